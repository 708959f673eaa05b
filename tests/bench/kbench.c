/* Kernel micro-benchmark (x86; not a test: no assertion, not run by
 * `make test`). Build and run from the repository root:
 *   make kbench && build/kbench [threads]       (default 2)
 * Prints, for this machine:
 *  - memory read bandwidth: summing a 1 GiB buffer with AVX-512/AVX2 loads on
 *    1 and on `threads` threads (the pool of the op layer);
 *  - matvec throughput (GB/s of weights read) for a 0.6B talker layer's
 *    matrices [3072,1024], [1024,3072], [2048,1024] in BF16, Q8_B32, Q4_B32
 *    for every kernel table, n = 1 and n = 4, cycling through enough copies
 *    (~1 GiB) that nothing is cache resident;
 *  - a talker-like decode step: 28 layers x 7 matmuls at n = 1;
 *  - thread-pool dispatch overhead per call (empty job) and per small matmul;
 *  - conv1d K 7 / K 1 and an f32 GEMM in GMAC/s (codec decoder shapes), and
 *    the K 7 conv in the codec formats bf16 and q8 (conv_bf16.h, conv_q8.h);
 *  - the codec decoder's residual-unit convs in int8, bf16 and f32 at the
 *    shapes of a 4-frame chunk, one thread;
 *  - the decoder's convs that its q8 format keeps in f32 (decoder.0 and the
 *    transposed convs, run as the decoder runs them) at the same shapes;
 *  - SnakeBeta at the same shapes, as the decoder calls it and again on one
 *    L1-resident row: what fusing it into the next conv's input packing
 *    could save at most (the memory pass; its arithmetic stays).
 * Method: one warm-up pass, then REPS measured passes; median (min, max). */
#include <immintrin.h>
#include <math.h>
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
#include "util/clock.h"

#define REPS 7

static double now_s(void) { return now_ms() * 1e-3; }

static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stat3 {
    double med, lo, hi;
} stat3;

static stat3 stats(double *v, int n) {
    qsort(v, n, sizeof *v, cmpd);
    stat3 s = {v[n / 2], v[0], v[n - 1]};
    return s;
}

static uint64_t rng = 88172645463325252ull;
static float rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ------------------------------------------------------------ bandwidth */

typedef struct bw_job {
    const float *buf;
    size_t n;
    double sums[64];
} bw_job;

__attribute__((target("avx512f"))) static double sum512(const float *p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) static double sum256(const float *p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

static void bw_task(void *arg, int t, int nt) {
    bw_job *j = arg;
    const size_t per = j->n / nt / 64 * 64;
    const float *p = j->buf + per * t;
    j->sums[t] = ops_cpu_features()->avx512 ? sum512(p, per) : sum256(p, per);
}

static double bandwidth(threadpool *pool, int nt, const float *buf, size_t n) {
    bw_job j = {buf, n, {0}};
    double v[REPS];
    threadpool_run(pool, bw_task, &j, nt);
    for (int r = 0; r < REPS; r++) {
        const double t0 = now_s();
        threadpool_run(pool, bw_task, &j, nt);
        v[r] = n * 4.0 / (now_s() - t0) / 1e9;
    }
    stat3 s = stats(v, REPS);
    printf("  read bandwidth, %d thread%s: %6.1f GB/s (min %.1f, max %.1f)\n", nt, nt > 1 ? "s" : " ", s.med, s.lo, s.hi);
    return s.med;
}

/* ------------------------------------------------------------ matvec */

typedef struct wset {
    qt_mat *m;
    int copies;
    size_t bytes; /* per copy: weights (+ scales) */
} wset;

static void make_set(wset *s, int rows, int cols, int quant, size_t total_bytes) {
    qt_mat base = {0};
    uint16_t *d = aligned_alloc(64, (size_t)rows * cols * 2);
    for (size_t i = 0; i < (size_t)rows * cols; i++) d[i] = f32_to_bf16(0.05f * rnd());
    base.data = d;
    base.dtype = DT_BF16;
    base.rows = rows;
    base.cols = cols;
    size_t per = (size_t)rows * cols * 2;
    if (quant) {
        qt_mat q;
        qmat_quantize(&base, quant, &q, NULL);
        per = qmat_row_bytes(&q) * rows + (size_t)rows * (qt_kpad(cols) / 32) * 2 * (quant == QT_Q4M_B32 ? 2 : 1);
        qmat_free(&q);
    }
    s->copies = (int)(total_bytes / per) + 1;
    s->bytes = per;
    s->m = calloc(s->copies, sizeof(qt_mat));
    for (int c = 0; c < s->copies; c++) {
        if (quant) {
            qmat_quantize(&base, quant, &s->m[c], NULL);
        } else {
            uint16_t *cp = aligned_alloc(64, (size_t)rows * cols * 2);
            memcpy(cp, d, (size_t)rows * cols * 2);
            s->m[c] = base;
            s->m[c].data = cp;
        }
    }
    free(d);
}

static void free_set(wset *s, int quant) {
    for (int c = 0; c < s->copies; c++) {
        if (quant) qmat_free(&s->m[c]);
        else free((void *)s->m[c].data);
    }
    free(s->m);
}

static stat3 run_set(const ops_ctx *ctx, const wset *s, int n, const float *X, float *Y, int max_calls) {
    int calls = s->copies < max_calls ? s->copies : max_calls;
    double v[REPS];
    for (int c = 0; c < calls; c++) ops_matmul(ctx, &s->m[c], X, n, NULL, Y);
    for (int r = 0; r < REPS; r++) {
        const double t0 = now_s();
        for (int c = 0; c < calls; c++) ops_matmul(ctx, &s->m[c], X, n, NULL, Y);
        v[r] = s->bytes * (double)calls / (now_s() - t0) / 1e9;
    }
    return stats(v, REPS);
}

static void bench_matvec(int threads) {
    static const int shapes[3][2] = {{3072, 1024}, {1024, 3072}, {2048, 1024}};
    static const int quants[3] = {0, QT_Q8_B32, QT_Q4_B32};
    static const char *qn[3] = {"BF16", "Q8_B32", "Q4_B32"};
    static const char *isas[3] = {"scalar", "avx2", "avx512"};
    float *X = malloc(sizeof(float) * 4 * 3072), *Y = malloc(sizeof(float) * 4 * 3072);
    for (int i = 0; i < 4 * 3072; i++) X[i] = rnd();
    printf("\nmatvec: GB/s of weights read (incl. scales), median of %d passes over ~1 GiB of copies (min-max)\n", REPS);
    printf("  %-8s %-12s %-6s %3s  %-22s %-22s\n", "format", "shape", "isa", "thr", "n=1", "n=4");
    for (int qi = 0; qi < 3; qi++)
        for (int s = 0; s < 3; s++) {
            wset set;
            make_set(&set, shapes[s][0], shapes[s][1], quants[qi], (size_t)1 << 30);
            for (int ii = 0; ii < 3; ii++) {
                const ops_kernels *k = ops_kernels_by_name(isas[ii], NULL);
                if (!k) continue;
                for (int nt = 1; nt <= threads; nt += threads - 1 > 0 ? threads - 1 : 1) {
                    ops_ctx ctx;
                    ops_init(&ctx, nt, 0);
                    ctx.k = k;
                    /* the scalar reference is slow: fewer calls per pass */
                    const int maxc = ii == 0 ? 24 : 1 << 20;
                    stat3 a = run_set(&ctx, &set, 1, X, Y, maxc), b = run_set(&ctx, &set, 4, X, Y, maxc);
                    char sh[32];
                    snprintf(sh, sizeof sh, "[%d,%d]", shapes[s][0], shapes[s][1]);
                    printf("  %-8s %-12s %-6s %3d  %5.1f (%5.1f-%5.1f)    %5.1f (%5.1f-%5.1f)\n", qn[qi], sh, isas[ii], nt,
                           a.med, a.lo, a.hi, b.med, b.lo, b.hi);
                    ops_free(&ctx);
                    if (threads == 1) break;
                }
            }
            free_set(&set, quants[qi]);
        }
    free(X);
    free(Y);
}

/* 28 layers x (q, k, v, o, gate, up, down) of the 0.6B talker at n = 1. */
static void bench_step(int threads) {
    enum { L = 28 };
    static const int sh[7][2] = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048}, {3072, 1024}, {3072, 1024}, {1024, 3072}};
    static const int quants[3] = {0, QT_Q8_B32, QT_Q4_B32};
    static const char *qn[3] = {"BF16", "Q8_B32", "Q4_B32"};
    float *X = malloc(sizeof(float) * 3072), *Y = malloc(sizeof(float) * 3072);
    for (int i = 0; i < 3072; i++) X[i] = rnd();
    printf("\ntalker-like step (28 layers x 7 matmuls, n = 1, 196 calls), median of %d steps\n", REPS);
    for (int qi = 0; qi < 3; qi++) {
        qt_mat *m = calloc(L * 7, sizeof(qt_mat));
        double bytes = 0;
        for (int l = 0; l < L; l++)
            for (int j = 0; j < 7; j++) {
                wset s1;
                make_set(&s1, sh[j][0], sh[j][1], quants[qi], 0);
                m[l * 7 + j] = s1.m[0];
                bytes += s1.bytes;
                free(s1.m);
            }
        for (int nt = 1; nt <= threads; nt++) {
            if (nt != 1 && nt != threads) continue;
            ops_ctx ctx;
            ops_init(&ctx, nt, 0);
            double v[REPS];
            for (int j = 0; j < L * 7; j++) ops_matmul(&ctx, &m[j], X, 1, NULL, Y);
            for (int r = 0; r < REPS; r++) {
                const double t0 = now_s();
                for (int j = 0; j < L * 7; j++) ops_matmul(&ctx, &m[j], X, 1, NULL, Y);
                v[r] = now_s() - t0;
            }
            stat3 s = stats(v, REPS);
            printf("  %-7s %s %d thr: %6.2f ms/step (min %.2f max %.2f), %5.1f GB/s, %.0f MB/step\n", qn[qi], ctx.k->name,
                   nt, s.med * 1e3, s.lo * 1e3, s.hi * 1e3, bytes / s.med / 1e9, bytes / 1e6);
            ops_free(&ctx);
        }
        for (int j = 0; j < L * 7; j++) {
            if (quants[qi]) qmat_free(&m[j]);
            else free((void *)m[j].data);
        }
        free(m);
    }
    free(X);
    free(Y);
}

/* ------------------------------------------------------------ dispatch */

static void empty_task(void *arg, int t, int nt) {
    (void)arg;
    (void)t;
    (void)nt;
}

static void bench_dispatch(int threads) {
    if (threads < 2) return;
    threadpool *p = threadpool_create(threads);
    const int calls = 200000;
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        const double t0 = now_s();
        for (int c = 0; c < calls; c++) threadpool_run(p, empty_task, NULL, threads);
        v[r] = (now_s() - t0) / calls * 1e9;
    }
    stat3 s = stats(v, REPS);
    printf("\nthread pool, %d threads: empty job %.0f ns per dispatch (min %.0f, max %.0f), %d calls x %d reps\n", threads,
           s.med, s.lo, s.hi, calls, REPS);
    threadpool_destroy(p);
    /* a decode-size matmul [1024, 1024] BF16 (2 MiB, cache resident) on 1 vs threads */
    qt_mat w = {0};
    uint16_t *d = aligned_alloc(64, 1024 * 1024 * 2);
    for (int i = 0; i < 1024 * 1024; i++) d[i] = f32_to_bf16(rnd());
    w.data = d;
    w.dtype = DT_BF16;
    w.rows = w.cols = 1024;
    float X[1024], Y[1024];
    for (int i = 0; i < 1024; i++) X[i] = rnd();
    for (int nt = 1; nt <= threads; nt += threads - 1) {
        ops_ctx ctx;
        ops_init(&ctx, nt, 0);
        for (int r = 0; r < REPS; r++) {
            const double t0 = now_s();
            for (int c = 0; c < 2000; c++) ops_matmul(&ctx, &w, X, 1, NULL, Y);
            v[r] = (now_s() - t0) / 2000 * 1e6;
        }
        s = stats(v, REPS);
        printf("  [1024,1024] BF16 n=1 (L2-resident) %s %d thr: %.1f us per call (min %.1f max %.1f)\n", ctx.k->name, nt,
               s.med, s.lo, s.hi);
        ops_free(&ctx);
    }
    free(d);
}

/* ------------------------------------------------------------ conv / gemm */

static void bench_conv(int threads) {
    static const char *isas[3] = {"scalar", "avx2", "avx512"};
    const int C = 384, T = 2000, K = 7;
    float *x = malloc(sizeof(float) * C * (T + 6)), *w = malloc(sizeof(float) * C * C * K), *b = malloc(sizeof(float) * C);
    float *y = malloc(sizeof(float) * C * T);
    for (size_t i = 0; i < (size_t)C * (T + 6); i++) x[i] = rnd();
    for (size_t i = 0; i < (size_t)C * C * K; i++) w[i] = rnd() * 0.05f;
    for (int i = 0; i < C; i++) b[i] = rnd();
    /* GEMM: codec ConvNeXt pwconv1 [4096, 1024] F32 at n = 200 */
    const int GR = 4096, GC = 1024, GN = 200;
    float *gw = malloc(sizeof(float) * GR * GC), *gx = malloc(sizeof(float) * GN * GC), *gy = malloc(sizeof(float) * GN * GR);
    for (size_t i = 0; i < (size_t)GR * GC; i++) gw[i] = rnd();
    for (size_t i = 0; i < (size_t)GN * GC; i++) gx[i] = rnd();
    qt_mat gm = {.data = gw, .dtype = DT_F32, .rows = GR, .cols = GC};
    conv_bf16_w wh;
    conv_q8_w wq;
    if (!conv_bf16_w_make(&wh, w, b, C, C, K) || !conv_q8_w_make(&wq, w, b, C, C, K)) return;
    const size_t sb = ops_conv_bf16_scratch_bytes(C, T + 6), sq = ops_conv_q8_scratch_bytes(C, T + 6);
    void *scr = aligned_alloc(64, sb > sq ? sb : sq);
    printf("\nconv / GEMM (GMAC/s, median of %d)\n", REPS);
    for (int ii = 0; ii < 3; ii++) {
        const ops_kernels *k = ops_kernels_by_name(isas[ii], NULL);
        if (!k) continue;
        for (int nt = 1; nt <= threads; nt += threads > 1 ? threads - 1 : 1) {
            ops_ctx ctx;
            ops_init(&ctx, nt, 0);
            ctx.k = k;
            const int reps = ii == 0 ? 3 : REPS;
            double v[REPS], v1[REPS], vg[REPS], vh[REPS], vq[REPS];
            for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                ops_conv1d_ctx(&ctx, x, C, T + 6, T + 6, w, b, C, K, 1, 1, 1, y, T);
                v[r] = (double)C * C * K * T / (now_s() - t0) / 1e9;
                t0 = now_s();
                ops_conv1d_ctx(&ctx, x, C, T, T + 6, w, b, C, 1, 1, 1, 1, y, T);
                v1[r] = (double)C * C * T / (now_s() - t0) / 1e9;
                t0 = now_s();
                ops_matmul(&ctx, &gm, gx, GN, NULL, gy);
                vg[r] = (double)GR * GC * GN / (now_s() - t0) / 1e9;
                t0 = now_s();
                ops_conv1d_bf16_ctx(&ctx, x, C, T + 6, T + 6, &wh, 1, y, T, scr);
                vh[r] = (double)C * C * K * T / (now_s() - t0) / 1e9;
                t0 = now_s();
                ops_conv1d_q8_ctx(&ctx, x, C, T + 6, T + 6, &wq, 1, y, T, scr);
                vq[r] = (double)C * C * K * T / (now_s() - t0) / 1e9;
            }
            stat3 a = stats(v, reps), c1 = stats(v1, reps), g = stats(vg, reps), h = stats(vh, reps),
                  q = stats(vq, reps);
            printf("  %-6s %d thr: conv1d C%d K7 T%d %6.1f   conv1d K1 %6.1f   GEMM f32 [%d,%d] n=%d %6.1f   "
                   "K7 bf16 %6.1f   K7 q8 %6.1f\n",
                   k->name, nt, C, T, a.med, c1.med, GR, GC, GN, g.med, h.med, q.med);
            ops_free(&ctx);
            if (threads == 1) break;
        }
    }
    free(x);
    free(w);
    free(b);
    free(y);
    free(gw);
    free(gx);
    free(gy);
    free(scr);
    conv_bf16_w_free(&wh);
    conv_q8_w_free(&wq);
}

/* The vocoder blocks' output channels, steps and upsampling rates in a
 * 4-frame chunk of the 12 Hz decoder (the shapes of the tables below). */
static const int codec_C[4] = {768, 384, 192, 96}, codec_T[4] = {128, 640, 2560, 7680}, codec_R[4] = {8, 5, 4, 3};

/* The codec decoder's residual-unit convs in its int8 and bf16 formats at the
 * shapes of a 4-frame chunk of the 12 Hz decoder (per block: channels x
 * steps), one thread, each with its input packing, dilations 1, 3, 9 (K 7)
 * and K 1: where the decoder's conv time goes against the instruction peaks. */
static void bench_codec_shapes(void) {
    ops_ctx ctx;
    ops_init(&ctx, 1, 0);
    printf("\ncodec residual-unit convs, 4-frame chunk shapes, 1 thread, %s (GMAC/s, median of %d)\n", ctx.k->name, REPS);
    for (int sh = 0; sh < 4; sh++)
        for (int K = 7; K >= 1; K -= 6)
            for (int dil = 1; dil <= (K == 7 ? 9 : 1); dil *= 3) {
                const int C = codec_C[sh], T = codec_T[sh], H = dil * (K - 1);
                float *x = malloc(sizeof(float) * C * (T + H)), *w = malloc(sizeof(float) * C * C * K);
                float *b = malloc(sizeof(float) * C), *y = malloc(sizeof(float) * C * T);
                conv_bf16_w wh;
                conv_q8_w wq;
                const size_t sb = ops_conv_bf16_scratch_bytes(C, T + H), sq = ops_conv_q8_scratch_bytes(C, T + H);
                void *scr = aligned_alloc(64, ((sb > sq ? sb : sq) + 63) / 64 * 64);
                memset(&wh, 0, sizeof wh);
                memset(&wq, 0, sizeof wq);
                if (x && w && b) {
                    for (size_t i = 0; i < (size_t)C * (T + H); i++) x[i] = rnd();
                    for (size_t i = 0; i < (size_t)C * C * K; i++) w[i] = rnd() * 0.05f;
                    for (int i = 0; i < C; i++) b[i] = rnd();
                }
                if (!x || !w || !b || !y || !scr || !conv_bf16_w_make(&wh, w, b, C, C, K) ||
                    !conv_q8_w_make(&wq, w, b, C, C, K)) {
                    printf("  C %3d T %4d K %d d %d: out of memory\n", C, T, K, dil);
                    free(x), free(w), free(b), free(y), free(scr);
                    conv_bf16_w_free(&wh);
                    conv_q8_w_free(&wq);
                    continue;
                }
                const double macs = (double)C * C * K * T;
                double vq[REPS], vh[REPS], vf[REPS];
                ops_conv1d_q8_ctx(&ctx, x, C, T + H, T + H, &wq, dil, y, T, scr); /* warm-up */
                ops_conv1d_bf16_ctx(&ctx, x, C, T + H, T + H, &wh, dil, y, T, scr);
                ops_conv1d_ctx(&ctx, x, C, T + H, T + H, w, b, C, K, 1, dil, 1, y, T);
                for (int r = 0; r < REPS; r++) {
                    double t0 = now_s();
                    ops_conv1d_q8_ctx(&ctx, x, C, T + H, T + H, &wq, dil, y, T, scr);
                    vq[r] = macs / (now_s() - t0) / 1e9;
                    t0 = now_s();
                    ops_conv1d_bf16_ctx(&ctx, x, C, T + H, T + H, &wh, dil, y, T, scr);
                    vh[r] = macs / (now_s() - t0) / 1e9;
                    t0 = now_s();
                    ops_conv1d_ctx(&ctx, x, C, T + H, T + H, w, b, C, K, 1, dil, 1, y, T);
                    vf[r] = macs / (now_s() - t0) / 1e9;
                }
                const stat3 q = stats(vq, REPS), h = stats(vh, REPS), f = stats(vf, REPS);
                printf("  C %3d T %4d K %d d %d (%5.1f M MAC): int8 %6.1f (%.3f ms)   bf16 %6.1f (%.3f ms)   f32 %6.1f "
                       "(%.3f ms)\n",
                       C, T, K, dil, macs / 1e6, q.med, macs / q.med / 1e6, h.med, macs / h.med / 1e6, f.med,
                       macs / f.med / 1e6);
                free(x), free(w), free(b), free(y), free(scr);
                conv_bf16_w_free(&wh);
                conv_q8_w_free(&wq);
            }
    ops_free(&ctx);
}

/* The convs the q8 format keeps out of int8 (decoder.0, the transposed convs
 * as their packed K 2 conv1d, the residual units' 1x1 convs), at the shapes
 * of a 4-frame chunk: f32 against int16 (input packing included). */
static void bench_codec_f32_shapes(void) {
    ops_ctx ctx;
    ops_init(&ctx, 1, 0);
    printf("\ncodec convs q8 keeps out of int8, 4-frame chunk shapes, 1 thread, %s (GMAC/s, median of %d)\n",
           ctx.k->name, REPS);
    for (int sh = -1; sh < 8; sh++) {
        /* -1 decoder.0, 0-3 transposed, 4-7 the 1x1 convs after them */
        const int tr = sh >= 0 && sh < 4, k1 = sh >= 4, st = k1 ? sh - 4 : sh;
        /* a transposed conv: block st's input (2C channels, T / rate steps) to C; a 1x1: C to C over T */
        const int cin = tr ? 2 * codec_C[st] : k1 ? codec_C[st] : 1024, cout = tr || k1 ? codec_C[st] : 1536;
        const int r = tr ? codec_R[st] : 1, T = tr ? codec_T[st] / codec_R[st] : k1 ? codec_T[st] : 16;
        const int K = tr ? 2 * r : k1 ? 1 : 7;
        const int tin = tr ? T + 1 : T + K - 1;
        float *x = malloc(sizeof(float) * cin * tin), *w = malloc(sizeof(float) * cin * cout * K);
        float *b = malloc(sizeof(float) * cout), *y = malloc(sizeof(float) * cout * T * r);
        float *scr = malloc(sizeof(float) * cout * T * r), *wc = NULL;
        void *qs = aligned_alloc(64, ops_conv_i16_scratch_bytes(cin, tin + 2));
        conv_i16_w q = {0};
        int qok = 0;
        if (x && w && b) {
            for (size_t i = 0; i < (size_t)cin * tin; i++) x[i] = rnd();
            for (size_t i = 0; i < (size_t)cin * cout * K; i++) w[i] = rnd() * 0.05f;
            for (int i = 0; i < cout; i++) b[i] = rnd();
            if (tr) wc = ops_conv_transpose1d_pack_conv(w, b, cin, cout, K, r);
            if (tr && wc) qok = conv_i16_w_make(&q, wc, wc + (size_t)r * cout * cin * 2, r * cout, cin, 2);
            else if (!tr) qok = conv_i16_w_make(&q, w, b, cout, cin, K);
        }
        if (!x || !w || !b || !y || !scr || !qs || !qok) {
            printf("  out of memory\n");
        } else {
            const double macs = (double)cin * cout * K * T;
            double v[2][REPS];
            for (int rep = -1; rep < REPS; rep++)
                for (int f = 0; f < 2; f++) {
                    const double t0 = now_s();
                    const int t1 = r + T * r;
                    if (tr && !f) ops_conv_transpose1d_conv_ctx(&ctx, x, cin, tin, tin, wc, cout, K, r, r, t1, y, T * r, scr);
                    else if (tr) ops_conv_transpose1d_i16_ctx(&ctx, x, cin, tin, tin, &q, cout, K, r, r, t1, y, T * r, scr, qs);
                    else if (!f) ops_conv1d_ctx(&ctx, x, cin, tin, tin, w, b, cout, K, 1, 1, 1, y, T);
                    else ops_conv1d_i16_ctx(&ctx, x, cin, tin, tin, &q, 1, y, T, qs);
                    if (rep >= 0) v[f][rep] = macs / (now_s() - t0) / 1e9;
                }
            const stat3 s = stats(v[0], REPS), si = stats(v[1], REPS);
            if (tr) printf("  transposed %4d -> %3d r %d T %4d", cin, cout, r, T);
            else if (k1) printf("  1x1        %4d -> %3d     T %4d", cin, cout, T);
            else printf("  decoder.0  %4d -> %4d K 7 T %3d", cin, cout, T);
            printf(" (%5.1f M MAC): f32 %6.1f (%.3f ms), int16 %6.1f (%.3f ms)\n", macs / 1e6, s.med,
                   macs / s.med / 1e6, si.med, macs / si.med / 1e6);
        }
        conv_i16_w_free(&q);
        free(x), free(w), free(b), free(y), free(scr), free(wc), free(qs);
    }
    ops_free(&ctx);
}

/* SnakeBeta at the shapes of a 4-frame chunk, one thread: each vocoder
 * block's six residual-unit activations (C x T) and the block's input
 * activation (2C x T / rate), as the decoder calls ops_snake (out of place
 * into a history-strided buffer), against the same element count run from
 * one 2048-float row into another, both staying in L1 (the arithmetic
 * alone; the input row is never overwritten, so every call sees |a x| in
 * the decoder's range, under the kernels' 8192 limit). The difference is
 * the memory pass that fusing SnakeBeta into the next conv's packing would
 * remove. */
static void bench_codec_snake(void) {
    enum { ROW = 2048 };
    ops_ctx ctx;
    ops_init(&ctx, 1, 0);
    printf("\ncodec SnakeBeta, 4-frame chunk shapes, 1 thread, %s (G elements/s, median of %d)\n", ctx.k->name, REPS);
    double tot_mem = 0.0, tot_l1 = 0.0;
    for (int sh = 0; sh < 5; sh++) {
        /* 0-3: a block's residual units (hist 54 for the widest dilation);
         * 4: the final activation before the last conv (96 x 7680) */
        const int C = codec_C[sh < 4 ? sh : 3], T = codec_T[sh < 4 ? sh : 3], H = 54;
        const int n_calls = sh < 4 ? 6 : 1; /* 3 residual units x 2 activations */
        float *x = malloc(sizeof(float) * C * T), *y = malloc(sizeof(float) * C * (T + H));
        float *a = malloc(sizeof(float) * C), *ib = malloc(sizeof(float) * C), *row = malloc(sizeof(float) * ROW);
        float *rout = malloc(sizeof(float) * ROW);
        if (!x || !y || !a || !ib || !row || !rout) {
            printf("  out of memory\n");
            free(x), free(y), free(a), free(ib), free(row), free(rout);
            continue;
        }
        for (size_t i = 0; i < (size_t)C * T; i++) x[i] = 3.0f * rnd();
        for (int i = 0; i < C; i++) a[i] = 1.0f + 0.5f * rnd(), ib[i] = 1.0f + 0.5f * rnd();
        for (int i = 0; i < ROW; i++) row[i] = 3.0f * rnd();
        const double elems = (double)C * T;
        const int row_calls = (int)(elems / ROW + 0.5);
        double vm[REPS], vl[REPS];
        for (int rep = -1; rep < REPS; rep++) {
            double t0 = now_s();
            ops_snake(&ctx, x, T, y + H, T + H, a, ib, C, T);
            const double dm = now_s() - t0;
            t0 = now_s();
            for (int i = 0; i < row_calls; i++) ops_snake(&ctx, row, ROW, rout, ROW, a + (i % C), ib + (i % C), 1, ROW);
            const double dl = now_s() - t0;
            if (rep >= 0) vm[rep] = elems / dm / 1e9, vl[rep] = (double)row_calls * ROW / dl / 1e9;
        }
        const stat3 m = stats(vm, REPS), l = stats(vl, REPS);
        const double ms_m = elems / m.med / 1e6, ms_l = elems / l.med / 1e6;
        /* a 4-frame chunk's calls at this rate: the six, plus the block's
         * input activation (2C channels at T / rate steps) as a fraction */
        double calls = n_calls;
        if (sh < 4) calls += (double)(2 * C) * (T / codec_R[sh]) / elems;
        tot_mem += calls * ms_m, tot_l1 += calls * ms_l;
        printf("  C %3d T %4d (%6.3f M): decoder's call %5.2f G/s (%.3f ms), L1 row %5.2f G/s (%.3f ms), x %.2f calls\n",
               C, T, elems / 1e6, m.med, ms_m, l.med, ms_l, calls);
        free(x), free(y), free(a), free(ib), free(row), free(rout);
    }
    printf("  a frame (chunk / 4): %.3f ms as called, %.3f ms arithmetic alone; memory pass %.3f ms\n", tot_mem / 4,
           tot_l1 / 4, (tot_mem - tot_l1) / 4);
    ops_free(&ctx);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2 && !strcmp(argv[2], "codec")) { /* the codec decoder's tables alone */
        bench_codec_shapes();
        bench_codec_f32_shapes();
        bench_codec_snake();
        return 0;
    }
    const ops_cpu *c = ops_cpu_features();
    printf("kbench: cpu avx2 %d avx512 %d vnni %d bf16 %d; threads %d; default table %s\n", c->avx2, c->avx512,
           c->avx512_vnni, c->avx512_bf16, threads, ops_kernels_best()->name);
    const size_t n = ((size_t)1 << 30) / 4;
    float *buf = aligned_alloc(64, n * 4);
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 1023);
    threadpool *pool = threadpool_create(threads > 1 ? threads : 2);
    printf("memory (1 GiB buffer, sum of floats):\n");
    bandwidth(pool, 1, buf, n);
    if (threads > 1) bandwidth(pool, threads, buf, n);
    threadpool_destroy(pool);
    free(buf);
    bench_dispatch(threads);
    bench_step(threads);
    bench_matvec(threads);
    bench_conv(threads);
    bench_codec_shapes();
    bench_codec_f32_shapes();
    bench_codec_snake();
    return 0;
}
