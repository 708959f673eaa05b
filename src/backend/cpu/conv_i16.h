/* int16 convolutions (the codec decoder's q8 format takes them for the convs
 * it keeps out of int8): weights quantised per output channel and tap,
 * activations per time step over all input channels, each to [-qmax, qmax]
 * by its max |value|, qmax = conv_i16_qmax(cin): the largest level that keeps
 * cin2 products of two such values within int32, so every integer sum is
 * exact (1182 at 1536 input channels, 4729 at 96; 10-12 bits, against int8's
 * 7). Dataflow: x f32 [cin][t] -> pack (per step: max |x| over channels,
 * scale, round; 2 channels interleaved per 32-bit lane) -> per output channel
 * and tap, an integer sum over input channels -> times the step's scale,
 * summed over taps in order (f32), each times its tap's weight scale -> +
 * bias -> y f32: conv_q8.h's steps with pairs in place of quads.
 * A step's scale depends on that step's column only, so a chunked call packs
 * the same values as a whole one: streaming stays exact. The integer sums are
 * exact and the f32 steps are one multiply and one add each (no FMA), in a
 * fixed order, so every kernel table (scalar, avx2 vpmaddwd, avx512 VNNI
 * vpdpwssd, neon smlal) gives the same bits. Only stride 1, groups 1 (a
 * transposed conv runs as its packed conv1d, conv.h). */
#ifndef QTTS_BACKEND_CPU_CONV_I16_H
#define QTTS_BACKEND_CPU_CONV_I16_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"

/* A conv1d's weights in int16 (made once at load). */
typedef struct conv_i16_w {
    int16_t *q;        /* [cout][k][cin2]: rint(w / sw), input channels padded with 0 to cin2 */
    float *sw;         /* [cout][k] max over input channels of |w[o][.][tap]| / qmax */
    const float *bias; /* [cout] a copy (in owned: the source may go), or NULL */
    int cout, cin, cin2, k, qmax;
    void *owned;       /* one 64-byte aligned buffer holding q, sw and bias */
} conv_i16_w;

/* The levels of a conv of cin input channels: the largest q <= 32767 with
 * cin2 q^2 <= INT32_MAX (cin2 = cin rounded up to 2); 0 when cin < 1. */
int conv_i16_qmax(int cin);

/* Quantise wf [cout][cin][k] (PyTorch Conv1d layout). 1: done, 0: out of memory. */
int conv_i16_w_make(conv_i16_w *w, const float *wf, const float *bias, int cout, int cin, int k);
void conv_i16_w_free(conv_i16_w *w);

/* Scratch ops_conv1d_i16_ctx needs for cin input channels of t_in steps. */
size_t ops_conv_i16_scratch_bytes(int cin, int t_in);

/* y[o][t] = bias[o] + sum over taps in order of sx[t + tap d] sw[o][tap]
 * (sum over input channels of q_w[o][tap][i] q_x[i][t + tap d]), for t <
 * t_out = t_in - dilation (k - 1) (nothing when t_in is shorter). x: [cin]
 * rows of x_stride; y rows of y_stride; scratch: ops_conv_i16_scratch_bytes,
 * 64-byte aligned. Output channels split over the context's threads (c may
 * be NULL); a long input of a short span (1x1, K 2) runs in time pieces
 * instead, split over the threads (conv_i16.c), with the same bits. */
void ops_conv1d_i16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_i16_w *w,
                        int dilation, float *y, int y_stride, void *scratch);

/* ops_conv_transpose1d_q8_ctx's contract (conv_q8.h) with wc the int16 form
 * of the packed conv1d; qscratch: ops_conv_i16_scratch_bytes(cin, (t1 - t0)
 * / stride + k / stride - 1). */
int ops_conv_transpose1d_i16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                 const conv_i16_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                 int y_stride, float *fscratch, void *qscratch);

/* The scalar reference kernels (ops_kernels_scalar's entries) and the
 * packing of columns [t0, t1) alone (the SIMD packs' ragged tail). */
void conv1d_i16_scalar(const ops_conv_i16_args *a, int o0, int o1);
void conv_i16_pack_scalar(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq, int xq_stride,
                          float *sx);
void conv_i16_pack_cols(const float *x, int cin, int x_stride, int qmax, int16_t *xq, int xq_stride, float *sx,
                        int t0, int t1);

#endif
