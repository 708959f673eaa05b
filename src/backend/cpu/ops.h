/* CPU op layer: the only place model code reaches for arithmetic.
 * Dataflow: model code -> ops_* (this header) -> the kernel table picked once
 * at model load (ops_dispatch) -> scalar reference or an ISA-specific kernel.
 * Weights are read in their stored dtype (qt_mat); activations are f32.
 * Every matrix op takes n rows of input so prefill and several streams
 * stepped together use the same entry point as a single decode step. */
#ifndef QTTS_BACKEND_CPU_OPS_H
#define QTTS_BACKEND_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"

/* A weight matrix as stored: rows x cols, row-major (PyTorch Linear [out, in]).
 * data points into the mmap (or an owned aligned copy); never written. */
typedef struct qt_mat {
    const void *data;
    qtts_dtype dtype; /* DT_F32, DT_F16 or DT_BF16 */
    int rows;         /* out features */
    int cols;         /* in features */
} qt_mat;

typedef struct ops_ctx ops_ctx;

/* Kernel table: one implementation per ISA, the scalar one always present. */
typedef struct ops_kernels {
    const char *name; /* "scalar", "avx2", ... */
    /* Y[n][W.rows] = X[n][W.cols] * W^T (+ bias[W.rows] if bias != NULL). */
    void (*matmul)(const qt_mat *W, const float *X, int n, const float *bias, float *Y);
} ops_kernels;

struct ops_ctx {
    const ops_kernels *k;
    int n_threads;
};

/* Initialise with the best kernels for this CPU (force_scalar = 1: reference). */
void ops_init(ops_ctx *ctx, int n_threads, int force_scalar);

/* Release what ops_init set up (worker threads); accepts a zeroed ctx. */
void ops_free(ops_ctx *ctx);

/* The scalar reference kernels (always built). */
const ops_kernels *ops_kernels_scalar(void);

/* Y[n][rows] = X[n][cols] W^T + bias */
static inline void ops_matmul(const ops_ctx *c, const qt_mat *W, const float *X, int n,
                              const float *bias, float *Y) {
    c->k->matmul(W, X, n, bias, Y);
}

/* out[cols] = row r of W widened to f32. */
void ops_get_row(const qt_mat *W, int r, float *out);
/* out[cols] += row r of W widened to f32. */
void ops_add_row(const qt_mat *W, int r, float *out);

/* y = x / sqrt(mean(x^2) + eps) * w  over n elements (in place allowed). */
void ops_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* x[i] = silu(x[i]) */
void ops_silu(float *x, int n);
/* g[i] = silu(g[i]) * u[i] */
void ops_swiglu(float *g, const float *u, int n);

/* Split-half (NeoX) RoPE on one head of dim d at position pos:
 * y[i] = x[i] c - x[i+d/2] s, y[i+d/2] = x[i+d/2] c + x[i] s.
 * inv_freq[d/2] precomputed. */
void ops_rope_neox(float *x, int d, int pos, const float *inv_freq);

/* In-place softmax over n entries (max-subtracted, f32). -INFINITY allowed. */
void ops_softmax(float *x, int n);

#endif
