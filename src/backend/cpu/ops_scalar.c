/* Scalar reference kernels: the definition of correct for every optimised path.
 * Weights are widened to f32 element by element; accumulation in f32 in index
 * order (matches a straightforward PyTorch fp32 matmul to float rounding). */
#include "backend/cpu/ops.h"

#include <stdint.h>

static void matmul_scalar(const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    const int rows = W->rows, cols = W->cols;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) {
            const float *x = X + (size_t)i * cols;
            float acc = 0.0f;
            switch (W->dtype) {
            case DT_F32: {
                const float *w = (const float *)W->data + (size_t)r * cols;
                for (int j = 0; j < cols; j++) acc += w[j] * x[j];
                break;
            }
            case DT_BF16: {
                const uint16_t *w = (const uint16_t *)W->data + (size_t)r * cols;
                for (int j = 0; j < cols; j++) acc += bf16_to_f32(w[j]) * x[j];
                break;
            }
            case DT_F16: {
                const uint16_t *w = (const uint16_t *)W->data + (size_t)r * cols;
                for (int j = 0; j < cols; j++) acc += f16_to_f32(w[j]) * x[j];
                break;
            }
            default: break;
            }
            Y[(size_t)i * rows + r] = acc + (bias ? bias[r] : 0.0f);
        }
    }
}

static const ops_kernels scalar_kernels = {
    .name = "scalar",
    .matmul = matmul_scalar,
};

const ops_kernels *ops_kernels_scalar(void) { return &scalar_kernels; }
