/* Unit test of the CPU kernels (src/backend/cpu): every kernel table this
 * machine can run (scalar, avx2, avx512; SKIP with the reason otherwise)
 * against the scalar reference on seeded random data, per format:
 *  - float weights (F32, F16, BF16): within (2 cols + 4) 2^-24 sum|w x| of
 *    the scalar result (both are f32 dot products, summed in different orders);
 *  - bf16 dot product (opt-in): within 2^-8 sum|w x| of the exact product;
 *  - int8/int4: the scalar kernel within the activation-quantisation bound of
 *    the dequantised-f32 product, each SIMD kernel within f32 rounding of the
 *    scalar one (same exact integer block dots);
 * odd shapes (cols not a multiple of 8/16/32/128, rows not of the unroll),
 * n = 1, 2, 3, 17. The bit-exactness contract of ops.h: row i of an n-row call
 * equals the 1-row call, any row split, 1/2/3 threads and a busy pool give
 * identical bits. Quantisation: layout decoded independently, round-trip
 * error per format, f16 conversion exhaustively. Thread pool under repeated
 * use. Convolutions and SnakeBeta vs scalar / double, chunked == whole,
 * channel split and threads bit-identical. The NEON build: the op layer is
 * compiled with the aarch64 cross compiler, and this test, built for aarch64,
 * runs under qemu-aarch64 (its default CPU has the dot product), where the
 * NEON matmul and int8/bf16 conv checks, sdot and baseline, must pass (each
 * SKIP when the tool is not installed). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_bf16.h"
#include "backend/cpu/conv_i16.h"
#include "backend/cpu/conv_q8.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/ops_dispatch.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/threadpool.h"
#include "test.h"

#define EPS32 5.9604644775390625e-8 /* 2^-24 */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)rnd_u32() / 2147483648.0 - 1.0); }

static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = rnd() * scale;
}

static double f16_val(uint16_t h) {
    const int sgn = h >> 15, ex = (h >> 10) & 31, man = h & 1023;
    double v = ex == 0 ? ldexp((double)man, -24) : ldexp(1.0 + man / 1024.0, ex - 15);
    return sgn ? -v : v;
}

/* ------------------------------------------------------------ kernel tables */

static const char *isa_names[] = {"scalar", "avx2", "avx512", "neon"};
static const ops_kernels *tables[5];
static int n_tables;
#if defined(__x86_64__)
static ops_kernels novnni; /* the AVX-512 table as built for a CPU without VNNI/BF16 */
#endif
static ops_kernels nodot;  /* the NEON table as built for a CPU without the dot product (int8 conv
                              tests only: the rest of it is the NEON table's); name NULL if unused */

static void find_tables(void) {
    for (int i = 0; i < 4; i++) {
        const char *why = NULL;
        const ops_kernels *k = ops_kernels_by_name(isa_names[i], &why);
        char name[64];
        snprintf(name, sizeof name, "kernels_%s", isa_names[i]);
        if (k) {
            tables[n_tables++] = k;
            CHECK(name, k->name && !strcmp(k->name, isa_names[i]) && k->matmul && k->dot && k->axpy && k->conv1d &&
                            k->conv_transpose1d && k->snake,
                  "table incomplete");
        } else {
            test_skip(name, "%s", why ? why : "unavailable");
        }
    }
    /* AVX-512 without VNNI and BF16 (Skylake-X): AVX-512 float kernels, AVX2 int kernels */
    const ops_kernels *a2 = ops_kernels_by_name("avx2", NULL), *a5 = ops_kernels_by_name("avx512", NULL);
#if defined(__x86_64__)
    if (a2 && a5) {
        novnni = *a2;
        novnni.name = "avx512-novnni";
        novnni.matmul = NULL; /* run_mm goes through ops_matmul_with */
        ops_fill_avx512(&novnni, 0, 0);
        conv_fill_avx512(&novnni);
        CHECK("kernels_avx512_novnni", novnni.mm_bf16_dp == NULL && novnni.mm[OPS_WF_Q8] == a2->mm[OPS_WF_Q8] &&
                                           novnni.mm[OPS_WF_BF16] == a5->mm[OPS_WF_BF16],
              "table composition");
        tables[n_tables++] = &novnni;
    }
#else
    (void)a2;
#endif
    /* the default is the best table this CPU has (unless QTTS_ISA says otherwise) */
    const char *env = getenv("QTTS_ISA");
    if (!env || !*env) {
        const ops_kernels *best = ops_kernels_best();
        CHECK("kernels_best_is_widest", best == (a5 ? a5 : tables[n_tables - 1]), "default %s", best->name);
    } else {
        test_skip("kernels_best_is_widest", "QTTS_ISA=%s set", env);
    }
#if defined(__aarch64__)
    /* with the dot product extension the NEON table's int8 conv is the sdot
     * one (GCC builds): test_conv_int tests the baseline one too */
    const ops_kernels *ne = ops_kernels_by_name("neon", NULL);
    if (ne) {
        nodot = *ne;
        conv_q8_fill_neon(&nodot, 0);
        const char *why = !ops_cpu_features()->neon_dotprod ? "CPU lacks the dot product"
                          : nodot.conv1d_q8 == ne->conv1d_q8 ? "this build has no sdot path"
                                                             : NULL;
        nodot.name = why ? NULL : "neon-nodot";
        if (why) test_skip("kernels_neon_nodot", "%s: the NEON table's int8 conv is the baseline one", why);
    }
#endif
    ops_ctx c;
    ops_init(&c, 1, 1);
    CHECK("ops_init_force_scalar", c.k == ops_kernels_scalar() && c.rt == NULL, "force_scalar ignored");
    ops_free(&c);
}

/* ------------------------------------------------------------ matrices */

typedef struct fmat {
    qt_mat m;
    void *data;
} fmat;

static void make_fmat(fmat *f, qtts_dtype dt, int rows, int cols, float scale) {
    const size_t n = (size_t)rows * cols;
    f->data = malloc(n * (dt == DT_F32 ? 4 : 2) + 64);
    for (size_t i = 0; i < n; i++) {
        const float v = rnd() * scale;
        if (dt == DT_F32) ((float *)f->data)[i] = v;
        else if (dt == DT_BF16) ((uint16_t *)f->data)[i] = f32_to_bf16(v);
        else ((uint16_t *)f->data)[i] = qt_f32_to_f16(v);
    }
    /* only the four float fields are set: the rest must not matter */
    memset(&f->m, 0xa5, sizeof f->m);
    f->m.data = f->data;
    f->m.dtype = dt;
    f->m.rows = rows;
    f->m.cols = cols;
}

static void free_fmat(fmat *f) { free(f->data); }

/* Y = k(W, X) with a sentinel after n * rows; returns 0 if written past. */
static int run_mm(const ops_kernels *k, const qt_mat *W, const float *X, int n, const float *bias, float *Y) {
    const size_t ny = (size_t)n * W->rows;
    Y[ny] = 1234.5f;
    Y[ny + 1] = -777.0f;
    if (k->matmul) k->matmul(W, X, n, bias, Y);
    else ops_matmul_with(k, W, X, n, bias, Y);
    return Y[ny] == 1234.5f && Y[ny + 1] == -777.0f;
}

/* sum |w x| (+|b|) of output (i, r) with the dequantised row. */
static double abs_dot(const qt_mat *W, int r, const float *x, const float *bias, float *wrow) {
    ops_get_row(W, r, wrow);
    double s = bias ? fabs(bias[r]) : 0.0;
    for (int j = 0; j < W->cols; j++) s += fabs((double)wrow[j] * x[j]);
    return s;
}

static void test_matmul_float(void) {
    static const qtts_dtype dts[3] = {DT_F32, DT_F16, DT_BF16};
    static const int shapes[][2] = {{1, 1}, {3, 7}, {5, 15}, {17, 16}, {6, 17}, {33, 31}, {9, 33}, {66, 100}, {13, 129}, {7, 257}};
    static const int ns[4] = {1, 2, 3, 17};
    const ops_kernels *ref = ops_kernels_scalar();
    for (int t = 1; t < n_tables; t++)
        for (int d = 0; d < 3; d++) {
            double worst = 0;
            int sent = 1;
            char where[128] = "";
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                const int rows = shapes[s][0], cols = shapes[s][1];
                fmat w;
                make_fmat(&w, dts[d], rows, cols, 1.0f);
                float *X = malloc(sizeof(float) * 17 * cols), *b = malloc(sizeof(float) * rows);
                float *Y = malloc(sizeof(float) * (17 * rows + 2)), *Yr = malloc(sizeof(float) * (17 * rows + 2));
                float *wrow = malloc(sizeof(float) * cols);
                fill(X, (size_t)17 * cols, 2.0f);
                fill(b, rows, 1.0f);
                for (int ni = 0; ni < 4; ni++)
                    for (int bias = 0; bias < 2; bias++) {
                        const int n = ns[ni];
                        sent &= run_mm(tables[t], &w.m, X, n, bias ? b : NULL, Y);
                        run_mm(ref, &w.m, X, n, bias ? b : NULL, Yr);
                        for (int i = 0; i < n; i++)
                            for (int r = 0; r < rows; r++) {
                                const double sa = abs_dot(&w.m, r, X + (size_t)i * cols, bias ? b : NULL, wrow);
                                const double q = fabs((double)Y[i * rows + r] - Yr[i * rows + r]) /
                                                 ((2.0 * cols + 4) * EPS32 * sa + 1e-30);
                                if (!(q <= worst)) {
                                    worst = q;
                                    snprintf(where, sizeof where, "%dx%d n=%d bias=%d row %d", rows, cols, n, bias, r);
                                }
                            }
                    }
                free(X);
                free(b);
                free(Y);
                free(Yr);
                free(wrow);
                free_fmat(&w);
            }
            char name[96];
            snprintf(name, sizeof name, "matmul_%s_%s_vs_scalar", tables[t]->name, dtype_name(dts[d]));
            CHECK(name, worst <= 1.0 && sent, "error %.3g x bound at %s%s", worst, where, sent ? "" : "; wrote past Y");
        }
}

/* ------------------------------------------------------------ quantised */

static const char *qname(int q) { return q == QT_Q8_B32 ? "Q8_B32" : q == QT_Q4_B32 ? "Q4_B32" : "Q4M_B32"; }

/* Decode one weight from the documented layout, independently of quant.c. */
static double q_weight(const qt_mat *m, int r, int j) {
    const int nb = qt_kpad(m->cols) / 32, b = j / 32, jj = j % 32;
    const double d = f16_val(m->scales[(size_t)r * nb + b]);
    if (m->quant == QT_Q8_B32) return d * ((const int8_t *)m->data)[(size_t)r * qt_kpad(m->cols) + j];
    const uint8_t byte = ((const uint8_t *)m->data)[(size_t)r * qt_kpad(m->cols) / 2 + b * 16 + (jj & 15)];
    const int q = jj < 16 ? byte & 15 : byte >> 4;
    if (m->quant == QT_Q4_B32) return d * (q - 8);
    return d * q + f16_val(m->mins[(size_t)r * nb + b]);
}

static void test_quantize(void) {
    static const int qts[3] = {QT_Q8_B32, QT_Q4_B32, QT_Q4M_B32};
    /* round-trip error on N(0,1)-like weights (sum of 4 uniforms) of a 1024 x 1024 BF16 matrix */
    const int R = 256, C = 1024;
    fmat w;
    make_fmat(&w, DT_BF16, R, C, 1.0f);
    uint16_t *d = w.data;
    for (size_t i = 0; i < (size_t)R * C; i++) d[i] = f32_to_bf16(0.05f * (rnd() + rnd() + rnd() + rnd()));
    static const double max_rms[3] = {0.006, 0.12, 0.10};
    for (int qi = 0; qi < 3; qi++) {
        qt_mat q;
        qtts_error e;
        qtts_status st = qmat_quantize(&w.m, qts[qi], &q, &e);
        char name[96];
        snprintf(name, sizeof name, "quantize_%s_status", qname(qts[qi]));
        CHECK(name, st == QTTS_OK && q.owned && qt_is_quant(&q) && (int)q.quant == qts[qi], "status %d", st);
        if (st) continue;
        const double rms = qmat_rel_rms(&w.m, &q);
        printf("# round trip %-8s relative RMS %.4f (BF16 [%d, %d], Gaussian-like weights)\n", qname(qts[qi]), rms, R,
               C);
        snprintf(name, sizeof name, "quantize_%s_rel_rms", qname(qts[qi]));
        CHECK(name, rms > 0.0 && rms <= max_rms[qi], "relative RMS %.4f (limit %.3f)", rms, max_rms[qi]);
        /* the documented layout decodes to what qmat_dequant_row / ops_get_row give */
        float *row = malloc(sizeof(float) * C), *acc = malloc(sizeof(float) * C);
        int same = 1;
        for (int r = 0; r < R; r += 37) {
            ops_get_row(&q, r, row);
            for (int j = 0; j < C; j++) acc[j] = 0.25f;
            ops_add_row(&q, r, acc);
            for (int j = 0; j < C; j++) same &= (double)row[j] == q_weight(&q, r, j) && acc[j] == 0.25f + row[j];
        }
        snprintf(name, sizeof name, "quantize_%s_layout", qname(qts[qi]));
        CHECK(name, same, "decoded weights differ from the documented layout");
        free(row);
        free(acc);
        qmat_free(&q);
        CHECK("qmat_free_zeroes", q.data == NULL && q.owned == NULL, "not zeroed");
    }
    free_fmat(&w);
    qt_mat q;
    qtts_error e;
    make_fmat(&w, DT_F32, 2, 3, 1.0f);
    CHECK("quantize_bad_type", qmat_quantize(&w.m, 99, &q, &e) == QTTS_ERR_INVALID_ARG && q.data == NULL, "accepted");
    qt_mat bad = w.m;
    bad.dtype = DT_I32;
    CHECK("quantize_bad_source", qmat_quantize(&bad, QT_Q8_B32, &q, &e) == QTTS_ERR_INVALID_ARG, "accepted I32");
    free_fmat(&w);
    qmat_free(NULL);

    /* f16 conversion: every f16 value round trips, and rounding is to nearest even */
    int rt_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t hh = (uint16_t)h;
        const float f = f16_to_f32(hh);
        if (isnan(f)) rt_ok &= isnan(f16_to_f32(qt_f32_to_f16(f)));
        else rt_ok &= qt_f32_to_f16(f) == hh;
    }
    CHECK("f16_round_trip_all", rt_ok, "some f16 value does not survive f16 -> f32 -> f16");
    int rne_ok = 1;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rnd_u32();
        u = (u & 0x807fffffu) | ((100u + rnd_u32() % 48u) << 23); /* |v| in [2^-27, 2^21) */
        float v;
        memcpy(&v, &u, 4);
        const uint16_t h = qt_f32_to_f16(v);
        const double got = f16_val(h);
        /* neighbours of h: the result must be the nearest, ties to even */
        double best = INFINITY;
        for (int dd = -1; dd <= 1; dd++) {
            const int hn = (h & 0x7fff) + dd;
            if (hn < 0 || hn > 0x7bff) continue;
            const double c = f16_val((uint16_t)((h & 0x8000) | hn));
            if (fabs(c - v) < best) best = fabs(c - v);
        }
        if (fabs(v) >= 65520.0) rne_ok &= (h & 0x7fff) == 0x7c00;
        else rne_ok &= fabs(got - v) == best;
        if (fabs(got - v) == best && best > 0) {
            /* a tie must land on an even mantissa */
            const int hn = h & 0x7fff;
            const double other = f16_val((uint16_t)((h & 0x8000) | (hn ^ 1)));
            if (fabs(other - v) == best) rne_ok &= (hn & 1) == 0;
        }
    }
    CHECK("f16_round_nearest_even", rne_ok, "qt_f32_to_f16 is not round-to-nearest-even");
}

/* Activation-quantisation bound of Y[i][r] against the dequantised-f32 product,
 * and the f32 rounding scale of the integer path. */
static void q_bounds(const qt_mat *W, int r, const float *x, const void *prep, int i, const float *bias, double *act,
                     double *sq) {
    const int cols = W->cols, nb = qt_kpad(cols) / 32;
    const q8_rows xr = q8_prep_row(prep, cols, i);
    double a = 0, s = bias ? fabs(bias[r]) : 0.0;
    for (int b = 0; b < nb; b++) {
        const double dw = f16_val(W->scales[(size_t)r * nb + b]), dx = xr.dx[b];
        double sb = 0;
        for (int jj = 0; jj < 32; jj++) {
            const int j = b * 32 + jj;
            /* xq in natural order: recompute it (the prep may be permuted) */
            const double wv = j < cols ? q_weight(W, r, j) : 0.0;
            const double xv = j < cols ? x[j] : 0.0;
            a += fabs(wv) * (0.5001 * dx + 4 * EPS32 * fabs(xv));
            const double xq = dx > 0 ? fabs(xv) / dx + 0.5 : 0;
            sb += (W->quant == QT_Q8_B32 ? 255.0 : 16.0) * xq;
        }
        s += fabs(dw * dx) * sb;
        if (W->quant == QT_Q4M_B32) s += fabs(f16_val(W->mins[(size_t)r * nb + b]) * xr.fsum[b]);
    }
    *act = a;
    *sq = s;
}

static void test_matmul_quant(void) {
    static const int qts[3] = {QT_Q8_B32, QT_Q4_B32, QT_Q4M_B32};
    static const int shapes[][2] = {{1, 1}, {5, 31}, {17, 32}, {6, 33}, {9, 100}, {66, 129}, {7, 300}, {4, 1024}};
    static const int ns[4] = {1, 2, 3, 17};
    for (int qi = 0; qi < 3; qi++) {
        double worst_ref = 0, worst_simd[5] = {0, 0, 0, 0, 0}, rel_err_sum = 0, rel_n = 0;
        char where_ref[128] = "", where_simd[5][128] = {"", "", "", "", ""};
        int sent = 1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int rows = shapes[s][0], cols = shapes[s][1], nb = qt_kpad(cols) / 32;
            fmat w;
            make_fmat(&w, DT_BF16, rows, cols, 1.0f);
            qt_mat q;
            qtts_error e;
            if (qmat_quantize(&w.m, qts[qi], &q, &e) != QTTS_OK) {
                CHECK("quantize", 0, "%s", e.msg);
                free_fmat(&w);
                continue;
            }
            float *X = malloc(sizeof(float) * 17 * cols), *b = malloc(sizeof(float) * rows);
            float *Y = malloc(sizeof(float) * (17 * rows + 2)), *Yr = malloc(sizeof(float) * (17 * rows + 2));
            float *wrow = malloc(sizeof(float) * cols);
            void *prep = aligned_alloc(64, (q8_prep_size(&q, 17) + 63) & ~(size_t)63);
            fill(X, (size_t)17 * cols, 3.0f);
            for (int j = 0; j < cols; j += 7) X[j] *= 20.0f; /* outliers: blocks with uneven ranges */
            fill(b, rows, 1.0f);
            q8_prep(&q, X, 17, prep);
            for (int ni = 0; ni < 4; ni++)
                for (int bias = 0; bias < 2; bias++) {
                    const int n = ns[ni];
                    const float *bb = bias ? b : NULL;
                    run_mm(ops_kernels_scalar(), &q, X, n, bb, Yr);
                    for (int i = 0; i < n; i++)
                        for (int r = 0; r < rows; r++) {
                            ops_get_row(&q, r, wrow);
                            double yd = bias ? b[r] : 0.0, ya = bias ? fabs(b[r]) : 0.0;
                            for (int j = 0; j < cols; j++) {
                                yd += (double)wrow[j] * X[(size_t)i * cols + j];
                                ya += fabs((double)wrow[j] * X[(size_t)i * cols + j]);
                            }
                            double act, sq;
                            q_bounds(&q, r, X + (size_t)i * cols, prep, i, bb, &act, &sq);
                            const double err = fabs(Yr[i * rows + r] - yd);
                            const double qq = err / (act + (2.0 * nb + 8) * EPS32 * sq + 1e-30);
                            rel_err_sum += err / (ya + 1e-30);
                            rel_n++;
                            if (!(qq <= worst_ref)) {
                                worst_ref = qq;
                                snprintf(where_ref, sizeof where_ref, "%dx%d n=%d row %d", rows, cols, n, r);
                            }
                        }
                    for (int t = 1; t < n_tables; t++) {
                        sent &= run_mm(tables[t], &q, X, n, bb, Y);
                        for (int i = 0; i < n; i++)
                            for (int r = 0; r < rows; r++) {
                                double act, sq;
                                q_bounds(&q, r, X + (size_t)i * cols, prep, i, bb, &act, &sq);
                                const double qq = fabs((double)Y[i * rows + r] - Yr[i * rows + r]) /
                                                  ((4.0 * nb + 32) * EPS32 * sq + 1e-30);
                                if (!(qq <= worst_simd[t])) {
                                    worst_simd[t] = qq;
                                    snprintf(where_simd[t], sizeof where_simd[t], "%dx%d n=%d row %d", rows, cols, n, r);
                                }
                            }
                    }
                }
            free(prep);
            free(X);
            free(b);
            free(Y);
            free(Yr);
            free(wrow);
            qmat_free(&q);
            free_fmat(&w);
        }
        char name[96];
        snprintf(name, sizeof name, "matmul_scalar_%s_vs_dequantised", qname(qts[qi]));
        CHECK(name, worst_ref <= 1.0, "error %.3g x the activation-quantisation bound at %s", worst_ref, where_ref);
        printf("# %s: mean |y - y_dequantised_f32| / sum|w x| = %.2e (int8 activations)\n", qname(qts[qi]),
               rel_err_sum / rel_n);
        for (int t = 1; t < n_tables; t++) {
            snprintf(name, sizeof name, "matmul_%s_%s_vs_scalar", tables[t]->name, qname(qts[qi]));
            CHECK(name, worst_simd[t] <= 1.0 && sent, "error %.3g x bound at %s%s", worst_simd[t], where_simd[t],
                  sent ? "" : "; wrote past Y");
        }
    }
    /* unsupported formats give NaN, loudly */
    fmat w;
    make_fmat(&w, DT_F32, 3, 5, 1.0f);
    qt_mat bad = w.m;
    bad.dtype = DT_I32;
    float X[5] = {1, 2, 3, 4, 5}, Y[3] = {0, 0, 0};
    ops_ctx c;
    ops_init(&c, 1, 0);
    ops_matmul(&c, &bad, X, 1, NULL, Y);
    CHECK("matmul_unsupported_dtype_nan", isnan(Y[0]) && isnan(Y[2]), "no NaN for an I32 matrix");
    ops_free(&c);
    free_fmat(&w);
}

/* QT_Q8_B32_X16, QT_Q8_B32_X16S (q8s) and QT_Q4M_B32_X16 (int8 / int4
 * regrouped by 16 rows): the same values as the row-major matrix they came
 * from; every table's kernel gives the scalar X16 kernel's bits for any n, row
 * range and thread count; within the SIMD-vs-scalar bound of the row-major
 * result; the signed int8 bytes give the unsigned ones' bits. */
static void test_matmul_x16(int src_quant, int q8s) {
    const int q4 = src_quant == QT_Q4M_B32, wf = q4 ? OPS_WF_Q4MX16 : q8s ? OPS_WF_Q8X16S : OPS_WF_Q8X16;
    const int want = q4 ? QT_Q4M_B32_X16 : q8s ? QT_Q8_B32_X16S : QT_Q8_B32_X16;
    const char *tag = q4 ? "q4mx16" : q8s ? "q8x16s" : "q8x16";
    char nm[96];
    static const int shapes[][2] = {{1, 1}, {5, 33}, {16, 32}, {17, 129}, {33, 300}, {64, 1024}, {100, 77}};
    /* row counts: every tile height of the AVX-512 kernels (1-4 rows of X
     * against 16 weight rows, 1-6 against 32) and remainders after whole tiles */
    enum { NS = 8, NX = 13 };
    static const int ns[NS] = {1, 2, 3, 4, 5, 8, 9, 13};
    int deq_ok = 1, bits_ok[5] = {1, 1, 1, 1, 1}, split_ok = 1, pool_ok = 1, sent = 1, n_cases = 0, as_u8 = 1;
    double worst = 0;
    char where[96] = "";
    ops_ctx c2;
    ops_init(&c2, 2, 0);
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int rows = shapes[sh][0], cols = shapes[sh][1], nb = qt_kpad(cols) / 32;
        fmat w;
        make_fmat(&w, DT_BF16, rows, cols, 1.0f);
        qt_mat q, p, u = {0};
        qtts_error e;
        if (qmat_quantize(&w.m, src_quant, &q, &e) || qmat_quantize(&w.m, src_quant, &p, &e) ||
            qmat_pack_x16(&p, q8s, &e) || (int)p.quant != want ||
            (q8s && (qmat_quantize(&w.m, src_quant, &u, &e) || qmat_pack_x16(&u, 0, &e)))) {
            snprintf(nm, sizeof nm, "%s_pack", tag);
            CHECK(nm, 0, "%s", e.msg);
            free_fmat(&w);
            continue;
        }
        float *r1 = malloc(sizeof(float) * cols), *r2 = malloc(sizeof(float) * cols);
        for (int r = 0; r < rows; r++) {
            qmat_dequant_row(&q, r, r1);
            qmat_dequant_row(&p, r, r2);
            deq_ok &= memcmp(r1, r2, sizeof(float) * cols) == 0;
        }
        float *X = malloc(sizeof(float) * NX * cols), *b = malloc(sizeof(float) * rows);
        float *Yr = malloc(sizeof(float) * (NX * rows + 2)), *Y = malloc(sizeof(float) * (NX * rows + 2));
        float *Yq = malloc(sizeof(float) * (NX * rows + 2));
        void *prep = aligned_alloc(64, (q8_prep_size(&p, NX) + 63) & ~(size_t)63);
        fill(X, (size_t)NX * cols, 3.0f);
        for (int j = 0; j < cols; j += 7) X[j] *= 20.0f;
        fill(b, rows, 1.0f);
        q8_prep(&q, X, NX, prep); /* the row-major bound below reads dx from it */
        for (int ni = 0; ni < NS; ni++)
            for (int bias = 0; bias < 2; bias++) {
                const int n = ns[ni];
                const float *bb = bias ? b : NULL;
                n_cases++;
                sent &= run_mm(ops_kernels_scalar(), &p, X, n, bb, Yr);
                if (q8s) {
                    sent &= run_mm(ops_kernels_scalar(), &u, X, n, bb, Yq);
                    as_u8 &= memcmp(Yq, Yr, sizeof(float) * n * rows) == 0;
                }
                sent &= run_mm(ops_kernels_scalar(), &q, X, n, bb, Yq);
                for (int i = 0; i < n; i++)
                    for (int r = 0; r < rows; r++) {
                        double act, sq;
                        q_bounds(&q, r, X + (size_t)i * cols, prep, i, bb, &act, &sq);
                        const double qq = fabs((double)Yr[i * rows + r] - Yq[i * rows + r]) /
                                          ((4.0 * nb + 32) * EPS32 * sq + 1e-30);
                        if (!(qq <= worst)) {
                            worst = qq;
                            snprintf(where, sizeof where, "%dx%d n=%d row %d", rows, cols, n, r);
                        }
                    }
                for (int t = 1; t < n_tables; t++) {
                    sent &= run_mm(tables[t], &p, X, n, bb, Y);
                    bits_ok[t] &= memcmp(Y, Yr, sizeof(float) * n * rows) == 0;
                }
                /* any row ranges, also ones that split a group of 16, on every SIMD table */
                void *px = aligned_alloc(64, (q8_prep_size(&p, n) + 63) & ~(size_t)63);
                for (int t = 1; t < n_tables; t++) {
                    const ops_kernels *kt = tables[t];
                    kt->prep[wf](&p, X, n, px);
                    for (int i = 0; i < n * rows; i++) Y[i] = NAN;
                    for (int r0 = 0; r0 < rows;) {
                        const int r1e = r0 + 1 + (r0 * 7 + 5) % 19 < rows ? r0 + 1 + (r0 * 7 + 5) % 19 : rows;
                        kt->mm[wf](&p, X, px, n, bb, Y, r0, r1e);
                        r0 = r1e;
                    }
                    split_ok &= memcmp(Y, Yr, sizeof(float) * n * rows) == 0;
                    /* ranges of 5 then 43 rows: pairs of whole groups (rows 16-47 and 48-79 of 100) beside split ones */
                    for (int i = 0; i < n * rows; i++) Y[i] = NAN;
                    for (int r0 = 0; r0 < rows;) {
                        const int r1e = r0 + (r0 ? 43 : 5) < rows ? r0 + (r0 ? 43 : 5) : rows;
                        kt->mm[wf](&p, X, px, n, bb, Y, r0, r1e);
                        r0 = r1e;
                    }
                    split_ok &= memcmp(Y, Yr, sizeof(float) * n * rows) == 0;
                }
                free(px);
                ops_matmul(&c2, &p, X, n, bb, Y);
                pool_ok &= memcmp(Y, Yr, sizeof(float) * n * rows) == 0;
            }
        free(prep);
        free(X);
        free(b);
        free(Y);
        free(Yr);
        free(Yq);
        free(r1);
        free(r2);
        qmat_free(&q);
        qmat_free(&p);
        if (q8s) qmat_free(&u);
        free_fmat(&w);
    }
    ops_free(&c2);
    if (q8s) CHECK("q8x16s_bits_equal_q8x16", as_u8, "signed and unsigned int8 bytes give different outputs");
    snprintf(nm, sizeof nm, "%s_same_values", tag);
    CHECK(nm, deq_ok, "a regrouped row dequantises differently");
    snprintf(nm, sizeof nm, "%s_scalar_vs_row_major_%s", tag, q4 ? "q4m" : "q8");
    CHECK(nm, worst <= 1.0 && sent && n_cases == 7 * NS * 2, "error %.3g x bound at %s%s", worst, where,
          sent ? "" : "; wrote past Y");
    for (int t = 1; t < n_tables; t++) {
        snprintf(nm, sizeof nm, "%s_%s_bits_equal_scalar", tag, tables[t]->name);
        CHECK(nm, bits_ok[t], "the %s kernel's bits differ from the scalar one", tables[t]->name);
    }
    snprintf(nm, sizeof nm, "%s_row_ranges", tag);
    CHECK(nm, split_ok, "bits depend on the row range");
    snprintf(nm, sizeof nm, "%s_two_threads", tag);
    CHECK(nm, pool_ok, "bits depend on the thread count");
    if (q4) {
        /* only int8 and int4-with-minima can be regrouped */
        fmat w;
        make_fmat(&w, DT_BF16, 8, 64, 1.0f);
        qt_mat q4s;
        qtts_error e;
        const int made = qmat_quantize(&w.m, QT_Q4_B32, &q4s, &e) == QTTS_OK;
        CHECK("x16_rejects_q4", made && qmat_pack_x16(&q4s, 0, &e) == QTTS_ERR_INVALID_ARG && q4s.quant == QT_Q4_B32,
              "an int4 matrix without minima was accepted");
        qmat_free(&q4s);
        free_fmat(&w);
        return;
    }
    if (q8s) return; /* the activation prep is the unsigned layout's, checked there */
    /* every table's activation prep writes the scalar prep's bytes (zero blocks,
     * ragged tails, a row with NaN and one with Inf included) */
    static const int pcols[] = {1, 31, 33, 100, 300, 1024};
    int prep_ok = 1;
    for (size_t ci = 0; ci < sizeof pcols / sizeof pcols[0]; ci++) {
        const int cols = pcols[ci], n = 5;
        const qt_mat shape = {.dtype = DT_I8, .rows = 16, .cols = cols, .quant = QT_Q8_B32_X16};
        float *X = malloc(sizeof(float) * n * cols);
        fill(X, (size_t)n * cols, 2.0f);
        for (int j = 0; j < cols && j < 40; j++) X[cols + j] = 0.0f; /* zero block(s) in row 1 */
        X[2 * cols + cols / 2] = NAN;
        X[3 * cols] = INFINITY;
        const size_t sz = q8_prep_size(&shape, n);
        unsigned char *pr = aligned_alloc(64, (sz + 63) & ~(size_t)63), *pt = aligned_alloc(64, (sz + 63) & ~(size_t)63);
        for (int t = 0; t < n_tables; t++) {
            /* the X16 prep of every table; the row-major int8 prep of the AVX-512
             * tables (whose vpdpbusd offsets sit in lane pairs) */
            for (int f = 0; f < 2; f++) {
                const int avx512 = !strcmp(tables[t]->name, "avx512"); /* with VNNI */
                if (f == 1 && !(avx512 && tables[t]->prep[OPS_WF_Q8])) continue;
                qt_mat sh = shape;
                sh.quant = f ? QT_Q8_B32 : QT_Q8_B32_X16;
                memset(pr, 0, sz);
                memset(pt, 0, sz);
                q8_prep_ex(&sh, X, n, pr, 1, f ? Q8_OFF_PAIRS_128 : Q8_OFF_BLOCK_128);
                tables[t]->prep[f ? OPS_WF_Q8 : OPS_WF_Q8X16](&sh, X, n, pt);
                prep_ok &= memcmp(pr, pt, sz) == 0;
            }
        }
        free(pr);
        free(pt);
        free(X);
    }
    CHECK("q8x16_prep_bytes", prep_ok, "an activation prep differs from the scalar one");
}

static void test_bf16_dp(void) {
    for (int t = 0; t < n_tables; t++) {
        const ops_kernels *k = tables[t];
        char name[96];
        snprintf(name, sizeof name, "matmul_%s_bf16_dp", k->name);
        if (!k->mm_bf16_dp) {
            if (!strcmp(k->name, "avx512")) test_skip(name, "CPU lacks AVX512_BF16");
            continue;
        }
        double worst = 0, mean_rel = 0;
        int cnt = 0;
        static const int shapes[][2] = {{1, 1}, {5, 31}, {17, 32}, {6, 33}, {9, 100}, {13, 129}, {4, 1024}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int rows = shapes[s][0], cols = shapes[s][1];
            fmat w;
            make_fmat(&w, DT_BF16, rows, cols, 1.0f);
            float *X = malloc(sizeof(float) * 17 * cols), *Y = malloc(sizeof(float) * 17 * rows);
            float *wrow = malloc(sizeof(float) * cols);
            void *prep = aligned_alloc(64, (bf16_prep_size(&w.m, 17) + 63) & ~(size_t)63);
            fill(X, (size_t)17 * cols, 2.0f);
            for (int n = 1; n <= 17; n += 8) {
                bf16_prep(&w.m, X, n, prep);
                k->mm_bf16_dp(&w.m, X, prep, n, NULL, Y, 0, rows);
                for (int i = 0; i < n; i++)
                    for (int r = 0; r < rows; r++) {
                        ops_get_row(&w.m, r, wrow);
                        double yd = 0, ya = 0;
                        for (int j = 0; j < cols; j++) {
                            yd += (double)wrow[j] * X[(size_t)i * cols + j];
                            ya += fabs((double)wrow[j] * X[(size_t)i * cols + j]);
                        }
                        const double q = fabs(Y[i * rows + r] - yd) / (ldexp(1.0, -8) * ya + 1e-30);
                        if (!(q <= worst)) worst = q;
                        mean_rel += fabs(Y[i * rows + r] - yd) / (ya + 1e-30);
                        cnt++;
                    }
            }
            free(prep);
            free(X);
            free(Y);
            free(wrow);
            free_fmat(&w);
        }
        CHECK(name, worst <= 1.0, "error %.3g x 2^-8 sum|w x|", worst);
        printf("# %s: mean |err| / sum|w x| = %.2e (activations rounded to bf16)\n", name, mean_rel / cnt);
    }
    /* through a context: opt-in, off by default, same bits as the kernel */
    ops_ctx c;
    ops_init(&c, 1, 0);
    const int have = c.k->mm_bf16_dp != NULL;
    fmat w;
    make_fmat(&w, DT_BF16, 40, 70, 1.0f);
    float X[3 * 70], Y0[3 * 40], Y1[3 * 40], Y2[3 * 40];
    fill(X, 3 * 70, 1.0f);
    ops_matmul(&c, &w.m, X, 3, NULL, Y0);
    const int on = ops_set_bf16_dp(&c, 1);
    ops_matmul(&c, &w.m, X, 3, NULL, Y1);
    if (have) {
        _Alignas(64) uint16_t prep[3 * 96];
        bf16_prep(&w.m, X, 3, prep);
        c.k->mm_bf16_dp(&w.m, X, prep, 3, NULL, Y2, 0, 40);
        CHECK("ops_set_bf16_dp", on == 1 && c.bf16_dp == 1 && memcmp(Y1, Y2, sizeof Y1) == 0 &&
                                     memcmp(Y0, Y1, sizeof Y0) != 0,
              "opt-in not honoured");
    } else {
        CHECK("ops_set_bf16_dp_unavailable", on == 0 && c.bf16_dp == 0 && memcmp(Y0, Y1, sizeof Y0) == 0,
              "enabled without a kernel");
    }
    ops_set_bf16_dp(&c, 0);
    ops_matmul(&c, &w.m, X, 3, NULL, Y2);
    CHECK("ops_set_bf16_dp_off", memcmp(Y0, Y2, sizeof Y0) == 0 && c.bf16_dp == 0, "could not turn it off");
    ops_free(&c);
    free_fmat(&w);
}

/* ------------------------------------------------------------ bit-exactness contract */

typedef struct mm_case {
    const char *name;
    qt_mat m;
    fmat f;
    int quant;
    int dp;
} mm_case;

static int make_case(mm_case *c, int which, int rows, int cols) {
    memset(c, 0, sizeof *c);
    static const char *names[7] = {"F32", "F16", "BF16", "Q8_B32", "Q4_B32", "Q4M_B32", "BF16_dp"};
    static const qtts_dtype dts[7] = {DT_F32, DT_F16, DT_BF16, DT_BF16, DT_BF16, DT_BF16, DT_BF16};
    static const int qts[7] = {0, 0, 0, QT_Q8_B32, QT_Q4_B32, QT_Q4M_B32, 0};
    c->name = names[which];
    make_fmat(&c->f, dts[which], rows, cols, 1.0f);
    c->m = c->f.m;
    c->dp = which == 6;
    if (qts[which]) {
        qtts_error e;
        if (qmat_quantize(&c->f.m, qts[which], &c->m, &e)) return 0;
        c->quant = 1;
    }
    return 1;
}

static void free_case(mm_case *c) {
    if (c->quant) qmat_free(&c->m);
    free_fmat(&c->f);
}

static void test_contract(void) {
    enum { ROWS = 131, COLS = 517, N = 7 };
    float *X = malloc(sizeof(float) * N * COLS), *b = malloc(sizeof(float) * ROWS);
    float *Yn = malloc(sizeof(float) * N * ROWS), *Y1 = malloc(sizeof(float) * ROWS), *Ys = malloc(sizeof(float) * N * ROWS);
    float *X2 = malloc(sizeof(float) * 2 * COLS), *Y2 = malloc(sizeof(float) * 2 * ROWS);
    fill(X, (size_t)N * COLS, 2.0f);
    fill(b, ROWS, 1.0f);
    for (int t = 0; t < n_tables; t++)
        for (int which = 0; which < 7; which++) {
            mm_case c;
            if (!make_case(&c, which, ROWS, COLS)) continue;
            char name[96];
            snprintf(name, sizeof name, "contract_%s_%s", tables[t]->name, c.name);
            if (c.dp && !tables[t]->mm_bf16_dp) {
                free_case(&c);
                continue;
            }
            int ok_rows = 1, ok_pair = 1, ok_split = 1, ok_threads = 1, threaded = 1;
            ops_ctx ctx[3];
            for (int nt = 1; nt <= 3; nt++) {
                ops_init(&ctx[nt - 1], nt, 0);
                ctx[nt - 1].k = tables[t];
                if (c.dp) ops_set_bf16_dp(&ctx[nt - 1], 1);
            }
            ops_matmul(&ctx[0], &c.m, X, N, b, Yn);
            /* row 3 alone, and row 3 next to another row, give the bits it had among 7 */
            for (int i = 0; i < N; i++) {
                ops_matmul(&ctx[0], &c.m, X + (size_t)i * COLS, 1, b, Y1);
                ok_rows &= memcmp(Y1, Yn + (size_t)i * ROWS, sizeof(float) * ROWS) == 0;
            }
            memcpy(X2, X + (size_t)5 * COLS, sizeof(float) * COLS);
            memcpy(X2 + COLS, X + (size_t)3 * COLS, sizeof(float) * COLS);
            ops_matmul(&ctx[0], &c.m, X2, 2, b, Y2);
            ok_pair &= memcmp(Y2 + ROWS, Yn + (size_t)3 * ROWS, sizeof(float) * ROWS) == 0 &&
                       memcmp(Y2, Yn + (size_t)5 * ROWS, sizeof(float) * ROWS) == 0;
            /* any row split of the kernel */
            {
                const int f = ops_weight_format(&c.m);
                ops_mm_fn fn = c.dp ? tables[t]->mm_bf16_dp : tables[t]->mm[f];
                void *prep = NULL;
                if (c.dp) {
                    prep = aligned_alloc(64, (bf16_prep_size(&c.m, N) + 63) & ~(size_t)63);
                    bf16_prep(&c.m, X, N, prep);
                } else if (tables[t]->prep_size[f]) {
                    prep = aligned_alloc(64, (tables[t]->prep_size[f](&c.m, N) + 63) & ~(size_t)63);
                    tables[t]->prep[f](&c.m, X, N, prep);
                }
                static const int cuts[] = {0, 1, 2, 5, 9, 64, 77, 130, ROWS};
                for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++)
                    fn(&c.m, X, prep, N, b, Ys, cuts[k], cuts[k + 1]);
                ok_split &= memcmp(Ys, Yn, sizeof(float) * N * ROWS) == 0;
                free(prep);
            }
            /* 2 and 3 threads, n = 7 and n = 1 */
            for (int nt = 2; nt <= 3; nt++) {
                threaded &= ops_matmul_threads(&ctx[nt - 1], &c.m, N) == nt && ops_matmul_threads(&ctx[nt - 1], &c.m, 1) == nt;
                for (size_t i = 0; i < (size_t)N * ROWS; i++) Ys[i] = NAN; /* a row no task computed stays NaN */
                for (int i = 0; i < ROWS; i++) Y1[i] = NAN;
                ops_matmul(&ctx[nt - 1], &c.m, X, N, b, Ys);
                ok_threads &= memcmp(Ys, Yn, sizeof(float) * N * ROWS) == 0;
                ops_matmul(&ctx[nt - 1], &c.m, X + (size_t)3 * COLS, 1, b, Y1);
                ok_threads &= memcmp(Y1, Yn + (size_t)3 * ROWS, sizeof(float) * ROWS) == 0;
            }
            CHECK(name, ok_rows && ok_pair && ok_split && ok_threads && threaded,
                  "bits differ: single row %s, pair %s, row split %s, threads %s%s", ok_rows ? "ok" : "DIFF",
                  ok_pair ? "ok" : "DIFF", ok_split ? "ok" : "DIFF", ok_threads ? "ok" : "DIFF",
                  threaded ? "" : "; the pool was not used");
            for (int nt = 1; nt <= 3; nt++) ops_free(&ctx[nt - 1]);
            free_case(&c);
        }
    free(X);
    free(b);
    free(Yn);
    free(Y1);
    free(Ys);
    free(X2);
    free(Y2);
}

/* ------------------------------------------------------------ thread pool */

typedef struct pool_probe {
    atomic_int hits[8];
    atomic_int calls;
    pthread_t who[8];
    int bad;
    pthread_t caller;  /* wait_task: the thread that called threadpool_run */
    atomic_int others; /* wait_task: tasks run on other threads */
} pool_probe;

static void probe_task(void *arg, int t, int nt) {
    pool_probe *p = arg;
    if (t < 0 || t >= nt || nt > 8) p->bad = 1;
    else {
        atomic_fetch_add(&p->hits[t], 1);
        p->who[t] = pthread_self();
    }
    atomic_fetch_add(&p->calls, 1);
}

typedef struct hammer {
    const ops_ctx *ctx;
    const qt_mat *W;
    const float *X;
    const float *ref;
    int ok;
} hammer;

static void *hammer_main(void *arg) {
    hammer *h = arg;
    float *Y = malloc(sizeof(float) * 3 * h->W->rows);
    for (int it = 0; it < 200; it++) {
        ops_matmul(h->ctx, h->W, h->X, 3, NULL, Y);
        h->ok &= memcmp(Y, h->ref, sizeof(float) * 3 * h->W->rows) == 0;
    }
    free(Y);
    return NULL;
}

static void slow_task(void *arg, int t, int nt) {
    probe_task(arg, t, nt);
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
}

/* A task that, on the calling thread, waits until another thread has run
 * one of the job's tasks (10 s at most: a guard against a hang), so a pool
 * whose workers take tasks gets one there whatever the load or emulation
 * (qemu), and one whose workers never do is seen. Set p->caller first. */
static void wait_task(void *arg, int t, int nt) {
    pool_probe *p = arg;
    probe_task(arg, t, nt);
    if (!pthread_equal(pthread_self(), p->caller)) {
        atomic_fetch_add(&p->others, 1);
        return;
    }
    struct timespec ts = {0, 1000 * 1000};
    for (int i = 0; i < 10000 && !atomic_load(&p->others); i++) nanosleep(&ts, NULL);
}

/* An async function: counts its runs, notes its thread, flags two at once,
 * and (hold set) waits until the test releases it. */
typedef struct async_probe {
    atomic_int runs, inside, overlapped, hold;
    pthread_t who;
} async_probe;

static void async_fn(void *arg) {
    async_probe *a = arg;
    if (atomic_fetch_add(&a->inside, 1) != 0) atomic_store(&a->overlapped, 1);
    a->who = pthread_self();
    while (atomic_load(&a->hold)) sched_yield();
    atomic_fetch_add(&a->runs, 1);
    atomic_fetch_sub(&a->inside, 1);
}

typedef struct async_poster {
    threadpool *p;
    async_probe *a;
    int n;
} async_poster;

static void *async_post_main(void *arg) {
    async_poster *ap = arg;
    for (int i = 0; i < ap->n; i++)
        while (!threadpool_async(ap->p, async_fn, ap->a)) sched_yield();
    return NULL;
}

/* threadpool_async: one worker runs the function while the caller's jobs go
 * on without it (on the caller alone in a pool of two), every task once;
 * posts are serialised; a sleeping worker still takes one; no workers: 0. */
static void test_pool_async(void) {
    threadpool *p = threadpool_create(2);
    CHECK("pool_async_create", p != NULL, "no pool");
    if (!p) return;
    async_probe a;
    memset(&a, 0, sizeof a);
    atomic_store(&a.hold, 1);
    int posted = threadpool_async(p, async_fn, &a);
    while (posted && atomic_load(&a.inside) == 0) sched_yield(); /* the worker has it */
    pool_probe pr;
    memset(&pr, 0, sizeof pr);
    int jobs_ok = 1;
    for (int r = 0; r < 200; r++) {
        memset(&pr, 0, sizeof pr);
        threadpool_run(p, slow_task, &pr, 3);
        for (int t = 0; t < 3; t++) jobs_ok &= pr.hits[t] == 1 && pthread_equal(pr.who[t], pthread_self());
    }
    atomic_store(&a.hold, 0);
    threadpool_async_wait(p);
    CHECK("pool_async_runs_beside_jobs",
          posted && jobs_ok && a.runs == 1 && !pthread_equal(a.who, pthread_self()),
          "posted %d, jobs on the caller alone %d, runs %d", posted, jobs_ok, (int)a.runs);
    /* many posts between jobs: each runs once, never two at a time */
    memset(&a, 0, sizeof a);
    int counts_ok = 1, total = 0;
    int refused = 0;
    for (int r = 0; r < 3000; r++) {
        while (!threadpool_async(p, async_fn, &a)) refused++; /* the previous one is still running */
        memset(&pr, 0, sizeof pr);
        threadpool_run(p, probe_task, &pr, 1 + r % 5);
        counts_ok &= pr.calls == 1 + r % 5 && !pr.bad;
        total++;
    }
    threadpool_async_wait(p);
    CHECK("pool_async_each_once", counts_ok && a.runs == total && !a.overlapped, "%d runs of %d posts, overlap %d",
          (int)a.runs, total, (int)a.overlapped);
    /* two threads posting at once (neither the pool's caller): every accepted post runs once */
    memset(&a, 0, sizeof a);
    async_poster ps[2] = {{p, &a, 1500}, {p, &a, 1500}};
    pthread_t pt[2];
    int started = 0;
    for (int i = 0; i < 2; i++) started += pthread_create(&pt[i], NULL, async_post_main, &ps[i]) == 0;
    for (int i = 0; i < started; i++) pthread_join(pt[i], NULL);
    threadpool_async_wait(p);
    CHECK("pool_async_two_posters", started == 2 && a.runs == 3000 && !a.overlapped, "%d runs of 3000, overlap %d",
          (int)a.runs, (int)a.overlapped);
    /* a second post while one runs is refused, and taken once it has returned */
    memset(&a, 0, sizeof a);
    atomic_store(&a.hold, 1);
    const int first = threadpool_async(p, async_fn, &a), second = threadpool_async(p, async_fn, &a);
    atomic_store(&a.hold, 0);
    threadpool_async_wait(p);
    const int third = threadpool_async(p, async_fn, &a);
    threadpool_async_wait(p);
    CHECK("pool_async_busy_refused", first == 1 && second == 0 && third == 1 && a.runs == 2, "posts %d %d %d, runs %d",
          first, second, third, (int)a.runs);
    (void)refused;
    /* after the worker went to sleep */
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    memset(&a, 0, sizeof a);
    threadpool_async(p, async_fn, &a);
    threadpool_async_wait(p);
    memset(&pr, 0, sizeof pr);
    threadpool_run(p, slow_task, &pr, 3);
    memset(&pr, 0, sizeof pr);
    pr.caller = pthread_self();
    threadpool_run(p, wait_task, &pr, 3);
    int later_on_worker = 0;
    for (int t = 0; t < 3; t++) later_on_worker |= !pthread_equal(pr.who[t], pthread_self());
    CHECK("pool_async_after_sleep_then_jobs_again", a.runs == 1 && later_on_worker,
          "runs %d; the worker took no task after its async function: %d", (int)a.runs, later_on_worker);
    /* destroy with a function still running waits for it */
    memset(&a, 0, sizeof a);
    threadpool_async(p, async_fn, &a);
    threadpool_destroy(p);
    CHECK("pool_async_destroy_waits", a.runs == 1, "runs %d", (int)a.runs);
    CHECK("pool_async_no_workers", threadpool_async(NULL, async_fn, &a) == 0, "a NULL pool took an async function");
    /* three threads: while one worker runs the function the other still takes tasks */
    p = threadpool_create(3);
    if (!p) return;
    memset(&a, 0, sizeof a);
    atomic_store(&a.hold, 1);
    threadpool_async(p, async_fn, &a);
    while (atomic_load(&a.inside) == 0) sched_yield();
    int helped = 0;
    for (int r = 0; r < 3; r++) {
        memset(&pr, 0, sizeof pr);
        pr.caller = pthread_self();
        threadpool_run(p, wait_task, &pr, 3);
        for (int t = 0; t < 3; t++) helped += !pthread_equal(pr.who[t], pthread_self());
    }
    atomic_store(&a.hold, 0);
    threadpool_destroy(p);
    CHECK("pool_async_other_workers_help", helped > 0 && a.runs == 1, "%d of 9 tasks on the free worker", helped);
}

static void test_pool(void) {
    threadpool *p = threadpool_create(3);
    CHECK("pool_create", p && threadpool_size(p) == 3, "no pool");
    if (!p) return;
    pool_probe pr;
    memset(&pr, 0, sizeof pr);
    const int runs = 20000;
    for (int r = 0; r < runs; r++) threadpool_run(p, probe_task, &pr, 1 + r % 8);
    int expect[8] = {0}, total = 0;
    for (int r = 0; r < runs; r++)
        for (int t = 0; t < 1 + r % 8; t++) expect[t]++, total++;
    int counts_ok = !pr.bad && pr.calls == total;
    for (int t = 0; t < 8; t++) counts_ok &= pr.hits[t] == expect[t];
    CHECK("pool_every_task_once", counts_ok, "%d task calls for %d tasks (task 0: %d of %d)", (int)pr.calls, total,
          (int)pr.hits[0], expect[0]);
    /* tasks that wait on the caller: the workers take some of them */
    int on_workers = 0;
    for (int r = 0; r < 3; r++) {
        memset(&pr, 0, sizeof pr);
        pr.caller = pthread_self();
        threadpool_run(p, wait_task, &pr, 3);
        for (int t = 0; t < 3; t++) on_workers += pr.hits[t] == 1 && !pthread_equal(pr.who[t], pthread_self());
        counts_ok &= pr.hits[0] == 1 && pr.hits[1] == 1 && pr.hits[2] == 1;
    }
    CHECK("pool_workers_take_tasks", on_workers > 0 && counts_ok, "%d of 9 tasks ran on workers", on_workers);
    /* after the workers went to sleep, jobs still complete */
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    memset(&pr, 0, sizeof pr);
    threadpool_run(p, probe_task, &pr, 5);
    CHECK("pool_after_sleep", pr.calls == 5 && pr.hits[4] == 1, "a job after the workers slept did not complete");
    threadpool_destroy(p);
    threadpool_destroy(NULL);
    CHECK("pool_create_one_thread", threadpool_create(1) == NULL, "a pool of 1 thread needs no workers");

    /* contexts started and stopped repeatedly */
    int cycles_ok = 1;
    for (int i = 0; i < 30; i++) {
        ops_ctx c;
        ops_init(&c, 2 + i % 3, 0);
        cycles_ok &= c.n_threads == 2 + i % 3 && c.rt != NULL;
        ops_free(&c);
        cycles_ok &= c.rt == NULL;
    }
    ops_ctx z;
    memset(&z, 0, sizeof z);
    ops_free(&z);
    ops_free(NULL);
    CHECK("ops_init_free_cycles", cycles_ok, "ops_init/ops_free state");

    /* one context driven from two threads at once: results stay right
     * (float weights, and int8 weights whose activations need scratch) */
    for (int which = 2; which <= 3; which++) {
        mm_case mc;
        if (!make_case(&mc, which, 300, 260)) continue;
        float X[3 * 260], *ref = malloc(sizeof(float) * 3 * 300);
        fill(X, 3 * 260, 1.0f);
        ops_ctx c;
        ops_init(&c, 2, 0);
        ops_matmul(&c, &mc.m, X, 3, NULL, ref);
        hammer h[2] = {{&c, &mc.m, X, ref, 1}, {&c, &mc.m, X, ref, 1}};
        pthread_t th;
        pthread_create(&th, NULL, hammer_main, &h[1]);
        hammer_main(&h[0]);
        pthread_join(th, NULL);
        char name[64];
        snprintf(name, sizeof name, "ops_ctx_shared_by_two_threads_%s", mc.name);
        CHECK(name, h[0].ok && h[1].ok, "a concurrent call changed the result");
        ops_free(&c);
        free(ref);
        free_case(&mc);
    }
}

/* ------------------------------------------------------------ dot / axpy */

static void test_dot_axpy(void) {
    static const int ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128, 200};
    for (int t = 0; t < n_tables; t++) {
        double worst = 0, worst_axpy = 0;
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            const int n = ns[s];
            float a[200], b[200], y[201], y0[201];
            fill(a, n, 2.0f);
            fill(b, n, 2.0f);
            double d = 0, da = 0;
            for (int j = 0; j < n; j++) {
                d += (double)a[j] * b[j];
                da += fabs((double)a[j] * b[j]);
            }
            const double q = fabs(tables[t]->dot(a, b, n) - d) / ((n + 4) * EPS32 * da + 1e-30);
            if (!(q <= worst)) worst = q;
            fill(y, n, 1.0f);
            y[n] = 99.0f;
            memcpy(y0, y, sizeof y);
            tables[t]->axpy(y, 0.75f, a, n);
            for (int j = 0; j < n; j++) {
                const double r = y0[j] + 0.75 * a[j];
                const double qq = fabs(y[j] - r) / (2 * EPS32 * (fabs(y0[j]) + fabs(0.75 * a[j])) + 1e-30);
                if (!(qq <= worst_axpy)) worst_axpy = qq;
            }
            if (y[n] != 99.0f) worst_axpy = INFINITY;
        }
        char name[64];
        snprintf(name, sizeof name, "dot_%s", tables[t]->name);
        CHECK(name, worst <= 1.0, "error %.3g x bound", worst);
        snprintf(name, sizeof name, "axpy_%s", tables[t]->name);
        CHECK(name, worst_axpy <= 1.0, "error %.3g x bound (or wrote past n)", worst_axpy);
    }
}

static void test_attn_head(void) {
    enum { HD = 128, NP = 37, KVS = 3 * HD };
    float q[HD], *K = malloc(sizeof(float) * NP * KVS), *V = malloc(sizeof(float) * NP * KVS), sc[NP], out[HD];
    fill(q, HD, 1.0f);
    fill(K, (size_t)NP * KVS, 1.0f);
    fill(V, (size_t)NP * KVS, 1.0f);
    const float scale = 1.0f / sqrtf((float)HD);
    double p[NP], m = -INFINITY, tot = 0;
    for (int j = 0; j < NP; j++) {
        double d = 0;
        for (int t = 0; t < HD; t++) d += (double)q[t] * K[(size_t)j * KVS + HD + t];
        p[j] = d * scale;
        if (p[j] > m) m = p[j];
    }
    for (int j = 0; j < NP; j++) tot += p[j] = exp(p[j] - m);
    for (int t = 0; t < n_tables; t++) {
        ops_ctx c;
        ops_init(&c, 1, 0);
        c.k = tables[t];
        ops_attn_head(&c, q, K + HD, V + HD, KVS, NP, HD, scale, sc, out);
        double worst = 0;
        for (int i = 0; i < HD; i++) {
            double r = 0, ra = 0;
            for (int j = 0; j < NP; j++) {
                r += p[j] / tot * V[(size_t)j * KVS + HD + i];
                ra += fabs(p[j] / tot * V[(size_t)j * KVS + HD + i]);
            }
            const double e = fabs(out[i] - r) / (1e-5 * ra + 1e-30);
            if (!(e <= worst)) worst = e;
        }
        char name[64];
        snprintf(name, sizeof name, "attn_head_%s", tables[t]->name);
        CHECK(name, worst <= 1.0, "error %.3g x 1e-5 sum|p v|", worst);
        ops_free(&c);
    }
    free(K);
    free(V);
}

/* A table's fused attn_head must give exactly the bits of its own dot /
 * ops_softmax / axpy composition (the definition ops_attn_head falls back
 * to), for head sizes with and without a vector tail and over a block of
 * 128, and for 1 to 300 positions. */
static void test_attn_head_fused(void) {
    static const int hds[] = {128, 64, 80, 100, 136, 256, 7};
    static const int nps[] = {1, 2, 17, 300};
    enum { MAXHD = 256, MAXNP = 300, KVS = 2 * MAXHD + 3 };
    float *K = malloc(sizeof(float) * MAXNP * KVS), *V = malloc(sizeof(float) * MAXNP * KVS);
    float q[MAXHD], sc[MAXNP], out[MAXHD + 1], ref[MAXHD];
    fill(q, MAXHD, 1.0f);
    fill(K, (size_t)MAXNP * KVS, 1.0f);
    fill(V, (size_t)MAXNP * KVS, 1.0f);
    int fused = 0;
    for (int t = 0; t < n_tables; t++) {
        const ops_kernels *k = tables[t];
        if (!k->attn_head) continue;
        fused++;
        int bad = 0;
        char why[160] = "";
        for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
            for (size_t b = 0; b < sizeof nps / sizeof nps[0]; b++) {
                const int hd = hds[a], np = nps[b];
                const float scale = 1.0f / sqrtf((float)hd);
                for (int j = 0; j < np; j++) sc[j] = k->dot(q, K + (size_t)j * KVS + 1, hd) * scale;
                ops_softmax(sc, np);
                for (int i = 0; i < hd; i++) ref[i] = 0.0f;
                for (int j = 0; j < np; j++) k->axpy(ref, sc[j], V + (size_t)j * KVS + 1, hd);
                out[hd] = 42.0f;
                k->attn_head(q, K + 1, V + 1, KVS, np, hd, scale, sc, out);
                if (memcmp(out, ref, sizeof(float) * hd) || out[hd] != 42.0f) {
                    bad++;
                    snprintf(why, sizeof why, "hd %d, %d positions differ from dot/softmax/axpy (or wrote past hd)",
                             hd, np);
                }
            }
        char name[64];
        snprintf(name, sizeof name, "attn_head_fused_bits_%s", k->name);
        CHECK(name, bad == 0, "%s", why);
    }
    if (!fused) test_skip("attn_head_fused_bits", "no table on this CPU has a fused attention kernel");
    free(K);
    free(V);
}

/* ------------------------------------------------------------ convolutions */

static int conv_t_out(int t_in, int k, int s, int d) { return t_in < d * (k - 1) + 1 ? 0 : (t_in - d * (k - 1) - 1) / s + 1; }

static void conv1d_with(const ops_kernels *k, const float *x, int cin, int t_in, int xs, const float *w,
                        const float *b, int cout, int kk, int st, int dil, int gr, float *y, int ys, int o0, int o1,
                        int use_xph) {
    ops_conv_args a = {.x = x, .cin = cin, .t_in = t_in, .x_stride = xs, .w = w, .bias = b, .cout = cout, .k = kk,
                       .stride = st, .dilation = dil, .groups = gr, .t0 = 0, .t1 = conv_t_out(t_in, kk, st, dil),
                       .y = y, .y_stride = ys};
    float *xph = NULL;
    if (st > 1 && use_xph) {
        const int L = (t_in + st - 1) / st;
        xph = calloc((size_t)cin * st * L, sizeof(float));
        for (int i = 0; i < cin; i++)
            for (int p = 0; p < st; p++)
                for (int u = 0; u * st + p < t_in; u++) xph[((size_t)i * st + p) * L + u] = x[(size_t)i * xs + u * st + p];
        a.xph = xph;
        a.ph_len = L;
    }
    k->conv1d(&a, o0, o1);
    free(xph);
}

static void test_conv1d_kernels(void) {
    static const struct { int cin, cout, k, stride, dil, groups, t_in; } cs[] = {
        {4, 6, 3, 1, 1, 1, 20},   {6, 4, 5, 2, 1, 2, 31},  {8, 8, 3, 1, 3, 8, 25},  {4, 6, 4, 3, 2, 2, 40},
        {3, 5, 1, 1, 1, 1, 7},    {2, 2, 7, 1, 1, 1, 7},   {5, 10, 2, 2, 5, 5, 23}, {16, 9, 7, 1, 9, 1, 150},
        {12, 12, 7, 1, 1, 12, 97}, {7, 13, 1, 1, 1, 1, 133}, {9, 6, 8, 4, 1, 1, 203}, {3, 7, 10, 5, 1, 1, 71},
        {33, 17, 7, 1, 1, 1, 66}, {6, 6, 3, 1, 1, 3, 1000},
        /* inputs over the AVX-512 kernel's 512 KiB time block: several blocks */
        {96, 7, 7, 1, 9, 1, 3000}, {200, 13, 1, 1, 1, 1, 1500},
        /* one or two vectors of output steps (the AVX-512 12-channel tiles), taps 7, 2 and 5 */
        {20, 26, 7, 1, 1, 1, 30}, {14, 25, 2, 1, 1, 1, 17}, {10, 12, 7, 1, 2, 1, 18}, {9, 40, 5, 1, 1, 1, 36},
        /* inputs over the AVX2 kernel's 192 KiB: input channels in blocks, the last one short; grouped; strided */
        {200, 9, 7, 1, 1, 1, 300}, {400, 6, 1, 1, 1, 1, 200}, {256, 8, 3, 1, 2, 2, 400}, {240, 6, 4, 2, 1, 1, 260},
        /* K 1 there (packed blocks of channels x steps): grouped, strided */
        {512, 8, 1, 1, 1, 2, 200}, {300, 5, 1, 2, 1, 1, 400},
        /* a block of input channels over the AVX2 kernel's 128 KiB: time blocks too (the last one short);
         * K 2 (a packed transposed conv), dilated, grouped */
        {192, 13, 2, 1, 1, 1, 2600}, {100, 12, 2, 1, 3, 1, 1800}, {192, 14, 7, 1, 1, 2, 1500},
        /* K 1 over a long input of few channels (packed blocks of all of them), grouped too */
        {96, 13, 1, 1, 1, 1, 900}, {128, 12, 1, 1, 1, 2, 1000},
    };
    const ops_kernels *ref = ops_kernels_scalar();
    for (int t = 1; t < n_tables; t++) {
        double worst = 0;
        int sent_ok = 1, split_ok = 1, xph_ok = 1;
        char where[96] = "";
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, dil = cs[c].dil,
                      gr = cs[c].groups, t_in = cs[c].t_in, cin_g = cin / gr;
            const int t_out = conv_t_out(t_in, k, st, dil), xs = t_in + 3, ys = t_out + 2;
            float *x = malloc(sizeof(float) * cin * xs), *w = malloc(sizeof(float) * cout * cin_g * k);
            float *b = malloc(sizeof(float) * cout), *y = malloc(sizeof(float) * cout * ys);
            float *yr = malloc(sizeof(float) * cout * ys), *y2 = malloc(sizeof(float) * cout * ys);
            fill(x, (size_t)cin * xs, 1.0f);
            fill(w, (size_t)cout * cin_g * k, 1.0f);
            fill(b, cout, 0.5f);
            for (int i = 0; i < cout * ys; i++) y[i] = y2[i] = 777.0f;
            conv1d_with(tables[t], x, cin, t_in, xs, w, b, cout, k, st, dil, gr, y, ys, 0, cout, 1);
            conv1d_with(ref, x, cin, t_in, xs, w, b, cout, k, st, dil, gr, yr, ys, 0, cout, 1);
            for (int o = 0; o < cout; o++) {
                const int g = o / (cout / gr);
                for (int tt = 0; tt < t_out; tt++) {
                    double sa = fabs(b[o]);
                    for (int i = 0; i < cin_g; i++)
                        for (int tap = 0; tap < k; tap++)
                            sa += fabs((double)w[((size_t)o * cin_g + i) * k + tap] *
                                       x[(size_t)(g * cin_g + i) * xs + tt * st + tap * dil]);
                    const double q = fabs((double)y[o * ys + tt] - yr[o * ys + tt]) /
                                     ((2.0 * cin_g * k + 4) * EPS32 * sa + 1e-30);
                    if (!(q <= worst)) {
                        worst = q;
                        snprintf(where, sizeof where, "cin %d cout %d k %d s %d d %d g %d", cin, cout, k, st, dil, gr);
                    }
                }
                sent_ok &= y[o * ys + t_out] == 777.0f && y[o * ys + t_out + 1] == 777.0f;
            }
            /* output channels in odd pieces give the same bits */
            for (int o = 0; o < cout;) {
                const int o1 = o + 3 < cout ? o + 3 : cout;
                conv1d_with(tables[t], x, cin, t_in, xs, w, b, cout, k, st, dil, gr, y2, ys, o, o1, 1);
                o = o1;
            }
            split_ok &= memcmp(y, y2, sizeof(float) * cout * ys) == 0;
            /* stride > 1 without the deinterleaved copy: the fallback gives the same bits */
            if (st > 1) {
                conv1d_with(tables[t], x, cin, t_in, xs, w, b, cout, k, st, dil, gr, y2, ys, 0, cout, 0);
                xph_ok &= memcmp(y, y2, sizeof(float) * cout * ys) == 0;
            }
            free(x);
            free(w);
            free(b);
            free(y);
            free(yr);
            free(y2);
        }
        char name[96];
        snprintf(name, sizeof name, "conv1d_%s_vs_scalar", tables[t]->name);
        CHECK(name, worst <= 1.0 && sent_ok, "error %.3g x bound at %s%s", worst, where, sent_ok ? "" : "; wrote past t_out");
        snprintf(name, sizeof name, "conv1d_%s_channel_split", tables[t]->name);
        CHECK(name, split_ok, "bits depend on the output-channel range");
        snprintf(name, sizeof name, "conv1d_%s_strided_fallback", tables[t]->name);
        CHECK(name, xph_ok, "strided conv without the deinterleaved copy differs");
    }
}

/* Streaming conv1d with carried left context (input in irregular chunks),
 * plain and through contexts with 1-3 threads: all memcmp-equal to one pass. */
static void test_conv1d_streaming(void) {
    static const struct { int cin, cout, k, stride, dil, groups; } cs[] = {
        {4, 3, 5, 1, 2, 1}, {4, 4, 4, 2, 1, 2}, {3, 6, 7, 3, 1, 3}, {2, 2, 3, 1, 9, 1}, {6, 6, 1, 1, 1, 6},
        {24, 20, 7, 1, 3, 1}, {16, 16, 7, 1, 1, 16},
    };
    static const int chunks[] = {1, 7, 3, 13, 2, 5, 11, 1, 1, 4, 40, 17, 33};
    enum { T = 297 };
    for (int t = 0; t < n_tables; t++) {
        int ok = 1;
        char where[96] = "";
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, dil = cs[c].dil,
                      gr = cs[c].groups;
            const int span = dil * (k - 1) + 1, t_out = (T - span) / st + 1;
            float *x = malloc(sizeof(float) * cin * T), *w = malloc(sizeof(float) * cout * (cin / gr) * k);
            float *b = malloc(sizeof(float) * cout), *buf = malloc(sizeof(float) * cin * T);
            float *y1 = calloc((size_t)cout * t_out, sizeof(float)), *y2 = calloc((size_t)cout * t_out, sizeof(float));
            fill(x, (size_t)cin * T, 1.0f);
            fill(w, (size_t)cout * (cin / gr) * k, 1.0f);
            fill(b, cout, 0.5f);
            ops_ctx ctx[3];
            for (int nt = 1; nt <= 3; nt++) {
                ops_init(&ctx[nt - 1], nt, 0);
                ctx[nt - 1].k = tables[t];
            }
            ops_conv1d_ctx(&ctx[0], x, cin, T, T, w, b, cout, k, st, dil, gr, y1, t_out);
            for (int nt = 1; nt <= 3; nt++) {
                int fed = 0, blen = 0, done = 0, ci = (int)c;
                memset(y2, 0, sizeof(float) * cout * t_out);
                while (fed < T) {
                    int n = chunks[ci++ % (int)(sizeof chunks / sizeof chunks[0])];
                    if (n > T - fed) n = T - fed;
                    for (int i = 0; i < cin; i++)
                        memcpy(buf + (size_t)i * T + blen, x + (size_t)i * T + fed, sizeof(float) * n);
                    blen += n;
                    fed += n;
                    if (blen >= span) {
                        const int m = (blen - span) / st + 1;
                        ops_conv1d_ctx(&ctx[nt - 1], buf, cin, blen, T, w, b, cout, k, st, dil, gr, y2 + done, t_out);
                        done += m;
                        const int drop = m * st;
                        for (int i = 0; i < cin; i++)
                            memmove(buf + (size_t)i * T, buf + (size_t)i * T + drop, sizeof(float) * (blen - drop));
                        blen -= drop;
                    }
                }
                if (done != t_out || memcmp(y1, y2, sizeof(float) * cout * t_out)) {
                    ok = 0;
                    snprintf(where, sizeof where, "k %d s %d d %d g %d, %d threads", k, st, dil, gr, nt);
                }
            }
            for (int nt = 1; nt <= 3; nt++) ops_free(&ctx[nt - 1]);
            free(x);
            free(w);
            free(b);
            free(buf);
            free(y1);
            free(y2);
        }
        char name[96];
        snprintf(name, sizeof name, "conv1d_%s_chunked_equals_whole", tables[t]->name);
        CHECK(name, ok, "chunked result differs from one pass at %s", where);
    }
}

static void test_conv_transpose_kernels(void) {
    static const struct { int cin, cout, k, stride, groups, t_in; } cs[] = {
        {4, 6, 4, 2, 1, 10}, {6, 4, 3, 3, 2, 9},  {2, 2, 2, 4, 1, 5},    {3, 3, 1, 1, 3, 6},   {4, 2, 8, 4, 2, 7},
        {1, 1, 5, 1, 1, 1},  {3, 6, 10, 5, 3, 4}, {16, 8, 16, 8, 1, 37}, {12, 12, 2, 2, 1, 70}, {8, 5, 6, 3, 1, 55},
        {5, 9, 3, 1, 1, 100}, {70, 100, 16, 8, 1, 9}, {33, 67, 6, 3, 1, 40}, {24, 130, 2, 2, 1, 3},
    };
    const ops_kernels *ref = ops_kernels_scalar();
    for (int t = 1; t < n_tables; t++) {
        double worst = 0;
        int sent_ok = 1, win_ok = 1, split_ok = 1, conv_ok = 1, n_conv = 0;
        char where[96] = "";
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            const int cin = cs[c].cin, cout = cs[c].cout, k = cs[c].k, st = cs[c].stride, gr = cs[c].groups,
                      t_in = cs[c].t_in, cout_g = cout / gr, cin_g = cin / gr;
            const int t_out = (t_in - 1) * st + k, xs = t_in + 2, ys = t_out + 3;
            float *x = malloc(sizeof(float) * cin * xs), *w = malloc(sizeof(float) * cin * cout_g * k);
            float *b = malloc(sizeof(float) * cout), *y = malloc(sizeof(float) * cout * ys);
            float *yr = malloc(sizeof(float) * cout * ys), *y2 = malloc(sizeof(float) * cout * ys);
            fill(x, (size_t)cin * xs, 1.0f);
            fill(w, (size_t)cin * cout_g * k, 1.0f);
            fill(b, cout, 0.5f);
            for (int i = 0; i < cout * ys; i++) y[i] = 777.0f;
            ops_conv_args a = {.x = x, .cin = cin, .t_in = t_in, .x_stride = xs, .w = w, .bias = b, .cout = cout,
                               .k = k, .stride = st, .dilation = 1, .groups = gr, .t0 = 0, .t1 = t_out, .y = y,
                               .y_stride = ys};
            tables[t]->conv_transpose1d(&a, 0, cout);
            a.y = yr;
            ref->conv_transpose1d(&a, 0, cout);
            for (int o = 0; o < cout; o++) {
                const int g = o / cout_g, og = o % cout_g;
                for (int tt = 0; tt < t_out; tt++) {
                    double sa = fabs(b[o]);
                    for (int i = 0; i < cin_g; i++)
                        for (int j = 0; j < t_in; j++) {
                            const int tap = tt - j * st;
                            if (tap >= 0 && tap < k)
                                sa += fabs((double)x[(size_t)(g * cin_g + i) * xs + j] *
                                           w[((size_t)(g * cin_g + i) * cout_g + og) * k + tap]);
                        }
                    const int terms = cin_g * ((k + st - 1) / st);
                    const double q = fabs((double)y[o * ys + tt] - yr[o * ys + tt]) / ((2.0 * terms + 4) * EPS32 * sa + 1e-30);
                    if (!(q <= worst)) {
                        worst = q;
                        snprintf(where, sizeof where, "cin %d cout %d k %d s %d g %d t_in %d", cin, cout, k, st, gr, t_in);
                    }
                }
                for (int tt = t_out; tt < ys; tt++) sent_ok &= y[o * ys + tt] == 777.0f;
            }
            /* groups 1, k a multiple of the stride: as a conv1d over the input
             * (ops_conv_transpose1d_pack_conv) the same bits over every window of
             * whole input steps with all taps present (the whole interior, and
             * one step less on each side); other windows are refused */
            float *wc = gr == 1 ? ops_conv_transpose1d_pack_conv(w, b, cin, cout, k, st) : NULL;
            if (gr == 1 && k % st == 0 && !wc) conv_ok = 0;
            if (wc) {
                ops_ctx c1;
                ops_init(&c1, 1, 0);
                c1.k = tables[t];
                const int kk = k / st, lo = (kk - 1) * st, hi = t_in * st;
                float *scratch = malloc(sizeof(float) * cout * (t_out + st));
                for (int v = 0; v < 2; v++) {
                    const int t0 = lo + v * st, t1 = hi - v * st;
                    if (t1 <= t0) continue;
                    for (int i = 0; i < cout * ys; i++) y2[i] = 777.0f;
                    conv_ok &= ops_conv_transpose1d_conv_ctx(&c1, x, cin, t_in, xs, wc, cout, k, st, t0, t1, y2, ys,
                                                             scratch) == 1;
                    for (int o = 0; o < cout; o++) {
                        conv_ok &= memcmp(y2 + (size_t)o * ys, y + (size_t)o * ys + t0, sizeof(float) * (t1 - t0)) == 0;
                        for (int tt = t1 - t0; tt < ys; tt++) conv_ok &= y2[o * ys + tt] == 777.0f;
                    }
                    n_conv++;
                }
                if (hi > lo) /* a window that cuts an input step, and one with a missing tap */
                    conv_ok &= ops_conv_transpose1d_conv_ctx(&c1, x, cin, t_in, xs, wc, cout, k, st, lo + (st > 1), hi,
                                                             y2, ys, scratch) == (st == 1);
                conv_ok &= ops_conv_transpose1d_conv_ctx(&c1, x, cin, t_in, xs, wc, cout, k, st, lo - st, hi, y2, ys,
                                                         scratch) == 0;
                free(scratch);
                ops_free(&c1);
            }
            /* output windows [t0, t1) equal the slice of the full output */
            for (int t0 = 0; t0 < t_out; t0 += 1 + t_out / 5) {
                const int t1 = t0 + (t_out - t0) / 2 + 1;
                a.t0 = t0;
                a.t1 = t1;
                a.y = y2;
                tables[t]->conv_transpose1d(&a, 0, cout);
                for (int o = 0; o < cout; o++)
                    win_ok &= memcmp(y2 + (size_t)o * ys, y + (size_t)o * ys + t0, sizeof(float) * (t1 - t0)) == 0;
            }
            a.t0 = 0;
            a.t1 = t_out;
            a.y = y2;
            for (int o = 0; o < cout;) {
                const int o1 = o + 3 < cout ? o + 3 : cout;
                tables[t]->conv_transpose1d(&a, o, o1);
                o = o1;
            }
            for (int o = 0; o < cout; o++) split_ok &= memcmp(y2 + (size_t)o * ys, y + (size_t)o * ys, sizeof(float) * t_out) == 0;
            free(wc);
            free(x);
            free(w);
            free(b);
            free(y);
            free(yr);
            free(y2);
        }
        char name[96];
        snprintf(name, sizeof name, "conv_transpose1d_%s_vs_scalar", tables[t]->name);
        CHECK(name, worst <= 1.0 && sent_ok, "error %.3g x bound at %s%s", worst, where, sent_ok ? "" : "; wrote past t_out");
        snprintf(name, sizeof name, "conv_transpose1d_%s_windows", tables[t]->name);
        CHECK(name, win_ok, "an output window differs from the full output");
        snprintf(name, sizeof name, "conv_transpose1d_%s_channel_split", tables[t]->name);
        CHECK(name, split_ok, "bits depend on the output-channel range");
        snprintf(name, sizeof name, "conv_transpose1d_%s_as_conv1d", tables[t]->name);
        CHECK(name, conv_ok && n_conv == 16, "as a conv1d the bits differ, or a window was wrongly taken or refused (%d windows)",
              n_conv);
    }
}

/* Causal transposed conv (K = 2r, stride r, right trim r) streamed chunk by
 * chunk with the previous input column as context, through contexts with
 * 1-3 threads: memcmp-equal to one pass. */
static void test_conv_transpose_streaming(void) {
    enum { CIN = 20, COUT = 10, R = 3, K = 2 * R, T = 91 };
    static const int chunks[] = {1, 5, 2, 17, 3, 9, 1, 30, 4};
    float *x = malloc(sizeof(float) * CIN * (T + 1)), *w = malloc(sizeof(float) * CIN * COUT * K), b[COUT];
    float *y1 = malloc(sizeof(float) * COUT * T * R), *y2 = malloc(sizeof(float) * COUT * T * R);
    float *buf = malloc(sizeof(float) * CIN * (T + 1)), *yc = malloc(sizeof(float) * COUT * T * R);
    fill(w, (size_t)CIN * COUT * K, 1.0f);
    fill(b, COUT, 0.5f);
    /* x[i][0] = 0 (no previous input), then T steps */
    for (int i = 0; i < CIN; i++) {
        x[(size_t)i * (T + 1)] = 0.0f;
        fill(x + (size_t)i * (T + 1) + 1, T, 1.0f);
    }
    for (int t = 0; t < n_tables; t++) {
        int ok = 1;
        for (int nt = 1; nt <= 3; nt++) {
            ops_ctx c;
            ops_init(&c, nt, 0);
            c.k = tables[t];
            /* whole: full transposed conv of T + 1 inputs, keep [R, R + T R) */
            ops_conv_transpose1d_ctx(&c, x, CIN, T + 1, T + 1, w, b, COUT, K, R, 1, R, R + T * R, y1, T * R);
            int fed = 0, ci = nt;
            while (fed < T) {
                int m = chunks[ci++ % (int)(sizeof chunks / sizeof chunks[0])];
                if (m > T - fed) m = T - fed;
                for (int i = 0; i < CIN; i++) memcpy(buf + (size_t)i * (m + 1), x + (size_t)i * (T + 1) + fed, sizeof(float) * (m + 1));
                ops_conv_transpose1d_ctx(&c, buf, CIN, m + 1, m + 1, w, b, COUT, K, R, 1, R, R + m * R, yc, m * R);
                for (int o = 0; o < COUT; o++) memcpy(y2 + (size_t)o * T * R + fed * R, yc + (size_t)o * m * R, sizeof(float) * m * R);
                fed += m;
            }
            ok &= memcmp(y1, y2, sizeof(float) * COUT * T * R) == 0;
            ops_free(&c);
        }
        char name[96];
        snprintf(name, sizeof name, "conv_transpose1d_%s_chunked_equals_whole", tables[t]->name);
        CHECK(name, ok, "chunked causal transposed conv differs from one pass");
    }
    free(x);
    free(w);
    free(y1);
    free(y2);
    free(buf);
    free(yc);
}

/* Convolutions whose input is large enough that the pool splits output steps
 * instead of channels (ops_conv_time_split): 2 and 3 threads give the bits of
 * 1, for conv1d (dilated) and the transposed conv, plain and as a conv1d (whose
 * phases interleave over the pool too), with a window that starts past 0. */
static void test_conv_time_split(void) {
    enum { CIN = 48, T = 6000, COUT = 40, K = 7, DIL = 3, TCIN = 64, TT = 4200, TCO = 40, R = 3, TK = 2 * R };
    const int t_out = T - DIL * (K - 1), w0 = R, w1 = R + (TT - 1) * R;
    float *x = malloc(sizeof(float) * CIN * T), *w = malloc(sizeof(float) * COUT * CIN * K), b[COUT];
    float *y1 = malloc(sizeof(float) * COUT * t_out), *y2 = malloc(sizeof(float) * COUT * t_out);
    float *tx = malloc(sizeof(float) * TCIN * TT), *tw = malloc(sizeof(float) * TCIN * TCO * TK);
    float *ty1 = malloc(sizeof(float) * TCO * (w1 - w0)), *ty2 = malloc(sizeof(float) * TCO * (w1 - w0));
    fill(x, (size_t)CIN * T, 1.0f);
    fill(w, (size_t)COUT * CIN * K, 1.0f);
    fill(b, COUT, 0.5f);
    fill(tx, (size_t)TCIN * TT, 1.0f);
    fill(tw, (size_t)TCIN * TCO * TK, 1.0f);
    float *twc = ops_conv_transpose1d_pack_conv(tw, b, TCIN, TCO, TK, R);
    float *scratch = malloc(sizeof(float) * TCO * (w1 - w0));
    for (int t = 0; t < n_tables; t++) {
        int ok = twc != NULL && scratch != NULL, used = 1;
        ops_ctx c1;
        ops_init(&c1, 1, 0);
        c1.k = tables[t];
        ops_conv1d_ctx(&c1, x, CIN, T, T, w, b, COUT, K, 1, DIL, 1, y1, t_out);
        ops_conv_transpose1d_ctx(&c1, tx, TCIN, TT, TT, tw, b, TCO, TK, R, 1, w0, w1, ty1, w1 - w0);
        for (int nt = 2; nt <= 3; nt++) {
            ops_ctx c;
            ops_init(&c, nt, 0);
            c.k = tables[t];
            const ops_conv_args a1 = {.cin = CIN, .t_in = T, .groups = 1, .t0 = 0, .t1 = t_out};
            const ops_conv_args a2 = {.cin = TCIN, .t_in = TT, .groups = 1, .t0 = w0, .t1 = w1};
            used &= ops_conv_time_split(&c, &a1, 0) && ops_conv_time_split(&c, &a2, 1);
            memset(y2, 0, sizeof(float) * COUT * t_out);
            ops_conv1d_ctx(&c, x, CIN, T, T, w, b, COUT, K, 1, DIL, 1, y2, t_out);
            ok &= memcmp(y1, y2, sizeof(float) * COUT * t_out) == 0;
            memset(ty2, 0, sizeof(float) * TCO * (w1 - w0));
            ops_conv_transpose1d_ctx(&c, tx, TCIN, TT, TT, tw, b, TCO, TK, R, 1, w0, w1, ty2, w1 - w0);
            ok &= memcmp(ty1, ty2, sizeof(float) * TCO * (w1 - w0)) == 0;
            if (twc && scratch) {
                const ops_conv_args a3 = {.cin = TCIN, .t_in = TT, .groups = 1, .t0 = 0, .t1 = TT - 1};
                used &= ops_conv_time_split(&c, &a3, 0); /* the conv1d it runs */
                memset(ty2, 0, sizeof(float) * TCO * (w1 - w0));
                ok &= ops_conv_transpose1d_conv_ctx(&c, tx, TCIN, TT, TT, twc, TCO, TK, R, w0, w1, ty2, w1 - w0, scratch);
                ok &= memcmp(ty1, ty2, sizeof(float) * TCO * (w1 - w0)) == 0;
            }
            ops_free(&c);
        }
        /* few 64-step tiles (4, 10, 30: the vocoder's blocks at 1- and 4-frame
         * chunks), where the tasks are single tiles or a handful */
        {
            enum { SC = 1024, SO = 8 };
            static const int touts[] = {256, 640, 1920};
            float *sx = malloc(sizeof(float) * SC * (1920 + K - 1)), *sw = malloc(sizeof(float) * SO * SC * K);
            float *s1 = malloc(sizeof(float) * SO * 1920), *s2 = malloc(sizeof(float) * SO * 1920);
            ok &= sx && sw && s1 && s2;
            if (sx && sw && s1 && s2) {
                fill(sx, (size_t)SC * (1920 + K - 1), 1.0f);
                fill(sw, (size_t)SO * SC * K, 1.0f);
                for (size_t q = 0; q < sizeof touts / sizeof touts[0]; q++) {
                    const int to = touts[q], ti = to + K - 1;
                    ops_conv1d_ctx(&c1, sx, SC, ti, ti, sw, b, SO, K, 1, 1, 1, s1, to);
                    for (int nt = 2; nt <= 3; nt++) {
                        ops_ctx c;
                        ops_init(&c, nt, 0);
                        c.k = tables[t];
                        const ops_conv_args as = {.cin = SC, .t_in = ti, .groups = 1, .t0 = 0, .t1 = to};
                        if (nt == 2) used &= ops_conv_time_split(&c, &as, 0);
                        memset(s2, 0, sizeof(float) * SO * to);
                        ops_conv1d_ctx(&c, sx, SC, ti, ti, sw, b, SO, K, 1, 1, 1, s2, to);
                        ok &= memcmp(s1, s2, sizeof(float) * SO * to) == 0;
                        ops_free(&c);
                    }
                }
            }
            free(sx);
            free(sw);
            free(s1);
            free(s2);
        }
        ops_free(&c1);
        char name[96];
        snprintf(name, sizeof name, "conv_time_split_%s_same_bits", tables[t]->name);
        CHECK(name, ok && used, "%s", !used ? "the shapes were not split by time" : "bits depend on the split");
    }
    free(twc);
    free(scratch);
    free(x);
    free(w);
    free(y1);
    free(y2);
    free(tx);
    free(tw);
    free(ty1);
    free(ty2);
}

/* Each table's SwiGLU (the SIMD ones with their own exp) against double:
 * within 8 ulp of silu(g) u; special values; any chunking gives the same
 * bits (an element's result must not depend on where a call starts or ends:
 * ops_matmul_swiglu applies it to each task's rows). */
static void test_swiglu(void) {
    enum { N = 1003 };
    float g0[N], u[N], y[N], y2[N];
    fill(g0, N, 12.0f);
    fill(u, N, 3.0f);
    const float special[] = {0.0f, -0.0f, 1e-20f, -1e-20f, 30.0f, -30.0f, 88.0f, -88.0f, 87.5f, -87.5f,
                             100.0f, -100.0f, 1e30f, -1e30f, 5e-39f, 0.6931472f, -0.3465736f, 0.3465736f};
    const int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < ns; i++) g0[i] = special[i];
    for (int t = 0; t < n_tables; t++) {
        memcpy(y, g0, sizeof y);
        tables[t]->swiglu(y, u, N);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            const double r = (double)g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
            const double q = fabs(y[i] - r) / (8 * EPS32 * fabs(r) + 1e-40);
            if (!(q <= worst)) worst = q;
        }
        int chunk_ok = 1;
        memcpy(y2, g0, sizeof y2);
        for (int t0 = 0; t0 < N;) {
            const int n = 1 + (t0 * 7 + 3) % 37, t1 = t0 + n < N ? t0 + n : N;
            tables[t]->swiglu(y2 + t0, u + t0, t1 - t0);
            t0 = t1;
        }
        chunk_ok = memcmp(y, y2, sizeof y) == 0;
        float gs[4] = {NAN, INFINITY, -INFINITY, 1.0f}, us[4] = {1.0f, 1.0f, 0.5f, 1.0f};
        tables[t]->swiglu(gs, us, 4);
        const int special_ok = isnan(gs[0]) && gs[1] == INFINITY && isnan(gs[2]) && fabsf(gs[3] - 0.7310586f) < 1e-6f;
        char name[64];
        snprintf(name, sizeof name, "swiglu_%s_vs_double", tables[t]->name);
        CHECK(name, worst <= 1.0 && special_ok, "error %.3g x 8 ulp; NaN/inf handling %s", worst,
              special_ok ? "ok" : "WRONG");
        snprintf(name, sizeof name, "swiglu_%s_chunked", tables[t]->name);
        CHECK(name, chunk_ok, "a chunked pass differs from one pass");
    }
}

/* ulps between two finite floats of the same sign (or zeros) */
static double ulp_dist(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia; /* sign-magnitude to a monotonic integer line */
    if (ib < 0) ib = INT32_MIN - ib;
    return fabs((double)ia - (double)ib);
}

/* Each table's ELU against the scalar table's (libm expm1f): within 2 ulp
 * over a dense sweep of [-90, 0], tiny and subnormal negatives and seeded
 * data (the largest seen is printed); x >= 0, +-0 with their signs, +inf
 * and NaN unchanged, -inf to -1; any chunking gives the same bits. */
static void test_elu(void) {
    enum { N = 70000 }; /* over ops_elu_ctx's split size */
    float *x0 = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *ys = malloc(sizeof(float) * N),
          *y2 = malloc(sizeof(float) * N);
    if (!x0 || !y || !ys || !y2) {
        CHECK("elu_alloc", 0, "out of memory");
        return;
    }
    for (int i = 0; i < 20000; i++) x0[i] = -90.0f * (float)i / 20000.0f;          /* sweep of [-90, 0] */
    for (int i = 20000; i < 21000; i++) x0[i] = -ldexpf(1.0f, -(i - 20000) % 160); /* -1 down to subnormal */
    for (int i = 21000; i < 22000; i++) x0[i] = -0.3466f * (float)(i - 21000) / 1000.0f - 1e-3f; /* |r| edge */
    fill(x0 + 22000, N - 22000, 6.0f);
    const float special[] = {0.0f, -0.0f, 1.0f, 3.0e38f, INFINITY, -INFINITY, NAN, -87.0f, -87.5f, -88.7f, -1e-45f};
    const int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < ns; i++) x0[N - ns + i] = special[i];
    memcpy(ys, x0, sizeof(float) * N);
    ops_elu(ys, N);
    for (int t = 0; t < n_tables; t++) {
        void (*elu)(float *, int) = tables[t]->elu ? tables[t]->elu : ops_elu;
        memcpy(y, x0, sizeof(float) * N);
        elu(y, N);
        double worst = 0;
        int same_special = 1;
        for (int i = 0; i < N; i++) {
            if (isnan(x0[i]) || isinf(x0[i]) || x0[i] >= 0.0f) {
                int ok = isnan(x0[i]) ? isnan(y[i]) : (x0[i] == -INFINITY ? y[i] == -1.0f : memcmp(&y[i], &x0[i], 4) == 0);
                same_special &= ok;
                continue;
            }
            const double d = ulp_dist(y[i], ys[i]);
            if (!(d <= worst)) worst = d;
        }
        memcpy(y2, x0, sizeof(float) * N);
        for (int t0 = 0; t0 < N;) {
            const int n = 1 + (t0 * 7 + 3) % 37, t1 = t0 + n < N ? t0 + n : N;
            elu(y2 + t0, t1 - t0);
            t0 = t1;
        }
        char name[64];
        snprintf(name, sizeof name, "elu_%s_vs_expm1f", tables[t]->name);
        CHECK(name, worst <= 2.0 && same_special, "largest difference %.0f ulp (bound 2); x >= 0, inf, NaN %s", worst,
              same_special ? "ok" : "WRONG");
        printf("# elu %s: largest difference from expm1f %.0f ulp\n", tables[t]->name, worst);
        snprintf(name, sizeof name, "elu_%s_chunked", tables[t]->name);
        CHECK(name, memcmp(y, y2, sizeof(float) * N) == 0, "a chunked pass differs from one pass");
    }
    /* the context variant over 2 threads: the table's bits */
    ops_ctx c;
    ops_init(&c, 2, 0);
    memcpy(y2, x0, sizeof(float) * N);
    ops_elu_ctx(&c, y2, N);
    memcpy(y, x0, sizeof(float) * N);
    (c.k->elu ? c.k->elu : ops_elu)(y, N);
    CHECK("elu_ctx_threads", memcmp(y, y2, sizeof(float) * N) == 0, "ops_elu_ctx on 2 threads differs from the table");
    ops_free(&c);
    free(x0), free(y), free(ys), free(y2);
}

static void test_snake(void) {
    enum { T = 1003 };
    float x[T], y[T], y2[T];
    fill(x, T, 4.0f);
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = 1e-20f;
    x[3] = 3000.0f; /* a x beyond the vector reduction range */
    x[4] = -2500.0f;
    x[5] = 1e-3f;
    for (int t = 0; t < n_tables; t++) {
        double worst = 0;
        const float as[3] = {1.0f, 3.7f, 0.21f}, ibs[3] = {1.0f, 0.5f, 4.2f};
        int chunk_ok = 1, inplace_ok = 1;
        for (int ai = 0; ai < 3; ai++) {
            tables[t]->snake(y, x, T, as[ai], ibs[ai]);
            for (int i = 0; i < T; i++) {
                const double u = (double)((float)(x[i] * as[ai]));
                const double s = sin(u), r = x[i] + ibs[ai] * s * s;
                /* sin^2 within ~3 ulp (|u| < 8192) plus the rounding of the sum */
                const double tol = 8 * EPS32 * fabs(ibs[ai] * s * s) + 2 * EPS32 * fabs(r) + 1e-37;
                const double q = fabs(y[i] - r) / tol;
                if (!(q <= worst)) worst = q;
            }
            /* any chunking gives the same bits; in place too */
            for (int t0 = 0; t0 < T;) {
                const int n = 1 + (t0 * 7 + 3) % 29, t1 = t0 + n < T ? t0 + n : T;
                tables[t]->snake(y2 + t0, x + t0, t1 - t0, as[ai], ibs[ai]);
                t0 = t1;
            }
            chunk_ok &= memcmp(y, y2, sizeof y) == 0;
            memcpy(y2, x, sizeof x);
            tables[t]->snake(y2, y2, T, as[ai], ibs[ai]);
            inplace_ok &= memcmp(y, y2, sizeof y) == 0;
        }
        float nanx[3] = {NAN, INFINITY, 1.0f}, nany[3];
        tables[t]->snake(nany, nanx, 3, 1.0f, 1.0f);
        char name[64];
        snprintf(name, sizeof name, "snake_%s_vs_double", tables[t]->name);
        CHECK(name, worst <= 1.0 && isnan(nany[0]) && isnan(nany[1]) && isfinite(nany[2]), "error %.3g x tolerance", worst);
        snprintf(name, sizeof name, "snake_%s_chunked_in_place", tables[t]->name);
        CHECK(name, chunk_ok && inplace_ok, "chunked %s, in place %s", chunk_ok ? "ok" : "DIFF", inplace_ok ? "ok" : "DIFF");
    }
    /* the AVX-512 sin^2 is the AVX2 one, operation for operation: the same
     * bits, over the whole reduction range too (a = 1000: |a x| up to 4000,
     * and 3e6 for x[3], which takes sinf in both) */
    const ops_kernels *k2 = ops_kernels_by_name("avx2", NULL), *k5 = ops_kernels_by_name("avx512", NULL);
    if (k2 && k5) {
        const float as[4] = {1.0f, 3.7f, 0.21f, 1000.0f};
        int same = 1;
        for (int ai = 0; ai < 4; ai++) {
            k2->snake(y, x, T, as[ai], 0.5f);
            k5->snake(y2, x, T, as[ai], 0.5f);
            same &= memcmp(y, y2, sizeof y) == 0;
        }
        CHECK("snake_avx512_bits_eq_avx2", same, "the AVX-512 and AVX2 SnakeBeta differ");
    } else {
        test_skip("snake_avx512_bits_eq_avx2", "needs the AVX2 and AVX-512 tables");
    }
    /* ops_snake over channels with strides */
    ops_ctx c;
    ops_init(&c, 1, 0);
    float xs[3 * 10], ys[3 * 12], a[3] = {1.0f, 2.0f, 0.5f}, ib[3] = {1.0f, 0.3f, 2.0f};
    fill(xs, 30, 2.0f);
    for (int i = 0; i < 36; i++) ys[i] = 5.0f;
    ops_snake(&c, xs, 10, ys, 12, a, ib, 3, 9);
    int ok = 1;
    for (int ch = 0; ch < 3; ch++) {
        float one[9];
        c.k->snake(one, xs + ch * 10, 9, a[ch], ib[ch]);
        ok &= memcmp(one, ys + ch * 12, sizeof one) == 0 && ys[ch * 12 + 9] == 5.0f;
    }
    CHECK("ops_snake_channels", ok, "channel strides not honoured");
    ops_free(&c);
}

/* ------------------------------------------------------------ integer convolutions */

/* One integer conv format under test (int8: conv_q8.h, int16: conv_i16.h):
 * its weight form, levels, packed input and entries, behind one face, so
 * test_conv_int checks both the same way. */
typedef union int_w {
    conv_q8_w q8;
    conv_i16_w i16;
} int_w;

typedef struct int_fmt {
    const char *name; /* the checks' prefix: conv_<name>_... */
    int (*make)(int_w *w, const float *wf, const float *b, int cout, int cin, int k);
    void (*free_w)(int_w *w);
    const float *(*sw)(const int_w *w); /* [cout][k] weight scales */
    int (*qmax)(const int_w *w);        /* the largest level of a packed input */
    size_t (*scratch)(int cin, int t_in);
    void (*pack)(const ops_kernels *k, const float *x, int cin, int t_in, int xs, const int_w *w, void *scr);
    void (*conv)(const ops_ctx *c, const float *x, int cin, int t_in, int xs, const int_w *w, int d, float *y, int ys,
                 void *scr);
    int (*transposed)(const ops_ctx *c, const float *x, int cin, int t_in, const int_w *w, int cout, int k, int s,
                      int t0, int t1, float *y, int ys, float *fs, void *scr);
    double transposed_tol; /* of the largest |y| of the f32 transposed conv */
} int_fmt;

static int q8_make(int_w *w, const float *wf, const float *b, int cout, int cin, int k) {
    return conv_q8_w_make(&w->q8, wf, b, cout, cin, k);
}
static void q8_free(int_w *w) { conv_q8_w_free(&w->q8); }
static const float *q8_sw(const int_w *w) { return w->q8.sw; }
static int q8_qmax(const int_w *w) { return (void)w, 127; }
static size_t q8_scale_off(int cin, int t_in) { return ((size_t)((cin + 3) & ~3) * t_in + 63) & ~(size_t)63; }
static void q8_pack(const ops_kernels *k, const float *x, int cin, int t_in, int xs, const int_w *w, void *scr) {
    (void)w;
    k->conv_q8_pack(x, cin, t_in, xs, scr, t_in, (float *)((char *)scr + q8_scale_off(cin, t_in)));
}
static void q8_conv(const ops_ctx *c, const float *x, int cin, int t_in, int xs, const int_w *w, int d, float *y, int ys,
                    void *scr) {
    ops_conv1d_q8_ctx(c, x, cin, t_in, xs, &w->q8, d, y, ys, scr);
}
static int q8_transposed(const ops_ctx *c, const float *x, int cin, int t_in, const int_w *w, int cout, int k, int s,
                         int t0, int t1, float *y, int ys, float *fs, void *scr) {
    return ops_conv_transpose1d_q8_ctx(c, x, cin, t_in, t_in, &w->q8, cout, k, s, t0, t1, y, ys, fs, scr);
}

static int i16_make(int_w *w, const float *wf, const float *b, int cout, int cin, int k) {
    return conv_i16_w_make(&w->i16, wf, b, cout, cin, k);
}
static void i16_free(int_w *w) { conv_i16_w_free(&w->i16); }
static const float *i16_sw(const int_w *w) { return w->i16.sw; }
static int i16_qmax(const int_w *w) { return w->i16.qmax; }
static size_t i16_scale_off(int cin, int t_in) {
    return (sizeof(int16_t) * (size_t)((cin + 1) & ~1) * t_in + 63) & ~(size_t)63;
}
static void i16_pack(const ops_kernels *k, const float *x, int cin, int t_in, int xs, const int_w *w, void *scr) {
    k->conv_i16_pack(x, cin, t_in, xs, w->i16.qmax, scr, t_in, (float *)((char *)scr + i16_scale_off(cin, t_in)));
}
static void i16_conv(const ops_ctx *c, const float *x, int cin, int t_in, int xs, const int_w *w, int d, float *y,
                     int ys, void *scr) {
    ops_conv1d_i16_ctx(c, x, cin, t_in, xs, &w->i16, d, y, ys, scr);
}
static int i16_transposed(const ops_ctx *c, const float *x, int cin, int t_in, const int_w *w, int cout, int k, int s,
                          int t0, int t1, float *y, int ys, float *fs, void *scr) {
    return ops_conv_transpose1d_i16_ctx(c, x, cin, t_in, t_in, &w->i16, cout, k, s, t0, t1, y, ys, fs, scr);
}

static const int_fmt fmt_q8 = {"q8", q8_make, q8_free, q8_sw, q8_qmax, ops_conv_q8_scratch_bytes,
                               q8_pack, q8_conv, q8_transposed, 0.03};
/* 9880 levels at the transposed case's 22 channels: some 100x closer than int8's 3 % */
static const int_fmt fmt_i16 = {"i16", i16_make, i16_free, i16_sw, i16_qmax, ops_conv_i16_scratch_bytes,
                                i16_pack, i16_conv, i16_transposed, 3e-4};

static void int_conv_with(const int_fmt *f, const ops_ctx *c, const float *x, int cin, int t_in, int xs,
                          const int_w *w, int d, float *y, int ys) {
    void *scr = aligned_alloc(64, f->scratch(cin, t_in));
    f->conv(c, x, cin, t_in, xs, w, d, y, ys, scr);
    free(scr);
}

/* An integer conv1d on ragged shapes (input channels not a multiple of 4 or
 * 2, output channels leaving every tail of the 4 and 6 channel tiles, steps
 * not of the 4/8/16 vectors; taps 1, 2, 3, 7, dilations 1-9, zero columns,
 * an input over the drivers' 128 KiB time block, inputs int16 runs in time
 * pieces, whose chunked calls run whole): every table's (and on NEON
 * with sdot, the baseline int8 kernel's: neon-nodot) packed input, scales
 * and outputs bit-equal to the scalar reference's; the scalar result within
 * the quantisation bound of the exact f32 conv (per term |w| ex + |x| ew +
 * ex ew, ex and ew half a step of the step's and the channel's scale, plus
 * f32 rounding); 2 threads == 1; chunked calls == the whole call, sample for
 * sample. Then the worst case of the levels: 1536 input channels with every
 * |x| and |w| at its maximum, exact up to f32 rounding (int16: each integer
 * sum at 1536 qmax^2 = 2,146,033,664, just under 2^31; one level more, 1183,
 * would wrap it); and the transposed conv through its packed conv1d within
 * the format's tolerance of the f32 one, chunked == whole. */
static void test_conv_int(const int_fmt *f) {
    static const struct { int cin, cout, k, dil, t_in; } cs[] = {
        {4, 6, 7, 1, 30},   {5, 7, 7, 3, 61},     {3, 1, 1, 1, 9},   {13, 13, 2, 1, 40},  {96, 25, 7, 9, 300},
        {33, 12, 7, 1, 17}, {64, 18, 1, 1, 70},   {7, 5, 7, 2, 13},  {40, 11, 3, 1, 200}, {192, 24, 7, 3, 129},
        {192, 24, 1, 1, 129}, {6, 16, 2, 5, 44},  {17, 8, 3, 2, 23}, {1, 3, 2, 1, 19},
        /* three time blocks, the last short */
        {200, 9, 7, 3, 1500},
        /* int16's time pieces (conv_i16.c: spans up to 8 over more than two pieces of 64 steps): six
         * pieces, the last of 9 steps; span 8 (pieced), span 9 (not) */
        {30, 7, 2, 1, 330}, {24, 5, 3, 4, 300}, {24, 5, 2, 9, 300},
        /* the worst case of the levels (filled at +-max below) */
        {1536, 7, 1, 1, 27},
    };
    const int n_cases = (int)(sizeof cs / sizeof cs[0]);
    const ops_kernels *ref = ops_kernels_scalar();
    int bound_ok = 1, stream_ok = 1, thr_ok = 1, worst_ok = 1, make_ok = 1;
    char bwhere[96] = "", swhere[96] = "", twhere[96] = "", wwhere[96] = "";
    char name[64];
    /* every table, and the NEON one without sdot where it has sdot */
    const ops_kernels *tl[8];
    int ntl = 0, tab_ok[8];
    for (int t = 0; t < n_tables; t++) tl[ntl++] = tables[t];
    if (nodot.name) tl[ntl++] = &nodot;
    for (int t = 0; t < ntl; t++) tab_ok[t] = 1;
    for (int ci = 0; ci < n_cases; ci++) {
        const int cin = cs[ci].cin, cout = cs[ci].cout, k = cs[ci].k, d = cs[ci].dil, t_in = cs[ci].t_in;
        const int t_out = t_in - d * (k - 1), xs = t_in + 5, ys = t_out + 3, worst = ci == n_cases - 1;
        float *x = malloc(sizeof(float) * cin * xs), *wf = malloc(sizeof(float) * cout * cin * k);
        float *b = malloc(sizeof(float) * cout), *yr = malloc(sizeof(float) * cout * ys);
        float *y = malloc(sizeof(float) * cout * ys);
        fill(x, (size_t)cin * xs, 1.0f);
        fill(wf, (size_t)cout * cin * k, 1.0f);
        fill(b, cout, 0.5f);
        if (worst) { /* every |x| and |w| at its max: q = +-qmax; output o's signs agree (o even) or not */
            for (int i = 0; i < cin; i++)
                for (int tt = 0; tt < xs; tt++) x[(size_t)i * xs + tt] = (tt % 2 ? -1.0f : 1.0f) * (1.0f + (float)tt);
            for (int o = 0; o < cout; o++)
                for (int i = 0; i < cin; i++) wf[(size_t)o * cin + i] = (o % 2 && i % 3 == 0) ? -0.5f : 0.5f;
        } else {
            for (int i = 0; i < cin; i++) /* channels of different magnitude, and zero columns */
                for (int tt = 0; tt < xs; tt++) x[(size_t)i * xs + tt] *= (tt % 37 == 5) ? 0.0f : 0.1f + (float)(i % 5);
        }
        int_w w;
        /* made from a copy of b that is then overwritten: the form keeps its own bias (the codec
         * decoder gives back the transposed convs' packs the bias came from) */
        float *bsrc = malloc(sizeof(float) * cout);
        memcpy(bsrc, b, sizeof(float) * cout);
        if (!f->make(&w, wf, bsrc, cout, cin, k)) {
            make_ok = 0;
            free(x), free(wf), free(b), free(bsrc), free(yr), free(y);
            continue;
        }
        for (int o = 0; o < cout; o++) bsrc[o] = 1e6f;
        const ops_ctx cref = {.k = ref, .n_threads = 1};
        for (int i = 0; i < cout * ys; i++) yr[i] = 777.0f;
        int_conv_with(f, &cref, x, cin, t_in, xs, &w, d, yr, ys);
        /* the bound against the exact conv */
        float *sx = malloc(sizeof(float) * t_in);
        for (int tt = 0; tt < t_in; tt++) {
            float m = 0;
            for (int i = 0; i < cin; i++) m = fmaxf(m, fabsf(x[(size_t)i * xs + tt]));
            sx[tt] = m / (float)f->qmax(&w);
        }
        const float *sw = f->sw(&w);
        int case_ok = 1; /* every case is checked up to its first miss */
        for (int o = 0; o < cout && case_ok; o++)
            for (int tt = 0; tt < t_out; tt++) {
                double ex = 0, bnd = 0, sa = fabs(b[o]);
                for (int i = 0; i < cin; i++)
                    for (int tap = 0; tap < k; tap++) {
                        const double wv = wf[((size_t)o * cin + i) * k + tap], xv = x[(size_t)i * xs + tt + tap * d];
                        const double hx = sx[tt + tap * d] / 2, hw = sw[(size_t)o * k + tap] / 2;
                        ex += wv * xv;
                        sa += fabs(wv * xv);
                        bnd += fabs(wv) * hx + fabs(xv) * hw + hx * hw;
                    }
                ex += b[o];
                const double err = fabs(yr[(size_t)o * ys + tt] - ex);
                /* the worst case is exact up to f32 rounding: no level lost, no sum wrapped */
                if (worst && !(err <= 1e-5 * sa) && worst_ok) {
                    worst_ok = 0;
                    snprintf(wwhere, sizeof wwhere, "o %d t %d: %.7g against %.7g", o, tt, yr[(size_t)o * ys + tt], ex);
                }
                if (!(err <= bnd * 1.001 + 1e-5 * sa)) {
                    if (bound_ok)
                        snprintf(bwhere, sizeof bwhere, "case %d o %d t %d: err %.3g bound %.3g", ci, o, tt, err, bnd);
                    bound_ok = case_ok = 0;
                    break;
                }
            }
        free(sx);
        for (int o = 0; o < cout; o++)
            if (yr[(size_t)o * ys + t_out] != 777.0f) bound_ok = 0, snprintf(bwhere, sizeof bwhere, "wrote past t_out");
        /* every table: the same bits, of the outputs and of the packs alone */
        for (int t = 1; t < ntl; t++) {
            const ops_ctx ct = {.k = tl[t], .n_threads = 1};
            for (int i = 0; i < cout * ys; i++) y[i] = 777.0f;
            int_conv_with(f, &ct, x, cin, t_in, xs, &w, d, y, ys);
            if (memcmp(y, yr, sizeof(float) * cout * ys)) tab_ok[t] = 0;
            const size_t qb = f->scratch(cin, t_in);
            char *p1 = aligned_alloc(64, qb), *p2 = aligned_alloc(64, qb);
            memset(p1, 0, qb), memset(p2, 0, qb);
            f->pack(ref, x, cin, t_in, xs, &w, p1);
            f->pack(tl[t], x, cin, t_in, xs, &w, p2);
            if (memcmp(p1, p2, qb)) tab_ok[t] = 0;
            free(p1), free(p2);
        }
        /* 2 threads, and chunks of output steps, on the best table */
        ops_ctx c2;
        ops_init(&c2, 2, 0);
        for (int i = 0; i < cout * ys; i++) y[i] = 777.0f;
        const ops_ctx cbest = {.k = c2.k, .n_threads = 1};
        int_conv_with(f, &cbest, x, cin, t_in, xs, &w, d, yr, ys);
        int_conv_with(f, &c2, x, cin, t_in, xs, &w, d, y, ys);
        if (memcmp(y, yr, sizeof(float) * cout * ys)) thr_ok = 0, snprintf(twhere, sizeof twhere, "case %d", ci);
        static const int chunks[] = {1, 7, 3, 16, 2, 17, 33, 5};
        for (int t0 = 0, q = 0; t0 < t_out; q++) {
            const int n = chunks[q % 8] < t_out - t0 ? chunks[q % 8] : t_out - t0;
            int_conv_with(f, &c2, x + t0, cin, n + d * (k - 1), xs, &w, d, y + t0, ys);
            t0 += n;
        }
        if (memcmp(y, yr, sizeof(float) * cout * ys)) stream_ok = 0, snprintf(swhere, sizeof swhere, "case %d", ci);
        ops_free(&c2);
        f->free_w(&w);
        free(x), free(wf), free(b), free(bsrc), free(yr), free(y);
    }
#define INT_CHECK(what, ...)                                                                                           \
    snprintf(name, sizeof name, "conv_%s_%s", f->name, what);                                                          \
    CHECK(name, __VA_ARGS__)
    INT_CHECK("w_make", make_ok, "out of memory");
    INT_CHECK("scalar_within_quant_bound", bound_ok, "%s", bwhere);
    INT_CHECK("full_scale_exact", worst_ok, "%s", wwhere);
    for (int t = 1; t < ntl; t++) {
        char what[48];
        snprintf(what, sizeof what, "%s_bits_eq_scalar", tl[t]->name);
        INT_CHECK(what, tab_ok[t], "packed input or outputs differ from the scalar reference");
    }
    INT_CHECK("threads_bits_eq", thr_ok, "%s", twhere);
    INT_CHECK("chunked_eq_whole", stream_ok, "%s", swhere);

    /* transposed (the vocoder's: k = 2 stride) through the packed conv1d */
    {
        const int cin = 22, cout = 9, s = 5, k = 2 * s, t_in = 41;
        float *x = malloc(sizeof(float) * cin * t_in), *wt = malloc(sizeof(float) * cin * cout * k);
        float *b = malloc(sizeof(float) * cout);
        fill(x, (size_t)cin * t_in, 1.0f), fill(wt, (size_t)cin * cout * k, 1.0f), fill(b, cout, 0.5f);
        float *wc = ops_conv_transpose1d_pack_conv(wt, b, cin, cout, k, s);
        int_w q;
        const int made = f->make(&q, wc, wc + (size_t)s * cout * cin * (k / s), s * cout, cin, k / s);
        int ok = made;
        const int t0 = s, t1 = t_in * s, T = t1 - t0;
        float *yf = malloc(sizeof(float) * cout * T), *yq = malloc(sizeof(float) * cout * T);
        float *y2 = malloc(sizeof(float) * cout * T), *fs = malloc(sizeof(float) * s * cout * T);
        void *qs = aligned_alloc(64, f->scratch(cin, t_in + 2));
        ops_ctx c;
        ops_init(&c, 1, 0);
        ops_conv_transpose1d_ctx(&c, x, cin, t_in, t_in, wt, b, cout, k, s, 1, t0, t1, yf, T);
        ok = ok && f->transposed(&c, x, cin, t_in, &q, cout, k, s, t0, t1, yq, T, fs, qs);
        double worst = 0, amax = 0;
        for (int i = 0; ok && i < cout * T; i++) {
            if (fabs(yq[i] - yf[i]) > worst) worst = fabs(yq[i] - yf[i]);
            if (fabs(yf[i]) > amax) amax = fabs(yf[i]);
        }
        INT_CHECK("transposed_near_f32", ok && worst <= f->transposed_tol * amax, "max err %.3g of max |y| %.3g", worst,
                  amax);
        for (int u = t0, qq = 0; ok && u < t1; qq++) { /* chunks of whole input steps */
            const int n = ((qq % 3) + 1) * s < t1 - u ? ((qq % 3) + 1) * s : t1 - u;
            ok &= f->transposed(&c, x, cin, t_in, &q, cout, k, s, u, u + n, y2 + (u - t0), T, fs, qs);
            u += n;
        }
        INT_CHECK("transposed_chunked_eq_whole", ok && !memcmp(y2, yq, sizeof(float) * cout * T), "differs");
        ops_free(&c);
        if (made) f->free_w(&q);
        free(wc), free(x), free(wt), free(b), free(yf), free(yq), free(y2), free(fs), free(qs);
    }
#undef INT_CHECK
}

/* int16's levels (conv_i16.h): the largest q with cin2 q^2 within int32. */
static void test_conv_i16_qmax(void) {
    CHECK("conv_i16_qmax", conv_i16_qmax(1536) == 1182 && conv_i16_qmax(96) == 4729 && conv_i16_qmax(1) == 32767 &&
                                 conv_i16_qmax(1537) == conv_i16_qmax(1538) && conv_i16_qmax(0) == 0,
          "qmax(1536) %d, qmax(96) %d", conv_i16_qmax(1536), conv_i16_qmax(96));
}

/* ------------------------------------------------------------ bf16 convolutions */

/* The rounding to bf16 (conv_bf16.h): nearest, ties to even, |v| < 2^-56 to
 * 0, NaN stays NaN; each value checked against the nearest of the two bf16
 * neighbours computed in double. */
static void test_bf16_round(void) {
    int ok = 1;
    char where[96] = "";
    static const float special[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 0x1p-56f, 0x1.fffffep-57f,
                                    -0x1p-60f, 3.0e38f, 1e-30f, 0.0f};
    for (int i = 0; i < 20009 && ok; i++) {
        const float v = i < 9 ? special[i] : rnd() * ldexpf(1.0f, (i % 100) - 50);
        const uint16_t h = conv_bf16_round(v);
        uint32_t u = (uint32_t)h << 16, vu;
        float r;
        memcpy(&r, &u, 4), memcpy(&vu, &v, 4);
        double want;
        if (fabsf(v) < 0x1p-56f) want = 0.0;
        else {
            const uint32_t lo = vu & 0xffff0000u, hi = lo + 0x10000u;
            float fl, fh;
            memcpy(&fl, &lo, 4), memcpy(&fh, &hi, 4);
            const double dl = fabs((double)v - fl), dh = fabs((double)fh - v);
            want = dl < dh ? fl : dh < dl ? fh : ((lo >> 16) & 1) ? fh : fl;
        }
        if ((double)r != want) ok = 0, snprintf(where, sizeof where, "%a -> %a, want %a", v, r, want);
    }
    const float nan = NAN;
    uint32_t nu;
    const uint16_t nh = conv_bf16_round(nan);
    nu = (uint32_t)nh << 16;
    float nr;
    memcpy(&nr, &nu, 4);
    CHECK("bf16_round_nearest_even", ok && isnan(nr), "%s", ok ? "NaN not kept" : where);
}

/* The bf16 conv1d (conv_bf16.h) on the ragged shapes of test_conv_int, with
 * channels of very different magnitudes (some under 2^-56): every table's
 * packed input and outputs bit-equal to the scalar reference's; the scalar
 * result within the rounding bound of the exact f32 conv (per term |w x|
 * (2^-7 + 2^-16), both operands off by up to 2^-8 relative (bf16's unit
 * roundoff: 8 significant bits, round to nearest), plus f32
 * summation: (terms + 1) 2^-24 of sum |w x|); 2 threads == 1; chunked calls
 * == the whole call, sample for sample; the transposed conv through its
 * packed conv1d within the same bound, chunked == whole. */
static void conv_bf16_with(const ops_ctx *c, const float *x, int cin, int t_in, int xs, const conv_bf16_w *w, int d,
                           float *y, int ys) {
    void *scr = aligned_alloc(64, ops_conv_bf16_scratch_bytes(cin, t_in));
    ops_conv1d_bf16_ctx(c, x, cin, t_in, xs, w, d, y, ys, scr);
    free(scr);
}

static void test_conv_bf16(void) {
    static const struct { int cin, cout, k, dil, t_in; } cs[] = {
        {4, 6, 7, 1, 30},   {5, 7, 7, 3, 61},   {3, 1, 1, 1, 9},    {13, 13, 2, 1, 40},  {96, 25, 7, 9, 300},
        {33, 12, 7, 1, 17}, {64, 18, 1, 1, 70}, {7, 5, 7, 2, 13},   {40, 11, 3, 1, 200}, {192, 24, 7, 3, 129},
        {1, 3, 2, 1, 5},    {9, 31, 7, 1, 100}, {6, 16, 2, 5, 44},  {17, 8, 3, 2, 23},
    };
    const ops_kernels *ref = ops_kernels_scalar();
    int bound_ok = 1, stream_ok = 1, thr_ok = 1;
    char bwhere[96] = "", swhere[96] = "", twhere[96] = "";
    int tab_ok[8];
    for (int t = 0; t < n_tables; t++) tab_ok[t] = 1;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const int cin = cs[ci].cin, cout = cs[ci].cout, k = cs[ci].k, d = cs[ci].dil, t_in = cs[ci].t_in;
        const int t_out = t_in - d * (k - 1), xs = t_in + 5, ys = t_out + 3;
        float *x = malloc(sizeof(float) * cin * xs), *wf = malloc(sizeof(float) * cout * cin * k);
        float *b = malloc(sizeof(float) * cout), *yr = malloc(sizeof(float) * cout * ys);
        float *y = malloc(sizeof(float) * cout * ys);
        fill(x, (size_t)cin * xs, 1.0f);
        for (int i = 0; i < cin; i++) /* channels of different magnitude (1e-18 flushes to 0), zero columns */
            for (int tt = 0; tt < xs; tt++)
                x[(size_t)i * xs + tt] *= (tt % 37 == 5) ? 0.0f : i % 7 == 6 ? 1e-18f : 0.1f + (float)(i % 5);
        fill(wf, (size_t)cout * cin * k, 1.0f);
        fill(b, cout, 0.5f);
        conv_bf16_w w;
        /* made from a copy of b that is then overwritten: the form keeps its own bias (the codec
         * decoder gives back the transposed convs' packs the bias came from) */
        float *bsrc = malloc(sizeof(float) * cout);
        memcpy(bsrc, b, sizeof(float) * cout);
        CHECK("conv_bf16_w_make", conv_bf16_w_make(&w, wf, bsrc, cout, cin, k), "out of memory");
        for (int o = 0; o < cout; o++) bsrc[o] = 1e6f;
        const ops_ctx cref = {.k = ref, .n_threads = 1};
        for (int i = 0; i < cout * ys; i++) yr[i] = 777.0f;
        conv_bf16_with(&cref, x, cin, t_in, xs, &w, d, yr, ys);
        for (int o = 0; o < cout && bound_ok; o++)
            for (int tt = 0; tt < t_out; tt++) {
                double ex = b[o], sa = 0;
                for (int i = 0; i < cin; i++)
                    for (int tap = 0; tap < k; tap++) {
                        const double wv = wf[((size_t)o * cin + i) * k + tap], xv = x[(size_t)i * xs + tt + tap * d];
                        ex += wv * xv;
                        sa += fabs(wv * xv);
                    }
                const double bnd = sa * (0x1p-7 + 0x1p-16 + (cin * k + 1) * 0x1p-24) + fabs(ex) * 0x1p-24 + 1e-30;
                const double err = fabs(yr[(size_t)o * ys + tt] - ex);
                if (!(err <= bnd)) {
                    bound_ok = 0;
                    snprintf(bwhere, sizeof bwhere, "case %zu o %d t %d: err %.3g bound %.3g", ci, o, tt, err, bnd);
                    break;
                }
            }
        for (int o = 0; o < cout; o++)
            if (yr[(size_t)o * ys + t_out] != 777.0f) bound_ok = 0, snprintf(bwhere, sizeof bwhere, "wrote past t_out");
        for (int t = 1; t < n_tables; t++) {
            const ops_ctx ct = {.k = tables[t], .n_threads = 1};
            for (int i = 0; i < cout * ys; i++) y[i] = 777.0f;
            conv_bf16_with(&ct, x, cin, t_in, xs, &w, d, y, ys);
            if (memcmp(y, yr, sizeof(float) * cout * ys)) tab_ok[t] = 0;
            const size_t qb = ops_conv_bf16_scratch_bytes(cin, t_in);
            uint32_t *p1 = aligned_alloc(64, qb), *p2 = aligned_alloc(64, qb);
            memset(p1, 0, qb), memset(p2, 0, qb);
            ref->conv_bf16_pack(x, cin, t_in, xs, p1, t_in);
            tables[t]->conv_bf16_pack(x, cin, t_in, xs, p2, t_in);
            if (memcmp(p1, p2, qb)) tab_ok[t] = 0;
            free(p1), free(p2);
        }
        ops_ctx c2;
        ops_init(&c2, 2, 0);
        for (int i = 0; i < cout * ys; i++) y[i] = 777.0f;
        const ops_ctx cbest = {.k = c2.k, .n_threads = 1};
        conv_bf16_with(&cbest, x, cin, t_in, xs, &w, d, yr, ys);
        conv_bf16_with(&c2, x, cin, t_in, xs, &w, d, y, ys);
        if (memcmp(y, yr, sizeof(float) * cout * ys)) thr_ok = 0, snprintf(twhere, sizeof twhere, "case %zu", ci);
        static const int chunks[] = {1, 7, 3, 16, 2, 17, 33, 5};
        for (int t0 = 0, q = 0; t0 < t_out; q++) {
            const int n = chunks[q % 8] < t_out - t0 ? chunks[q % 8] : t_out - t0;
            conv_bf16_with(&c2, x + t0, cin, n + d * (k - 1), xs, &w, d, y + t0, ys);
            t0 += n;
        }
        if (memcmp(y, yr, sizeof(float) * cout * ys)) stream_ok = 0, snprintf(swhere, sizeof swhere, "case %zu", ci);
        ops_free(&c2);
        conv_bf16_w_free(&w);
        free(x), free(wf), free(b), free(bsrc), free(yr), free(y);
    }
    CHECK("conv_bf16_scalar_within_rounding_bound", bound_ok, "%s", bwhere);
    for (int t = 1; t < n_tables; t++) {
        char name[64];
        snprintf(name, sizeof name, "conv_bf16_%s_bits_eq_scalar", tables[t]->name);
        CHECK(name, tab_ok[t], "packed input or outputs differ from the scalar reference");
    }
    CHECK("conv_bf16_threads_bits_eq", thr_ok, "%s", twhere);
    CHECK("conv_bf16_chunked_eq_whole", stream_ok, "%s", swhere);

    /* transposed (the vocoder's: k = 2 stride) through the packed conv1d */
    {
        const int cin = 23, cout = 9, s = 5, k = 2 * s, t_in = 41;
        float *x = malloc(sizeof(float) * cin * t_in), *w = malloc(sizeof(float) * cin * cout * k);
        float *b = malloc(sizeof(float) * cout);
        fill(x, (size_t)cin * t_in, 1.0f), fill(w, (size_t)cin * cout * k, 1.0f), fill(b, cout, 0.5f);
        float *wc = ops_conv_transpose1d_pack_conv(w, b, cin, cout, k, s);
        conv_bf16_w q;
        conv_bf16_w_make(&q, wc, wc + (size_t)s * cout * cin * (k / s), s * cout, cin, k / s);
        const int t0 = s, t1 = t_in * s, T = t1 - t0;
        float *yf = malloc(sizeof(float) * cout * T), *yq = malloc(sizeof(float) * cout * T);
        float *y2 = malloc(sizeof(float) * cout * T), *fs = malloc(sizeof(float) * s * cout * T);
        void *qs = aligned_alloc(64, ops_conv_bf16_scratch_bytes(cin, t_in + 2));
        ops_ctx c;
        ops_init(&c, 1, 0);
        ops_conv_transpose1d_ctx(&c, x, cin, t_in, t_in, w, b, cout, k, s, 1, t0, t1, yf, T);
        int ok = ops_conv_transpose1d_bf16_ctx(&c, x, cin, t_in, t_in, &q, cout, k, s, t0, t1, yq, T, fs, qs);
        double worst = 0, amax = 0;
        for (int i = 0; i < cout * T; i++) {
            if (fabs(yq[i] - yf[i]) > worst) worst = fabs(yq[i] - yf[i]);
            if (fabs(yf[i]) > amax) amax = fabs(yf[i]);
        }
        /* 2 cin terms of |w x| <= 1 each: 46 (2^-7 + 2^-16 + 48 2^-24) */
        CHECK("conv_bf16_transposed_near_f32", ok && worst <= 46 * (0x1p-7 + 0x1p-16 + 48 * 0x1p-24) + 1e-6,
              "max err %.3g of max |y| %.3g", worst, amax);
        for (int u = t0, qq = 0; u < t1; qq++) {
            const int n = ((qq % 3) + 1) * s < t1 - u ? ((qq % 3) + 1) * s : t1 - u;
            ok &= ops_conv_transpose1d_bf16_ctx(&c, x, cin, t_in, t_in, &q, cout, k, s, u, u + n, y2 + (u - t0), T, fs,
                                                qs);
            u += n;
        }
        CHECK("conv_bf16_transposed_chunked_eq_whole", ok && !memcmp(y2, yq, sizeof(float) * cout * T), "differs");
        ops_free(&c);
        conv_bf16_w_free(&q);
        free(wc), free(x), free(w), free(b), free(yf), free(yq), free(y2), free(fs), free(qs);
    }
}

static void test_neon_compiles(void) {
#if defined(__aarch64__)
    test_skip("neon_cross_compile", "native aarch64 build: the NEON kernels are built and tested above");
    test_skip("neon_under_qemu", "native aarch64 build");
#else
    if (system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1") != 0) {
        test_skip("neon_cross_compile", "aarch64-linux-gnu-gcc not installed (apt-get install gcc-aarch64-linux-gnu)");
        test_skip("neon_under_qemu", "aarch64-linux-gnu-gcc not installed");
        return;
    }
    const char *d = test_dir();
    char cmd[4096];
    /* every file of the op layer except the x86 ones, warnings as errors */
    snprintf(cmd, sizeof cmd,
             "cd %s/.. && for f in $(ls src/backend/cpu/*.c | grep -v -e _avx2.c -e _avx512.c); do "
             "aarch64-linux-gnu-gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror "
             "-Iinclude -Isrc -c $f -o /dev/null || exit 1; done",
             d);
    CHECK("neon_cross_compile", system(cmd) == 0, "the aarch64 build of src/backend/cpu has errors or warnings");
    if (system("command -v qemu-aarch64 >/dev/null 2>&1") != 0 || system("test -d /usr/aarch64-linux-gnu") != 0) {
        test_skip("neon_under_qemu", "qemu-aarch64 not installed (apt-get install qemu-user)");
        return;
    }
    /* this test, built for aarch64 (NEON table), run under qemu: must pass */
    char dir[] = "/tmp/qtts_neon_XXXXXX";
    if (!mkdtemp(dir)) {
        test_skip("neon_under_qemu", "cannot create a temporary folder");
        return;
    }
    snprintf(cmd, sizeof cmd,
             "cd %s/.. && aarch64-linux-gnu-gcc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -Itests/common "
             "tests/unit/test_kernels.c tests/common/test.c src/util/dtype.c src/util/error.c src/util/huge_arena.c "
             "$(ls src/backend/cpu/*.c | grep -v -e _avx2.c -e _avx512.c) -lm -lpthread -o %s/t > %s/out.txt 2>&1 && "
             "QTTS_TEST_DIR=$PWD/tests qemu-aarch64 -L /usr/aarch64-linux-gnu %s/t > %s/out.txt 2>&1; "
             "rc=$?; grep -q '^ok matmul_neon_Q4_B32_vs_scalar' %s/out.txt && "
             "grep -q '^ok conv_q8_neon_bits_eq_scalar' %s/out.txt && "
             "grep -q '^ok conv_q8_neon-nodot_bits_eq_scalar' %s/out.txt && "
             "grep -q '^ok conv_bf16_neon_bits_eq_scalar' %s/out.txt && "
             "grep -q '^ok conv_i16_neon_bits_eq_scalar' %s/out.txt && "
             "grep -q '^ok snake_neon_vs_double' %s/out.txt && "
             "grep -q '^ok conv1d_neon_vs_scalar' %s/out.txt && "
             "grep -q '^ok conv_transpose1d_neon_as_conv1d' %s/out.txt && "
             "grep -q '^# [0-9]* passed, 0 failed' %s/out.txt && [ $rc -eq 0 ]",
             d, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir);
    const int ok = system(cmd) == 0;
    if (!ok) {
        snprintf(cmd, sizeof cmd, "grep -v '^ok ' %s/out.txt | head -20 | sed 's/^/# aarch64: /'", dir);
        if (system(cmd)) {
        }
    }
    CHECK("neon_under_qemu", ok, "test_kernels built for aarch64 failed under qemu-aarch64 (lines above)");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
#endif
}

/* ops_matmul_multi (q/k/v and gate/up of one input as one pool job): every
 * output has the bits of its own ops_matmul, for every format and table, 1-3
 * threads, per-matrix biases (one NULL), and the fallback for matrices that
 * do not share a format or width. */
static void test_matmul_multi(void) {
    enum { COLS = 300, N = 5 };
    static const int rows[3] = {131, 40, 17};
    float *X = malloc(sizeof(float) * N * COLS), *b = malloc(sizeof(float) * 131);
    fill(X, (size_t)N * COLS, 2.0f);
    fill(b, 131, 1.0f);
    const float *const bias[3] = {b, NULL, b};
    for (int t = 0; t < n_tables; t++)
        for (int which = 0; which < 8; which++) {
            mm_case c[3];
            int made = 0, ok = 1, mixed = which == 7;
            for (int i = 0; i < 3; i++) {
                /* which 7: F32, Q8 and BF16 (no shared preparation: one product each) */
                const int kind = mixed ? (i == 0 ? 0 : i == 1 ? 3 : 2) : which;
                made += make_case(&c[i], kind, rows[i], COLS);
            }
            if (made < 3) continue;
            if ((which == 3 || which == 5) && tables[t]->prefer_x16)
                for (int i = 0; i < 3; i++) {
                    qtts_error e;
                    if (qmat_pack_x16(&c[i].m, tables[t]->x16_q8_signed, &e)) ok = 0;
                }
            if (c[0].dp && !tables[t]->mm_bf16_dp) {
                for (int i = 0; i < 3; i++) free_case(&c[i]);
                continue;
            }
            float *Yr[3], *Y[3];
            for (int i = 0; i < 3; i++) {
                Yr[i] = malloc(sizeof(float) * N * rows[i]);
                Y[i] = malloc(sizeof(float) * (N * rows[i] + 1));
            }
            const qt_mat *const W[3] = {&c[0].m, &c[1].m, &c[2].m};
            for (int nt = 1; nt <= 3; nt++) {
                ops_ctx ctx;
                ops_init(&ctx, nt, 0);
                ctx.k = tables[t];
                if (c[0].dp) ops_set_bf16_dp(&ctx, 1);
                if (nt == 1)
                    for (int i = 0; i < 3; i++) ops_matmul(&ctx, W[i], X, N, bias[i], Yr[i]);
                for (int n = 1; n <= N; n += N - 1) {
                    for (int i = 0; i < 3; i++) {
                        for (int k = 0; k < n * rows[i]; k++) Y[i][k] = NAN; /* rows no task computed stay NaN */
                        Y[i][n * rows[i]] = 777.0f;
                    }
                    ops_matmul_multi(&ctx, 3, W, X, n, bias, Y);
                    for (int i = 0; i < 3; i++)
                        ok &= memcmp(Y[i], Yr[i], sizeof(float) * n * rows[i]) == 0 && Y[i][n * rows[i]] == 777.0f;
                    /* two of the three, no biases */
                    float *const Y2[2] = {Y[2], Y[0]};
                    const qt_mat *const W2[2] = {W[2], W[0]};
                    ops_matmul_multi(&ctx, 2, W2, X, n, NULL, Y2);
                    float *r = malloc(sizeof(float) * n * rows[0]);
                    ops_matmul(&ctx, W[0], X, n, NULL, r);
                    ok &= memcmp(Y[0], r, sizeof(float) * n * rows[0]) == 0;
                    ops_matmul(&ctx, W[2], X, n, NULL, r);
                    ok &= memcmp(Y[2], r, sizeof(float) * n * rows[2]) == 0;
                    free(r);
                }
                ops_free(&ctx);
            }
            char name[96];
            snprintf(name, sizeof name, "matmul_multi_%s_%s", tables[t]->name,
                     mixed                                ? "mixed"
                     : c[0].m.quant == QT_Q8_B32_X16  ? "Q8_B32_X16"
                     : c[0].m.quant == QT_Q8_B32_X16S ? "Q8_B32_X16S"
                     : c[0].m.quant == QT_Q4M_B32_X16 ? "Q4M_B32_X16"
                                                      : c[0].name);
            CHECK(name, ok, "a product of the shared job differs from its own ops_matmul");
            for (int i = 0; i < 3; i++) {
                free(Yr[i]);
                free(Y[i]);
                free_case(&c[i]);
            }
        }
    free(X);
    free(b);
}

/* ops_matmul_swiglu: H and U have the bits of the two ops_matmul then the
 * table's swiglu, every table and format, 1-3 threads, and for a gate and an up
 * of different formats (the fallback); gate and up of different heights give
 * NaN. */
static void test_matmul_swiglu(void) {
    enum { ROWS = 131, COLS = 300, N = 5 };
    float *X = malloc(sizeof(float) * N * COLS);
    fill(X, (size_t)N * COLS, 2.0f);
    float *H = malloc(sizeof(float) * N * ROWS), *U = malloc(sizeof(float) * N * ROWS);
    float *Hr = malloc(sizeof(float) * N * ROWS), *Ur = malloc(sizeof(float) * N * ROWS);
    for (int t = 0; t < n_tables; t++)
        for (int which = 0; which < 9; which++) {
            const int mixed = which == 7, uneven = which == 8;
            mm_case g, u;
            if (!make_case(&g, mixed || uneven ? 3 : which, ROWS, COLS)) continue;
            if (!make_case(&u, mixed ? 0 : uneven ? 3 : which, uneven ? ROWS - 16 : ROWS, COLS)) {
                free_case(&g);
                continue;
            }
            if (g.dp && !tables[t]->mm_bf16_dp) {
                free_case(&g);
                free_case(&u);
                continue;
            }
            int ok = 1;
            const int x16 = (which == 3 || which == 5) && tables[t]->prefer_x16; /* as the model stores them */
            if (x16) {
                qtts_error e;
                ok &= qmat_pack_x16(&g.m, tables[t]->x16_q8_signed, &e) == QTTS_OK &&
                      qmat_pack_x16(&u.m, tables[t]->x16_q8_signed, &e) == QTTS_OK;
            }
            for (int nt = 1; nt <= 3; nt++) {
                ops_ctx ctx;
                ops_init(&ctx, nt, 0);
                ctx.k = tables[t];
                if (g.dp) ops_set_bf16_dp(&ctx, 1);
                for (int n = 1; n <= N; n += N - 1) {
                    for (int k = 0; k < N * ROWS; k++) H[k] = U[k] = NAN; /* rows no task computed stay NaN */
                    ops_matmul_swiglu(&ctx, &g.m, &u.m, X, n, H, U);
                    if (uneven) {
                        ok &= isnan(H[0]) && isnan(H[n * ROWS - 1]) && isnan(U[0]) && isnan(U[n * u.m.rows - 1]);
                        continue;
                    }
                    ops_matmul(&ctx, &g.m, X, n, NULL, Hr);
                    ops_matmul(&ctx, &u.m, X, n, NULL, Ur);
                    tables[t]->swiglu(Hr, Ur, n * ROWS);
                    ok &= memcmp(H, Hr, sizeof(float) * n * ROWS) == 0 && memcmp(U, Ur, sizeof(float) * n * ROWS) == 0;
                }
                ops_free(&ctx);
            }
            char name[96];
            snprintf(name, sizeof name, "matmul_swiglu_%s_%s%s", tables[t]->name,
                     mixed ? "mixed" : uneven ? "uneven_nan" : g.name,
                     !x16 ? "" : g.m.quant == QT_Q8_B32_X16S ? "_X16S" : "_X16");
            CHECK(name, ok, uneven ? "gate and up of different heights did not give NaN"
                                   : "the fused SwiGLU differs from two products and the table's swiglu");
            free_case(&g);
            free_case(&u);
        }
    free(X);
    free(H);
    free(U);
    free(Hr);
    free(Ur);
}

/* The row tasks of a product job cover every row whatever the heights and
 * the thread count: products of 1, 2 and 3 matrices and the SwiGLU pair,
 * outputs poisoned with NaN first, against one thread. (A row no task
 * computes keeps whatever the buffer held, which a reused buffer can hide.) */
static void test_mm_tasks(void) {
    enum { COLS = 40, N = 3 };
    static const int heights[] = {1, 15, 16, 17, 31, 32, 33, 48, 63, 100, 131, 257, 1000, 3072};
    const int nh = (int)(sizeof heights / sizeof heights[0]);
    float *X = malloc(sizeof(float) * N * COLS), *w = malloc(sizeof(float) * 3072 * COLS);
    float *Y[3], *R[3], *U = malloc(sizeof(float) * N * 3072), *UR = malloc(sizeof(float) * N * 3072);
    fill(X, (size_t)N * COLS, 1.0f);
    fill(w, (size_t)3072 * COLS, 1.0f);
    for (int i = 0; i < 3; i++) {
        Y[i] = malloc(sizeof(float) * N * 3072);
        R[i] = malloc(sizeof(float) * N * 3072);
    }
    ops_ctx one;
    ops_init(&one, 1, 0);
    int bad = 0, cases = 0;
    for (int nt = 2; nt <= 5; nt++) {
        ops_ctx ctx;
        ops_init(&ctx, nt, 0);
        for (int a = 0; a < nh; a++) {
            const int hs[3] = {heights[a], heights[(a + 5) % nh], heights[(a + 9) % nh]};
            qt_mat m[3];
            for (int i = 0; i < 3; i++) m[i] = (qt_mat){.rows = hs[i], .cols = COLS, .dtype = DT_F32, .data = w};
            const qt_mat *const W[3] = {&m[0], &m[1], &m[2]};
            for (int i = 0; i < 3; i++) ops_matmul(&one, W[i], X, N, NULL, R[i]);
            for (int nw = 1; nw <= 3; nw++) {
                for (int i = 0; i < 3; i++)
                    for (int k = 0; k < N * hs[i]; k++) Y[i][k] = NAN;
                ops_matmul_multi(&ctx, nw, W, X, N, NULL, Y);
                for (int i = 0; i < nw; i++) bad += memcmp(Y[i], R[i], sizeof(float) * N * hs[i]) != 0;
                cases++;
            }
            /* the SwiGLU pair: gate and up of the same height */
            for (int k = 0; k < N * hs[0]; k++) Y[0][k] = U[k] = NAN;
            ops_matmul_swiglu(&ctx, W[0], W[0], X, N, Y[0], U);
            memcpy(UR, R[0], sizeof(float) * N * hs[0]);
            float *HR = R[1];
            memcpy(HR, R[0], sizeof(float) * N * hs[0]);
            ops_swiglu_ctx(&ctx, HR, UR, N * hs[0]);
            bad += memcmp(U, R[0], sizeof(float) * N * hs[0]) != 0 || memcmp(Y[0], HR, sizeof(float) * N * hs[0]) != 0;
            cases++;
        }
        ops_free(&ctx);
    }
    CHECK("mm_tasks_cover_every_row", bad == 0, "%d of %d products differ from one thread (or left rows NaN)", bad,
          cases);
    ops_free(&one);
    for (int i = 0; i < 3; i++) {
        free(Y[i]);
        free(R[i]);
    }
    free(U);
    free(UR);
    free(X);
    free(w);
}

/* QTTS_KERNEL_TESTS=a,b,...: run only these groups (main's names, without
 * "test_"); unset or empty runs them all. The AVX-512 run under Bochs
 * (tests/emu) uses it to stay within its time. */
static int want(const char *group) {
    const char *l = getenv("QTTS_KERNEL_TESTS");
    if (!l || !*l) return 1;
    const size_t n = strlen(group);
    for (const char *p = l; (p = strstr(p, group)) != NULL; p += n)
        if ((p == l || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

int main(void) {
    find_tables();
    if (want("mm_tasks")) test_mm_tasks();
    if (want("matmul_float")) test_matmul_float();
    if (want("quantize")) test_quantize();
    if (want("matmul_quant")) test_matmul_quant();
    if (want("matmul_x16")) test_matmul_x16(QT_Q8_B32, 0);
    if (want("matmul_x16")) test_matmul_x16(QT_Q8_B32, 1);
    if (want("matmul_x16")) test_matmul_x16(QT_Q4M_B32, 0);
    if (want("bf16_dp")) test_bf16_dp();
    if (want("contract")) test_contract();
    if (want("matmul_multi")) test_matmul_multi();
    if (want("matmul_swiglu")) test_matmul_swiglu();
    if (want("pool")) test_pool();
    if (want("pool_async")) test_pool_async();
    if (want("dot_axpy")) test_dot_axpy();
    if (want("attn_head")) test_attn_head();
    if (want("attn_head_fused")) test_attn_head_fused();
    if (want("conv1d_kernels")) test_conv1d_kernels();
    if (want("conv1d_streaming")) test_conv1d_streaming();
    if (want("conv_transpose_kernels")) test_conv_transpose_kernels();
    if (want("conv_transpose_streaming")) test_conv_transpose_streaming();
    if (want("conv_time_split")) test_conv_time_split();
    if (want("snake")) test_snake();
    if (want("swiglu")) test_swiglu();
    if (want("elu")) test_elu();
    if (want("conv_int")) test_conv_int(&fmt_q8);
    if (want("conv_i16_qmax")) test_conv_i16_qmax();
    if (want("conv_int")) test_conv_int(&fmt_i16);
    if (want("bf16_round")) test_bf16_round();
    if (want("conv_bf16")) test_conv_bf16();
    if (want("neon_compiles")) test_neon_compiles();
    return test_finish();
}
