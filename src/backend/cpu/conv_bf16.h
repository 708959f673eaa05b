/* BF16 convolutions (the codec decoder's bf16 format): weights and inputs
 * rounded to bf16 (round to nearest even), products summed in f32.
 * Dataflow: x f32 [cin][t] -> pack (bf16 of channels 2g, 2g + 1 per step) ->
 * per output channel and step: acc = 0, for each tap in order, for each pair
 * g in order: acc += x[2g+1] w[2g+1], then acc += x[2g] w[2g] (f32, each add
 * rounded) -> acc + bias -> y f32.
 * That order is vdpbf16ps's (AVX512-BF16); the product of two bf16 is exact
 * in f32, so an FMA gives the same bits, and values under 2^-56 are rounded
 * to 0, so every nonzero product and partial sum is a multiple of 2^-126 and
 * never denormal: vdpbf16ps's flushing never acts. Every kernel table
 * (scalar, avx2, avx512) therefore gives the same bits. A step's bf16 depends
 * on that step alone, so chunked calls equal a whole one. Only stride 1,
 * groups 1 (a transposed conv runs as its packed conv1d, conv.h). */
#ifndef QTTS_BACKEND_CPU_CONV_BF16_H
#define QTTS_BACKEND_CPU_CONV_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"

/* A conv1d's weights in bf16 (made once at load). */
typedef struct conv_bf16_w {
    uint16_t *w;       /* [cout][k][cin2]: bf16 of w, input channels padded with 0 to cin2; then bias (owned,
                          one 64-byte aligned buffer) */
    const float *bias; /* [cout] a copy (in w's buffer: the source may go), or NULL */
    int cout, cin, cin2, k;
} conv_bf16_w;

/* bf16 bits of v: round to nearest even; |v| < 2^-56 -> 0; NaN -> a quiet NaN. */
uint16_t conv_bf16_round(float v);

/* Round wf [cout][cin][k] (PyTorch Conv1d layout). 1: done, 0: out of memory. */
int conv_bf16_w_make(conv_bf16_w *w, const float *wf, const float *bias, int cout, int cin, int k);
void conv_bf16_w_free(conv_bf16_w *w);
size_t conv_bf16_w_bytes(const conv_bf16_w *w);

/* Scratch ops_conv1d_bf16_ctx needs for cin input channels of t_in steps. */
size_t ops_conv_bf16_scratch_bytes(int cin, int t_in);

/* y[o][t] = bias[o] + the bf16 sum above, for t < t_out = t_in - dilation
 * (k - 1) (nothing when t_in is shorter). x: [cin] rows of x_stride; y rows
 * of y_stride; scratch: ops_conv_bf16_scratch_bytes, 64-byte aligned. Output
 * channels split over the context's threads (c may be NULL). */
void ops_conv1d_bf16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_bf16_w *w,
                         int dilation, float *y, int y_stride, void *scratch);

/* ops_conv_transpose1d_q8_ctx's contract (conv_q8.h) with wc the bf16 form
 * of the packed conv1d; bscratch: ops_conv_bf16_scratch_bytes(cin, (t1 -
 * t0) / stride + k / stride - 1). 0 when the window rules do not hold. */
int ops_conv_transpose1d_bf16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                  const conv_bf16_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                  int y_stride, float *fscratch, void *bscratch);

/* The scalar reference kernels (ops_kernels_scalar's entries) and the
 * packing of columns [t0, t1) alone (the SIMD packs' ragged tail). */
void conv1d_bf16_scalar(const ops_conv_bf16_args *a, int o0, int o1);
void conv_bf16_pack_scalar(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride);
void conv_bf16_pack_cols(const float *x, int cin, int x_stride, uint32_t *xb, int xb_stride, int t0, int t1);

#endif
