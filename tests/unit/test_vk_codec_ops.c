/* Unit test of the Vulkan codec-decoder shaders (src/backend/vulkan/shaders:
 * conv1d_f32, conv_transpose1d_f32, snake_f32, layernorm_f32, gelu_f32,
 * codebook_f32, rope_ring_f32, attention_window_f32, copy2d_f32,
 * scale_add_f32) against the scalar CPU reference on seeded random data,
 * with ragged sizes (lengths and channel counts that are not multiples of the
 * workgroup, odd channel counts), nonzero offsets and row strides. Every
 * output buffer starts filled with a sentinel and is compared whole, so a
 * write outside the op's window fails too.
 * References and tolerances (f32, unit roundoff u = 2^-24 = 6e-8):
 *  - conv1d (ops_kernels_scalar()->conv1d, then the clamp), conv_transpose1d
 *    (->conv_transpose1d), codebook (dequantize's loop in
 *    src/model/codec_stream.c), rope_ring (ops_rope_neox_cs and the ring
 *    slots), copy2d, scale_add (a + g b): bit-exact. Each shader keeps the
 *    CPU's operation order (input channel, then tap or input step; codebooks
 *    1, 2, ... in order), and the C side is built with -std=c11, which does
 *    not contract a * b + c into an FMA; a device that fuses would fail here,
 *    which is the point: the codec's streamed == whole guarantee and its
 *    CPU parity rest on these orders. conv1d also runs as two chunks (the
 *    second reading the first's columns as its history) and must give the
 *    same bits as one pass;
 *  - snake: |gpu - ref| <= 4e-6 (|x| + inv_b), ref in f64 of the same f32
 *    argument a x (so both sides see the same rounded angle): the device's
 *    sin is not libm's sinf (Vulkan only bounds it on [-pi, pi]), and the
 *    error of y is inv_b 2|s| times sin's absolute error plus one rounding of
 *    y. The CPU (sinf) is measured against the same reference;
 *  - layernorm: |gpu - ref| <= 1e-6 |w| |mean| / std + 1e-5 (|w| + |b|), ref
 *    the CPU's layernorm (double sums, copied below): f32 tree sums of the
 *    mean and of the squared deviations (error ~ log2(C) u); x - mean loses
 *    ~ log2(C) |mean| u absolute, which normalised is that over std (one row
 *    of mean 50, one of scale 1e-3);
 *  - gelu: |gpu - ref| <= (2e-6 + 8 z^2 u) |ref|, z = |x| / sqrt 2, ref =
 *    x erfc(-x / sqrt 2) / 2 in f64: the shader's erfc is Numerical Recipes'
 *    erfcc (fractional error < 1.2e-7) = t exp(-z^2 + P(t)), and -z^2 in f32
 *    carries ~3.5 z^2 u absolute error into exp's argument (measured; z = x
 *    itself rounded, z^2 and the sum rounded, exp's own error): relative
 *    error ~1e-5 at |x| = 10 on the negative tail, where the value is 1e-23.
 *    The CPU (0.5 x (1 + erff), copied from codec_stream.c) is measured too:
 *    it cancels to 0 in the negative tail, so its error there is absolute
 *    only (its relative error is 1);
 *  - attention_window: |gpu - ref| <= 2e-5 A, ref in f64 over the window's
 *    ring slots, A = max over outputs of sum_t p_t |v_t| (as test_vk_ops's
 *    attention: f32 exp and sums).
 * Needs a Vulkan device (lavapipe in CI); skips when there is none. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/ops.h"
#include "test.h"

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_kernels.h"

#define SENT (-777.0f)

static uint64_t g_rng = 0x13198a2e03707344ull;

static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = rnd() * scale;
}

static void fill_c(float *v, size_t n, float c) {
    for (size_t i = 0; i < n; i++) v[i] = c;
}

static float *fdup(const float *v, size_t n) {
    float *r = malloc(sizeof(float) * n);
    memcpy(r, v, sizeof(float) * n);
    return r;
}

typedef struct gpu {
    vk_dev *d;
    vk_cmd *c;
    qtts_error e;
    int bad; /* a runtime call failed: e holds why */
} gpu;

static vk_buf mk(gpu *g, const void *data, size_t bytes) {
    vk_buf b = {0};
    if (g->bad) return b;
    if (vk_buf_alloc(g->d, &b, bytes, 0, &g->e) != QTTS_OK) {
        g->bad = 1;
        return b;
    }
    if (data && vk_buf_upload(g->d, &b, 0, data, bytes, &g->e) != QTTS_OK) g->bad = 1;
    return b;
}

static void get(gpu *g, const vk_buf *b, void *dst, size_t bytes) {
    if (!g->bad && vk_buf_download(g->d, b, 0, dst, bytes, &g->e) != QTTS_OK) g->bad = 1;
}

static void put(gpu *g, vk_buf *b, const void *src, size_t bytes) {
    if (!g->bad && vk_buf_upload(g->d, b, 0, src, bytes, &g->e) != QTTS_OK) g->bad = 1;
}

static vk_kernel *kern(gpu *g, const char *name) {
    vk_kernel *k = NULL;
    if (!g->bad && vk_kernel_get(g->d, name, NULL, 0, &k, &g->e) != QTTS_OK) g->bad = 1;
    return k;
}

/* one dispatch, recorded, submitted and waited for */
static void run1(gpu *g, const char *name, const vk_binding *b, int nb, const void *pc, size_t pcb, uint32_t gx,
                 uint32_t gy) {
    vk_kernel *k = kern(g, name);
    if (!g->bad && vk_cmd_begin(g->c, &g->e) != QTTS_OK) g->bad = 1;
    if (!g->bad) vk_cmd_dispatch(g->c, k, b, nb, pc, pcb, gx, gy, 1);
    if (!g->bad && (vk_cmd_end(g->c, &g->e) != QTTS_OK || vk_cmd_submit(g->c, &g->e) != QTTS_OK ||
                    vk_cmd_wait(g->c, &g->e) != QTTS_OK))
        g->bad = 1;
}

static uint32_t cdiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* ------------------------------------------------------------ results */

typedef struct res {
    int ok;
    char why[320];
    long n_cmp, n_diff; /* compared elements, those not bit-equal */
    double max_abs;     /* max |gpu - ref| */
    double max_rel;     /* max |gpu - ref| / |ref| over |ref| > 1e-30 */
    double max_norm;    /* max |gpu - ref| / (the case's bound) */
    double worst_ref;   /* the reference where max_norm was reached */
} res;

static void res_init(res *r) {
    memset(r, 0, sizeof *r);
    r->ok = 1;
}

static void res_fail(res *r, const char *fmt, ...) {
    if (r->ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->why, sizeof r->why, fmt, ap);
        va_end(ap);
    }
    r->ok = 0;
}

/* one element; bound < 0: must be bit-equal; else |gpu - ref| <= bound */
static int res_one(res *r, float gv, double ref, double bound) {
    const double d = fabs((double)gv - ref);
    r->n_cmp++;
    const int eq = (double)gv == ref || (isnan(gv) && isnan(ref));
    if (!eq) r->n_diff++;
    if (!(d <= r->max_abs)) r->max_abs = d; /* NaN sticks */
    if (fabs(ref) > 1e-30 && d / fabs(ref) > r->max_rel) r->max_rel = d / fabs(ref);
    if (bound < 0) return eq;
    if (bound > 0 && d / bound > r->max_norm) r->max_norm = d / bound, r->worst_ref = ref;
    return d <= bound;
}

/* whole buffers, bit-exact */
static void res_exact(res *r, const float *gv, const float *ref, size_t n, const char *ctx) {
    for (size_t i = 0; i < n; i++)
        if (!res_one(r, gv[i], ref[i], -1)) res_fail(r, "%s: [%zu] = %.9g, want %.9g", ctx, i, gv[i], ref[i]);
}

static void res_report(gpu *g, const char *name, const res *r, const char *tol) {
    if (g->bad) test_report(name, 0, "runtime: %s", g->e.msg);
    else test_report(name, r->ok, "%s", r->why);
    printf("  %s: %ld values, %ld not bit-equal, max abs err %.3g, max rel err %.3g", name, r->n_cmp, r->n_diff,
           r->max_abs, r->max_rel);
    if (r->max_norm > 0) printf(", max err / bound %.3g (at ref %.4g)", r->max_norm, r->worst_ref);
    printf(" (%s)\n", tol);
}

/* ------------------------------------------------------------ conv1d */

static void test_conv1d(gpu *g) {
    /* cin, cout, K, dil, groups, n */
    const int cfg[][6] = {
        {1, 1, 1, 1, 1, 1},     {3, 5, 3, 1, 1, 67},      {7, 9, 7, 3, 1, 130},   {16, 16, 7, 9, 16, 65},
        {33, 33, 7, 1, 33, 200}, {12, 18, 3, 9, 3, 63},   {64, 31, 1, 1, 1, 129}, {257, 3, 7, 1, 1, 100},
        {5, 5, 3, 3, 5, 1},     {6, 10, 7, 9, 2, 191},
    };
    const int ncfg = (int)(sizeof cfg / sizeof cfg[0]);
    res r;
    res_init(&r);
    long n_clamped = 0;
    for (int ci = 0; ci < ncfg; ci++)
        for (int hist = 0; hist < 2; hist++)
            for (int clampf = 0; clampf < 2; clampf++) {
                const int cin = cfg[ci][0], cout = cfg[ci][1], K = cfg[ci][2], dil = cfg[ci][3];
                const int groups = cfg[ci][4], n = cfg[ci][5], cin_g = cin / groups;
                const int span = (K - 1) * dil, t_in = n + span, x_stride = t_in + 3, x_off = 5;
                const int y_stride = n + 2, y_off = 7, w_off = 3, b_off = 2;
                const size_t nx = (size_t)x_off + (size_t)cin * x_stride, nw = (size_t)w_off + (size_t)cout * cin_g * K;
                const size_t nb = (size_t)b_off + cout, ny = (size_t)y_off + (size_t)cout * y_stride;
                float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * nb);
                float *ref = malloc(sizeof(float) * ny), *out = malloc(sizeof(float) * ny);
                fill(x, nx, 1.0f);
                if (!hist) /* a fresh stream: zero history columns */
                    for (int c = 0; c < cin; c++) fill_c(x + x_off + (size_t)c * x_stride, (size_t)span, 0.0f);
                fill(w, nw, (clampf ? 4.0f : 1.0f) / sqrtf((float)(cin_g * K)));
                fill(b, nb, 0.5f);
                fill_c(ref, ny, SENT);
                const ops_conv_args a = {.x = x + x_off, .cin = cin, .t_in = t_in, .x_stride = x_stride,
                                         .w = w + w_off, .bias = b + b_off, .cout = cout, .k = K, .stride = 1,
                                         .dilation = dil, .groups = groups, .t0 = 0, .t1 = n,
                                         .y = ref + y_off, .y_stride = y_stride};
                ops_kernels_scalar()->conv1d(&a, 0, cout);
                if (clampf)
                    for (int o = 0; o < cout; o++)
                        for (int t = 0; t < n; t++) {
                            float *v = ref + y_off + (size_t)o * y_stride + t;
                            if (*v > 1.0f || *v < -1.0f) n_clamped++;
                            *v = *v > 1.0f ? 1.0f : *v < -1.0f ? -1.0f : *v;
                        }
                vk_buf bx = mk(g, x, sizeof(float) * nx), bw = mk(g, w, sizeof(float) * nw);
                vk_buf bb = mk(g, b, sizeof(float) * nb), by = mk(g, NULL, sizeof(float) * ny);
                vk_binding bd[4] = {{&bx, 0, 0}, {&bw, 0, 0}, {&bb, 0, 0}, {&by, 0, 0}};
                char ctx[160];
                /* one pass, then (n > 1) two chunks [0, n1), [n1, n): the second's
                 * history is the first's input columns */
                for (int chunked = 0; chunked < 1 + (n > 1); chunked++) {
                    fill_c(out, ny, SENT);
                    put(g, &by, out, sizeof(float) * ny);
                    const int n1 = chunked ? n / 3 + 1 : n;
                    vk_pc_conv1d pc = {(uint32_t)cin, (uint32_t)cout, (uint32_t)K, (uint32_t)dil, (uint32_t)groups,
                                       (uint32_t)n1, x_off, x_stride, y_off, y_stride, w_off, b_off,
                                       clampf ? VK_CONV_CLAMP : 0u};
                    run1(g, "conv1d_f32", bd, 4, &pc, sizeof pc, cdiv(n1, 64), cout);
                    if (chunked) {
                        pc.n = (uint32_t)(n - n1);
                        pc.x_off = (uint32_t)(x_off + n1);
                        pc.y_off = (uint32_t)(y_off + n1);
                        run1(g, "conv1d_f32", bd, 4, &pc, sizeof pc, cdiv(n - n1, 64), cout);
                    }
                    get(g, &by, out, sizeof(float) * ny);
                    snprintf(ctx, sizeof ctx, "cin %d cout %d K %d dil %d groups %d n %d hist %d clamp %d chunks %d",
                             cin, cout, K, dil, groups, n, hist, clampf, 1 + chunked);
                    if (!g->bad) res_exact(&r, out, ref, ny, ctx);
                }
                vk_buf_free(g->d, &bx), vk_buf_free(g->d, &bw), vk_buf_free(g->d, &bb), vk_buf_free(g->d, &by);
                free(x), free(w), free(b), free(ref), free(out);
            }
    if (n_clamped == 0) res_fail(&r, "no output reached the clamp");
    res_report(g, "vk_conv1d", &r, "bit-exact, one pass and two chunks");
}

/* ------------------------------------------------------------ conv_transpose1d */

static void test_conv_transpose1d(gpu *g) {
    /* cin, cout, K, stride, t_in, t0, n (0: to the end) */
    const int cfg[][7] = {
        {1, 1, 1, 1, 5, 0, 0},   {3, 5, 2, 2, 33, 0, 0},  {7, 4, 4, 2, 40, 2, 0},  {5, 3, 10, 5, 14, 5, 65},
        {9, 6, 3, 3, 30, 0, 0},  {4, 7, 7, 3, 20, 1, 50}, {16, 8, 16, 8, 9, 8, 64}, {2, 3, 5, 4, 17, 3, 0},
        {33, 2, 12, 6, 11, 6, 60}, {1, 65, 1, 1, 70, 3, 0},
    };
    const int ncfg = (int)(sizeof cfg / sizeof cfg[0]);
    res r;
    res_init(&r);
    for (int ci = 0; ci < ncfg; ci++) {
        const int cin = cfg[ci][0], cout = cfg[ci][1], K = cfg[ci][2], s = cfg[ci][3], t_in = cfg[ci][4];
        const int t0 = cfg[ci][5], t_out = (t_in - 1) * s + K, n = cfg[ci][6] ? cfg[ci][6] : t_out - t0;
        const int x_stride = t_in + 1, x_off = 3, y_stride = n + 5, y_off = 1, w_off = 2, b_off = 4;
        const size_t nx = (size_t)x_off + (size_t)cin * x_stride, nw = (size_t)w_off + (size_t)cin * cout * K;
        const size_t nb = (size_t)b_off + cout, ny = (size_t)y_off + (size_t)cout * y_stride;
        float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * nb);
        float *ref = malloc(sizeof(float) * ny), *out = malloc(sizeof(float) * ny);
        fill(x, nx, 1.0f);
        fill(w, nw, 1.0f / sqrtf((float)cin));
        fill(b, nb, 0.5f);
        fill_c(ref, ny, SENT);
        fill_c(out, ny, SENT);
        const ops_conv_args a = {.x = x + x_off, .cin = cin, .t_in = t_in, .x_stride = x_stride, .w = w + w_off,
                                 .bias = b + b_off, .cout = cout, .k = K, .stride = s, .dilation = 1, .groups = 1,
                                 .t0 = t0, .t1 = t0 + n, .y = ref + y_off, .y_stride = y_stride};
        ops_kernels_scalar()->conv_transpose1d(&a, 0, cout);
        vk_buf bx = mk(g, x, sizeof(float) * nx), bw = mk(g, w, sizeof(float) * nw);
        vk_buf bb = mk(g, b, sizeof(float) * nb), by = mk(g, out, sizeof(float) * ny);
        vk_binding bd[4] = {{&bx, 0, 0}, {&bw, 0, 0}, {&bb, 0, 0}, {&by, 0, 0}};
        const vk_pc_conv_transpose1d pc = {(uint32_t)cin, (uint32_t)cout, (uint32_t)K, (uint32_t)s,
                                           (uint32_t)t_in, (uint32_t)t0, (uint32_t)n, x_off,
                                           x_stride, y_off, y_stride, w_off, b_off};
        run1(g, "conv_transpose1d_f32", bd, 4, &pc, sizeof pc, cdiv(n, 64), cout);
        get(g, &by, out, sizeof(float) * ny);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "cin %d cout %d K %d stride %d t_in %d window [%d, %d)", cin, cout, K, s, t_in, t0,
                 t0 + n);
        if (!g->bad) res_exact(&r, out, ref, ny, ctx);
        vk_buf_free(g->d, &bx), vk_buf_free(g->d, &bw), vk_buf_free(g->d, &bb), vk_buf_free(g->d, &by);
        free(x), free(w), free(b), free(ref), free(out);
    }
    res_report(g, "vk_conv_transpose1d", &r, "bit-exact");
}

/* ------------------------------------------------------------ snake */

static void test_snake(gpu *g) {
    const float as[] = {1e-4f, 0.5f, 3.0f, 80.0f, 1000.0f};
    const float ibs[] = {1e-4f, 1.0f, 30.0f, 1e6f}; /* 1 / (exp(beta) + eps), beta from -14 to 9 */
    const int shapes[][2] = {{1, 1}, {20, 63}, {21, 65}, {7, 300}}; /* C, n */
    res r, rc;
    res_init(&r);
    res_init(&rc);
    for (int si = 0; si < 4; si++)
        for (int inplace = 0; inplace < 2; inplace++) {
            const int C = shapes[si][0], n = shapes[si][1], xs = n + 3, x_off = 2, ys = inplace ? xs : n + 1;
            const int y_off = inplace ? x_off : 4, a_off = 1, ib_off = 1 + C + 2;
            const size_t nx = (size_t)x_off + (size_t)C * xs, ny = inplace ? nx : (size_t)y_off + (size_t)C * ys;
            const size_t np = (size_t)ib_off + C;
            float *x = malloc(sizeof(float) * nx), *p = malloc(sizeof(float) * np), *out = malloc(sizeof(float) * ny);
            float *cpu = malloc(sizeof(float) * n);
            fill(x, nx, 4.0f);
            for (int c = 0; c < C; c++) {
                p[a_off + c] = as[(c + si) % 5];
                p[ib_off + c] = ibs[(c / 5 + si) % 4];
                if (c % 3 == 2) /* a channel of larger inputs */
                    for (int t = 0; t < n; t++) x[x_off + (size_t)c * xs + t] *= 12.0f;
            }
            if (!inplace) fill_c(out, ny, SENT);
            vk_buf bx = mk(g, x, sizeof(float) * nx), bp = mk(g, p, sizeof(float) * np);
            vk_buf by = inplace ? bx : mk(g, out, sizeof(float) * ny);
            vk_binding bd[3] = {{&bx, 0, 0}, {&bp, 0, 0}, {&by, 0, 0}};
            const vk_pc_snake pc = {(uint32_t)C, (uint32_t)n, x_off, xs, y_off, ys, a_off, ib_off};
            run1(g, "snake_f32", bd, 3, &pc, sizeof pc, cdiv(n, 64), C);
            get(g, &by, out, sizeof(float) * ny);
            for (int c = 0; c < C && !g->bad; c++) {
                const float a = p[a_off + c], ib = p[ib_off + c];
                const float *xc = x + x_off + (size_t)c * xs;
                ops_kernels_scalar()->snake(cpu, xc, n, a, ib);
                for (int t = 0; t < n; t++) {
                    const float ax = a * xc[t];
                    const double s = sin((double)ax), ref = xc[t] + ib * (s * s);
                    const double bound = 4e-6 * (fabs(xc[t]) + ib);
                    const float gv = out[y_off + (size_t)c * ys + t];
                    if (!res_one(&r, gv, ref, bound))
                        res_fail(&r, "C %d n %d inplace %d: c %d t %d x %.9g a %g inv_b %g: %.9g, want %.9g", C, n,
                                 inplace, c, t, xc[t], a, ib, gv, ref);
                    res_one(&rc, cpu[t], ref, bound);
                }
            }
            /* the gaps between rows stay as they were */
            for (int c = 0; c < C && !g->bad; c++)
                for (int t = n; t < ys; t++) {
                    const size_t i = (size_t)y_off + (size_t)c * ys + t;
                    const float want = inplace ? x[i] : SENT;
                    if (out[i] != want) res_fail(&r, "C %d n %d inplace %d: wrote [%zu] outside the rows", C, n, inplace, i);
                }
            vk_buf_free(g->d, &bx), vk_buf_free(g->d, &bp);
            if (!inplace) vk_buf_free(g->d, &by);
            free(x), free(p), free(out), free(cpu);
        }
    res_report(g, "vk_snake", &r, "|err| <= 4e-6 (|x| + inv_b) vs f64 sin of the f32 angle");
    printf("  snake, CPU sinf: max abs err %.3g, max err / bound %.3g\n", rc.max_abs, rc.max_norm);
}

/* ------------------------------------------------------------ layernorm */

/* codec_stream.c's layernorm (static there): double sums */
static void layernorm_ref(float *y, const float *x, const float *w, const float *b, int C, float eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) {
        const double dv = x[i] - mean;
        var += dv * dv;
    }
    var /= C;
    const double rstd = 1.0 / sqrt(var + eps);
    for (int i = 0; i < C; i++) y[i] = (float)((x[i] - mean) * rstd) * w[i] + b[i];
}

static void test_layernorm(gpu *g) {
    const int Cs[] = {1, 3, 64, 255, 257, 1024, 1537};
    res r;
    res_init(&r);
    for (int ci = 0; ci < 7; ci++)
        for (int inplace = 0; inplace < 2; inplace++) {
            const int C = Cs[ci], n = 3, x_off = 3, y_off = inplace ? x_off : 6, w_off = 1, b_off = 1 + C + 1;
            const float eps = 1e-6f;
            const size_t nx = (size_t)x_off + (size_t)n * C + 2, ny = (size_t)y_off + (size_t)n * C + 2;
            const size_t np = (size_t)b_off + C;
            float *x = malloc(sizeof(float) * nx), *p = malloc(sizeof(float) * np);
            float *ref = malloc(sizeof(float) * nx + sizeof(float) * ny), *out = malloc(sizeof(float) * ny);
            fill(x, nx, 2.0f);
            /* row 1: offset mean 50, row 2: scale 1e-3 */
            for (int i = 0; i < C; i++) x[x_off + C + i] += 50.0f, x[x_off + 2 * C + i] *= 1e-3f;
            fill(p, np, 1.5f);
            fill_c(out, ny, SENT);
            vk_buf bx = mk(g, x, sizeof(float) * nx), bp = mk(g, p, sizeof(float) * np);
            vk_buf by = inplace ? bx : mk(g, out, sizeof(float) * ny);
            vk_binding bd[3] = {{&bx, 0, 0}, {&bp, 0, 0}, {&by, 0, 0}};
            const vk_pc_layernorm pc = {(uint32_t)C, (uint32_t)n, x_off, y_off, w_off, b_off, eps};
            run1(g, "layernorm_f32", bd, 3, &pc, sizeof pc, n, 1);
            get(g, &by, out, sizeof(float) * ny);
            for (int row = 0; row < n && !g->bad; row++) {
                const float *xr = x + x_off + (size_t)row * C;
                layernorm_ref(ref, xr, p + w_off, p + b_off, C, eps);
                double mean = 0, var = 0;
                for (int i = 0; i < C; i++) mean += xr[i];
                mean /= C;
                for (int i = 0; i < C; i++) var += (xr[i] - mean) * (xr[i] - mean);
                const double k = 1.0 + fabs(mean) / sqrt(var / C + eps);
                for (int i = 0; i < C; i++) {
                    const float gv = out[y_off + (size_t)row * C + i];
                    const double bound = 1e-6 * fabs(p[w_off + i]) * k + 1e-5 * (fabs(p[w_off + i]) + fabs(p[b_off + i]));
                    if (!res_one(&r, gv, ref[i], bound))
                        res_fail(&r, "C %d row %d inplace %d: [%d] = %.9g, want %.9g", C, row, inplace, i, gv, ref[i]);
                }
            }
            for (size_t i = 0; i < ny && !g->bad; i++)
                if (i < (size_t)y_off || i >= (size_t)y_off + (size_t)n * C) {
                    const float want = inplace ? x[i] : SENT;
                    if (out[i] != want) res_fail(&r, "C %d inplace %d: wrote [%zu] outside the rows", C, inplace, i);
                }
            vk_buf_free(g->d, &bx), vk_buf_free(g->d, &bp);
            if (!inplace) vk_buf_free(g->d, &by);
            free(x), free(p), free(ref), free(out);
        }
    res_report(g, "vk_layernorm", &r, "|err| <= 1e-6 |w| |mean|/std + 1e-5 (|w| + |b|) vs the CPU's double layernorm");
}

/* ------------------------------------------------------------ gelu */

static void test_gelu(gpu *g) {
    const int counts[] = {1, 255, 257, 4097};
    res r, rc;
    res_init(&r);
    res_init(&rc);
    for (int ci = 0; ci < 4; ci++) {
        const int count = counts[ci], x_off = 5;
        const size_t nx = (size_t)x_off + count + 3;
        float *x = malloc(sizeof(float) * nx), *out = malloc(sizeof(float) * nx);
        fill(x, nx, 10.0f);
        /* near 0, exact 0, the tails and the ends */
        const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 1e-3f, -1e-3f, 0.5f, -0.5f,
                                 3.0f,  -3.0f, 6.0f,   -6.0f,   9.5f,  -9.5f,  10.0f, -10.0f};
        for (int i = 0; i < 18 && i < count; i++) x[x_off + i] = special[i];
        for (int i = 18; i < count / 4; i++) x[x_off + i] = rnd() * 1e-2f; /* a quarter near 0 */
        memcpy(out, x, sizeof(float) * nx);
        vk_buf bx = mk(g, x, sizeof(float) * nx);
        vk_binding bd[1] = {{&bx, 0, 0}};
        const vk_pc_gelu pc = {(uint32_t)count, x_off};
        run1(g, "gelu_f32", bd, 1, &pc, sizeof pc, cdiv(count, 256), 1);
        get(g, &bx, out, sizeof(float) * nx);
        for (int i = 0; i < count && !g->bad; i++) {
            const float v = x[x_off + i];
            const double ref = 0.5 * v * erfc(-(double)v / sqrt(2.0));
            /* exp's argument -z^2 + P carries ~3.5 z^2 u absolute error in f32 */
            const double z = fabs((double)v) / sqrt(2.0);
            const double bound = (2e-6 + 8.0 * z * z * 0x1p-24) * fabs(ref) + 1e-37;
            const float gv = out[x_off + i];
            if (!res_one(&r, gv, ref, bound))
                res_fail(&r, "count %d: x %.9g: %.9g, want %.9g", count, v, gv, ref);
            const float cpu = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); /* codec_stream.c gelu_erf */
            res_one(&rc, cpu, ref, bound);
        }
        for (size_t i = 0; i < nx && !g->bad; i++)
            if ((i < (size_t)x_off || i >= (size_t)x_off + count) && out[i] != x[i])
                res_fail(&r, "count %d: wrote [%zu] outside", count, i);
        vk_buf_free(g->d, &bx);
        free(x), free(out);
    }
    res_report(g, "vk_gelu", &r, "|err| <= (2e-6 + 8 z^2 u) |ref| vs f64 x erfc(-x/sqrt2)/2");
    printf("  gelu, CPU erff: max abs err %.3g, max rel err %.3g, max err / bound %.3g\n", rc.max_abs, rc.max_rel,
           rc.max_norm);
}

/* ------------------------------------------------------------ codebook */

static void test_codebook(gpu *g) {
    const int cfg[][4] = {{5, 2, 7, 3}, {64, 3, 11, 4}, {100, 16, 33, 5}, {513, 16, 300, 2}, {1, 4, 2, 9}}; /* V Q size n */
    res r;
    res_init(&r);
    for (int ci = 0; ci < 5; ci++) {
        const int V = cfg[ci][0], Q = cfg[ci][1], size = cfg[ci][2], n = cfg[ci][3];
        const int codes_off = 3, first_off = 1, rest_off = first_off + n * V + 2;
        const size_t ncb = (size_t)Q * size * V, no = (size_t)rest_off + (size_t)n * V + 3;
        float *cb = malloc(sizeof(float) * ncb), *ref = malloc(sizeof(float) * no), *out = malloc(sizeof(float) * no);
        int32_t *codes = malloc(sizeof(int32_t) * (codes_off + (size_t)n * Q));
        fill(cb, ncb, 1.0f);
        for (size_t i = 0; i < ncb; i += 7) cb[i] *= 100.0f; /* mixed magnitudes: order matters */
        for (int i = 0; i < codes_off + n * Q; i++) codes[i] = (int32_t)(rnd_u32() % (uint32_t)size);
        codes[codes_off] = 0, codes[codes_off + Q - 1] = size - 1; /* the ends of a table */
        fill_c(ref, no, SENT);
        fill_c(out, no, SENT);
        const size_t tab = (size_t)size * V;
        for (int t = 0; t < n; t++) { /* dequantize's loop */
            const int32_t *ct = codes + codes_off + (size_t)t * Q;
            float *f = ref + first_off + (size_t)t * V, *rr = ref + rest_off + (size_t)t * V;
            memcpy(f, cb + (size_t)ct[0] * V, V * sizeof(float));
            memcpy(rr, cb + tab + (size_t)ct[1] * V, V * sizeof(float));
            for (int q = 2; q < Q; q++) {
                const float *E = cb + q * tab + (size_t)ct[q] * V;
                for (int i = 0; i < V; i++) rr[i] += E[i];
            }
        }
        vk_buf bc = mk(g, cb, sizeof(float) * ncb), bi = mk(g, codes, sizeof(int32_t) * (codes_off + (size_t)n * Q));
        vk_buf bo = mk(g, out, sizeof(float) * no);
        vk_binding bd[3] = {{&bc, 0, 0}, {&bi, 0, 0}, {&bo, 0, 0}};
        const vk_pc_codebook pc = {(uint32_t)V, (uint32_t)Q, (uint32_t)size, (uint32_t)n, codes_off, first_off,
                                   (uint32_t)rest_off};
        run1(g, "codebook_f32", bd, 3, &pc, sizeof pc, cdiv(V, 64), n);
        get(g, &bo, out, sizeof(float) * no);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "V %d Q %d size %d n %d", V, Q, size, n);
        if (!g->bad) res_exact(&r, out, ref, no, ctx);
        vk_buf_free(g->d, &bc), vk_buf_free(g->d, &bi), vk_buf_free(g->d, &bo);
        free(cb), free(ref), free(out), free(codes);
    }
    res_report(g, "vk_codebook", &r, "bit-exact");
}

/* ------------------------------------------------------------ rope_ring */

static void test_rope_ring(gpu *g) {
    /* hd, nh, nkv, ring, p0, n */
    const int cfg[][6] = {{8, 4, 2, 9, 7, 5}, {64, 16, 16, 74, 150, 3}, {6, 3, 1, 5, 3, 5}, {128, 8, 2, 40, 1000, 25},
                          {2, 1, 1, 3, 0, 1}};
    res r;
    res_init(&r);
    for (int ci = 0; ci < 5; ci++) {
        const int hd = cfg[ci][0], nh = cfg[ci][1], nkv = cfg[ci][2], ring = cfg[ci][3], p0 = cfg[ci][4];
        const int n = cfg[ci][5], h2 = hd / 2, qd = nh * hd, kvd = nkv * hd;
        const int q_off = 3, k_off = 1, v_off = 2, cache_off = 5;
        const size_t nq = (size_t)q_off + (size_t)n * qd + 1, nk = (size_t)k_off + (size_t)n * kvd + 1;
        const size_t nv = (size_t)v_off + (size_t)n * kvd + 1, nr = (size_t)cache_off + (size_t)ring * kvd + 4;
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk), *v = malloc(sizeof(float) * nv);
        float *rope = malloc(sizeof(float) * (size_t)n * hd), *inv = malloc(sizeof(float) * (h2 ? h2 : 1));
        float *kr = malloc(sizeof(float) * nr), *vr = malloc(sizeof(float) * nr);
        float *rkr = malloc(sizeof(float) * nr), *rvr = malloc(sizeof(float) * nr);
        fill(q, nq, 3.0f), fill(k, nk, 3.0f), fill(v, nv, 1.0f);
        for (int i = 0; i < h2; i++) inv[i] = powf(10000.0f, -2.0f * i / hd);
        for (int i = 0; i < n; i++) ops_rope_angles(rope + (size_t)i * hd, hd, p0 + i, inv);
        fill(kr, nr, 1.0f), fill(vr, nr, 1.0f); /* the ring's older contents */
        memcpy(rkr, kr, sizeof(float) * nr), memcpy(rvr, vr, sizeof(float) * nr);
        float *rq = fdup(q, nq), *rk = fdup(k, nk);
        for (int i = 0; i < n; i++) {
            const size_t slot = (size_t)cache_off + (size_t)((p0 + i) % ring) * kvd;
            for (int h = 0; h < nh; h++) ops_rope_neox_cs(rq + q_off + (size_t)i * qd + (size_t)h * hd, hd, rope + (size_t)i * hd);
            for (int h = 0; h < nkv; h++) ops_rope_neox_cs(rk + k_off + (size_t)i * kvd + (size_t)h * hd, hd, rope + (size_t)i * hd);
            memcpy(rkr + slot, rk + k_off + (size_t)i * kvd, sizeof(float) * kvd);
            memcpy(rvr + slot, v + v_off + (size_t)i * kvd, sizeof(float) * kvd);
        }
        const uint32_t ctl[2] = {(uint32_t)p0, 12345u};
        vk_buf bq = mk(g, q, sizeof(float) * nq), bk = mk(g, k, sizeof(float) * nk), bv = mk(g, v, sizeof(float) * nv);
        vk_buf br = mk(g, rope, sizeof(float) * (size_t)n * hd), bkr = mk(g, kr, sizeof(float) * nr);
        vk_buf bvr = mk(g, vr, sizeof(float) * nr), bc = mk(g, ctl, sizeof ctl);
        vk_binding bd[7] = {{&bq, 0, 0}, {&bk, 0, 0}, {&bv, 0, 0}, {&br, 0, 0}, {&bkr, 0, 0}, {&bvr, 0, 0}, {&bc, 0, 0}};
        const vk_pc_rope_ring pc = {(uint32_t)n, (uint32_t)nh, (uint32_t)nkv, (uint32_t)hd, (uint32_t)ring,
                                    cache_off, q_off, k_off, v_off};
        run1(g, "rope_ring_f32", bd, 7, &pc, sizeof pc, n, 1);
        float *gq = malloc(sizeof(float) * nq), *gk = malloc(sizeof(float) * nk);
        get(g, &bq, gq, sizeof(float) * nq), get(g, &bk, gk, sizeof(float) * nk);
        get(g, &bkr, kr, sizeof(float) * nr), get(g, &bvr, vr, sizeof(float) * nr);
        char ctx[128];
        if (!g->bad) {
            snprintf(ctx, sizeof ctx, "hd %d nh %d nkv %d ring %d p0 %d n %d: q", hd, nh, nkv, ring, p0, n);
            res_exact(&r, gq, rq, nq, ctx);
            snprintf(ctx, sizeof ctx, "hd %d nh %d nkv %d ring %d p0 %d n %d: k input", hd, nh, nkv, ring, p0, n);
            res_exact(&r, gk, k, nk, ctx); /* k itself is read only */
            snprintf(ctx, sizeof ctx, "hd %d nh %d nkv %d ring %d p0 %d n %d: k ring", hd, nh, nkv, ring, p0, n);
            res_exact(&r, kr, rkr, nr, ctx);
            snprintf(ctx, sizeof ctx, "hd %d nh %d nkv %d ring %d p0 %d n %d: v ring", hd, nh, nkv, ring, p0, n);
            res_exact(&r, vr, rvr, nr, ctx);
        }
        vk_buf *bufs[] = {&bq, &bk, &bv, &br, &bkr, &bvr, &bc};
        for (int i = 0; i < 7; i++) vk_buf_free(g->d, bufs[i]);
        free(q), free(k), free(v), free(rope), free(inv), free(kr), free(vr), free(rkr), free(rvr);
        free(rq), free(rk), free(gq), free(gk);
    }
    res_report(g, "vk_rope_ring", &r, "bit-exact; ring slots of other positions untouched");
}

/* ------------------------------------------------------------ attention_window */

static void test_attention_window(gpu *g) {
    /* hd, nh, nkv, window, n, p0, cache_off, ring extra */
    const int cfg[][8] = {
        {16, 4, 2, 5, 3, 100, 0, 0}, {64, 16, 16, 72, 25, 300, 0, 0}, {12, 3, 1, 72, 7, 2, 1, 3},
        {64, 2, 1, 200, 5, 1000, 4, 0}, {256, 2, 2, 130, 2, 129, 0, 1}, {6, 2, 2, 9, 9, 17, 3, 0},
        {32, 4, 4, 72, 1, 0, 0, 0},
    };
    const int ncfg = (int)(sizeof cfg / sizeof cfg[0]);
    res r;
    res_init(&r);
    for (int ci = 0; ci < ncfg; ci++) {
        const int hd = cfg[ci][0], nh = cfg[ci][1], nkv = cfg[ci][2], window = cfg[ci][3], n = cfg[ci][4];
        const int p0 = cfg[ci][5], cache_off = cfg[ci][6], ring = window - 1 + n + cfg[ci][7];
        const int qd = nh * hd, kvd = nkv * hd, q_off = 2, o_off = 3, grp = nh / nkv;
        const float scale = 1.0f / sqrtf((float)hd);
        const size_t nq = (size_t)q_off + (size_t)n * qd, nr = (size_t)cache_off + (size_t)ring * kvd;
        const size_t no = (size_t)o_off + (size_t)n * qd + 2;
        float *q = malloc(sizeof(float) * nq), *kr = malloc(sizeof(float) * nr), *vr = malloc(sizeof(float) * nr);
        float *out = malloc(sizeof(float) * no);
        double *sc = malloc(sizeof(double) * window);
        fill(q, nq, 2.0f), fill(kr, nr, 2.0f), fill(vr, nr, 1.0f);
        fill_c(out, no, SENT);
        const uint32_t ctl[1] = {(uint32_t)p0};
        vk_buf bq = mk(g, q, sizeof(float) * nq), bk = mk(g, kr, sizeof(float) * nr), bv = mk(g, vr, sizeof(float) * nr);
        vk_buf bo = mk(g, out, sizeof(float) * no), bc = mk(g, ctl, sizeof ctl);
        vk_binding bd[5] = {{&bq, 0, 0}, {&bk, 0, 0}, {&bv, 0, 0}, {&bo, 0, 0}, {&bc, 0, 0}};
        const vk_pc_attention_window pc = {(uint32_t)n, (uint32_t)nh, (uint32_t)nkv, (uint32_t)hd, (uint32_t)window,
                                           (uint32_t)ring, (uint32_t)cache_off, q_off, o_off, scale};
        run1(g, "attention_window_f32", bd, 5, &pc, sizeof pc, nh, n);
        get(g, &bo, out, sizeof(float) * no);
        for (int i = 0; i < n && !g->bad; i++)
            for (int h = 0; h < nh; h++) {
                const int p = p0 + i, first = p + 1 > window ? p + 1 - window : 0, np = p + 1 - first;
                const float *qh = q + q_off + (size_t)i * qd + (size_t)h * hd;
                const size_t kvo = (size_t)cache_off + (size_t)(h / grp) * hd;
                double mx = -INFINITY, l = 0, A = 0;
                for (int j = 0; j < np; j++) {
                    const float *kt = kr + kvo + (size_t)((first + j) % ring) * kvd;
                    double d = 0;
                    for (int e = 0; e < hd; e++) d += (double)qh[e] * kt[e];
                    sc[j] = d * scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j < np; j++) l += (sc[j] = exp(sc[j] - mx));
                for (int e = 0; e < hd; e++) { /* A: the size of the terms summed */
                    double s = 0;
                    for (int j = 0; j < np; j++) s += sc[j] * fabs(vr[kvo + (size_t)((first + j) % ring) * kvd + e]);
                    if (s / l > A) A = s / l;
                }
                for (int e = 0; e < hd; e++) {
                    double o = 0;
                    for (int j = 0; j < np; j++) o += sc[j] * vr[kvo + (size_t)((first + j) % ring) * kvd + e];
                    o /= l;
                    const float gv = out[o_off + (size_t)i * qd + (size_t)h * hd + e];
                    if (!res_one(&r, gv, o, 2e-5 * A))
                        res_fail(&r, "hd %d nh %d nkv %d window %d ring %d p0 %d: row %d head %d [%d] = %.9g, want %.9g",
                                 hd, nh, nkv, window, ring, p0, i, h, e, gv, o);
                }
            }
        for (size_t i = 0; i < no && !g->bad; i++)
            if ((i < (size_t)o_off || i >= (size_t)o_off + (size_t)n * qd) && out[i] != SENT)
                res_fail(&r, "hd %d window %d: wrote [%zu] outside", hd, window, i);
        vk_buf_free(g->d, &bq), vk_buf_free(g->d, &bk), vk_buf_free(g->d, &bv), vk_buf_free(g->d, &bo);
        vk_buf_free(g->d, &bc);
        free(q), free(kr), free(vr), free(out), free(sc);
    }
    res_report(g, "vk_attention_window", &r, "|err| <= 2e-5 A vs f64 over the window's ring slots");
}

/* ------------------------------------------------------------ copy2d */

static void test_copy2d(gpu *g) {
    /* rows, cols, s_off, s_rs, s_cs, d_off, d_rs, d_cs */
    const int cfg[][8] = {
        {1, 1, 0, 1, 1, 0, 1, 1},         {7, 65, 3, 70, 1, 2, 66, 1},   /* rows of a [C][T] with strides */
        {33, 130, 1, 131, 1, 5, 1, 33},   /* [C][T] -> [T][C] */
        {130, 33, 4, 1, 130, 0, 35, 1},   /* [C][T] read transposed -> rows */
        {3, 200, 0, 400, 2, 1, 201, 1},   /* every other column */
    };
    res r;
    res_init(&r);
    for (int ci = 0; ci < 5; ci++) {
        const int rows = cfg[ci][0], cols = cfg[ci][1];
        const size_t s_off = cfg[ci][2], s_rs = cfg[ci][3], s_cs = cfg[ci][4];
        const size_t d_off = cfg[ci][5], d_rs = cfg[ci][6], d_cs = cfg[ci][7];
        const size_t ns = s_off + (rows - 1) * s_rs + (cols - 1) * s_cs + 3;
        const size_t nd = d_off + (rows - 1) * d_rs + (cols - 1) * d_cs + 3;
        float *s = malloc(sizeof(float) * ns), *ref = malloc(sizeof(float) * nd), *out = malloc(sizeof(float) * nd);
        fill(s, ns, 5.0f);
        fill_c(ref, nd, SENT), fill_c(out, nd, SENT);
        for (int rr = 0; rr < rows; rr++)
            for (int c = 0; c < cols; c++) ref[d_off + rr * d_rs + c * d_cs] = s[s_off + rr * s_rs + c * s_cs];
        vk_buf bs = mk(g, s, sizeof(float) * ns), bdst = mk(g, out, sizeof(float) * nd);
        vk_binding bd[2] = {{&bs, 0, 0}, {&bdst, 0, 0}};
        const vk_pc_copy2d pc = {(uint32_t)rows, (uint32_t)cols, (uint32_t)s_off, (uint32_t)s_rs,
                                 (uint32_t)s_cs, (uint32_t)d_off, (uint32_t)d_rs, (uint32_t)d_cs};
        run1(g, "copy2d_f32", bd, 2, &pc, sizeof pc, cdiv(cols, 64), rows);
        get(g, &bdst, out, sizeof(float) * nd);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "rows %d cols %d case %d", rows, cols, ci);
        if (!g->bad) res_exact(&r, out, ref, nd, ctx);
        vk_buf_free(g->d, &bs), vk_buf_free(g->d, &bdst);
        free(s), free(ref), free(out);
    }
    res_report(g, "vk_copy2d", &r, "bit-exact");
}

/* ------------------------------------------------------------ scale_add */

static void test_scale_add(gpu *g) {
    /* rows, cols, flags, alias (y is a), b transposed */
    const int cfg[][5] = {{1, 1, 0, 0, 0}, {5, 65, 1, 0, 0}, {33, 130, 1, 1, 1}, {130, 33, 0, 1, 0},
                          {7, 63, 1, 1, 0}, {64, 129, 1, 0, 1}};
    res r;
    res_init(&r);
    for (int ci = 0; ci < 6; ci++) {
        const int rows = cfg[ci][0], cols = cfg[ci][1], scale = cfg[ci][2], alias = cfg[ci][3], btr = cfg[ci][4];
        const size_t a_off = 3, a_rs = cols + 2, a_cs = 1;
        const size_t b_off = 1, b_rs = btr ? 1 : (size_t)cols + 1, b_cs = btr ? (size_t)rows + 3 : 1;
        const size_t y_off = alias ? a_off : 2, y_rs = alias ? a_rs : (size_t)cols + 4, y_cs = 1, g_off = 2;
        const size_t na = a_off + rows * a_rs + 2, nb = b_off + (rows - 1) * b_rs + (cols - 1) * b_cs + 2;
        const size_t ny = alias ? na : y_off + rows * y_rs + 2, ng = g_off + cols;
        float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb), *gg = malloc(sizeof(float) * ng);
        float *ref = malloc(sizeof(float) * ny), *out = malloc(sizeof(float) * ny);
        fill(a, na, 3.0f), fill(b, nb, 3.0f), fill(gg, ng, 0.3f);
        if (alias) memcpy(ref, a, sizeof(float) * na);
        else fill_c(ref, ny, SENT);
        memcpy(out, ref, sizeof(float) * ny);
        for (int rr = 0; rr < rows; rr++)
            for (int c = 0; c < cols; c++) {
                const float bv = b[b_off + rr * b_rs + c * b_cs];
                const float s = scale ? gg[g_off + c] * bv : bv;
                ref[y_off + rr * y_rs + c * y_cs] = a[a_off + rr * a_rs + c * a_cs] + s;
            }
        vk_buf ba = mk(g, a, sizeof(float) * na), bb = mk(g, b, sizeof(float) * nb), bg = mk(g, gg, sizeof(float) * ng);
        vk_buf by = alias ? ba : mk(g, out, sizeof(float) * ny);
        vk_binding bd[4] = {{&ba, 0, 0}, {&bb, 0, 0}, {&bg, 0, 0}, {&by, 0, 0}};
        const vk_pc_scale_add pc = {(uint32_t)rows, (uint32_t)cols, (uint32_t)a_off, (uint32_t)a_rs, (uint32_t)a_cs,
                                    (uint32_t)b_off, (uint32_t)b_rs, (uint32_t)b_cs, (uint32_t)y_off, (uint32_t)y_rs,
                                    (uint32_t)y_cs, (uint32_t)g_off, scale ? VK_SA_SCALE : 0u};
        run1(g, "scale_add_f32", bd, 4, &pc, sizeof pc, cdiv(cols, 64), rows);
        get(g, &by, out, sizeof(float) * ny);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "rows %d cols %d scale %d alias %d b transposed %d", rows, cols, scale, alias, btr);
        if (!g->bad) res_exact(&r, out, ref, ny, ctx);
        vk_buf_free(g->d, &ba), vk_buf_free(g->d, &bb), vk_buf_free(g->d, &bg);
        if (!alias) vk_buf_free(g->d, &by);
        free(a), free(b), free(gg), free(ref), free(out);
    }
    res_report(g, "vk_scale_add", &r, "bit-exact (one product, one sum)");
}

int main(void) {
    gpu g = {0};
    if (vk_dev_create(&g.d, 0, &g.e) != QTTS_OK) {
        test_skip("vulkan", "no Vulkan device: %s", g.e.msg);
        return test_finish();
    }
    if (vk_cmd_new(g.d, &g.c, &g.e) != QTTS_OK) {
        test_report("vulkan", 0, "vk_cmd_new: %s", g.e.msg);
        vk_dev_free(g.d);
        return test_finish();
    }
    test_conv1d(&g);
    test_conv_transpose1d(&g);
    test_snake(&g);
    test_layernorm(&g);
    test_gelu(&g);
    test_codebook(&g);
    test_rope_ring(&g);
    test_attention_window(&g);
    test_copy2d(&g);
    test_scale_add(&g);
    vk_cmd_free(g.c);
    vk_dev_free(g.d);
    return test_finish();
}

#else

int main(void) {
    test_skip("vulkan", "built without Vulkan (apt-get install libvulkan-dev glslc)");
    return test_finish();
}

#endif
