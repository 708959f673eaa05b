/* CPU op layer: the only place model code reaches for arithmetic.
 * Dataflow: model code -> ops_* (this header) -> the kernel table picked once
 * at ops_init (ops_dispatch.c: scalar, avx2, avx512 or neon) -> the thread
 * pool of the context -> a kernel over a range of weight rows.
 * Weights are read in their stored format (qt_mat: f32/f16/bf16 or a block
 * quantised int8/int4 format, see quant.h); activations are f32.
 * Every matrix op takes n rows of input so prefill and several streams
 * stepped together use the same entry point as a single decode step.
 *
 * Bit-exactness contract (what exact streaming and "a request gives the same
 * audio alone or batched" rest on). For a given build and kernel table:
 *  - ops_matmul: each output Y[i][r] is computed by a fixed sequence of
 *    operations on row i of X and row r of W (the SIMD lane split of the
 *    reduction, the tail, the final horizontal sum and the bias add are the
 *    same for every call). It does not depend on n, on which other rows are in
 *    the call, on the number of threads or on how rows are split across them:
 *    threads split the weight rows r, never the reduction.
 *    Quantised weights: X is quantised per row (blocks of 32) before the
 *    product; that too depends on row i only.
 *  - ops_conv1d / ops_conv_transpose1d: each output sample is one sum in the
 *    fixed order documented in conv.h, independent of how many time steps or
 *    output channels one call computes and of the thread count.
 *  Different kernel tables (scalar vs avx2 vs avx512) may differ in the last
 *  bits: the SIMD paths split the reduction over lanes and use FMA.
 *
 * Threads: ops_init starts n_threads - 1 persistent workers (the calling thread
 * is the n-th); ops_free joins them. A matmul is cut into tasks of whole
 * weight rows (conv: output channels) that the threads pull, so a worker that
 * is late costs only its task. Model code passes a const ops_ctx *: the
 * pool is internally synchronised but is meant to be driven by one thread at a
 * time per ops_ctx. A call that finds the pool busy (another thread inside an
 * op of the same ops_ctx) does not wait or fail: it runs single-threaded on
 * its caller with the same result bits, only slower. Give each concurrently
 * running stream its own ops_ctx to get its own workers. */
#ifndef QTTS_BACKEND_CPU_OPS_H
#define QTTS_BACKEND_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"

/* Storage format of a quantised weight matrix (see quant.h for the block
 * layouts). Read only when dtype is DT_I8 or DT_U8 (qt_is_quant). */
typedef enum qt_quant {
    QT_FLOAT = 0, /* data: [rows][cols] in dtype (DT_F32, DT_F16 or DT_BF16) */
    QT_Q8_B32,    /* int8, blocks of 32 columns, f16 scale: w = d * q, q in [-127, 127] */
    QT_Q4_B32,    /* int4, blocks of 32, f16 scale: w = d * (q - 8), q in [0, 15] */
    QT_Q4M_B32,   /* int4, blocks of 32, f16 scale and min: w = d * q + m, q in [0, 15] */
    QT_Q8_B32_X16, /* QT_Q8_B32 interleaved by 16 rows for the integer dot units (quant.h) */
    QT_Q4M_B32_X16, /* QT_Q4M_B32 interleaved by 16 rows the same way (quant.h) */
    QT_Q8_B32_X16S, /* QT_Q8_B32_X16 with q stored as signed bytes, for tables without vpdpbusd (quant.h) */
    QT_QUANT_COUNT
} qt_quant;

/* A weight matrix: rows x cols, row-major (PyTorch Linear [out, in]).
 * Float formats (dtype DT_F32, DT_F16, DT_BF16): only data, dtype, rows and
 * cols are read, so code that fills those four need not touch the rest; data
 * points into the mmap (or an owned copy) and is never written.
 * Quantised formats (dtype DT_I8 or DT_U8): made by qmat_quantize (quant.h),
 * which sets every field and owns the buffer; rows are padded to
 * kpad = cols rounded up to 128 (zero weights). */
typedef struct qt_mat {
    const void *data;       /* float: [rows][cols] dtype; Q8: int8 [rows][kpad]; Q4/Q4M: u8 [rows][kpad/2] */
    qtts_dtype dtype;       /* float element type; DT_I8 (Q8) or DT_U8 (Q4, Q4M) when quantised */
    int rows;               /* out features */
    int cols;               /* in features */
    qt_quant quant;         /* quantised: the format; else unused (QT_FLOAT by convention) */
    const uint16_t *scales; /* quantised: f16 [rows][kpad/32] block scales d; else NULL */
    const uint16_t *mins;   /* QT_Q4M_B32(_X16): f16 block minima m; else NULL */
    void *owned;            /* buffer released by qmat_free (NULL: borrowed) */
    size_t owned_bytes;     /* its size: data, scales and mins, each 64-byte aligned, in that order */
} qt_mat;

/* 1 if m is quantised (dtype DT_I8 or DT_U8): only then are quant, scales,
 * mins and owned meaningful. */
static inline int qt_is_quant(const qt_mat *m) { return m->dtype == DT_I8 || m->dtype == DT_U8; }

/* Weight formats as kernel table indices. */
enum {
    OPS_WF_F32, OPS_WF_F16, OPS_WF_BF16, OPS_WF_Q8, OPS_WF_Q4, OPS_WF_Q4M, OPS_WF_Q8X16, OPS_WF_Q4MX16,
    OPS_WF_Q8X16S,
    OPS_WF_COUNT
};

/* The kernel table index of W's format, or -1 if unsupported. */
int ops_weight_format(const qt_mat *W);

/* Matmul over weight rows [r0, r1): Y[i][r] = X[i] . W[r] (+ bias[r]) for
 * i < n. prep: activations prepared by the format's prep function (NULL for
 * the float formats). Y and X have row strides W->rows and W->cols. */
typedef void (*ops_mm_fn)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                          int r0, int r1);
/* Bytes of prepared activations for n rows of W's width (0: no prep): n
 * records of prep_size(W, 1) bytes, row i at i times that. */
typedef size_t (*ops_prep_size_fn)(const qt_mat *W, int n);
/* Prepare X [n][cols] into buf (64-byte aligned, ops_prep_size bytes); each
 * row's record is made from X's row alone, so rows may be prepared apart (as
 * ops_matmul does over its pool). */
typedef void (*ops_prep_fn)(const qt_mat *W, const float *X, int n, void *buf);

/* Arguments of one convolution (see conv.h for the meaning of each). */
typedef struct ops_conv_args {
    const float *x;       /* [cin][x_stride], t_in valid steps */
    int cin, t_in, x_stride;
    const float *w;       /* conv1d: [cout][cin/groups][k]; transposed: [cin][cout/groups][k] */
    const float *bias;    /* [cout] or NULL */
    int cout, k, stride, dilation, groups;
    int t0, t1;           /* output window [t0, t1) (transposed conv); conv1d: [0, t_out) */
    float *y;             /* [cout][y_stride]: y[o][t - t0] */
    int y_stride;
    const float *xph;     /* conv1d with stride > 1: x deinterleaved by phase, or NULL */
    int ph_len;           /* steps per phase row of xph */
} ops_conv_args;

/* Arguments of one int8 convolution (conv_q8.h): stride 1, groups 1. */
typedef struct ops_conv_q8_args {
    const uint8_t *xq;    /* [cin4 / 4][xq_stride][4]: q + 128 of 4 input channels per step */
    const float *sx;      /* [t_in] per-step activation scales */
    int cin4, t_in, xq_stride; /* input channels rounded up to 4, valid steps, steps per row */
    const int8_t *w;      /* [cout][k][cin4] */
    const float *sw;      /* [cout][k] weight scales per output channel and tap */
    const int32_t *wsum;  /* [cout][k] 128 * sum over input channels of w (VNNI's + 128 undone) */
    const float *bias;    /* [cout] or NULL */
    int cout, k, dilation;
    float *y;             /* [cout][y_stride], t_out = t_in - dilation (k - 1) steps */
    int y_stride;
} ops_conv_q8_args;

/* Arguments of one int16 convolution (conv_i16.h): stride 1, groups 1. */
typedef struct ops_conv_i16_args {
    const int16_t *xq;    /* [cin2 / 2][xq_stride][2]: q of input channels 2g, 2g + 1 per step */
    const float *sx;      /* [t_in] per-step activation scales */
    int cin2, t_in, xq_stride; /* input channels rounded up to 2, valid steps, steps per row */
    const int16_t *w;     /* [cout][k][cin2] */
    const float *sw;      /* [cout][k] weight scales per output channel and tap */
    const float *bias;    /* [cout] or NULL */
    int cout, k, dilation;
    float *y;             /* [cout][y_stride], t_out = t_in - dilation (k - 1) steps */
    int y_stride;
} ops_conv_i16_args;

/* Arguments of one BF16 convolution (conv_bf16.h): stride 1, groups 1. */
typedef struct ops_conv_bf16_args {
    const uint32_t *xb;   /* [cin2 / 2][xb_stride]: per step, the bf16 of input channels 2g (low half), 2g + 1 (high) */
    int cin2, t_in, xb_stride; /* input channels rounded up to 2, valid steps, steps per row */
    const uint16_t *w;    /* [cout][k][cin2] bf16 */
    const float *bias;    /* [cout] or NULL */
    int cout, k, dilation;
    float *y;             /* [cout][y_stride], t_out = t_in - dilation (k - 1) steps */
    int y_stride;
} ops_conv_bf16_args;

/* Kernel table: one per ISA, the scalar one always present. */
typedef struct ops_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "neon" */
    /* Y[n][W.rows] = X[n][W.cols] * W^T (+ bias[W.rows] if bias != NULL), on
     * the calling thread; same bits as ops_matmul. Quantised W: prepares X in
     * a temporary buffer (malloc; Y is NaN if that fails). */
    void (*matmul)(const qt_mat *W, const float *X, int n, const float *bias, float *Y);
    ops_mm_fn mm[OPS_WF_COUNT];             /* per weight format, over a row range (NULL: the
                                               scalar table's kernel runs instead) */
    ops_prep_size_fn prep_size[OPS_WF_COUNT]; /* NULL: no prep for that format */
    ops_prep_fn prep[OPS_WF_COUNT];
    /* BF16 weights with the activations rounded to bf16 and vdpbf16ps (each
     * product off by up to 2^-9 relative); NULL where the CPU lacks it. */
    ops_mm_fn mm_bf16_dp;
    /* sum_j a[j] b[j] (lane-split, fixed order for a given n) */
    float (*dot)(const float *a, const float *b, int n);
    /* y[j] += a * x[j] (element-wise; the SIMD tables fuse, the scalar one rounds twice) */
    void (*axpy)(float *y, float a, const float *x, int n);
    /* ops_attn_head in one call, the same bits as its dot / softmax / axpy
     * composition with this table's dot and axpy; NULL: that composition */
    void (*attn_head)(const float *q, const float *K, const float *V, size_t kv_stride, int np, int hd, float scale,
                      float *scores, float *out);
    /* Output channels [o0, o1) of a convolution (conv.h). */
    void (*conv1d)(const ops_conv_args *a, int o0, int o1);
    void (*conv_transpose1d)(const ops_conv_args *a, int o0, int o1);
    /* int8 conv1d over output channels [o0, o1) and the packing of its f32
     * input (conv_q8.h); every table gives the same bits (integer sums) */
    void (*conv1d_q8)(const ops_conv_q8_args *a, int o0, int o1);
    void (*conv_q8_pack)(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride, float *sx);
    /* int16 conv1d over output channels [o0, o1) and the packing of its f32
     * input at qmax levels (conv_i16.h); every table gives the same bits */
    void (*conv1d_i16)(const ops_conv_i16_args *a, int o0, int o1);
    void (*conv_i16_pack)(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq, int xq_stride,
                          float *sx);
    /* BF16 conv1d over output channels [o0, o1) and the rounding of its f32
     * input to bf16 pairs (conv_bf16.h); every table gives the same bits */
    void (*conv1d_bf16)(const ops_conv_bf16_args *a, int o0, int o1);
    void (*conv_bf16_pack)(const float *x, int cin, int t_in, int x_stride, uint32_t *xb, int xb_stride);
    /* y[t] = x[t] + inv_b * sin(a x[t])^2 over T steps (SnakeBeta, in place allowed) */
    void (*snake)(float *y, const float *x, int T, float a, float inv_b);
    /* g[i] = silu(g[i]) u[i] over n elements (SwiGLU); each element's result
     * depends on its own g and u only, not on n or its position */
    void (*swiglu)(float *g, const float *u, int n);
    /* x[i] = x[i] > 0 ? x[i] : expm1(x[i]) in place (ELU, alpha 1); each
     * element's result depends on its own x only. NULL: ops_elu */
    void (*elu)(float *x, int n);
    /* 1 when quantised weights should be regrouped by 16 rows for this table
     * (QT_Q8_B32_X16, QT_Q4M_B32_X16: its kernels for those are the fast ones) */
    int prefer_x16;
    /* with prefer_x16, 1 when int8 should be regrouped as QT_Q8_B32_X16S:
     * kernels that take |w| and the sign of w (AVX2's vpmaddubsw after
     * vpsignb) read signed bytes directly, without the + 128 that VNNI's
     * unsigned operand needs */
    int x16_q8_signed;
} ops_kernels;

struct ops_rt; /* thread pool and scratch (ops.c) */

typedef struct ops_ctx {
    const ops_kernels *k;
    int n_threads;     /* >= 1, the caller included */
    int bf16_dp;       /* 1: BF16 weights use k->mm_bf16_dp (set by ops_set_bf16_dp) */
    struct ops_rt *rt; /* NULL with one thread */
} ops_ctx;

/* Initialise with the best kernels for this CPU (force_scalar = 1: the
 * reference). The environment variable QTTS_ISA=scalar|avx2|avx512|neon forces
 * a table (ignored, with the best table kept, if the CPU lacks it).
 * n_threads < 1 counts as 1. With n_threads > 1 it starts the worker threads
 * (if that fails the context runs on one thread). */
void ops_init(ops_ctx *ctx, int n_threads, int force_scalar);

/* Join the workers and release what ops_init set up; accepts a zeroed ctx.
 * Leaves the ctx zeroed except k. */
void ops_free(ops_ctx *ctx);

/* Opt in to the bf16-activation dot product for BF16 weights: error up to
 * 2^-8 sum|w x| (measured mean 2.3e-4 sum|w x|) instead of f32 rounding; the
 * LM golden test fails with it (hidden states ~5e-3 relative off, greedy codes
 * of the random test checkpoints diverge). Returns 1 if the kernel
 * table has it (AVX512_BF16), else 0 and nothing changes. on = 0 turns it off. */
int ops_set_bf16_dp(ops_ctx *ctx, int on);

/* The scalar reference kernels (always built). */
const ops_kernels *ops_kernels_scalar(void);

/* Y[n][rows] = X[n][cols] W^T + bias, threads split over W's rows. */
void ops_matmul(const ops_ctx *c, const qt_mat *W, const float *X, int n, const float *bias, float *Y);

/* Y[w] = X W[w]^T + bias[w] for w < nw (nw <= OPS_MM_MULTI_MAX; bias NULL or
 * per-matrix, NULL entries allowed): the products of one input (q/k/v, gate/up)
 * as one pool job, with X prepared once when the matrices share format and
 * width (else one ops_matmul each). Each Y[w] has the bits ops_matmul gives. */
#define OPS_MM_MULTI_MAX 4
void ops_matmul_multi(const ops_ctx *c, int nw, const qt_mat *const *W, const float *X, int n,
                      const float *const *bias, float *const *Y);

/* H = silu(X Wg^T) * (X Wu^T) element-wise (SwiGLU's first half), U: scratch
 * [n][rows] (gets X Wu^T): the two products and the product of the two as one
 * pool job, each task doing its rows of all three. Same bits as
 * ops_matmul_multi then ops_swiglu_ctx, which it falls back to for matrices
 * of different formats or widths. Wg and Wu of different heights: H and U NaN. */
void ops_matmul_swiglu(const ops_ctx *c, const qt_mat *Wg, const qt_mat *Wu, const float *X, int n, float *H,
                       float *U);

/* Threads ops_matmul uses for W and n rows (1 below the size where waking
 * the pool pays off). */
int ops_matmul_threads(const ops_ctx *c, const qt_mat *W, int n);

/* sum_j a[j] b[j] and y += a x with the context's kernels (attention helpers). */
static inline float ops_dot(const ops_ctx *c, const float *a, const float *b, int n) { return c->k->dot(a, b, n); }
static inline void ops_axpy(const ops_ctx *c, float *y, float a, const float *x, int n) { c->k->axpy(y, a, x, n); }

/* fn(arg, t, n_tasks) for t in [0, n_tasks) on the context's pool (the
 * calling thread only when the pool is busy or absent). Tasks must not
 * use the pool themselves. */
void ops_parallel(const ops_ctx *c, void (*fn)(void *arg, int t, int n_tasks), void *arg, int n_tasks);

/* Run fn(arg) on one of the context's worker threads while the caller goes
 * on (threadpool_async): ops calls meanwhile use the caller and the other
 * workers. fn must not use this context's pool. Returns 0 (nothing started)
 * when the context has no workers or an async function is still running
 * (any thread may post). */
int ops_async(const ops_ctx *c, void (*fn)(void *arg), void *arg);

/* One attention head for one query: scores[j] = scale * (q . K[j]) for
 * j < np, softmax (ops_softmax), out[hd] = sum_j p_j V[j], with the table's
 * dot/axpy, or its attn_head kernel with the same bits (rows of K and V kv_stride floats apart; scores: scratch [np]).
 * Depends only on its own q, K, V, np: batching rows does not change it. */
void ops_attn_head(const ops_ctx *c, const float *q, const float *K, const float *V, size_t kv_stride, int np,
                   int hd, float scale, float *scores, float *out);

/* out[cols] = row r of W widened (dequantised) to f32. */
void ops_get_row(const qt_mat *W, int r, float *out);
/* out[cols] += row r of W widened (dequantised) to f32. */
void ops_add_row(const qt_mat *W, int r, float *out);

/* y[i] += x[i] over n elements (one rounding each, any vector width). */
void ops_add(float *y, const float *x, size_t n);
/* y = x / sqrt(mean(x^2) + eps) * w  over n elements (in place allowed). */
void ops_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* x[i] = silu(x[i]) */
void ops_silu(float *x, int n);
/* g[i] = silu(g[i]) * u[i] with libm's expf (the scalar table's swiglu). */
void ops_swiglu(float *g, const float *u, int n);
/* The same with the context's kernel table (the SIMD tables' exp differs from
 * expf in the last bits), split over its threads (same bits: elementwise). */
void ops_swiglu_ctx(const ops_ctx *c, float *g, const float *u, int n);
/* x[i] = x[i] > 0 ? x[i] : expm1f(x[i]) in place, NaN kept (the scalar
 * table's ELU). */
void ops_elu(float *x, int n);
/* The same with the context's kernel table (the SIMD tables' expm1 is within
 * 2 ulp of expm1f: test_kernels), split over its threads (same bits:
 * elementwise). */
void ops_elu_ctx(const ops_ctx *c, float *x, size_t n);

/* Split-half (NeoX) RoPE on one head of dim d at position pos:
 * y[i] = x[i] c - x[i+d/2] s, y[i+d/2] = x[i+d/2] c + x[i] s.
 * inv_freq[d/2] precomputed. */
void ops_rope_neox(float *x, int d, int pos, const float *inv_freq);
/* The angles of one position once for all heads: cs[i] = cos, cs[d/2 + i] =
 * sin of pos * inv_freq[i]; ops_rope_neox_cs then rotates a head with them
 * (the same bits as ops_rope_neox). */
void ops_rope_angles(float *cs, int d, int pos, const float *inv_freq);
void ops_rope_neox_cs(float *x, int d, const float *cs);

/* In-place softmax over n entries (max-subtracted, f32). -INFINITY allowed. */
void ops_softmax(float *x, int n);

/* SnakeBeta over C channels of T steps: y[c][t] = x[c][t] + inv_b[c] *
 * sin(a[c] x[c][t])^2 (x and y channel-major with their row strides; in
 * place allowed). The AVX2, AVX-512 and NEON tables share one sin^2 (a
 * reduction by pi and a degree-4 sine polynomial, the same operations, so
 * the same bits on x86), not bit-equal to the scalar sinf path; test_kernels
 * holds every table within 8 x 2^-24 of the sin^2 term plus 2 x 2^-24 of y
 * of a double reference. */
void ops_snake(const ops_ctx *c, const float *x, int x_stride, float *y, int y_stride, const float *a,
               const float *inv_b, int C, int T);

/* y[i] = x[i] + y[i] over n elements, split over the context's threads (c may be NULL). */
void ops_add_ctx(const ops_ctx *c, float *y, const float *x, size_t n);

#endif
