/* int8 convolutions (the codec decoder's q8 format): weights quantised per
 * output channel and tap, activations per time step over all input
 * channels, each to [-127, 127] by its max |value|.
 * Dataflow: x f32 [cin][t] -> pack (per step: max |x| over channels, scale,
 * round; 4 channels interleaved per step, + 128) -> per output channel and
 * tap, an integer sum over input channels -> times the step's scale, summed
 * over taps in order (f32), each times its tap's weight scale -> + bias -> y f32.
 * A step's scale depends on that step's column only, so a chunked call packs
 * the same bytes as a whole one: streaming stays exact. The integer sums are
 * exact and the f32 steps are one multiply and one add each (no FMA), in a
 * fixed order, so every kernel table (scalar, avx2, avx512 VNNI) gives the
 * same bits. Only stride 1, groups 1 (the vocoder's convs; a transposed conv
 * runs as its packed conv1d, conv.h). */
#ifndef QTTS_BACKEND_CPU_CONV_Q8_H
#define QTTS_BACKEND_CPU_CONV_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"

/* A conv1d's weights in int8 (made once at load). */
typedef struct conv_q8_w {
    int8_t *q;         /* [cout][k][cin4]: rint(w / sw), input channels padded with 0 to cin4 */
    float *sw;         /* [cout][k] max over input channels of |w[o][.][tap]| / 127 */
    int32_t *wsum;     /* [cout][k] 128 * sum over input channels of q */
    const float *bias; /* [cout] a copy (in owned: the source may go), or NULL */
    int cout, cin, cin4, k;
    void *owned;       /* one 64-byte aligned buffer holding q, sw, wsum and bias */
} conv_q8_w;

/* Quantise wf [cout][cin][k] (PyTorch Conv1d layout). 1: done, 0: out of memory. */
int conv_q8_w_make(conv_q8_w *w, const float *wf, const float *bias, int cout, int cin, int k);
void conv_q8_w_free(conv_q8_w *w);
/* Weight bytes in memory (q, sw, wsum). */
size_t conv_q8_w_bytes(const conv_q8_w *w);

/* Scratch ops_conv1d_q8_ctx needs for cin input channels of t_in steps. */
size_t ops_conv_q8_scratch_bytes(int cin, int t_in);

/* y[o][t] = bias[o] + sum over taps in order of sx[t + tap d] sw[o][tap]
 * (sum over input channels of q_w[o][tap][i] q_x[i][t + tap d]), for t <
 * t_out = t_in - dilation (k - 1) (nothing when t_in is shorter). x: [cin]
 * rows of x_stride; y rows of y_stride; scratch: ops_conv_q8_scratch_bytes,
 * 64-byte aligned. Output channels split over the context's threads (c may
 * be NULL). */
void ops_conv1d_q8_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_q8_w *w,
                       int dilation, float *y, int y_stride, void *scratch);

/* The transposed conv of ops_conv_transpose1d_conv_ctx (conv.h: same window
 * rules, 0 when they do not hold) with wc = the int8 form of its packed conv1d
 * (conv_q8_w_make of ops_conv_transpose1d_pack_conv's weights and biases,
 * stride * cout output channels, k / stride taps). fscratch: stride * cout *
 * (t1 - t0) / stride floats; qscratch: ops_conv_q8_scratch_bytes(cin, (t1 -
 * t0) / stride + k / stride - 1). */
int ops_conv_transpose1d_q8_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                const conv_q8_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                int y_stride, float *fscratch, void *qscratch);

/* The scalar reference kernels (ops_kernels_scalar's entries) and the
 * packing of columns [t0, t1) alone (the SIMD packs' ragged tail). */
void conv1d_q8_scalar(const ops_conv_q8_args *a, int o0, int o1);
void conv_q8_pack_scalar(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride, float *sx);
void conv_q8_pack_cols(const float *x, int cin, int x_stride, uint8_t *xq, int xq_stride, float *sx, int t0, int t1);

#endif
