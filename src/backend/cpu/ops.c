/* CPU op layer: element-wise ops and kernel selection (see ops.h). */
#include "backend/cpu/ops.h"

#include <math.h>

void ops_init(ops_ctx *ctx, int n_threads, int force_scalar) {
    (void)force_scalar; /* only the scalar kernels exist so far */
    ctx->k = ops_kernels_scalar();
    ctx->n_threads = n_threads < 1 ? 1 : n_threads;
}

void ops_free(ops_ctx *ctx) { (void)ctx; }

void ops_get_row(const qt_mat *W, int r, float *out) {
    const size_t off = (size_t)r * W->cols;
    switch (W->dtype) {
    case DT_F32: dtype_to_f32(DT_F32, (const float *)W->data + off, out, W->cols); break;
    default: dtype_to_f32(W->dtype, (const uint16_t *)W->data + off, out, W->cols); break;
    }
}

void ops_add_row(const qt_mat *W, int r, float *out) {
    const size_t off = (size_t)r * W->cols;
    switch (W->dtype) {
    case DT_F32: {
        const float *w = (const float *)W->data + off;
        for (int j = 0; j < W->cols; j++) out[j] += w[j];
        break;
    }
    case DT_BF16: {
        const uint16_t *w = (const uint16_t *)W->data + off;
        for (int j = 0; j < W->cols; j++) out[j] += bf16_to_f32(w[j]);
        break;
    }
    case DT_F16: {
        const uint16_t *w = (const uint16_t *)W->data + off;
        for (int j = 0; j < W->cols; j++) out[j] += f16_to_f32(w[j]);
        break;
    }
    default: break;
    }
}

void ops_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * inv) * w[i];
}

void ops_silu(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

void ops_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

void ops_rope_neox(float *x, int d, int pos, const float *inv_freq) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        const float ang = (float)pos * inv_freq[i];
        const float c = cosf(ang), s = sinf(ang);
        const float a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = b * c + a * s;
    }
}

void ops_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = (x[i] == -INFINITY) ? 0.0f : expf(x[i] - m);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
