/* 1-D convolutions: the scalar reference kernels, the SIMD tables' scalar
 * FMA code, and the entry points that pick a kernel table and split output
 * channels, or for a large input output steps, over threads (see conv.h).
 * Dataflow: x[cin][t] (by phase if stride > 1) -> the table's kernel per channel or step range -> y[cout][t]. */
#include "backend/cpu/conv.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops_dispatch.h"

void conv1d_scalar(const ops_conv_args *a, int o0, int o1) {
    const int k = a->k, stride = a->stride, dilation = a->dilation, x_stride = a->x_stride;
    const int span = dilation * (k - 1) + 1;
    if (a->t_in < span) return;
    const int t_out = (a->t_in - span) / stride + 1;
    const int cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    for (int o = o0; o < o1; o++) {
        const int g = o / cout_g;
        const float *wo = a->w + (long)o * cin_g * k;
        float *yo = a->y + (long)o * a->y_stride;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int i = 0; i < cin_g; i++) {
                const float *xi = a->x + (long)(g * cin_g + i) * x_stride + (long)t * stride;
                const float *wi = wo + (long)i * k;
                for (int tap = 0; tap < k; tap++) acc += wi[tap] * xi[tap * dilation];
            }
            yo[t] = acc + (a->bias ? a->bias[o] : 0.0f);
        }
    }
}

void conv_transpose1d_scalar(const ops_conv_args *a, int o0, int o1) {
    const int k = a->k, stride = a->stride, t_in = a->t_in;
    const int cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    for (int o = o0; o < o1; o++) {
        const int g = o / cout_g, og = o % cout_g;
        float *yo = a->y + (long)o * a->y_stride - a->t0;
        for (int t = a->t0; t < a->t1; t++) {
            /* input steps j with 0 <= t - j*stride < k */
            int j_hi = t / stride;
            if (j_hi > t_in - 1) j_hi = t_in - 1;
            const int j_lo = t - k + 1 <= 0 ? 0 : (t - k + 1 + stride - 1) / stride;
            float acc = 0.0f;
            for (int i = 0; i < cin_g; i++) {
                const int ci = g * cin_g + i;
                const float *xi = a->x + (long)ci * a->x_stride;
                const float *wi = a->w + ((long)ci * cout_g + og) * k;
                for (int j = j_lo; j <= j_hi; j++) acc += xi[j] * wi[t - j * stride];
            }
            yo[t] = acc + (a->bias ? a->bias[o] : 0.0f);
        }
    }
}

/* The SIMD tables' scalar code, the products fused as in their vector FMA:
 * compiled for FMA on x86-64 (only the AVX2 and AVX-512 tables call it), so
 * fmaf is one instruction, as it is on aarch64. */
#if defined(__x86_64__) || defined(__i386__)
#define FMA_CODE __attribute__((target("fma")))
#else
#define FMA_CODE
#endif

FMA_CODE void conv1d_fma_generic(const ops_conv_args *a, int o0, int o1) {
    const int k = a->k, span = a->dilation * (k - 1) + 1, t_out = (a->t_in - span) / a->stride + 1;
    const int cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    for (int o = o0; o < o1; o++) {
        const int g = o / cout_g;
        const float *wo = a->w + (size_t)o * cin_g * k;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int i = 0; i < cin_g; i++) {
                const float *xi = a->x + (size_t)(g * cin_g + i) * a->x_stride + (size_t)t * a->stride;
                for (int tap = 0; tap < k; tap++) acc = fmaf(wo[i * k + tap], xi[tap * a->dilation], acc);
            }
            a->y[(size_t)o * a->y_stride + t] = acc + (a->bias ? a->bias[o] : 0.0f);
        }
    }
}

/* One transposed output y[o][t] over its present terms. */
FMA_CODE static float tr_point(const ops_conv_args *a, int o, int t) {
    const int k = a->k, s = a->stride, t_in = a->t_in, cin_g = a->cin / a->groups, cout_g = a->cout / a->groups;
    const int g = o / cout_g, og = o % cout_g;
    int j_hi = t / s;
    if (j_hi > t_in - 1) j_hi = t_in - 1;
    const int j_lo = t - k + 1 <= 0 ? 0 : (t - k + 1 + s - 1) / s;
    float acc = 0.0f;
    for (int i = 0; i < cin_g; i++) {
        const int ci = g * cin_g + i;
        const float *xi = a->x + (size_t)ci * a->x_stride;
        const float *wi = a->w + ((size_t)ci * cout_g + og) * k;
        for (int j = j_lo; j <= j_hi; j++) {
            const int tap = t - j * s;
            acc = fmaf(xi[j], wi[tap], acc);
        }
    }
    return acc + (a->bias ? a->bias[o] : 0.0f);
}

FMA_CODE void conv_tr_edges_fma(const ops_conv_args *a, int o, int n, int p, const ops_tr_phase *ph) {
    const int s = a->stride;
    for (int c = 0; c < n; c++) {
        float *yo = a->y + (size_t)(o + c) * a->y_stride - a->t0;
        for (int q = ph->qa; q < ph->ia; q++) yo[q * s + p] = tr_point(a, o + c, q * s + p);
        for (int q = ph->ib; q < ph->qb; q++) yo[q * s + p] = tr_point(a, o + c, q * s + p);
    }
}

int ops_conv_xmap_of(const ops_conv_args *a, ops_conv_xmap *xm) {
    const int k = a->k, s = a->stride, d = a->dilation;
    if (k > OPS_CONV_MAX_K || (s > 1 && !a->xph)) return 0;
    if (s == 1) {
        xm->base = a->x;
        xm->crs = (size_t)a->x_stride;
        for (int tap = 0; tap < k; tap++) xm->toff[tap] = tap * d;
    } else {
        xm->base = a->xph;
        xm->crs = (size_t)s * a->ph_len;
        for (int tap = 0; tap < k; tap++) xm->toff[tap] = (tap * d) % s * a->ph_len + (tap * d) / s;
    }
    return 1;
}

int ops_conv_time_block(int cin_g, int span, size_t bytes, int step, int min) {
    const long long tbl = (long long)(bytes / (sizeof(float) * (size_t)cin_g)) - (span - 1);
    return tbl < min ? min : tbl > (1 << 24) ? 1 << 24 : (int)(tbl / step) * step;
}

/* run(job, r0, r1) over [0, n) in ranges of per, one task each */
typedef struct range_job {
    void (*run)(const void *job, int r0, int r1);
    const void *job;
    int n, per;
} range_job;

static void range_task(void *arg, int t, int n_tasks) {
    (void)n_tasks;
    const range_job *j = arg;
    const int r0 = t * j->per, r1 = r0 + j->per < j->n ? r0 + j->per : j->n;
    if (r0 < r1) j->run(j->job, r0, r1);
}

static void run_ranges(const ops_ctx *c, int n, int per, void (*run)(const void *job, int r0, int r1),
                       const void *job) {
    range_job j = {run, job, n, per};
    ops_parallel(c, range_task, &j, (n + per - 1) / per);
}

void ops_conv_split_ctx(const ops_ctx *c, int cout, long long macs, void (*run)(const void *job, int o0, int o1),
                        const void *job) {
    const int nt = c ? c->n_threads : 1;
    if (nt > 1 && macs >= (1 << 21) && cout >= 24) {
        const int n_tasks = nt * 2;
        run_ranges(c, cout, ((cout + n_tasks - 1) / n_tasks + 11) / 12 * 12, run, job);
    } else {
        run(job, 0, cout);
    }
}

void ops_conv_pack_split_ctx(const ops_ctx *c, int cin, int t_in, void (*run)(const void *job, int t0, int t1),
                             const void *job) {
    const int nt = c ? c->n_threads : 1;
    if (nt > 1 && (long long)cin * t_in >= (1 << 15) && t_in >= 64)
        run_ranges(c, t_in, ((t_in + nt - 1) / nt + 15) / 16 * 16, run, job);
    else
        run(job, 0, t_in);
}

int ops_conv_transpose_window(int t_in, int k, int stride, int t0, int t1, int *u0, int *nu) {
    if (stride <= 0 || k <= 0 || k % stride || t1 <= t0 || t0 % stride || t1 % stride) return 0;
    const int kk = k / stride;
    if (t0 < (kk - 1) * stride || t1 > t_in * stride) return 0;
    *u0 = t0 / stride - (kk - 1);
    *nu = (t1 - t0) / stride;
    return 1;
}

static const ops_kernels *g_default;
static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;
static void default_init(void) { g_default = ops_kernels_best(); }

static const ops_kernels *default_kernels(void) {
    pthread_once(&g_default_once, default_init);
    return g_default;
}

/* x deinterleaved by stride phase: xph[(i*s + p)*len + u] = x[i][u*s + p]. */
static float *deinterleave(const float *x, int cin, int t_in, int x_stride, int s, int *len) {
    const int L = (t_in + s - 1) / s;
    float *xph = malloc(sizeof(float) * (size_t)cin * s * L);
    if (!xph) return NULL;
    for (int i = 0; i < cin; i++)
        for (int p = 0; p < s; p++) {
            float *dst = xph + ((size_t)i * s + p) * L;
            const float *src = x + (size_t)i * x_stride + p;
            for (int u = 0; u * s + p < t_in; u++) dst[u] = src[(size_t)u * s];
        }
    *len = L;
    return xph;
}

static void conv1d_any(const ops_ctx *c, const ops_kernels *k, const float *x, int cin, int t_in, int x_stride,
                       const float *w, const float *bias, int cout, int kk, int stride, int dilation, int groups,
                       float *y, int y_stride) {
    const int span = dilation * (kk - 1) + 1;
    if (t_in < span || cout <= 0) return;
    const int t_out = (t_in - span) / stride + 1;
    ops_conv_args a = {.x = x, .cin = cin, .t_in = t_in, .x_stride = x_stride, .w = w, .bias = bias,
                       .cout = cout, .k = kk, .stride = stride, .dilation = dilation, .groups = groups,
                       .t0 = 0, .t1 = t_out, .y = y, .y_stride = y_stride};
    float *xph = NULL;
    if (stride > 1 && k != ops_kernels_scalar()) {
        xph = deinterleave(x, cin, t_in, x_stride, stride, &a.ph_len);
        a.xph = xph;
    }
    if (stride == 1 && ops_conv_time_split(c, &a, 0)) ops_conv_run_time(c, k->conv1d, &a, 0);
    else ops_conv_run(c, k->conv1d, &a, (long long)cout * (cin / groups) * kk * t_out);
    free(xph);
}

void ops_conv1d(const float *x, int cin, int t_in, int x_stride, const float *w, const float *bias, int cout, int k,
                int stride, int dilation, int groups, float *y, int y_stride) {
    conv1d_any(NULL, default_kernels(), x, cin, t_in, x_stride, w, bias, cout, k, stride, dilation, groups, y,
               y_stride);
}

void ops_conv1d_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const float *w,
                    const float *bias, int cout, int k, int stride, int dilation, int groups, float *y, int y_stride) {
    conv1d_any(c, c->k, x, cin, t_in, x_stride, w, bias, cout, k, stride, dilation, groups, y, y_stride);
}

static void conv_tr_any(const ops_ctx *c, const ops_kernels *k, const float *x, int cin, int t_in, int x_stride,
                        const float *w, const float *bias, int cout, int kk, int stride, int groups, int t0, int t1,
                        float *y, int y_stride) {
    if (t_in <= 0 || t1 <= t0 || cout <= 0) return;
    ops_conv_args a = {.x = x, .cin = cin, .t_in = t_in, .x_stride = x_stride, .w = w, .bias = bias,
                       .cout = cout, .k = kk, .stride = stride, .dilation = 1, .groups = groups,
                       .t0 = t0, .t1 = t1, .y = y, .y_stride = y_stride};
    const long long per_out = (long long)(cin / groups) * ((kk + stride - 1) / stride);
    if (ops_conv_time_split(c, &a, 1)) ops_conv_run_time(c, k->conv_transpose1d, &a, 1);
    else ops_conv_run(c, k->conv_transpose1d, &a, (long long)cout * (t1 - t0) * per_out);
}

void ops_conv_transpose1d(const float *x, int cin, int t_in, int x_stride, const float *w, const float *bias,
                          int cout, int k, int stride, int groups, float *y, int y_stride) {
    const int t_out = (t_in - 1) * stride + k;
    conv_tr_any(NULL, default_kernels(), x, cin, t_in, x_stride, w, bias, cout, k, stride, groups, 0, t_out, y,
                y_stride);
}

void ops_conv_transpose1d_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const float *w,
                              const float *bias, int cout, int k, int stride, int groups, int t0, int t1, float *y,
                              int y_stride) {
    conv_tr_any(c, c->k, x, cin, t_in, x_stride, w, bias, cout, k, stride, groups, t0, t1, y, y_stride);
}

float *ops_conv_transpose1d_pack_conv(const float *w, const float *bias, int cin, int cout, int k, int stride) {
    if (!w || cin <= 0 || cout <= 0 || stride <= 0 || k <= 0 || k % stride) return NULL;
    const int kk = k / stride;
    const size_t nw = (size_t)stride * cout * cin * kk, n = nw + (size_t)stride * cout;
    float *wc = aligned_alloc(64, (sizeof(float) * n + 63) & ~(size_t)63);
    if (!wc) return NULL;
    for (int p = 0; p < stride; p++)
        for (int o = 0; o < cout; o++) {
            float *dst = wc + ((size_t)p * cout + o) * cin * kk;
            for (int i = 0; i < cin; i++)
                for (int u = 0; u < kk; u++)
                    dst[(size_t)i * kk + u] = w[((size_t)i * cout + o) * k + p + (size_t)(kk - 1 - u) * stride];
            wc[nw + (size_t)p * cout + o] = bias ? bias[o] : 0.0f;
        }
    return wc;
}

/* y[o][u stride + p] = yc[p cout + o][u] over output channels [o0, o1). */
typedef struct interleave_job {
    const float *yc;
    float *y;
    int cout, nu, stride, y_stride;
} interleave_job;

static void interleave_range(const interleave_job *j, int o0, int o1) {
    const int s = j->stride, nu = j->nu;
    for (int o = o0; o < o1; o++) {
        float *yo = j->y + (size_t)o * j->y_stride;
        for (int p = 0; p < s; p++) {
            const float *src = j->yc + ((size_t)p * j->cout + o) * nu;
            for (int u = 0; u < nu; u++) yo[(size_t)u * s + p] = src[u];
        }
    }
}

static void interleave_task(void *arg, int t, int n_tasks) {
    const interleave_job *j = arg;
    interleave_range(j, (int)((long long)j->cout * t / n_tasks), (int)((long long)j->cout * (t + 1) / n_tasks));
}

int ops_conv_transpose1d_conv_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const float *wc,
                                  int cout, int k, int stride, int t0, int t1, float *y, int y_stride,
                                  float *scratch) {
    int u0, nu;
    if (!wc || !scratch || !ops_conv_transpose_window(t_in, k, stride, t0, t1, &u0, &nu)) return 0;
    const int kk = k / stride, cc = stride * cout;
    const float *bias = wc + (size_t)cc * cin * kk;
    conv1d_any(c, c ? c->k : default_kernels(), x + u0, cin, nu + kk - 1, x_stride, wc, bias, cc, kk, 1, 1, 1,
               scratch, nu);
    ops_conv_interleave_ctx(c, scratch, y, cout, nu, stride, y_stride);
    return 1;
}

void ops_conv_interleave_ctx(const ops_ctx *c, const float *yc, float *y, int cout, int nu, int stride,
                             int y_stride) {
    interleave_job j = {yc, y, cout, nu, stride, y_stride};
    const long long bytes = (long long)stride * cout * nu * (long long)sizeof(float);
    const int nt = c ? c->n_threads : 1;
    if (nt > 1 && bytes >= (1 << 18)) ops_parallel(c, interleave_task, &j, nt * 2 < cout ? nt * 2 : cout);
    else interleave_range(&j, 0, cout);
}

