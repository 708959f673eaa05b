/* 1-D convolutions on channel-major f32 activations x[C][T] (PyTorch layout).
 * No implicit padding: callers prepend causal/left context themselves, which is
 * what makes exact streaming possible. Each output sample is one dot product
 * accumulated in a fixed order (input channel, then tap), independent of how
 * many time steps or output channels are computed in one call and of the
 * thread count: decoding in chunks yields the same bits as one pass.
 * The SIMD kernels (conv_avx2.c, conv_avx512.c) keep that order per output and
 * fuse each multiply-add (FMA), so they differ from the scalar reference in
 * the last bits only; they vectorise over time, threads split output channels
 * or output steps (ops_conv_time_split below).
 *
 * The plain functions run on the calling thread with the process's default
 * kernel table (the best for this CPU, or QTTS_ISA); the _ctx variants use the
 * context's table and thread pool. Both give the same bits for the same table. */
#ifndef QTTS_BACKEND_CPU_CONV_H
#define QTTS_BACKEND_CPU_CONV_H

#include "backend/cpu/ops.h"

/* Conv1d. w: [cout][cin/groups][k]; bias: [cout] or NULL.
 * t_out = (t_in - dilation*(k-1) - 1) / stride + 1 (nothing is written when
 * t_in < dilation*(k-1) + 1). y: [cout][t_out], row stride y_stride (>= t_out)
 * so results can be written into a larger buffer; x row stride x_stride (>= t_in).
 * y[o][t] = bias[o] + sum over input channels i of the group in order, then
 * taps in order, of w[o][i][tap] x[g cin_g + i][t stride + tap dilation].
 * stride > 1 deinterleaves x into a temporary buffer (malloc); if that fails
 * a slower path with the same bits runs. */
void ops_conv1d(const float *x, int cin, int t_in, int x_stride,
                const float *w, const float *bias, int cout, int k,
                int stride, int dilation, int groups,
                float *y, int y_stride);
void ops_conv1d_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                    const float *w, const float *bias, int cout, int k,
                    int stride, int dilation, int groups,
                    float *y, int y_stride);

/* ConvTranspose1d, full output (no trimming). w: [cin][cout/groups][k] (PyTorch);
 * t_out = (t_in - 1) * stride + k. y[o][t] = bias[o] + sum over (i, j) with
 * t = j*stride + tap of x[i][j] * w[i][o][tap]; the sum runs over input
 * channels in order, then over the contributing input steps j ascending. */
void ops_conv_transpose1d(const float *x, int cin, int t_in, int x_stride,
                          const float *w, const float *bias, int cout, int k,
                          int stride, int groups,
                          float *y, int y_stride);
/* The same over the output window [t0, t1) only (0 <= t0 <= t1 <= t_out):
 * y[o][t - t0]. A causal transposed conv that trims its right edge (or a
 * streaming one that drops outputs already emitted) computes just what it keeps. */
void ops_conv_transpose1d_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                              const float *w, const float *bias, int cout, int k,
                              int stride, int groups, int t0, int t1,
                              float *y, int y_stride);

/* A transposed conv (groups 1, k a multiple of stride, kk = k / stride) is,
 * for each output phase p = t mod stride, an ordinary conv1d with kk taps over
 * the input: y[o][q stride + p] = sum over input channels i in order, then
 * input steps j = q - kk + 1 ... q ascending, of x[i][j] w[i][o][(q - j) stride + p].
 * These pack w (and bias, NULL = zeros) as one such conv1d with stride * cout
 * output channels, [stride][cout][cin][kk] with the taps reversed, then
 * [stride][cout] biases (64-byte aligned; the caller frees it with free();
 * NULL when out of memory or k % stride != 0), and run it: the conv1d kernels
 * (vectorised over time, register tiles of output channels) then a pass that
 * interleaves the stride phases into y. Each output gets the same terms in the
 * same order as in the transposed kernels (and the bias last), so the bits
 * are theirs on every kernel table; docs/BENCH.md has the speeds.
 * The window [t0, t1) must hold whole input steps with every tap present:
 * t0 and t1 multiples of stride, (kk - 1) stride <= t0 < t1 <= t_in stride;
 * otherwise nothing is done and 0 is returned (1: done). scratch: stride *
 * cout * (t1 - t0) / stride floats (the phases before the interleave). */
float *ops_conv_transpose1d_pack_conv(const float *w, const float *bias, int cin, int cout, int k, int stride);
int ops_conv_transpose1d_conv_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const float *wc,
                                  int cout, int k, int stride, int t0, int t1, float *y, int y_stride,
                                  float *scratch);

/* y[o][u stride + p] = yc[p cout + o][u] for o < cout, u < nu, p < stride:
 * the interleave of ops_conv_transpose1d_conv_ctx (output channels split
 * over the context's threads when large; c may be NULL). */
void ops_conv_interleave_ctx(const ops_ctx *c, const float *yc, float *y, int cout, int nu, int stride,
                             int y_stride);

/* Output phase p of a transposed conv (outputs t = q stride + p over the
 * window [t0, t1)): M taps per output, the window's q range [qa, qb) and its
 * interior [ia, ib), where all M input steps exist (the SIMD kernels' tiles;
 * the q outside it are edges, computed point by point). */
typedef struct ops_tr_phase {
    int M, qa, qb, ia, ib;
} ops_tr_phase;

static inline ops_tr_phase ops_tr_phase_of(const ops_conv_args *a, int p) {
    const int s = a->stride, k = a->k;
    ops_tr_phase ph;
    ph.M = p < k ? (k - 1 - p) / s + 1 : 0;
    ph.qa = a->t0 <= p ? 0 : (a->t0 - p + s - 1) / s;
    ph.qb = a->t1 <= p ? 0 : (a->t1 - p + s - 1) / s;
    ph.ia = ph.M > 1 ? ph.M - 1 : 0;
    ph.ib = a->t_in;
    if (ph.ia < ph.qa) ph.ia = ph.qa;
    if (ph.ib > ph.qb) ph.ib = ph.qb;
    if (ph.M == 0 || ph.ia > ph.ib) ph.ia = ph.ib = ph.qb; /* no interior: all edges */
    return ph;
}

/* Conv scheduling on the context's thread pool (implemented in ops.c, which
 * owns the pool; c may be NULL: the calling thread only).
 * ops_conv_run: a conv kernel over output channels [0, a->cout) split over
 * the pool; macs sizes the split.
 * ops_conv_time_split: whether a conv (groups 1) should split its output
 * steps rather than its output channels, given enough steps (two 64-step
 * tiles per thread): a transposed conv always (its kernel's register tile is
 * 64 output channels, which a channel split into tasks cuts into narrow
 * ones); a conv1d when its input is too large to share one core's L2
 * (OPS_CONV_TIME_SPLIT_BYTES), so each core reads only its part of it
 * (docs/BENCH.md, "Convolutions split by time": the conv kernels' GFLOP/s on
 * 2 threads split both ways).
 * ops_conv_run_time: a conv kernel over every output channel, output steps
 * [a->t0, a->t1) split over the pool (conv1d: stride 1 only; transposed:
 * any). Same bits as ops_conv_run. */
#define OPS_CONV_TIME_SPLIT_BYTES (1u << 20)
void ops_conv_run(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                  long long macs);
int ops_conv_time_split(const ops_ctx *c, const ops_conv_args *a, int transposed);
void ops_conv_run_time(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                       int transposed);

/* The input rows of a conv1d's SIMD tiles (conv_avx2.c, conv_avx512.c,
 * conv_neon.c): for input channel i and tap j the row at output step 0 is
 * base + i crs + toff[j] (stride 1: x itself; stride > 1: the phase rows of
 * a->xph). ops_conv_xmap_of fills it and returns 1, or 0 where the tiles do
 * not take the conv (more than OPS_CONV_MAX_K taps, or stride > 1 without
 * xph: conv1d_fma_generic runs it then). */
#define OPS_CONV_MAX_K 64
typedef struct ops_conv_xmap {
    const float *base;
    size_t crs;
    int toff[OPS_CONV_MAX_K];
} ops_conv_xmap;
int ops_conv_xmap_of(const ops_conv_args *a, ops_conv_xmap *xm);

/* Output steps of a conv1d time block whose input over cin_g channels of
 * floats (its steps plus span - 1) fits in bytes: a multiple of step, at
 * least min, at most 2^24 (the int8 driver asks for cin4 / 4 "channels":
 * its packed steps are cin4 bytes). */
int ops_conv_time_block(int cin_g, int span, size_t bytes, int step, int min);

/* Name pasting for the drivers compiled once per ISA: CONV_CAT(conv1d_q8, avx2) is conv1d_q8_avx2. */
#define CONV_CAT2(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT2(a, b)

/* Output channels [0, cout) of a packed-input conv (int8, int16, bf16) by
 * run(job, o0, o1): over the context's threads in ranges of a multiple of 12
 * channels (whole tiles on every table) when macs is large, else in one call
 * (c may be NULL). */
void ops_conv_split_ctx(const ops_ctx *c, int cout, long long macs, void (*run)(const void *job, int o0, int o1),
                        const void *job);

/* The packing of a conv's input (int8, int16: each step packed from its own
 * column alone) by run(job, t0, t1) over steps [0, t_in): over the
 * context's threads in ranges of a multiple of 16 steps when cin * t_in is
 * large, else in one call; the same bytes either way. */
void ops_conv_pack_split_ctx(const ops_ctx *c, int cin, int t_in, void (*run)(const void *job, int t0, int t1),
                             const void *job);

/* A transposed conv of kernel k and stride run as its packed conv1d (kk = k /
 * stride taps) over the output window [t0, t1): 1 with the conv1d's first
 * input step *u0 and its output steps *nu when the window rules of
 * ops_conv_transpose1d_conv_ctx hold, else 0. */
int ops_conv_transpose_window(int t_in, int k, int stride, int t0, int t1, int *u0, int *nu);

/* Scalar reference convolutions over output channels [o0, o1) (the kernel
 * table entries of ops_kernels_scalar). */
void conv1d_scalar(const ops_conv_args *a, int o0, int o1);
void conv_transpose1d_scalar(const ops_conv_args *a, int o0, int o1);

/* The scalar code of the AVX2 and AVX-512 tables (conv.c): the products
 * fused (fmaf), as their vector FMA, in the same order, so the same bits.
 * conv1d_fma_generic: the whole conv1d, for the shapes their tiles do not
 * take (k > 64 taps, stride > 1 without a->xph). conv_tr_edges_fma: the edge
 * outputs of phase p (ph->qa..ph->ia and ph->ib..ph->qb) of a transposed conv
 * for output channels [o, o + n). */
void conv1d_fma_generic(const ops_conv_args *a, int o0, int o1);
void conv_tr_edges_fma(const ops_conv_args *a, int o, int n, int p, const ops_tr_phase *ph);

#endif
