/* Scalar reference kernels: the definition of correct for every optimised path.
 * Float weights are widened to f32 element by element; accumulation in f32 in
 * index order (matches a straightforward PyTorch fp32 matmul to float
 * rounding). Quantised weights: exact integer dot per block of 32 with the
 * int8 activations of quant.h, then d_w * (d_x * dot) summed over blocks in
 * order. Built for the baseline ISA (no FMA): each multiply and add rounds. */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_bf16.h"
#include "backend/cpu/conv_i16.h"
#include "backend/cpu/conv_q8.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"

static void mm_float_scalar(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                            int r0, int r1) {
    (void)prep;
    const int rows = W->rows, cols = W->cols;
    for (int r = r0; r < r1; r++) {
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
            default: acc = NAN; break;
            }
            Y[(size_t)i * rows + r] = acc + (bias ? bias[r] : 0.0f);
        }
    }
}

static void mm_quant_scalar(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                            int r0, int r1) {
    (void)X;
    const int rows = W->rows, cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK;
    const size_t rb = qmat_row_bytes(W);
    for (int r = r0; r < r1; r++) {
        const uint8_t *wr = (const uint8_t *)W->data + (size_t)r * rb;
        const uint16_t *sc = W->scales + (size_t)r * nb;
        for (int i = 0; i < n; i++) {
            const q8_rows xr = q8_prep_row(prep, cols, i);
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const int8_t *xq = xr.xq + b * QT_BLOCK;
                int32_t dot = 0;
                if (W->quant == QT_Q8_B32) {
                    const int8_t *q = (const int8_t *)wr + b * QT_BLOCK;
                    for (int j = 0; j < QT_BLOCK; j++) dot += q[j] * xq[j];
                } else {
                    const uint8_t *p = wr + b * 16;
                    const int off = W->quant == QT_Q4_B32 ? 8 : 0;
                    for (int j = 0; j < 16; j++) dot += ((p[j] & 15) - off) * xq[j] + ((p[j] >> 4) - off) * xq[j + 16];
                }
                acc += f16_to_f32(sc[b]) * (xr.dx[b] * (float)dot);
                if (W->quant == QT_Q4M_B32) acc += f16_to_f32(W->mins[(size_t)r * nb + b]) * xr.fsum[b];
            }
            Y[(size_t)i * rows + r] = acc + (bias ? bias[r] : 0.0f);
        }
    }
}

/* QT_Q8_B32_X16(S) and QT_Q4M_B32_X16 (quant.h): per output, blocks in order,
 * the exact integer dot, acc = fmaf(isum, d_w * dx, acc) (int4 also
 * accm = fmaf(m_w, fsum, accm), then acc + accm), then + bias: the op
 * sequence of every table's kernel for these layouts, so the bits are the
 * same. */
static void mm_x16_scalar(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                          int r0, int r1) {
    (void)X;
    const int q4 = W->quant == QT_Q4M_B32_X16, blk_bytes = q4 ? 256 : 512;
    const int rows = W->rows, cols = W->cols, nb = qt_kpad(cols) / QT_BLOCK;
    for (int r = r0; r < r1; r++) {
        const size_t g = (size_t)r / 16, j = (size_t)r % 16;
        for (int i = 0; i < n; i++) {
            const q8_rows xr = q8_prep_row(prep, cols, i);
            float acc = 0.0f, accm = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = (const uint8_t *)W->data + (g * nb + b) * blk_bytes;
                const int8_t *xq = xr.xq + b * QT_BLOCK;
                const size_t si = (g * nb + b) * 16 + j;
                int32_t dot = 0;
                if (q4) {
                    for (int c = 0; c < 16; c++) {
                        const uint8_t byte = blk[(c / 4) * 64 + j * 4 + c % 4];
                        dot += (byte & 15) * xq[c] + (byte >> 4) * xq[c + 16];
                    }
                } else if (W->quant == QT_Q8_B32_X16S) {
                    for (int c = 0; c < QT_BLOCK; c++)
                        dot += (int32_t)(int8_t)blk[(c / 4) * 64 + j * 4 + c % 4] * xq[c];
                } else {
                    dot = xr.off[b]; /* -128 isum: cancels the stored q + 128 */
                    for (int c = 0; c < QT_BLOCK; c++) dot += (int32_t)blk[(c / 4) * 64 + j * 4 + c % 4] * xq[c];
                }
                acc = fmaf((float)dot, f16_to_f32(W->scales[si]) * xr.dx[b], acc);
                if (q4) accm = fmaf(f16_to_f32(W->mins[si]), xr.fsum[b], accm);
            }
            const float y = q4 ? acc + accm : acc;
            Y[(size_t)i * rows + r] = y + (bias ? bias[r] : 0.0f);
        }
    }
}

static float dot_scalar(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}

static void axpy_scalar(float *y, float a, const float *x, int n) {
    for (int j = 0; j < n; j++) y[j] += a * x[j];
}

static void snake_scalar(float *y, const float *x, int T, float a, float inv_b) {
    for (int t = 0; t < T; t++) {
        const float v = x[t], s = sinf(v * a);
        y[t] = v + inv_b * (s * s);
    }
}

static void matmul_scalar(const qt_mat *W, const float *X, int n, const float *bias, float *Y);

static const ops_kernels scalar_kernels = {
    .name = "scalar",
    .matmul = matmul_scalar,
    .mm = {mm_float_scalar, mm_float_scalar, mm_float_scalar, mm_quant_scalar, mm_quant_scalar, mm_quant_scalar,
           mm_x16_scalar, mm_x16_scalar, mm_x16_scalar},
    .prep_size = {NULL, NULL, NULL, q8_prep_size, q8_prep_size, q8_prep_size, q8_prep_size, q8_prep_size,
                  q8_prep_size},
    .prep = {NULL, NULL, NULL, q8_prep, q8_prep, q8_prep, q8x16_prep, q8x16_prep, q8x16_prep},
    .mm_bf16_dp = NULL,
    .dot = dot_scalar,
    .axpy = axpy_scalar,
    .conv1d = conv1d_scalar,
    .conv_transpose1d = conv_transpose1d_scalar,
    .conv1d_q8 = conv1d_q8_scalar,
    .conv_q8_pack = conv_q8_pack_scalar,
    .conv1d_bf16 = conv1d_bf16_scalar,
    .conv_bf16_pack = conv_bf16_pack_scalar,
    .conv1d_i16 = conv1d_i16_scalar,
    .conv_i16_pack = conv_i16_pack_scalar,
    .snake = snake_scalar,
    .swiglu = ops_swiglu,
    .elu = ops_elu,
};

static void matmul_scalar(const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    ops_matmul_with(&scalar_kernels, W, X, n, bias, Y);
}

const ops_kernels *ops_kernels_scalar(void) { return &scalar_kernels; }
