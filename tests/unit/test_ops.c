/* Unit test of the CPU op layer (src/backend/cpu): matmul for F32/BF16/F16
 * weights against a double-precision reference on seeded random data (the
 * dispatched kernels and the scalar reference, several row counts, odd
 * sizes, with and without bias); rmsnorm, softmax (with -inf), NeoX RoPE,
 * SiLU/SwiGLU; conv1d (stride, dilation, groups) and conv_transpose1d against
 * naive references written here; and streaming conv1d with carried left
 * context, which must be bit-identical to one pass.
 * Tolerances: an f32 dot product of length n has error <= n * 2^-24 * sum|a b|
 * (to first order); the checks use (n + 2) * 2^-24 * sum|a b|. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/ops.h"
#include "test.h"

#define EPS32 5.9604644775390625e-8 /* 2^-24 */

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = rnd() * scale;
}

/* an f16 value decoded independently of the library */
static double f16_val(uint16_t h) {
    const int sgn = h >> 15, ex = (h >> 10) & 31, man = h & 1023;
    double v = ex == 0 ? ldexp((double)man, -24) : ldexp(1.0 + man / 1024.0, ex - 15);
    return sgn ? -v : v;
}

static double bf16_val(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

/* ------------------------------------------------------------ matmul */

typedef struct wmat {
    qt_mat m;
    void *data;
    double *ref; /* [rows][cols] exact weight values */
} wmat;

static void make_weights(wmat *w, qtts_dtype dt, int rows, int cols) {
    const size_t n = (size_t)rows * cols;
    w->ref = malloc(sizeof(double) * n);
    w->data = malloc(n * (dt == DT_F32 ? 4 : 2));
    for (size_t i = 0; i < n; i++) {
        if (dt == DT_F32) {
            float v = rnd();
            ((float *)w->data)[i] = v;
            w->ref[i] = v;
        } else if (dt == DT_BF16) {
            uint16_t h = f32_to_bf16(rnd());
            ((uint16_t *)w->data)[i] = h;
            w->ref[i] = bf16_val(h);
        } else {
            /* random f16: exponents 8..16 (|v| in [2^-7, 4)), every 13th a subnormal */
            uint32_t r = rnd_u32();
            uint16_t h = (uint16_t)(((r >> 31) << 15) | ((i % 13 == 0 ? 0u : 8u + (r >> 8) % 9u) << 10) | (r & 1023u));
            ((uint16_t *)w->data)[i] = h;
            w->ref[i] = f16_val(h);
        }
    }
    w->m.data = w->data;
    w->m.dtype = dt;
    w->m.rows = rows;
    w->m.cols = cols;
}

static void free_weights(wmat *w) {
    free(w->data);
    free(w->ref);
}

/* Compare Y = X W^T + b against double; returns the worst error / bound. */
static double check_matmul(const ops_kernels *k, const wmat *w, int n, int with_bias, int *sentinel_ok) {
    const int rows = w->m.rows, cols = w->m.cols;
    float *X = malloc(sizeof(float) * n * cols), *b = malloc(sizeof(float) * rows);
    float *Y = malloc(sizeof(float) * (n * rows + 4));
    fill(X, (size_t)n * cols, 2.0f);
    fill(b, rows, 1.0f);
    for (int i = 0; i < n * rows + 4; i++) Y[i] = 1234.5f;
    k->matmul(&w->m, X, n, with_bias ? b : NULL, Y);
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < rows; r++) {
            double s = with_bias ? b[r] : 0.0, sa = with_bias ? fabs(b[r]) : 0.0;
            for (int j = 0; j < cols; j++) {
                s += w->ref[(size_t)r * cols + j] * X[(size_t)i * cols + j];
                sa += fabs(w->ref[(size_t)r * cols + j] * X[(size_t)i * cols + j]);
            }
            const double bound = (cols + 2) * EPS32 * sa + 1e-30;
            const double q = fabs(Y[(size_t)i * rows + r] - s) / bound;
            if (!(q <= worst)) worst = q; /* NaN propagates */
        }
    *sentinel_ok = Y[n * rows] == 1234.5f && Y[n * rows + 3] == 1234.5f;
    free(X);
    free(b);
    free(Y);
    return worst;
}

static void test_matmul(void) {
    static const qtts_dtype dts[3] = {DT_F32, DT_BF16, DT_F16};
    static const int shapes[][2] = {{1, 1}, {5, 7}, {33, 19}, {16, 64}, {3, 129}};
    static const int ns[3] = {1, 3, 17};
    ops_ctx ctx;
    ops_init(&ctx, 2, 0);
    const ops_kernels *kernels[2] = {ops_kernels_scalar(), ctx.k};
    const int n_kernels = ctx.k == ops_kernels_scalar() ? 1 : 2;
    for (int ki = 0; ki < n_kernels; ki++)
        for (int d = 0; d < 3; d++) {
            double worst = 0;
            int all_sent = 1;
            char where[128] = "";
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                wmat w;
                make_weights(&w, dts[d], shapes[s][0], shapes[s][1]);
                for (int ni = 0; ni < 3; ni++)
                    for (int bias = 0; bias < 2; bias++) {
                        int sent = 1;
                        double q = check_matmul(kernels[ki], &w, ns[ni], bias, &sent);
                        all_sent &= sent;
                        if (!(q <= worst)) {
                            worst = q;
                            snprintf(where, sizeof where, "%dx%d, n=%d, bias=%d", shapes[s][0], shapes[s][1], ns[ni],
                                     bias);
                        }
                    }
                free_weights(&w);
            }
            char name[96];
            snprintf(name, sizeof name, "matmul_%s_%s", kernels[ki]->name, dtype_name(dts[d]));
            CHECK(name, worst <= 1.0 && all_sent, "error %.3g x the f32 bound at %s%s", worst, where,
                  all_sent ? "" : "; wrote past Y");
        }
    /* ops_matmul through the context gives the kernel's result */
    wmat w;
    make_weights(&w, DT_BF16, 9, 11);
    float X[2 * 11], Y1[2 * 9], Y2[2 * 9];
    fill(X, 22, 1.0f);
    ops_matmul(&ctx, &w.m, X, 2, NULL, Y1);
    ctx.k->matmul(&w.m, X, 2, NULL, Y2);
    CHECK("ops_matmul_dispatch", memcmp(Y1, Y2, sizeof Y1) == 0, "ops_matmul differs from its kernel");
    free_weights(&w);
    CHECK("ops_init_threads", ctx.n_threads == 2 && ctx.k && ctx.k->name, "ops_init state");
    ops_ctx c0;
    ops_init(&c0, 0, 1);
    CHECK("ops_init_force_scalar", c0.k == ops_kernels_scalar() && c0.n_threads == 1,
          "force_scalar / n_threads clamp not honoured");
    ops_free(&c0);

    /* row access */
    for (int d = 0; d < 3; d++) {
        make_weights(&w, dts[d], 4, 13);
        float row[13], acc[13];
        int ok = 1;
        for (int r = 0; r < 4; r++) {
            ops_get_row(&w.m, r, row);
            for (int j = 0; j < 13; j++) acc[j] = 0.5f;
            ops_add_row(&w.m, r, acc);
            for (int j = 0; j < 13; j++)
                ok &= (double)row[j] == w.ref[r * 13 + j] && acc[j] == (float)(0.5 + w.ref[r * 13 + j]);
        }
        char name[64];
        snprintf(name, sizeof name, "get_add_row_%s", dtype_name(dts[d]));
        CHECK(name, ok, "row widening differs from the stored values");
        free_weights(&w);
    }
    ops_free(&ctx);
}

/* ------------------------------------------------------------ element-wise */

static void test_elementwise(void) {
    enum { N = 67 };
    float x[N], w[N], y[N], y2[N];
    fill(x, N, 3.0f);
    fill(w, N, 1.5f);
    const float eps = 1e-6f;
    ops_rmsnorm(y, x, w, N, eps);
    double ss = 0;
    for (int i = 0; i < N; i++) ss += (double)x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / N + eps);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double r = x[i] * inv * w[i];
        double q = fabs(y[i] - r) / (1e-6 * (fabs(r) + 1e-3));
        if (!(q <= worst)) worst = q;
    }
    CHECK("rmsnorm_vs_double", worst <= 1.0, "error %.3g x tolerance", worst);
    /* every split of the 16 partial sums: below one block, whole blocks, tails */
    {
        static const int sizes[] = {1, 5, 15, 16, 17, 32, 128, 131, 1024, 2048};
        float xs[2048], ws[2048], ys[2048];
        fill(xs, 2048, 2.0f);
        fill(ws, 2048, 1.0f);
        double worst_n = 0;
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            const int n = sizes[k];
            ops_rmsnorm(ys, xs, ws, n, eps);
            double s2 = 0;
            for (int i = 0; i < n; i++) s2 += (double)xs[i] * xs[i];
            const double iv = 1.0 / sqrt(s2 / n + eps);
            for (int i = 0; i < n; i++) {
                const double r = xs[i] * iv * ws[i];
                const double q = fabs(ys[i] - r) / (1e-6 * (fabs(r) + 1e-3));
                if (!(q <= worst_n)) worst_n = q;
            }
        }
        CHECK("rmsnorm_sizes_vs_double", worst_n <= 1.0, "error %.3g x tolerance", worst_n);
    }
    memcpy(y2, x, sizeof x);
    ops_rmsnorm(y2, y2, w, N, eps);
    CHECK("rmsnorm_in_place", memcmp(y, y2, sizeof y) == 0, "in-place result differs");
    float z[4] = {0, 0, 0, 0}, zw[4] = {1, 1, 1, 1};
    ops_rmsnorm(z, z, zw, 4, eps);
    CHECK("rmsnorm_zero_input", z[0] == 0.0f && z[3] == 0.0f, "zero input gave %g", z[0]);

    /* add: y += x, element by element, for every tail of the 16-wide loop */
    {
        float ya[70], yb[70], xa[70];
        fill(xa, 70, 2.5f);
        int same = 1, n_bad = -1;
        for (int n = 0; n <= 70 && same; n++) {
            fill(ya, 70, 1.25f);
            memcpy(yb, ya, sizeof ya);
            ops_add(ya, xa, n);
            for (int i = 0; i < n; i++) yb[i] = yb[i] + xa[i];
            same = !memcmp(ya, yb, sizeof ya);
            if (!same) n_bad = n;
        }
        CHECK("add_matches_scalar", same, "n = %d: ops_add differs from y[i] + x[i] (or wrote past n)", n_bad);
    }

    /* softmax */
    float s[7] = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f, 3.0f, -1.0f};
    float s0[7];
    memcpy(s0, s, sizeof s);
    ops_softmax(s, 7);
    double m = 3.0, tot = 0, sum = 0;
    for (int i = 0; i < 7; i++) tot += s0[i] == -INFINITY ? 0.0 : exp(s0[i] - m);
    worst = 0;
    for (int i = 0; i < 7; i++) {
        double r = s0[i] == -INFINITY ? 0.0 : exp(s0[i] - m) / tot;
        double q = fabs(s[i] - r) / 1e-6;
        if (!(q <= worst)) worst = q;
        sum += s[i];
    }
    CHECK("softmax_neg_inf", s[1] == 0.0f && s[3] == 0.0f && worst <= 1.0 && fabs(sum - 1.0) < 1e-6,
          "-inf entries %g %g, error %.3g x 1e-6, sum %.9g", s[1], s[3], worst, sum);
    float big[3] = {1000.0f, 1001.0f, 999.0f};
    ops_softmax(big, 3);
    CHECK("softmax_large_values", isfinite(big[0]) && fabs(big[1] - 0.665240955) < 1e-6 &&
                                      fabs(big[0] - 0.244728471) < 1e-6,
          "softmax of {1000, 1001, 999} = %g %g %g", big[0], big[1], big[2]);
    float one[1] = {-42.0f};
    ops_softmax(one, 1);
    CHECK("softmax_single", one[0] == 1.0f, "softmax of one entry = %g", one[0]);

    /* silu / swiglu */
    float g[N], u[N], g0[N];
    fill(g, N, 6.0f);
    fill(u, N, 2.0f);
    g[0] = -100.0f;
    g[1] = 100.0f;
    g[2] = 0.0f;
    memcpy(g0, g, sizeof g);
    ops_swiglu(g, u, N);
    worst = 0;
    for (int i = 0; i < N; i++) {
        double r = g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
        double q = fabs(g[i] - r) / (4 * EPS32 * fabs(r) + 1e-37);
        if (!(q <= worst)) worst = q;
    }
    CHECK("swiglu_vs_double", worst <= 1.0, "error %.3g x tolerance", worst);
    {
        /* split over a pool: the same bits as one pass (elementwise) */
        enum { NB = 10007 };
        float *ga = malloc(sizeof(float) * NB), *gb = malloc(sizeof(float) * NB), *ub = malloc(sizeof(float) * NB);
        int same = ga && gb && ub;
        if (same) {
            fill(ga, NB, 8.0f);
            fill(ub, NB, 2.0f);
            memcpy(gb, ga, sizeof(float) * NB);
            ops_ctx pc;
            ops_init(&pc, 3, 0);
            pc.k->swiglu(ga, ub, NB); /* the context table's kernel, one pass */
            ops_swiglu_ctx(&pc, gb, ub, NB);
            ops_free(&pc);
            same = memcmp(ga, gb, sizeof(float) * NB) == 0;
        }
        CHECK("swiglu_ctx_same_bits", same, "3 threads differ from one pass");
        free(ga);
        free(gb);
        free(ub);
    }
    {
        /* the pooled add y = x + y (large enough to split over 3 threads): x + y exactly per element */
        enum { NA = 100003 };
        float *xa = malloc(sizeof(float) * NA), *ya = malloc(sizeof(float) * NA), *y0 = malloc(sizeof(float) * NA);
        int ok = xa && ya && y0;
        if (ok) {
            fill(xa, NA, 4.0f);
            fill(y0, NA, 4.0f);
            memcpy(ya, y0, sizeof(float) * NA);
            ops_ctx pc;
            ops_init(&pc, 3, 0);
            ops_add_ctx(&pc, ya, xa, NA);
            ops_free(&pc);
            for (int i = 0; i < NA && ok; i++) ok = ya[i] == xa[i] + y0[i];
        }
        CHECK("add_ctx_split_exact", ok, "an element is not x + y after the pooled add");
        free(xa);
        free(ya);
        free(y0);
    }
    memcpy(g, g0, sizeof g);
    ops_silu(g, N);
    worst = 0;
    for (int i = 0; i < N; i++) {
        double r = g0[i] / (1.0 + exp(-(double)g0[i]));
        double q = fabs(g[i] - r) / (4 * EPS32 * fabs(r) + 1e-37);
        if (!(q <= worst)) worst = q;
    }
    CHECK("silu_vs_double", worst <= 1.0 && g[1] == 100.0f && fabsf(g[0]) < 1e-40f, "error %.3g x tolerance", worst);

    /* RoPE (split halves) */
    enum { D = 16 };
    float inv_freq[D / 2];
    for (int i = 0; i < D / 2; i++) inv_freq[i] = 1.0f / powf(1e6f, (float)(2 * i) / (float)D);
    float q0[D], q[D];
    fill(q0, D, 2.0f);
    memcpy(q, q0, sizeof q);
    ops_rope_neox(q, D, 0, inv_freq);
    CHECK("rope_pos0_identity", memcmp(q, q0, sizeof q) == 0, "position 0 changed the vector");
    const int pos = 37;
    memcpy(q, q0, sizeof q);
    ops_rope_neox(q, D, pos, inv_freq);
    worst = 0;
    double pair_worst = 0;
    for (int i = 0; i < D / 2; i++) {
        const double a = (double)((float)pos * inv_freq[i]);
        const double r0 = q0[i] * cos(a) - q0[i + D / 2] * sin(a), r1 = q0[i + D / 2] * cos(a) + q0[i] * sin(a);
        double e = fmax(fabs(q[i] - r0), fabs(q[i + D / 2] - r1)) / 1e-5;
        if (!(e <= worst)) worst = e;
        /* each (i, i + d/2) pair is rotated: its norm is preserved */
        const double n0 = hypot(q0[i], q0[i + D / 2]), n1 = hypot(q[i], q[i + D / 2]);
        e = fabs(n1 - n0) / (1e-6 * (n0 + 1e-6));
        if (!(e <= pair_worst)) pair_worst = e;
    }
    CHECK("rope_vs_double", worst <= 1.0, "error %.3g x 1e-5", worst);
    CHECK("rope_norm_preserved", pair_worst <= 1.0, "pair norm change %.3g x 1e-6 relative", pair_worst);
    /* the rotation must actually rotate: a wrong pairing (interleaved) would differ */
    double moved = 0;
    for (int i = 0; i < D; i++) moved += fabs(q[i] - q0[i]);
    CHECK("rope_pos37_moves", moved > 0.1, "position 37 barely changed the vector (%g)", moved);
    /* angles once per position, then every head: the same bits as ops_rope_neox */
    float qa[D], cs[D];
    memcpy(qa, q0, sizeof qa);
    ops_rope_angles(cs, D, pos, inv_freq);
    ops_rope_neox_cs(qa, D, cs);
    CHECK("rope_angles_same_bits", memcmp(qa, q, sizeof qa) == 0, "precomputed angles rotate differently");
}

/* ------------------------------------------------------------ convolutions */

static void conv1d_ref(const float *x, int cin, int t_in, int xs, const float *w, const float *b, int cout, int k,
                       int stride, int dil, int groups, double *y, double *yabs, int t_out) {
    const int cin_g = cin / groups, cout_g = cout / groups;
    for (int o = 0; o < cout; o++)
        for (int t = 0; t < t_out; t++) {
            double s = b ? b[o] : 0.0, sa = b ? fabs(b[o]) : 0.0;
            const int g = o / cout_g;
            for (int i = 0; i < cin_g; i++)
                for (int tap = 0; tap < k; tap++) {
                    const int ti = t * stride + tap * dil;
                    if (ti >= t_in) continue; /* cannot happen for valid t_out */
                    const double p = (double)w[((size_t)o * cin_g + i) * k + tap] * x[(size_t)(g * cin_g + i) * xs + ti];
                    s += p;
                    sa += fabs(p);
                }
            y[(size_t)o * t_out + t] = s;
            yabs[(size_t)o * t_out + t] = sa;
        }
}

static void conv_tr_ref(const float *x, int cin, int t_in, int xs, const float *w, const float *b, int cout, int k,
                        int stride, int groups, double *y, double *yabs, int t_out) {
    const int cin_g = cin / groups, cout_g = cout / groups;
    for (int o = 0; o < cout; o++)
        for (int t = 0; t < t_out; t++) {
            y[(size_t)o * t_out + t] = b ? b[o] : 0.0;
            yabs[(size_t)o * t_out + t] = b ? fabs(b[o]) : 0.0;
        }
    for (int ci = 0; ci < cin; ci++) {
        const int g = ci / cin_g;
        for (int og = 0; og < cout_g; og++) {
            const int o = g * cout_g + og;
            for (int j = 0; j < t_in; j++)
                for (int tap = 0; tap < k; tap++) {
                    const double p = (double)x[(size_t)ci * xs + j] * w[((size_t)ci * cout_g + og) * k + tap];
                    y[(size_t)o * t_out + j * stride + tap] += p;
                    yabs[(size_t)o * t_out + j * stride + tap] += fabs(p);
                }
        }
    }
}

#define SENT 777.0f

static void test_conv1d(void) {
    static const struct { int cin, cout, k, stride, dil, groups, t_in, bias; } cs[] = {
        {4, 6, 3, 1, 1, 1, 20, 1}, {6, 4, 5, 2, 1, 2, 31, 0}, {8, 8, 3, 1, 3, 8, 25, 1}, {4, 6, 4, 3, 2, 2, 40, 1},
        {3, 5, 1, 1, 1, 1, 7, 1},  {2, 2, 7, 1, 1, 1, 7, 0},  {5, 10, 2, 2, 5, 5, 23, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, dil = cs[c].dil,
                  gr = cs[c].groups, t_in = cs[c].t_in;
        const int t_out = (t_in - dil * (k - 1) - 1) / st + 1, xs = t_in + 3, ys = t_out + 2;
        float *x = malloc(sizeof(float) * cin * xs), *w = malloc(sizeof(float) * cout * (cin / gr) * k);
        float *b = malloc(sizeof(float) * cout), *y = malloc(sizeof(float) * cout * ys);
        double *r = malloc(sizeof(double) * cout * t_out), *ra = malloc(sizeof(double) * cout * t_out);
        fill(x, (size_t)cin * xs, 1.0f);
        fill(w, (size_t)cout * (cin / gr) * k, 1.0f);
        fill(b, cout, 0.5f);
        for (int i = 0; i < cout * ys; i++) y[i] = SENT;
        ops_conv1d(x, cin, t_in, xs, w, cs[c].bias ? b : NULL, cout, k, st, dil, gr, y, ys);
        conv1d_ref(x, cin, t_in, xs, w, cs[c].bias ? b : NULL, cout, k, st, dil, gr, r, ra, t_out);
        double worst = 0;
        int sent_ok = 1;
        for (int o = 0; o < cout; o++) {
            for (int t = 0; t < t_out; t++) {
                const double bound = ((cin / gr) * k + 2) * EPS32 * ra[o * t_out + t] + 1e-30;
                const double q = fabs(y[o * ys + t] - r[o * t_out + t]) / bound;
                if (!(q <= worst)) worst = q;
            }
            sent_ok &= y[o * ys + t_out] == SENT && y[o * ys + t_out + 1] == SENT;
        }
        char name[96];
        snprintf(name, sizeof name, "conv1d_cin%d_cout%d_k%d_s%d_d%d_g%d", cin, cout, k, st, dil, gr);
        CHECK(name, worst <= 1.0 && sent_ok, "error %.3g x bound%s", worst, sent_ok ? "" : "; wrote past t_out");
        free(x);
        free(w);
        free(b);
        free(y);
        free(r);
        free(ra);
    }
    /* input shorter than the receptive field: nothing written */
    float x[2 * 4], w[2 * 2 * 5], y[2 * 4];
    fill(x, 8, 1.0f);
    fill(w, 20, 1.0f);
    for (int i = 0; i < 8; i++) y[i] = SENT;
    ops_conv1d(x, 2, 4, 4, w, NULL, 2, 5, 1, 1, 1, y, 4);
    int untouched = 1;
    for (int i = 0; i < 8; i++) untouched &= y[i] == SENT;
    CHECK("conv1d_short_input_no_output", untouched, "wrote output for t_in < receptive field");
}

static void test_conv_transpose(void) {
    static const struct { int cin, cout, k, stride, groups, t_in, bias; } cs[] = {
        {4, 6, 4, 2, 1, 10, 1}, {6, 4, 3, 3, 2, 9, 0}, {2, 2, 2, 4, 1, 5, 1}, {3, 3, 1, 1, 3, 6, 1},
        {4, 2, 8, 4, 2, 7, 1},  {1, 1, 5, 1, 1, 1, 0}, {3, 6, 10, 5, 3, 4, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, gr = cs[c].groups,
                  t_in = cs[c].t_in;
        const int t_out = (t_in - 1) * st + k, xs = t_in + 2, ys = t_out + 3;
        float *x = malloc(sizeof(float) * cin * xs), *w = malloc(sizeof(float) * cin * (cout / gr) * k);
        float *b = malloc(sizeof(float) * cout), *y = malloc(sizeof(float) * cout * ys);
        double *r = malloc(sizeof(double) * cout * t_out), *ra = malloc(sizeof(double) * cout * t_out);
        fill(x, (size_t)cin * xs, 1.0f);
        fill(w, (size_t)cin * (cout / gr) * k, 1.0f);
        fill(b, cout, 0.5f);
        for (int i = 0; i < cout * ys; i++) y[i] = SENT;
        ops_conv_transpose1d(x, cin, t_in, xs, w, cs[c].bias ? b : NULL, cout, k, st, gr, y, ys);
        conv_tr_ref(x, cin, t_in, xs, w, cs[c].bias ? b : NULL, cout, k, st, gr, r, ra, t_out);
        double worst = 0;
        int sent_ok = 1;
        for (int o = 0; o < cout; o++) {
            for (int t = 0; t < t_out; t++) {
                const int terms = (cin / gr) * ((k + st - 1) / st) + 2;
                const double bound = terms * EPS32 * ra[o * t_out + t] + 1e-30;
                const double q = fabs(y[o * ys + t] - r[o * t_out + t]) / bound;
                if (!(q <= worst)) worst = q;
            }
            for (int t = t_out; t < ys; t++) sent_ok &= y[o * ys + t] == SENT;
        }
        char name[96];
        snprintf(name, sizeof name, "conv_transpose1d_cin%d_cout%d_k%d_s%d_g%d_t%d", cin, cout, k, st, gr, t_in);
        CHECK(name, worst <= 1.0 && sent_ok, "error %.3g x bound%s", worst, sent_ok ? "" : "; wrote past t_out");
        free(x);
        free(w);
        free(b);
        free(y);
        free(r);
        free(ra);
    }
}

/* Streaming conv1d: input arrives in irregular chunks; a buffer keeps the
 * samples not yet consumed (the left context) and each call computes every
 * output the buffer allows. Must equal one pass bit for bit. */
static void test_conv1d_streaming(void) {
    static const struct { int cin, cout, k, stride, dil, groups; } cs[] = {
        {4, 3, 5, 1, 2, 1}, {4, 4, 4, 2, 1, 2}, {3, 6, 7, 3, 1, 3}, {2, 2, 3, 1, 9, 1}, {6, 6, 1, 1, 1, 6},
    };
    static const int chunks[] = {1, 7, 3, 13, 2, 5, 11, 1, 1, 4};
    enum { T = 97 };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, dil = cs[c].dil,
                  gr = cs[c].groups;
        const int span = dil * (k - 1) + 1, t_out = (T - span) / st + 1;
        float *x = malloc(sizeof(float) * cin * T), *w = malloc(sizeof(float) * cout * (cin / gr) * k);
        float *b = malloc(sizeof(float) * cout);
        float *y1 = calloc((size_t)cout * t_out, sizeof(float)), *y2 = calloc((size_t)cout * t_out, sizeof(float));
        float *buf = malloc(sizeof(float) * cin * T);
        fill(x, (size_t)cin * T, 1.0f);
        fill(w, (size_t)cout * (cin / gr) * k, 1.0f);
        fill(b, cout, 0.5f);
        ops_conv1d(x, cin, T, T, w, b, cout, k, st, dil, gr, y1, t_out);

        int fed = 0, blen = 0, done = 0, ci = 0;
        while (fed < T) {
            int n = chunks[ci++ % (int)(sizeof chunks / sizeof chunks[0])];
            if (n > T - fed) n = T - fed;
            for (int i = 0; i < cin; i++) memcpy(buf + (size_t)i * T + blen, x + (size_t)i * T + fed, sizeof(float) * n);
            blen += n;
            fed += n;
            if (blen >= span) {
                const int m = (blen - span) / st + 1;
                ops_conv1d(buf, cin, blen, T, w, b, cout, k, st, dil, gr, y2 + done, t_out);
                done += m;
                /* drop the consumed samples, keep the left context */
                const int drop = m * st;
                for (int i = 0; i < cin; i++)
                    memmove(buf + (size_t)i * T, buf + (size_t)i * T + drop, sizeof(float) * (blen - drop));
                blen -= drop;
            }
        }
        char name[96];
        snprintf(name, sizeof name, "conv1d_streaming_k%d_s%d_d%d_g%d", k, st, dil, gr);
        CHECK(name, done == t_out && memcmp(y1, y2, sizeof(float) * cout * t_out) == 0,
              "%d of %d outputs, chunked result %s one pass", done, t_out,
              memcmp(y1, y2, sizeof(float) * cout * t_out) ? "differs from" : "equals");
        free(x);
        free(w);
        free(b);
        free(y1);
        free(y2);
        free(buf);
    }
}

int main(void) {
    test_matmul();
    test_elementwise();
    test_conv1d();
    test_conv_transpose();
    test_conv1d_streaming();
    return test_finish();
}
