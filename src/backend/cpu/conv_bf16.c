/* BF16 convolutions: weight rounding, the scalar reference kernels, and the
 * entry points that pack the input and split output channels over threads
 * (conv_bf16.h has the contract).
 * Dataflow: x f32 -> table's pack -> bf16 pairs [cin2/2][t] -> table's conv1d_bf16 per channel range -> y f32. */
#include "backend/cpu/conv_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

uint16_t conv_bf16_round(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7fc0;  /* NaN */
    if (a < 0x23800000u) return 0;       /* |v| < 2^-56 */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int conv_bf16_w_make(conv_bf16_w *w, const float *wf, const float *bias, int cout, int cin, int k) {
    memset(w, 0, sizeof *w);
    const int cin2 = (cin + 1) & ~1;
    const size_t nw = ALIGN64(sizeof(uint16_t) * (size_t)cout * k * cin2);
    w->w = aligned_alloc(64, nw + (bias ? ALIGN64(sizeof(float) * (size_t)cout) : 0));
    if (!w->w) return 0;
    if (bias) w->bias = memcpy((char *)w->w + nw, bias, sizeof(float) * (size_t)cout);
    w->cout = cout, w->cin = cin, w->cin2 = cin2, w->k = k;
    for (int o = 0; o < cout; o++)
        for (int tap = 0; tap < k; tap++) {
            uint16_t *wo = w->w + ((size_t)o * k + tap) * cin2;
            for (int i = 0; i < cin2; i++) wo[i] = i < cin ? conv_bf16_round(wf[((size_t)o * cin + i) * k + tap]) : 0;
        }
    return 1;
}

void conv_bf16_w_free(conv_bf16_w *w) {
    if (!w) return;
    free(w->w);
    memset(w, 0, sizeof *w);
}

size_t conv_bf16_w_bytes(const conv_bf16_w *w) { return sizeof(uint16_t) * (size_t)w->cout * w->k * w->cin2; }

size_t ops_conv_bf16_scratch_bytes(int cin, int t_in) {
    return ALIGN64(sizeof(uint16_t) * (size_t)((cin + 1) & ~1) * (t_in > 0 ? t_in : 1));
}

void conv_bf16_pack_cols(const float *x, int cin, int x_stride, uint32_t *xb, int xb_stride, int t0, int t1) {
    for (int g = 0; 2 * g < cin; g++) {
        const float *x0 = x + (size_t)(2 * g) * x_stride, *x1 = 2 * g + 1 < cin ? x0 + x_stride : NULL;
        uint32_t *o = xb + (size_t)g * xb_stride;
        for (int t = t0; t < t1; t++)
            o[t] = (uint32_t)conv_bf16_round(x0[t]) | (x1 ? (uint32_t)conv_bf16_round(x1[t]) << 16 : 0u);
    }
}

void conv_bf16_pack_scalar(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride) {
    conv_bf16_pack_cols(x, cin, x_stride, xb, xb_stride, 0, t_in);
}

void conv1d_bf16_scalar(const ops_conv_bf16_args *a, int o0, int o1) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2, t_out = a->t_in - d * (k - 1);
    for (int o = o0; o < o1; o++) {
        float *yo = a->y + (size_t)o * a->y_stride;
        const float b = a->bias ? a->bias[o] : 0.0f;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int tap = 0; tap < k; tap++) {
                const uint16_t *w = a->w + ((size_t)o * k + tap) * a->cin2;
                const uint32_t *xp = a->xb + t + tap * d;
                for (int g = 0; g < G; g++) {
                    const uint32_t xv = xp[(size_t)g * a->xb_stride];
                    acc += bf16_f((uint16_t)(xv >> 16)) * bf16_f(w[2 * g + 1]);
                    acc += bf16_f((uint16_t)xv) * bf16_f(w[2 * g]);
                }
            }
            yo[t] = acc + b;
        }
    }
}

typedef struct bf16_job {
    void (*fn)(const ops_conv_bf16_args *, int, int);
    const ops_conv_bf16_args *a;
} bf16_job;

static void bf16_run(const void *job, int o0, int o1) {
    const bf16_job *j = job;
    j->fn(j->a, o0, o1);
}

void ops_conv1d_bf16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_bf16_w *w,
                         int dilation, float *y, int y_stride, void *scratch) {
    const int t_out = t_in - dilation * (w->k - 1);
    if (t_out <= 0 || w->cout <= 0 || cin != w->cin) return;
    const ops_kernels *k = c ? c->k : ops_kernels_scalar();
    uint32_t *xb = scratch;
    void (*pack)(const float *, int, int, int, uint32_t *, int) =
        k->conv_bf16_pack ? k->conv_bf16_pack : conv_bf16_pack_scalar;
    void (*fn)(const ops_conv_bf16_args *, int, int) = k->conv1d_bf16 ? k->conv1d_bf16 : conv1d_bf16_scalar;
    pack(x, cin, t_in, x_stride, xb, t_in);
    const ops_conv_bf16_args a = {.xb = xb, .cin2 = w->cin2, .t_in = t_in, .xb_stride = t_in, .w = w->w,
                                  .bias = w->bias, .cout = w->cout, .k = w->k, .dilation = dilation, .y = y,
                                  .y_stride = y_stride};
    const bf16_job j = {fn, &a};
    ops_conv_split_ctx(c, w->cout, (long long)w->cout * w->cin2 * w->k * t_out, bf16_run, &j);
}

int ops_conv_transpose1d_bf16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                  const conv_bf16_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                  int y_stride, float *fscratch, void *bscratch) {
    int u0, nu;
    if (!wc || !fscratch || !bscratch || !ops_conv_transpose_window(t_in, k, stride, t0, t1, &u0, &nu) ||
        wc->cout != stride * cout || wc->k != k / stride)
        return 0;
    ops_conv1d_bf16_ctx(c, x + u0, cin, nu + wc->k - 1, x_stride, wc, 1, fscratch, nu, bscratch);
    ops_conv_interleave_ctx(c, fscratch, y, cout, nu, stride, y_stride);
    return 1;
}
