/* CPU op layer: context lifecycle, threaded matmul dispatch, element-wise
 * ops (see ops.h). A matmul: pick the kernel for W's format -> prepare X if
 * the format needs it (int8 blocks, bf16) into the context's scratch ->
 * split W's rows into tasks of a multiple of 16 rows that the pool's threads
 * pull -> kernel per row range. ops_matmul_multi does the same for several
 * matrices of one X in one pool job (one preparation, one wait). */
#include "backend/cpu/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/threadpool.h"

/* Below this many multiply-adds a matmul runs on the caller alone: a pool job
 * costs about 0.35 us on the dev machine (tests/bench/kbench.c). */
#define MT_MIN_MACS (1 << 16)
#define ROW_CHUNK 16
/* Prepared activations up to this size live on the stack when the context
 * has no scratch (one thread): n = 4 rows of 3072 columns, 2 of 6144. */
#define STACK_PREP_BYTES 65536

typedef struct conv_job {
    void (*fn)(const ops_conv_args *a, int o0, int o1);
    const ops_conv_args *a;
    int ch_per_task;
} conv_job;

typedef struct conv_time_job {
    void (*fn)(const ops_conv_args *a, int o0, int o1);
    const ops_conv_args *a;
    int per, transposed;
} conv_time_job;

struct ops_rt {
    threadpool *pool;
    atomic_int busy;
    void *scratch; /* 64-byte aligned, grow-only */
    size_t scratch_cap;
    conv_job conv;
    conv_time_job conv_time;
};

void ops_init(ops_ctx *ctx, int n_threads, int force_scalar) {
    memset(ctx, 0, sizeof *ctx);
    ctx->k = force_scalar ? ops_kernels_scalar() : ops_kernels_best();
    ctx->n_threads = n_threads < 1 ? 1 : n_threads;
    if (ctx->n_threads > 1) {
        struct ops_rt *rt = calloc(1, sizeof *rt);
        if (rt) rt->pool = threadpool_create(ctx->n_threads);
        if (!rt || !rt->pool) {
            free(rt);
            ctx->n_threads = 1;
            return;
        }
        atomic_init(&rt->busy, 0);
        ctx->rt = rt;
    }
}

void ops_free(ops_ctx *ctx) {
    if (!ctx) return;
    if (ctx->rt) {
        threadpool_destroy(ctx->rt->pool);
        free(ctx->rt->scratch);
        free(ctx->rt);
    }
    const ops_kernels *k = ctx->k;
    memset(ctx, 0, sizeof *ctx);
    ctx->k = k;
}

int ops_set_bf16_dp(ops_ctx *ctx, int on) {
    if (!on) {
        ctx->bf16_dp = 0;
        return 1;
    }
    if (!ctx->k->mm_bf16_dp) return 0;
    ctx->bf16_dp = 1;
    return 1;
}

int ops_weight_format(const qt_mat *W) {
    switch (W->dtype) {
    case DT_F32: return OPS_WF_F32;
    case DT_F16: return OPS_WF_F16;
    case DT_BF16: return OPS_WF_BF16;
    case DT_I8:
        if (W->quant == QT_Q8_B32 && W->scales) return OPS_WF_Q8;
        if (W->quant == QT_Q8_B32_X16 && W->scales) return OPS_WF_Q8X16;
        if (W->quant == QT_Q8_B32_X16S && W->scales) return OPS_WF_Q8X16S;
        return -1;
    case DT_U8:
        if (W->quant == QT_Q4_B32 && W->scales) return OPS_WF_Q4;
        if (W->quant == QT_Q4M_B32 && W->scales && W->mins) return OPS_WF_Q4M;
        if (W->quant == QT_Q4M_B32_X16 && W->scales && W->mins) return OPS_WF_Q4MX16;
        return -1;
    default: return -1;
    }
}

/* Take the pool for this call (0 if another thread holds it). */
static int rt_acquire(struct ops_rt *rt) {
    int expect = 0;
    return rt && atomic_compare_exchange_strong(&rt->busy, &expect, 1);
}

static void rt_release(struct ops_rt *rt) { atomic_store(&rt->busy, 0); }

static void *rt_scratch(struct ops_rt *rt, size_t bytes) {
    if (bytes <= rt->scratch_cap) return rt->scratch;
    const size_t cap = (bytes + bytes / 4 + 4095) & ~(size_t)4095;
    void *p = aligned_alloc(64, cap);
    if (!p) return NULL;
    free(rt->scratch);
    rt->scratch = p;
    rt->scratch_cap = cap;
    return p;
}

/* Split `total` units into about TASKS_PER_THREAD tasks per thread, each a
 * multiple of `align` units: tasks are pulled dynamically, so a late or
 * descheduled thread costs only its current task. */
#define TASKS_PER_THREAD 4
static int task_size(int total, int nt, int align) {
    int per = (total + nt * TASKS_PER_THREAD - 1) / (nt * TASKS_PER_THREAD);
    per = (per + align - 1) / align * align;
    return per < align ? align : per;
}

static int threads_for(const ops_ctx *c, long long macs, int units) {
    int nt = c->n_threads;
    if (macs < MT_MIN_MACS) return 1;
    const int max_units = (units + ROW_CHUNK - 1) / ROW_CHUNK;
    return nt < max_units ? nt : max_units;
}

/* Prepared activations (int8/int4 quantisation, bf16 rounding) with rows
 * split over the pool: a prepared buffer is one fixed-size record per row
 * made from that row alone (ops.h), so rows [i0, i1) are the prep of X's rows
 * [i0, i1) at their own offset, the same bytes whichever thread makes them. */
typedef struct prep_job {
    ops_prep_fn prep;
    const qt_mat *W;
    const float *X;
    int n;
    unsigned char *buf;
    size_t row_bytes;
} prep_job;

static void prep_task(void *arg, int t, int nt) {
    const prep_job *j = arg;
    const int i0 = (int)((long long)j->n * t / nt), i1 = (int)((long long)j->n * (t + 1) / nt);
    if (i0 < i1) j->prep(j->W, j->X + (size_t)i0 * j->W->cols, i1 - i0, j->buf + j->row_bytes * (size_t)i0);
}

int ops_matmul_threads(const ops_ctx *c, const qt_mat *W, int n) {
    if (!c->rt || n <= 0) return 1;
    return threads_for(c, (long long)W->rows * W->cols * n, W->rows);
}

/* Several products of one X, as one pool job: task t is rows
 * [(t - first[w]) per, + per) of matrix w, first[w] <= t < first[w + 1]. */
typedef struct mm_multi_job {
    ops_mm_fn fn;
    int per;
    const qt_mat *const *W;
    const float *X;
    const void *prep;
    int n;
    const float *const *bias;
    float *const *Y;
    int first[OPS_MM_MULTI_MAX + 1];
} mm_multi_job;

static void mm_multi_task(void *arg, int t, int nt) {
    (void)nt;
    const mm_multi_job *j = arg;
    int w = 0;
    while (t >= j->first[w + 1]) w++;
    const qt_mat *W = j->W[w];
    const int r0 = (t - j->first[w]) * j->per;
    const int r1 = r0 + j->per < W->rows ? r0 + j->per : W->rows;
    if (r0 < r1) j->fn(W, j->X, j->prep, j->n, j->bias ? j->bias[w] : NULL, j->Y[w], r0, r1);
}

static void mm_fail(int nw, const qt_mat *const *W, int n, float *const *Y) {
    for (int w = 0; w < nw; w++)
        for (size_t i = 0; i < (size_t)n * W[w]->rows; i++) Y[w][i] = NAN;
}

/* The context table's SwiGLU (the scalar one for a table without it). */
static void (*ctx_swiglu(const ops_ctx *c))(float *, const float *, int) {
    return c && c->k->swiglu ? c->k->swiglu : ops_swiglu;
}

/* SwiGLU's two products as one job: each task makes rows [r0, r1) of the
 * gate product (into H) and of the up product (into U), then H = silu(H) U
 * over those columns of every row, with the context table's swiglu (as
 * ops_swiglu_ctx). */
typedef struct mm_glu_job {
    ops_mm_fn fn;
    int per;
    const qt_mat *Wg, *Wu;
    const float *X;
    const void *prep;
    int n;
    float *H, *U;
    void (*swiglu)(float *g, const float *u, int n); /* the context table's */
} mm_glu_job;

static void mm_glu_task(void *arg, int t, int nt) {
    (void)nt;
    const mm_glu_job *j = arg;
    const int rows = j->Wg->rows, r0 = t * j->per, r1 = r0 + j->per < rows ? r0 + j->per : rows;
    if (r0 >= r1) return;
    j->fn(j->Wg, j->X, j->prep, j->n, NULL, j->H, r0, r1);
    j->fn(j->Wu, j->X, j->prep, j->n, NULL, j->U, r0, r1);
    for (int i = 0; i < j->n; i++) j->swiglu(j->H + (size_t)i * rows + r0, j->U + (size_t)i * rows + r0, r1 - r0);
}

/* The matrices of one call share X's preparation and the pool job: same
 * format and width (checked by the caller). glu_u != NULL: the SwiGLU pair
 * (nw = 2, same rows), Y[0] gets silu(X W0^T) (X W1^T) and glu_u the second
 * product. */
static void mm_run(const ops_ctx *c, int nw, const qt_mat *const *W, const float *X, int n, const float *const *bias,
                   float *const *Y, float *glu_u) {
    const ops_kernels *k = c->k;
    const int f = ops_weight_format(W[0]);
    if (f < 0) {
        mm_fail(nw, W, n, Y);
        return;
    }
    if (!k->mm[f]) k = ops_kernels_scalar(); /* a layout this table has no kernel for */
    ops_mm_fn fn = k->mm[f];
    ops_prep_size_fn psize = k->prep_size[f];
    ops_prep_fn prep = k->prep[f];
    if (f == OPS_WF_BF16 && c->bf16_dp && k->mm_bf16_dp) {
        fn = k->mm_bf16_dp;
        psize = bf16_prep_size;
        prep = bf16_prep;
    }
    struct ops_rt *rt = c->rt;
    const int own = rt_acquire(rt);
    _Alignas(64) unsigned char stack_buf[STACK_PREP_BYTES];
    void *pbuf = NULL, *heap = NULL;
    if (psize) {
        const size_t sz = psize(W[0], n);
        if (own) pbuf = rt_scratch(rt, sz);
        if (!pbuf && sz <= sizeof stack_buf) pbuf = stack_buf;
        if (!pbuf) pbuf = heap = aligned_alloc(64, (sz + 63) & ~(size_t)63);
        if (!pbuf) {
            mm_fail(nw, W, n, Y);
            if (own) rt_release(rt);
            return;
        }
    }
    int rows = 0;
    for (int w = 0; w < nw; w++) rows += W[w]->rows;
    const int nt = own ? threads_for(c, (long long)rows * W[0]->cols * n, rows) : 1;
    if (psize && nt > 1 && n >= 2) {
        prep_job pj = {prep, W[0], X, n, pbuf, psize(W[0], 1)};
        threadpool_run(rt->pool, prep_task, &pj, n < nt ? n : nt);
    } else if (psize) {
        prep(W[0], X, n, pbuf);
    }
    if (glu_u) {
        mm_glu_job j = {.fn = fn, .per = nt > 1 ? task_size(W[0]->rows, nt, ROW_CHUNK) : W[0]->rows, .Wg = W[0],
                        .Wu = W[1], .X = X, .prep = pbuf, .n = n, .H = Y[0], .U = glu_u,
                        .swiglu = ctx_swiglu(c)};
        const int tasks = (W[0]->rows + j.per - 1) / j.per;
        if (nt <= 1) mm_glu_task(&j, 0, 1);
        else threadpool_run(rt->pool, mm_glu_task, &j, tasks);
    } else if (nt <= 1) {
        for (int w = 0; w < nw; w++) fn(W[w], X, pbuf, n, bias ? bias[w] : NULL, Y[w], 0, W[w]->rows);
    } else {
        mm_multi_job j = {.fn = fn, .per = task_size(rows, nt, ROW_CHUNK), .W = W, .X = X, .prep = pbuf, .n = n,
                          .bias = bias, .Y = Y};
        for (int w = 0; w < nw; w++) j.first[w + 1] = j.first[w] + (W[w]->rows + j.per - 1) / j.per;
        threadpool_run(rt->pool, mm_multi_task, &j, j.first[nw]);
    }
    if (own) rt_release(rt);
    free(heap);
}

/* Same format and width: one preparation of X serves every matrix. */
static int mm_shared(int nw, const qt_mat *const *W) {
    int ok = nw <= OPS_MM_MULTI_MAX;
    for (int w = 0; w < nw && ok; w++)
        ok = W[w]->rows > 0 && W[w]->cols == W[0]->cols && W[w]->dtype == W[0]->dtype &&
             ops_weight_format(W[w]) == ops_weight_format(W[0]);
    return ok;
}

void ops_matmul(const ops_ctx *c, const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    if (n <= 0 || W->rows <= 0) return;
    mm_run(c, 1, &W, X, n, bias ? &bias : NULL, &Y, NULL);
}

void ops_matmul_multi(const ops_ctx *c, int nw, const qt_mat *const *W, const float *X, int n,
                      const float *const *bias, float *const *Y) {
    if (n <= 0 || nw <= 0) return;
    if (mm_shared(nw, W)) {
        mm_run(c, nw, W, X, n, bias, Y, NULL);
        return;
    }
    for (int w = 0; w < nw; w++) ops_matmul(c, W[w], X, n, bias ? bias[w] : NULL, Y[w]);
}

void ops_matmul_swiglu(const ops_ctx *c, const qt_mat *Wg, const qt_mat *Wu, const float *X, int n, float *H,
                       float *U) {
    if (n <= 0) return;
    const qt_mat *const W[2] = {Wg, Wu};
    float *const Y[2] = {H, U};
    if (Wg->rows != Wu->rows) {
        mm_fail(2, W, n, Y);
        return;
    }
    if (mm_shared(2, W)) {
        mm_run(c, 2, W, X, n, NULL, Y, U);
        return;
    }
    ops_matmul_multi(c, 2, W, X, n, NULL, Y);
    ops_swiglu_ctx(c, H, U, n * Wg->rows);
}

/* ------------------------------------------------------------ convolutions */

static void conv_task(void *arg, int t, int nt) {
    (void)nt;
    const conv_job *j = arg;
    const int o0 = t * j->ch_per_task, o1 = o0 + j->ch_per_task < j->a->cout ? o0 + j->ch_per_task : j->a->cout;
    if (o0 < o1) j->fn(j->a, o0, o1);
}

/* Time split: task t computes every output channel over its own range of
 * output steps (conv1d with stride 1: x, t_in and y shifted; transposed: the
 * window [t0, t1) and y). Each output is still one computation in the same
 * order (conv.h), so the split changes no bit. */
static void conv_time_task(void *arg, int t, int nt) {
    (void)nt;
    const conv_time_job *j = arg;
    const ops_conv_args *a = j->a;
    const int t0 = a->t0 + t * j->per, t1 = t0 + j->per < a->t1 ? t0 + j->per : a->t1;
    if (t0 >= t1) return;
    ops_conv_args b = *a;
    b.y = a->y + (t0 - a->t0);
    if (j->transposed) {
        b.t0 = t0;
        b.t1 = t1;
    } else { /* stride 1: outputs [t0, t1) read x[t0, t1 + span - 1) */
        b.x = a->x + t0;
        b.t_in = t1 - t0 + a->dilation * (a->k - 1);
        b.t0 = 0;
        b.t1 = t1 - t0;
    }
    j->fn(&b, 0, b.cout);
}

int ops_conv_time_split(const ops_ctx *c, const ops_conv_args *a, int transposed) {
    const int steps = a->t1 - a->t0;
    return c && c->rt && c->n_threads > 1 && a->groups == 1 && steps >= 2 * 64 * c->n_threads &&
           (transposed || (size_t)a->cin * (size_t)a->t_in * sizeof(float) >= OPS_CONV_TIME_SPLIT_BYTES);
}

void ops_conv_run_time(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                       int transposed) {
    struct ops_rt *rt = c ? c->rt : NULL;
    if (!rt_acquire(rt)) {
        fn(a, 0, a->cout);
        return;
    }
    /* whole 64-step tiles (of each phase, transposed), a few tasks per thread,
     * rounded down so the tasks come out near a multiple of the threads: 10
     * tiles on 2 threads as 10 tasks, not 5 (3 + 2: one thread idle for a
     * fifth of the conv; the vocoder's block 2 at 4-frame chunks) */
    const int steps = a->t1 - a->t0, unit = 64 * (transposed ? a->stride : 1);
    const int tiles = (steps + unit - 1) / unit, want = c->n_threads * TASKS_PER_THREAD;
    const int per = (tiles / want > 1 ? tiles / want : 1) * unit;
    rt->conv_time = (conv_time_job){fn, a, per, transposed};
    threadpool_run(rt->pool, conv_time_task, &rt->conv_time, (steps + per - 1) / per);
    rt_release(rt);
}

void ops_conv_run(const ops_ctx *c, void (*fn)(const ops_conv_args *, int, int), const ops_conv_args *a,
                  long long macs) {
    struct ops_rt *rt = c ? c->rt : NULL;
    const int own = rt_acquire(rt);
    int nt = 1;
    if (own && macs >= MT_MIN_MACS) nt = c->n_threads < (a->cout + 3) / 4 ? c->n_threads : (a->cout + 3) / 4;
    if (nt <= 1) {
        fn(a, 0, a->cout);
    } else {
        /* channels in multiples of 4 (the AVX2 kernels' channel tile; the
         * AVX-512 one takes 6 at a time and any remainder) */
        const int per = task_size(a->cout, nt, 4);
        rt->conv = (conv_job){fn, a, per};
        threadpool_run(rt->pool, conv_task, &rt->conv, (a->cout + per - 1) / per);
    }
    if (own) rt_release(rt);
}

/* ------------------------------------------------------------ attention */

int ops_async(const ops_ctx *c, void (*fn)(void *arg), void *arg) {
    return c && c->rt ? threadpool_async(c->rt->pool, fn, arg) : 0;
}

void ops_parallel(const ops_ctx *c, void (*fn)(void *arg, int t, int n_tasks), void *arg, int n_tasks) {
    struct ops_rt *rt = c ? c->rt : NULL;
    if (n_tasks > 1 && rt_acquire(rt)) {
        threadpool_run(rt->pool, fn, arg, n_tasks);
        rt_release(rt);
        return;
    }
    for (int t = 0; t < n_tasks; t++) fn(arg, t, n_tasks);
}

void ops_attn_head(const ops_ctx *c, const float *q, const float *K, const float *V, size_t kv_stride, int np,
                   int hd, float scale, float *scores, float *out) {
    if (c->k->attn_head) {
        c->k->attn_head(q, K, V, kv_stride, np, hd, scale, scores, out);
        return;
    }
    for (int j = 0; j < np; j++) scores[j] = c->k->dot(q, K + (size_t)j * kv_stride, hd) * scale;
    ops_softmax(scores, np);
    for (int t = 0; t < hd; t++) out[t] = 0.0f;
    for (int j = 0; j < np; j++) c->k->axpy(out, scores[j], V + (size_t)j * kv_stride, hd);
}

/* ------------------------------------------------------------ rows */

void ops_get_row(const qt_mat *W, int r, float *out) {
    if (qt_is_quant(W)) {
        qmat_dequant_row(W, r, out);
        return;
    }
    const size_t off = (size_t)r * W->cols;
    switch (W->dtype) {
    case DT_F32: dtype_to_f32(DT_F32, (const float *)W->data + off, out, W->cols); break;
    default: dtype_to_f32(W->dtype, (const uint16_t *)W->data + off, out, W->cols); break;
    }
}

void ops_add_row(const qt_mat *W, int r, float *out) {
    const size_t off = (size_t)r * W->cols;
    if (qt_is_quant(W)) {
        float tmp[1024];
        if (W->cols <= 1024) {
            qmat_dequant_row(W, r, tmp);
            for (int j = 0; j < W->cols; j++) out[j] += tmp[j];
        } else {
            float *t = malloc(sizeof(float) * W->cols);
            if (!t) {
                for (int j = 0; j < W->cols; j++) out[j] = NAN;
                return;
            }
            qmat_dequant_row(W, r, t);
            for (int j = 0; j < W->cols; j++) out[j] += t[j];
            free(t);
        }
        return;
    }
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

/* ------------------------------------------------------------ element-wise */

/* Four floats in a vector register where the target has one (SSE, NEON),
 * or four scalars: lane-wise operations in a fixed order either way. */
typedef float f32x4 __attribute__((vector_size(16)));

static f32x4 load4(const float *p) {
    f32x4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

void ops_add(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const f32x4 a0 = load4(y + i) + load4(x + i), a1 = load4(y + i + 4) + load4(x + i + 4);
        const f32x4 a2 = load4(y + i + 8) + load4(x + i + 8), a3 = load4(y + i + 12) + load4(x + i + 12);
        memcpy(y + i, &a0, sizeof a0);
        memcpy(y + i + 4, &a1, sizeof a1);
        memcpy(y + i + 8, &a2, sizeof a2);
        memcpy(y + i + 12, &a3, sizeof a3);
    }
    for (; i < n; i++) y[i] += x[i];
}

/* The sum of squares in 16 running partial sums (element i goes to partial
 * i mod 16, in order), then added pairwise: p[j] += p[j + 8], + 4, + 2, + 1.
 * One fixed order whatever kernels the CPU gets, and 16 independent chains
 * instead of one (a 1024-wide norm: ~4k cycles of add latency -> a few
 * hundred; the 4-stream step spent ~2 % of its time here). */
void ops_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    f32x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const f32x4 x0 = load4(x + i), x1 = load4(x + i + 4), x2 = load4(x + i + 8), x3 = load4(x + i + 12);
        a0 += x0 * x0;
        a1 += x1 * x1;
        a2 += x2 * x2;
        a3 += x3 * x3;
    }
    float p[16];
    memcpy(p, &a0, 16);
    memcpy(p + 4, &a1, 16);
    memcpy(p + 8, &a2, 16);
    memcpy(p + 12, &a3, 16);
    for (int j = 0; i + j < n; j++) p[j] += x[i + j] * x[i + j];
    for (int h = 8; h > 0; h /= 2)
        for (int j = 0; j < h; j++) p[j] += p[j + h];
    const float inv = 1.0f / sqrtf(p[0] / (float)n + eps);
    const f32x4 iv = {inv, inv, inv, inv};
    for (i = 0; i + 4 <= n; i += 4) {
        const f32x4 v = load4(x + i) * iv * load4(w + i);
        memcpy(y + i, &v, sizeof v);
    }
    for (; i < n; i++) y[i] = (x[i] * inv) * w[i];
}

void ops_silu(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

void ops_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

void ops_elu(float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!(x[i] > 0.0f)) x[i] = expm1f(x[i]);
}

/* Elementwise work over n floats split over the pool in even ranges (any
 * split gives the same bits): SwiGLU g = silu(g) u, the add y = x + y, and
 * ELU y = elu(y) (x unused). */
typedef enum { PAIR_SWIGLU, PAIR_ADD, PAIR_ELU } pair_op;

typedef struct pair_job {
    pair_op op;
    float *y;
    const float *x;
    size_t n;
    void (*swiglu)(float *g, const float *u, int n); /* the table's */
    void (*elu)(float *x, int n);                    /* the table's */
} pair_job;

static void pair_range(const pair_job *j, size_t a, size_t b) {
    if (j->op == PAIR_SWIGLU) j->swiglu(j->y + a, j->x + a, (int)(b - a));
    else if (j->op == PAIR_ELU)
        for (size_t i = a; i < b; i += (size_t)1 << 30) /* int counts */
            j->elu(j->y + i, (int)(b - i < ((size_t)1 << 30) ? b - i : ((size_t)1 << 30)));
    else ops_add(j->y + a, j->x + a, b - a);
}

static void pair_task(void *arg, int t, int n_tasks) {
    const pair_job *j = arg;
    pair_range(j, j->n * t / n_tasks, j->n * (t + 1) / n_tasks);
}

/* on the calling thread below min_split elements (not worth a ~2 us dispatch) */
static void pair_run(const ops_ctx *c, pair_op op, float *y, const float *x, size_t n, size_t min_split) {
    pair_job j = {op, y, x, n, ctx_swiglu(c), c && c->k->elu ? c->k->elu : ops_elu};
    if (!c || c->n_threads <= 1 || n < min_split) pair_range(&j, 0, n);
    else ops_parallel(c, pair_task, &j, c->n_threads);
}

void ops_swiglu_ctx(const ops_ctx *c, float *g, const float *u, int n) {
    /* ~10 ns per element in scalar code: one row of a 1024-wide MLP
     * (talker, predictor) is already worth splitting */
    if (n > 0) pair_run(c, PAIR_SWIGLU, g, u, (size_t)n, 1024);
}

void ops_elu_ctx(const ops_ctx *c, float *x, size_t n) {
    /* ~2 ns per element on 16 lanes: split from 64 Ki elements */
    if (n > 0) pair_run(c, PAIR_ELU, x, NULL, n, (size_t)1 << 16);
}

void ops_rope_angles(float *cs, int d, int pos, const float *inv_freq) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        const float ang = (float)pos * inv_freq[i];
        cs[i] = cosf(ang);
        cs[h + i] = sinf(ang);
    }
}

void ops_rope_neox_cs(float *x, int d, const float *cs) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        const float c = cs[i], s = cs[h + i];
        const float a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = b * c + a * s;
    }
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

typedef struct snake_job {
    const ops_kernels *k;
    const float *x, *a, *inv_b;
    float *y;
    int x_stride, y_stride, C, T;
} snake_job;

static void snake_task(void *arg, int t, int n_tasks) {
    const snake_job *j = arg;
    const int c0 = (int)((long long)j->C * t / n_tasks), c1 = (int)((long long)j->C * (t + 1) / n_tasks);
    for (int ch = c0; ch < c1; ch++)
        j->k->snake(j->y + (size_t)ch * j->y_stride, j->x + (size_t)ch * j->x_stride, j->T, j->a[ch], j->inv_b[ch]);
}

void ops_snake(const ops_ctx *c, const float *x, int x_stride, float *y, int y_stride, const float *a,
               const float *inv_b, int C, int T) {
    snake_job j = {c->k, x, a, inv_b, y, x_stride, y_stride, C, T};
    /* a few ns per element against ~2 us per pool dispatch; channels split
     * (each channel's samples are computed alike on any thread: same bits) */
    const int tasks = (long long)C * T < 16384 ? 1 : c->n_threads < C ? c->n_threads : C;
    if (tasks <= 1) snake_task(&j, 0, 1);
    else ops_parallel(c, snake_task, &j, tasks);
}

void ops_add_ctx(const ops_ctx *c, float *y, const float *x, size_t n) { pair_run(c, PAIR_ADD, y, x, n, 65536); }
