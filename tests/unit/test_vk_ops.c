/* Unit test of the Vulkan generation-step shaders (src/backend/vulkan/
 * shaders: rmsnorm, qk_rope, attention, swiglu, embed_f32, embed_bf16,
 * logits_talker, sample, advance) against the scalar CPU reference
 * (ops_rmsnorm, ops_rope_angles + ops_rope_neox_cs, ops_attn_head,
 * ops_swiglu, logits_repetition_penalty, sample_token) on seeded random data
 * with ragged sizes, offsets, several rows and both position sources.
 * Tolerances (f32, unit roundoff u = 2^-24 = 6e-8):
 *  - rmsnorm, qk_rope: max|gpu - cpu| <= 1e-5 max|cpu|: both reduce the sum
 *    of squares in a tree (error ~ log2(H) u < 1e-6) and differ only in
 *    order, plus a few ulp for sqrt, division and the rotation's products;
 *  - attention: max|gpu - ref| <= 2e-5 A, ref in f64, A = max over the
 *    outputs of sum_t p_t |v_t| (the size of the terms being summed; the
 *    output itself can be much smaller by cancellation): f32 sums over up to
 *    2500 positions have error ~ sqrt(np) u A in practice; the CPU is held
 *    to the same bound;
 *  - swiglu: |gpu - cpu| <= 2e-5 |cpu| per element (Vulkan's exp is allowed
 *    3 + 2|x| ulp, |x| <= 8 here);
 *  - qk_rope and attention over several streams in one dispatch (rows,
 *    cache_stride): bit for bit what each stream's own dispatch gives;
 *  - embed, advance, sample's greedy pick and state writes: exact;
 *    logits_talker: exact except penalised values (4e-7 relative: Vulkan
 *    allows 2.5 ulp for a division);
 *  - sampling: the kept set is sample_token's own (the entries it leaves
 *    finite); every draw must be in it, and given the draw u (the shader's
 *    hash, repeated here) the pick must equal the f64 inverse-CDF pick over
 *    the CPU's kept probabilities except where u * sum lies within 1e-4 sum
 *    of a boundary (f32 exp and sums); frequencies within 5 sigma.
 * Needs a Vulkan device (lavapipe in CI); skips when there is none. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "model/sampling.h"
#include "test.h"

#ifdef QTTS_HAVE_VULKAN
#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_kernels.h"

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

static vk_kernel *kern(gpu *g, const char *name) {
    vk_kernel *k = NULL;
    if (!g->bad && vk_kernel_get(g->d, name, NULL, 0, &k, &g->e) != QTTS_OK) g->bad = 1;
    return k;
}

static void begin(gpu *g) {
    if (!g->bad && vk_cmd_begin(g->c, &g->e) != QTTS_OK) g->bad = 1;
}

static void finish(gpu *g) {
    if (g->bad) return;
    if (vk_cmd_end(g->c, &g->e) != QTTS_OK || vk_cmd_submit(g->c, &g->e) != QTTS_OK ||
        vk_cmd_wait(g->c, &g->e) != QTTS_OK)
        g->bad = 1;
}

/* one dispatch, recorded, submitted and waited for */
static void run1(gpu *g, const char *name, const vk_binding *b, int nb, const void *pc, size_t pcb, uint32_t gx,
                 uint32_t gy) {
    vk_kernel *k = kern(g, name);
    begin(g);
    if (!g->bad) vk_cmd_dispatch(g->c, k, b, nb, pc, pcb, gx, gy, 1);
    finish(g);
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *max_ref) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = fabs((double)a[i] - b[i]);
        if (!(x <= d)) d = x; /* NaN -> NaN */
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    *max_ref = m;
    return d;
}

/* ------------------------------------------------------------ rmsnorm */

static void test_rmsnorm(gpu *g) {
    const int Hs[] = {1, 7, 64, 100, 1024, 2048};
    double worst = 0;
    int ok = 1;
    char why[256] = "";
    for (int hi = 0; hi < 6; hi++)
        for (int n = 1; n <= 3; n += 2)
            for (int inplace = 0; inplace < 2; inplace++) {
                const int H = Hs[hi], xo = 5, yo = inplace ? xo : 3, go = 2;
                const size_t nx = (size_t)xo + (size_t)n * H + 4;
                float *x = malloc(sizeof(float) * nx), *gw = malloc(sizeof(float) * (H + go));
                float *ref = malloc(sizeof(float) * (size_t)n * H), *out = malloc(sizeof(float) * nx);
                fill(x, nx, 2.0f);
                for (int j = 0; j < H; j++) x[xo + j] *= 50.0f; /* a row of another scale */
                fill(gw, H + go, 1.5f);
                const float eps = 1e-6f;
                for (int i = 0; i < n; i++) ops_rmsnorm(ref + (size_t)i * H, x + xo + (size_t)i * H, gw + go, H, eps);
                vk_buf bx = mk(g, x, sizeof(float) * nx), bg = mk(g, gw, sizeof(float) * (H + go));
                vk_buf by = inplace ? bx : mk(g, NULL, sizeof(float) * nx);
                vk_pc_rmsnorm pc = {(uint32_t)H, (uint32_t)n, xo, yo, go, eps, 0};
                vk_binding b[3] = {{&bx, 0, 0}, {&bg, 0, 0}, {&by, 0, 0}};
                run1(g, "rmsnorm", b, 3, &pc, sizeof pc, n, 1);
                get(g, &by, out, sizeof(float) * nx);
                if (!g->bad) {
                    double m;
                    const double d = max_abs_diff(out + yo, ref, (size_t)n * H, &m) / m;
                    if (d > worst) worst = d;
                    if (!(d <= 1e-5) && ok) {
                        ok = 0;
                        snprintf(why, sizeof why, "H=%d n=%d inplace=%d: rel err %.3g > 1e-5", H, n, inplace, d);
                    }
                }
                vk_buf_free(g->d, &bx);
                vk_buf_free(g->d, &bg);
                if (!inplace) vk_buf_free(g->d, &by);
                free(x);
                free(gw);
                free(ref);
                free(out);
            }
    if (g->bad) test_report("vk_rmsnorm", 0, "runtime: %s", g->e.msg);
    else test_report("vk_rmsnorm", ok, "%s", why);
    printf("  rmsnorm: max rel err %.3g (tolerance 1e-5)\n", worst);
}

/* ------------------------------------------------------------ qk_rope */

static void test_qk_rope(gpu *g) {
    const int cfg[][3] = {{8, 4, 2}, {16, 16, 8}, {128, 16, 8}}; /* hd, nh, nkv */
    double worst = 0;
    int ok = 1;
    char why[256] = "";
    for (int ci = 0; ci < 3; ci++)
        for (int n = 1; n <= 3; n += 2)
            for (int ps = 0; ps < 2; ps++) {
                const int hd = cfg[ci][0], nh = cfg[ci][1], nkv = cfg[ci][2];
                const int qd = nh * hd, kvd = nkv * hd, P = 64, p0 = ps ? 11 : 37;
                const int qo = 3, ko = 1, vo = 2, qno = 4, kno = 4 + hd + 1, co = 7;
                const float eps = 1e-6f;
                float *q = malloc(sizeof(float) * (qo + n * qd)), *k = malloc(sizeof(float) * (ko + n * kvd));
                float *v = malloc(sizeof(float) * (vo + n * kvd)), *w = malloc(sizeof(float) * (kno + hd));
                float *rope = malloc(sizeof(float) * P * hd), *inv = malloc(sizeof(float) * hd / 2);
                const size_t ncache = (size_t)co + (size_t)P * kvd;
                float *kc = malloc(sizeof(float) * ncache), *vc = malloc(sizeof(float) * ncache);
                float *rq = malloc(sizeof(float) * (qo + n * qd)), *rk = malloc(sizeof(float) * (ko + n * kvd));
                float *rkc = malloc(sizeof(float) * ncache), *rvc = malloc(sizeof(float) * ncache);
                fill(q, qo + n * qd, 3.0f);
                fill(k, ko + n * kvd, 3.0f);
                fill(v, vo + n * kvd, 1.0f);
                fill(w, kno + hd, 1.5f);
                for (int i = 0; i < hd / 2; i++) inv[i] = powf(1000000.0f, -2.0f * i / hd);
                for (int p = 0; p < P; p++) ops_rope_angles(rope + (size_t)p * hd, hd, p, inv);
                for (size_t i = 0; i < ncache; i++) kc[i] = vc[i] = -777.0f;
                uint32_t st[VK_ST_WORDS] = {0};
                st[VK_ST_POS] = 11;
                memcpy(rq, q, sizeof(float) * (qo + n * qd));
                memcpy(rk, k, sizeof(float) * (ko + n * kvd));
                memcpy(rkc, kc, sizeof(float) * ncache);
                memcpy(rvc, vc, sizeof(float) * ncache);
                for (int i = 0; i < n; i++) {
                    const int p = p0 + i;
                    float *qi = rq + qo + i * qd, *ki = rk + ko + i * kvd;
                    for (int h = 0; h < nh; h++) {
                        ops_rmsnorm(qi + h * hd, qi + h * hd, w + qno, hd, eps);
                        ops_rope_neox_cs(qi + h * hd, hd, rope + (size_t)p * hd);
                    }
                    for (int h = 0; h < nkv; h++) {
                        ops_rmsnorm(ki + h * hd, ki + h * hd, w + kno, hd, eps);
                        ops_rope_neox_cs(ki + h * hd, hd, rope + (size_t)p * hd);
                    }
                    memcpy(rkc + co + (size_t)p * kvd, ki, sizeof(float) * kvd);
                    memcpy(rvc + co + (size_t)p * kvd, v + vo + i * kvd, sizeof(float) * kvd);
                }
                vk_buf bq = mk(g, q, sizeof(float) * (qo + n * qd)), bk = mk(g, k, sizeof(float) * (ko + n * kvd));
                vk_buf bv = mk(g, v, sizeof(float) * (vo + n * kvd)), bw = mk(g, w, sizeof(float) * (kno + hd));
                vk_buf br = mk(g, rope, sizeof(float) * P * hd), bkc = mk(g, kc, sizeof(float) * ncache);
                vk_buf bvc = mk(g, vc, sizeof(float) * ncache), bst = mk(g, st, sizeof st);
                vk_pc_qk_rope pc = {(uint32_t)n, nh, nkv, hd, ps ? 999u : (uint32_t)p0, (uint32_t)ps, co, qno,
                                    kno, qo, ko, vo, eps, 0, 0};
                vk_binding b[8] = {{&bq, 0, 0}, {&bk, 0, 0}, {&bv, 0, 0}, {&bw, 0, 0},
                                   {&br, 0, 0}, {&bkc, 0, 0}, {&bvc, 0, 0}, {&bst, 0, 0}};
                run1(g, "qk_rope", b, 8, &pc, sizeof pc, n, 1);
                get(g, &bq, q, sizeof(float) * (qo + n * qd));
                get(g, &bk, k, sizeof(float) * (ko + n * kvd));
                get(g, &bkc, kc, sizeof(float) * ncache);
                get(g, &bvc, vc, sizeof(float) * ncache);
                if (!g->bad) {
                    double m1, m2, m3;
                    const double d1 = max_abs_diff(q, rq, qo + n * qd, &m1) / m1;
                    const double d2 = max_abs_diff(k, rk, ko + n * kvd, &m2) / m2;
                    const double d3 = max_abs_diff(kc, rkc, ncache, &m3) / 3.0; /* m3 is the sentinel */
                    double d4 = 0;
                    for (size_t i = 0; i < ncache; i++)
                        if (vc[i] != rvc[i]) d4 = 1;
                    const double d = fmax(fmax(d1, d2), d3);
                    if (d > worst) worst = d;
                    if ((!(d <= 1e-5) || d4 != 0) && ok) {
                        ok = 0;
                        snprintf(why, sizeof why,
                                 "hd=%d nh=%d nkv=%d n=%d pos_state=%d: q %.3g k %.3g kc %.3g (tol 1e-5) vc %s", hd, nh,
                                 nkv, n, ps, d1, d2, d3, d4 ? "differs" : "exact");
                    }
                }
                vk_buf *bufs[] = {&bq, &bk, &bv, &bw, &br, &bkc, &bvc, &bst};
                for (int i = 0; i < 8; i++) vk_buf_free(g->d, bufs[i]);
                free(q), free(k), free(v), free(w), free(rope), free(inv), free(kc), free(vc);
                free(rq), free(rk), free(rkc), free(rvc);
            }
    if (g->bad) test_report("vk_qk_rope", 0, "runtime: %s", g->e.msg);
    else test_report("vk_qk_rope", ok, "%s", why);
    printf("  qk_rope: max rel err %.3g (tolerance 1e-5; v copy exact, other cache positions untouched)\n", worst);
}

/* ------------------------------------------------------------ attention */

static void test_attention(gpu *g) {
    /* hd, nh, nkv, positions of row 0 (p0 + 1), rows, pos_state */
    const int cases[][6] = {{8, 4, 2, 1, 1, 0},       {16, 4, 2, 5, 3, 1},    {128, 16, 8, 300, 3, 0},
                            {128, 16, 8, 2500, 1, 1}, {16, 16, 8, 2500, 3, 0}, {8, 4, 2, 300, 3, 1},
                            {128, 4, 2, 129, 3, 1},   {16, 16, 8, 1, 3, 1}};
    ops_ctx cpu;
    ops_init(&cpu, 1, 1);
    double worst = 0, worst_cpu = 0;
    int ok = 1;
    char why[256] = "";
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int hd = cases[ci][0], nh = cases[ci][1], nkv = cases[ci][2], p0 = cases[ci][3] - 1;
        const int n = cases[ci][4], ps = cases[ci][5];
        const int qd = nh * hd, kvd = nkv * hd, P = p0 + n, qo = 3, oo = 2;
        const int co = ci % 2 ? 5 : 8; /* unaligned and 16-byte aligned cache rows (scalar and vec4 K reads) */
        const float scale = 1.0f / sqrtf((float)hd);
        const size_t ncache = (size_t)co + (size_t)P * kvd;
        float *q = malloc(sizeof(float) * (qo + n * qd)), *kc = malloc(sizeof(float) * ncache);
        float *vc = malloc(sizeof(float) * ncache), *out = malloc(sizeof(float) * (oo + n * qd));
        float *ref = malloc(sizeof(float) * n * qd), *scores = malloc(sizeof(float) * P);
        double *pr = malloc(sizeof(double) * P);
        fill(q, qo + n * qd, 3.0f);
        fill(kc, ncache, 1.0f);
        fill(vc, ncache, 1.0f);
        uint32_t st[VK_ST_WORDS] = {0};
        st[VK_ST_POS] = (uint32_t)p0;
        vk_buf bq = mk(g, q, sizeof(float) * (qo + n * qd)), bkc = mk(g, kc, sizeof(float) * ncache);
        vk_buf bvc = mk(g, vc, sizeof(float) * ncache), bo = mk(g, NULL, sizeof(float) * (oo + n * qd));
        vk_buf bst = mk(g, st, sizeof st);
        vk_pc_attention pc = {(uint32_t)n, nh, nkv, hd, ps ? 12345u : (uint32_t)p0, (uint32_t)ps, co, qo, oo, scale,
                              0, 0};
        vk_binding b[5] = {{&bq, 0, 0}, {&bkc, 0, 0}, {&bvc, 0, 0}, {&bo, 0, 0}, {&bst, 0, 0}};
        run1(g, "attention", b, 5, &pc, sizeof pc, nh, n);
        get(g, &bo, out, sizeof(float) * (oo + n * qd));
        double err = 0, err_cpu = 0;
        for (int i = 0; i < n && !g->bad; i++)
            for (int h = 0; h < nh; h++) {
                const int np = p0 + i + 1, kvh = h / (nh / nkv);
                const float *qh = q + qo + i * qd + h * hd;
                const float *K = kc + co + kvh * hd, *V = vc + co + kvh * hd;
                ops_attn_head(&cpu, qh, K, V, kvd, np, hd, scale, scores, ref + i * qd + h * hd);
                double mx = -INFINITY, sum = 0;
                for (int t = 0; t < np; t++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += (double)qh[d] * K[(size_t)t * kvd + d];
                    pr[t] = s * scale;
                    if (pr[t] > mx) mx = pr[t];
                }
                for (int t = 0; t < np; t++) sum += pr[t] = exp(pr[t] - mx);
                for (int d = 0; d < hd; d++) {
                    double o = 0, a = 0;
                    for (int t = 0; t < np; t++) {
                        o += pr[t] / sum * V[(size_t)t * kvd + d];
                        a += pr[t] / sum * fabs(V[(size_t)t * kvd + d]);
                    }
                    const double eg = fabs(out[oo + i * qd + h * hd + d] - o) / a;
                    const double ec = fabs(ref[i * qd + h * hd + d] - o) / a;
                    if (!(eg <= err)) err = eg;
                    if (ec > err_cpu) err_cpu = ec;
                }
            }
        if (err > worst) worst = err;
        if (err_cpu > worst_cpu) worst_cpu = err_cpu;
        if ((!(err <= 2e-5) || !(err_cpu <= 2e-5)) && ok && !g->bad) {
            ok = 0;
            snprintf(why, sizeof why, "hd=%d nh=%d nkv=%d np=%d n=%d pos_state=%d: gpu err %.3g cpu err %.3g (tol 2e-5)",
                     hd, nh, nkv, p0 + 1, n, ps, err, err_cpu);
        }
        vk_buf *bufs[] = {&bq, &bkc, &bvc, &bo, &bst};
        for (int i = 0; i < 5; i++) vk_buf_free(g->d, bufs[i]);
        free(q), free(kc), free(vc), free(out), free(ref), free(scores), free(pr);
    }
    ops_free(&cpu);
    if (g->bad) test_report("vk_attention", 0, "runtime: %s", g->e.msg);
    else test_report("vk_attention", ok, "%s", why);
    printf("  attention: max err %.3g of sum p|v| vs f64 (tolerance 2e-5; CPU ops_attn_head: %.3g)\n", worst,
           worst_cpu);
}

/* ------------------------------------------------------------ streams */

/* qk_rope then attention over ns streams of `rows` rows whose caches share
 * one buffer pair (stream j's at co + j * stride): one dispatch each must
 * give, bit for bit, what one dispatch per stream (rows 0, its own
 * cache_off) gives. */
static void test_stream_dim(gpu *g) {
    /* hd, nh, nkv, rows, stride pad (0: 16-byte aligned regions) */
    const int cases[][5] = {{16, 4, 2, 2, 3}, {128, 16, 8, 1, 0}, {8, 4, 2, 2, 0}};
    int ok = 1;
    char why[160] = "";
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int hd = cases[ci][0], nh = cases[ci][1], nkv = cases[ci][2], rows = cases[ci][3], ns = 3;
        const int qd = nh * hd, kvd = nkv * hd, P = 20, p0 = 7, co = 4, n = ns * rows;
        const uint32_t stride = (uint32_t)(P * kvd + cases[ci][4]);
        const size_t ncache = (size_t)co + (size_t)ns * stride, nq = (size_t)n * qd, nk = (size_t)n * kvd;
        float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nk), *v = malloc(sizeof(float) * nk);
        float *w = malloc(sizeof(float) * 2 * hd), *rope = malloc(sizeof(float) * P * hd);
        float *kc = malloc(sizeof(float) * ncache), *vc = malloc(sizeof(float) * ncache);
        float *out[2][5];
        fill(q, nq, 3.0f), fill(k, nk, 3.0f), fill(v, nk, 1.0f), fill(w, 2 * hd, 1.5f), fill(rope, P * hd, 1.0f);
        fill(kc, ncache, 1.0f), fill(vc, ncache, 1.0f);
        for (int pass = 0; pass < 2; pass++) { /* 0: one dispatch, 1: one per stream */
            vk_buf bq = mk(g, q, sizeof(float) * nq), bk = mk(g, k, sizeof(float) * nk), bv = mk(g, v, sizeof(float) * nk);
            vk_buf bw = mk(g, w, sizeof(float) * 2 * hd), br = mk(g, rope, sizeof(float) * P * hd);
            vk_buf bkc = mk(g, kc, sizeof(float) * ncache), bvc = mk(g, vc, sizeof(float) * ncache);
            vk_buf bo = mk(g, NULL, sizeof(float) * nq), bst = mk(g, NULL, sizeof(uint32_t) * VK_ST_WORDS);
            const int nd = pass ? ns : 1, per = pass ? rows : n;
            for (int j = 0; j < nd; j++) {
                const uint32_t r0 = (uint32_t)(j * rows), cof = co + (pass ? j * stride : 0);
                vk_pc_qk_rope pr = {(uint32_t)per, nh, nkv, hd, p0, 0, cof, 0, hd, r0 * qd, r0 * kvd, r0 * kvd, 1e-6f,
                                    pass ? 0u : (uint32_t)rows, pass ? 0u : stride};
                vk_binding b[8] = {{&bq, 0, 0}, {&bk, 0, 0},  {&bv, 0, 0},  {&bw, 0, 0},
                                   {&br, 0, 0}, {&bkc, 0, 0}, {&bvc, 0, 0}, {&bst, 0, 0}};
                run1(g, "qk_rope", b, 8, &pr, sizeof pr, per, 1);
            }
            for (int j = 0; j < nd; j++) {
                const uint32_t r0 = (uint32_t)(j * rows), cof = co + (pass ? j * stride : 0);
                vk_pc_attention pa = {(uint32_t)per, nh, nkv, hd, p0, 0, cof, r0 * qd, r0 * qd, 0.25f,
                                      pass ? 0u : (uint32_t)rows, pass ? 0u : stride};
                vk_binding b[5] = {{&bq, 0, 0}, {&bkc, 0, 0}, {&bvc, 0, 0}, {&bo, 0, 0}, {&bst, 0, 0}};
                run1(g, "attention", b, 5, &pa, sizeof pa, nh, per);
            }
            const vk_buf *src[5] = {&bq, &bk, &bkc, &bvc, &bo};
            const size_t cnt[5] = {nq, nk, ncache, ncache, nq};
            for (int i = 0; i < 5; i++) {
                out[pass][i] = calloc(cnt[i], sizeof(float));
                get(g, src[i], out[pass][i], sizeof(float) * cnt[i]);
            }
            vk_buf *bufs[] = {&bq, &bk, &bv, &bw, &br, &bkc, &bvc, &bo, &bst};
            for (int i = 0; i < 9; i++) vk_buf_free(g->d, bufs[i]);
        }
        const char *what[5] = {"q", "k", "kc", "vc", "attention out"};
        const size_t cnt[5] = {nq, nk, ncache, ncache, nq};
        for (int i = 0; i < 5; i++) {
            if (ok && !g->bad && memcmp(out[0][i], out[1][i], sizeof(float) * cnt[i])) {
                ok = 0;
                snprintf(why, sizeof why, "hd=%d rows=%d: %s differs from per-stream dispatches", hd, rows, what[i]);
            }
            free(out[0][i]), free(out[1][i]);
        }
        free(q), free(k), free(v), free(w), free(rope), free(kc), free(vc);
    }
    if (g->bad) test_report("vk_stream_dim", 0, "runtime: %s", g->e.msg);
    else test_report("vk_stream_dim", ok, "%s", why);
}

/* ------------------------------------------------------------ swiglu */

static void test_swiglu(gpu *g) {
    const int counts[] = {1, 7, 100, 1024, 3073};
    double worst = 0;
    int ok = 1;
    char why[256] = "";
    for (int ci = 0; ci < 5; ci++) {
        const int n = counts[ci], go = 1, uo = 4, oo = 2, tot = n + 8;
        float *gg = malloc(sizeof(float) * tot), *u = malloc(sizeof(float) * tot);
        float *o = malloc(sizeof(float) * tot), *ref = malloc(sizeof(float) * tot);
        fill(gg, tot, 8.0f);
        fill(u, tot, 2.0f);
        memcpy(ref, gg + go, sizeof(float) * n);
        ops_swiglu(ref, u + uo, n);
        vk_buf bg = mk(g, gg, sizeof(float) * tot), bu = mk(g, u, sizeof(float) * tot), bo = mk(g, NULL, sizeof(float) * tot);
        vk_pc_swiglu pc = {(uint32_t)n, go, uo, oo};
        vk_binding b[3] = {{&bg, 0, 0}, {&bu, 0, 0}, {&bo, 0, 0}};
        run1(g, "swiglu", b, 3, &pc, sizeof pc, (n + 255) / 256, 1);
        get(g, &bo, o, sizeof(float) * tot);
        for (int j = 0; j < n && !g->bad; j++) {
            const double e = fabs((double)o[oo + j] - ref[j]) / (fabs(ref[j]) + 1e-30);
            if (!(e <= worst)) worst = e;
            if (!(e <= 2e-5) && ok) {
                ok = 0;
                snprintf(why, sizeof why, "count=%d j=%d: %g vs %g", n, j, o[oo + j], ref[j]);
            }
        }
        vk_buf_free(g->d, &bg), vk_buf_free(g->d, &bu), vk_buf_free(g->d, &bo);
        free(gg), free(u), free(o), free(ref);
    }
    if (g->bad) test_report("vk_swiglu", 0, "runtime: %s", g->e.msg);
    else test_report("vk_swiglu", ok, "%s", why);
    printf("  swiglu: max rel err %.3g per element (tolerance 2e-5)\n", worst);
}

/* ------------------------------------------------------------ embed */

static void test_embed(gpu *g) {
    const int Hs[] = {7, 100, 1024};
    int ok = 1;
    char why[256] = "";
    for (int hi = 0; hi < 3; hi++)
        for (int bf = 0; bf < 2; bf++)
            for (int acc = 0; acc < 2; acc++)
                for (int clamp = 0; clamp < 2; clamp++) {
                    const int H = Hs[hi], R = 10, to = 3, oo = 5;
                    float *tf = malloc(sizeof(float) * (to + R * H));
                    uint16_t *tb = calloc(to + R * H + 2, sizeof(uint16_t)); /* + 4 bytes: the upload is a whole number of words */
                    fill(tf, to + R * H, 4.0f);
                    for (int i = 0; i < to + R * H; i++) tb[i] = (uint16_t)rnd_u32();
                    for (int i = 0; i < to + R * H; i++)
                        if ((tb[i] & 0x7f80) == 0x7f80) tb[i] &= 0xbfff; /* no inf/NaN */
                    float *o = malloc(sizeof(float) * (oo + H + 3)), *ref = malloc(sizeof(float) * (oo + H + 3));
                    fill(o, oo + H + 3, 1.0f);
                    memcpy(ref, o, sizeof(float) * (oo + H + 3));
                    const uint32_t ids[4] = {9, 1, clamp ? 8u : 2u, 4}; /* id_pos 2, id_add 3, id_max 7 */
                    const uint32_t idx = ids[2] + 3 > 7 ? 7 : ids[2] + 3;
                    for (int j = 0; j < H; j++) {
                        float x;
                        if (bf) {
                            const uint32_t bits = (uint32_t)tb[to + idx * H + j] << 16;
                            memcpy(&x, &bits, 4);
                        } else {
                            x = tf[to + idx * H + j];
                        }
                        ref[oo + j] = acc ? ref[oo + j] + x : x;
                    }
                    vk_buf bt = bf ? mk(g, tb, sizeof(uint16_t) * (to + R * H) + 4) : mk(g, tf, sizeof(float) * (to + R * H));
                    vk_buf bi = mk(g, ids, sizeof ids), bo = mk(g, o, sizeof(float) * (oo + H + 3));
                    vk_pc_embed pc = {(uint32_t)H, to, 2, 3, 7, oo, (uint32_t)acc, 0, 0};
                    vk_binding b[3] = {{&bt, 0, 0}, {&bi, 0, 0}, {&bo, 0, 0}};
                    run1(g, bf ? "embed_bf16" : "embed_f32", b, 3, &pc, sizeof pc, (H + 255) / 256, 1);
                    get(g, &bo, o, sizeof(float) * (oo + H + 3));
                    if (!g->bad && memcmp(o, ref, sizeof(float) * (oo + H + 3)) != 0 && ok) {
                        ok = 0;
                        snprintf(why, sizeof why, "H=%d %s accumulate=%d clamp=%d: not exact", H, bf ? "bf16" : "f32",
                                 acc, clamp);
                    }
                    vk_buf_free(g->d, &bt), vk_buf_free(g->d, &bi), vk_buf_free(g->d, &bo);
                    free(tf), free(tb), free(o), free(ref);
                }
    if (g->bad) test_report("vk_embed", 0, "runtime: %s", g->e.msg);
    else test_report("vk_embed", ok, "%s", why);
}

/* ------------------------------------------------------------ logits_talker */

static void test_logits_talker(gpu *g) {
    const int V = 3072, eos = 2150, suppress = 2048, min_k = 2;
    /* k, ban_eos, penalty */
    const struct {
        int k, ban;
        float pen;
    } cases[] = {{0, 0, 1.05f}, {1, 0, 1.3f}, {2, 0, 1.05f}, {7, 1, 1.05f}, {7, 0, 1.0f}};
    int ok = 1;
    char why[256] = "";
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        float *l = malloc(sizeof(float) * V), *ref = malloc(sizeof(float) * V);
        uint32_t *seen = calloc(V, sizeof(uint32_t));
        int32_t hist[64];
        int nh = 0;
        fill(l, V, 10.0f);
        for (int i = 0; i < 40; i++) { /* ids repeat: penalised once */
            const int id = i % 3 == 2 ? hist[i - 1] : (int)(rnd_u32() % 2100);
            hist[nh++] = id;
            seen[id] = 1;
        }
        hist[nh++] = eos;
        seen[eos] = 1;
        memcpy(ref, l, sizeof(float) * V);
        logits_repetition_penalty(ref, V, hist, nh, cases[ci].pen);
        if (cases[ci].k < min_k || cases[ci].ban) ref[eos] = -INFINITY;
        for (int t = suppress; t < V; t++)
            if (t != eos) ref[t] = -INFINITY;
        uint32_t st[VK_ST_WORDS] = {0};
        st[VK_ST_K] = (uint32_t)cases[ci].k;
        st[VK_ST_BAN_EOS] = (uint32_t)cases[ci].ban;
        vk_buf bl = mk(g, l, sizeof(float) * V), bs = mk(g, seen, sizeof(uint32_t) * V), bst = mk(g, st, sizeof st);
        vk_pc_logits_talker pc = {(uint32_t)V, eos, min_k, suppress, cases[ci].pen};
        vk_binding b[3] = {{&bl, 0, 0}, {&bs, 0, 0}, {&bst, 0, 0}};
        run1(g, "logits_talker", b, 3, &pc, sizeof pc, (V + 255) / 256, 1);
        get(g, &bl, l, sizeof(float) * V);
        for (int j = 0; j < V && !g->bad; j++) {
            const int good = isinf(ref[j]) ? l[j] == ref[j] : fabsf(l[j] - ref[j]) <= 4e-7f * fabsf(ref[j]);
            if (!good && ok) {
                ok = 0;
                snprintf(why, sizeof why, "k=%d ban=%d penalty=%g id %d: %g, want %g", cases[ci].k, cases[ci].ban,
                         cases[ci].pen, j, l[j], ref[j]);
            }
        }
        vk_buf_free(g->d, &bl), vk_buf_free(g->d, &bs), vk_buf_free(g->d, &bst);
        free(l), free(ref), free(seen);
    }
    if (g->bad) test_report("vk_logits_talker", 0, "runtime: %s", g->e.msg);
    else test_report("vk_logits_talker", ok, "%s", why);
}

/* ------------------------------------------------------------ advance */

static void test_advance(gpu *g) {
    uint32_t st[VK_ST_WORDS], out[VK_ST_WORDS];
    for (int i = 0; i < VK_ST_WORDS; i++) st[i] = 100 + i;
    vk_buf bst = mk(g, st, sizeof st);
    vk_pc_advance pc = {0};
    vk_binding b[1] = {{&bst, 0, 0}};
    vk_kernel *k = kern(g, "advance");
    begin(g);
    if (!g->bad) {
        vk_cmd_dispatch(g->c, k, b, 1, &pc, sizeof pc, 1, 1, 1);
        vk_cmd_dispatch(g->c, k, b, 1, &pc, sizeof pc, 1, 1, 1);
    }
    finish(g);
    get(g, &bst, out, sizeof out);
    st[VK_ST_K] += 2;
    st[VK_ST_POS] += 2;
    if (g->bad) test_report("vk_advance", 0, "runtime: %s", g->e.msg);
    else test_report("vk_advance", memcmp(st, out, sizeof st) == 0, "k %u pos %u, want %u %u (or another word changed)",
                     out[VK_ST_K], out[VK_ST_POS], st[VK_ST_K], st[VK_ST_POS]);
    vk_buf_free(g->d, &bst);
}

/* ------------------------------------------------------------ sample */

/* the shader's draw (common.glsl vk_uniform) */
static uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static double vk_uniform_ref(uint32_t lo, uint32_t hi, uint32_t counter) {
    uint32_t h = hash32(hi ^ 0x9e3779b9u);
    h = hash32(h ^ lo);
    h = hash32(h ^ counter);
    h = hash32(h + 0x632be5abu);
    return (double)(h >> 8) / 16777216.0;
}

#define SLOT_WORDS 64 /* one 256-byte state slot per dispatch (VK_ST_WORDS) */

/* Record m sample dispatches over logits rows row_of(i) (row i % nrows),
 * state slot i with draws counter draw0 + i, run them, and return the
 * states. teach/seen may be NULL (dummy). */
static void sample_batch(gpu *g, const vk_buf *bl, int V, int nrows, const vk_pc_sample *base, int m, uint32_t draw0,
                         const uint32_t *st_init, uint32_t *st_out, const vk_buf *teach, const vk_buf *seen) {
    uint32_t *st = malloc(sizeof(uint32_t) * SLOT_WORDS * m);
    for (int i = 0; i < m; i++) {
        memcpy(st + (size_t)i * SLOT_WORDS, st_init, sizeof(uint32_t) * SLOT_WORDS);
        st[(size_t)i * SLOT_WORDS + VK_ST_DRAWS] = draw0 + (uint32_t)i;
    }
    vk_buf bst = mk(g, st, sizeof(uint32_t) * SLOT_WORDS * m);
    vk_kernel *k = kern(g, "sample");
    begin(g);
    for (int i = 0; i < m && !g->bad; i++) {
        vk_pc_sample pc = *base;
        pc.V = (uint32_t)V;
        pc.logits_off = (uint32_t)((i % nrows) * V);
        vk_binding b[4] = {{bl, 0, 0}, {&bst, (size_t)i * SLOT_WORDS * 4, SLOT_WORDS * 4}, {teach, 0, 0}, {seen, 0, 0}};
        vk_cmd_dispatch(g->c, k, b, 4, &pc, sizeof pc, 1, 1, 1);
    }
    finish(g);
    get(g, &bst, st_out, sizeof(uint32_t) * SLOT_WORDS * m);
    vk_buf_free(g->d, &bst);
    free(st);
}

static int cpu_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void test_sample_greedy(gpu *g) {
    const int Vs[] = {1, 7, 100, 255, 257, 2048, 3072, 4096};
    int ok = 1, total = 0, ties = 0;
    char why[256] = "";
    for (int vi = 0; vi < 8; vi++) {
        const int V = Vs[vi], nrows = 40;
        float *l = malloc(sizeof(float) * V * nrows);
        for (int r = 0; r < nrows; r++) {
            float *x = l + (size_t)r * V;
            if (r % 4 == 0) fill(x, V, 10.0f);
            else if (r % 4 == 1) /* exact ties: few distinct values */
                for (int j = 0; j < V; j++) x[j] = (float)(rnd_u32() % 5);
            else if (r % 4 == 2) { /* the maximum twice, far apart */
                fill(x, V, 1.0f);
                x[V - 1] = 3.0f;
                x[V / 2] = 3.0f;
                x[V / 3] = 3.0f;
            } else
                for (int j = 0; j < V; j++) x[j] = r % 8 == 3 ? -INFINITY : -2.0f; /* all equal */
        }
        vk_buf bl = mk(g, l, sizeof(float) * V * nrows);
        uint32_t st0[SLOT_WORDS] = {0}, *st = malloc(sizeof(uint32_t) * SLOT_WORDS * nrows);
        st0[VK_ST_K] = 5;
        st0[VK_ST_SEED_LO] = 1234;
        vk_pc_sample pc = {0, 0, 0, 50, 0.9f, 1.0f, 3, 16, 0};
        sample_batch(g, &bl, V, nrows, &pc, nrows, 77, st0, st, NULL, NULL);
        for (int r = 0; r < nrows && !g->bad; r++) {
            const uint32_t *s = st + (size_t)r * SLOT_WORDS;
            const int want = cpu_argmax(l + (size_t)r * V, V);
            int nmax = 0;
            for (int j = 0; j < V; j++) nmax += l[(size_t)r * V + j] == l[(size_t)r * V + want];
            ties += nmax > 1;
            total++;
            int good = s[VK_ST_CODES + 3] == (uint32_t)want && s[VK_ST_DRAWS] == 77u + r + 1;
            for (int w = 0; w < SLOT_WORDS; w++)
                if (w != VK_ST_CODES + 3 && w != VK_ST_DRAWS && s[w] != (w == VK_ST_K ? 5u : w == VK_ST_SEED_LO ? 1234u : 0u))
                    good = 0;
            if (!good && ok) {
                ok = 0;
                snprintf(why, sizeof why, "V=%d row %d: code %u draws %u, want %d and %d (or a stray state write)", V,
                         r, s[VK_ST_CODES + 3], s[VK_ST_DRAWS], want, 77 + r + 1);
            }
        }
        vk_buf_free(g->d, &bl);
        free(l), free(st);
    }
    if (g->bad) test_report("vk_sample_greedy", 0, "runtime: %s", g->e.msg);
    else test_report("vk_sample_greedy", ok, "%s", why);
    printf("  sample greedy: %d rows (%d with tied maxima) equal to the CPU argmax: %s\n", total, ties,
           ok ? "all" : "no");
}

/* One sampling configuration: the CPU's kept set (the entries sample_token
 * leaves finite) against m GPU draws over one row. */
typedef struct samp_case {
    const char *name;
    int V;
    float temperature, top_p;
    int top_k;
    int kind; /* 0 random, 1 ties straddling the top-p edge, 2 distinct (for top_k = 1) */
} samp_case;

static void test_sample_draws(gpu *g, const samp_case *sc, int m, int *n_ok_total, int *n_edge_total) {
    const int V = sc->V;
    float *l = malloc(sizeof(float) * V), *lc = malloc(sizeof(float) * V);
    if (sc->kind == 0) fill(l, V, 6.0f);
    else if (sc->kind == 1) {
        for (int j = 0; j < V; j++) l[j] = -12.0f + 0.25f * rnd();
        for (int j = 0; j < 10; j++) l[V / 2 + 7 * j] = 0.0f; /* 10 exact ties hold ~all the mass */
    } else {
        for (int j = 0; j < V; j++) l[j] = (float)j * 0.001f; /* distinct */
        for (int j = V - 1; j > 0; j--) { /* shuffle distinct values */
            const int r = (int)(rnd_u32() % (uint32_t)(j + 1));
            const float t = l[j];
            l[j] = l[r];
            l[r] = t;
        }
    }
    memcpy(lc, l, sizeof(float) * V);
    sampler smp;
    qtts_error e;
    sampler_init(&smp, V, 1, &e);
    const qtts_sampling sp = {1, sc->temperature, sc->top_k, sc->top_p, 1.0f};
    sample_token(&smp, lc, V, &sp); /* lc: the CPU's kept values, others -inf */
    sampler_free(&smp);
    double mx = -INFINITY, sum = 0;
    int nkept = 0;
    for (int j = 0; j < V; j++)
        if (lc[j] != -INFINITY) {
            nkept++;
            if (lc[j] > mx) mx = lc[j];
        }
    double *p = calloc(V, sizeof(double)), *cum = calloc(V, sizeof(double));
    for (int j = 0; j < V; j++)
        if (lc[j] != -INFINITY) sum += p[j] = exp((double)lc[j] - mx);
    double c = 0;
    for (int j = 0; j < V; j++) cum[j] = c += p[j] /= sum;

    vk_buf bl = mk(g, l, sizeof(float) * V);
    uint32_t st0[SLOT_WORDS] = {0}, *st = malloc(sizeof(uint32_t) * SLOT_WORDS * m);
    st0[VK_ST_SEED_LO] = 0xdeadbeefu;
    st0[VK_ST_SEED_HI] = 42;
    vk_pc_sample pc = {0, 0, 1, (uint32_t)sc->top_k, sc->temperature, sc->top_p, 0, 16, 0};
    sample_batch(g, &bl, V, 1, &pc, m, 1000, st0, st, NULL, NULL);
    int outside = -1, mismatch = 0, edge = 0, distinct = 0, worst_id = -1;
    int *cnt = calloc(V, sizeof(int));
    for (int i = 0; i < m && !g->bad; i++) {
        const uint32_t id = st[(size_t)i * SLOT_WORDS + VK_ST_CODES];
        if (id >= (uint32_t)V || lc[id] == -INFINITY) {
            outside = (int)id;
            continue;
        }
        cnt[id]++;
        const double u = vk_uniform_ref(0xdeadbeefu, 42, 1000u + (uint32_t)i);
        int want = -1;
        for (int j = 0; j < V && want < 0; j++)
            if (p[j] > 0 && cum[j] > u) want = j;
        if (want < 0) want = V - 1;
        if ((int)id != want) {
            double dist = 1; /* distance of u to the nearest boundary */
            for (int j = 0; j < V; j++)
                if (p[j] > 0) dist = fmin(dist, fmin(fabs(u - cum[j]), fabs(u - (cum[j] - p[j]))));
            if (dist < 1e-4) edge++;
            else mismatch++;
        }
    }
    double worst_z = 0;
    for (int j = 0; j < V; j++) {
        distinct += cnt[j] > 0;
        const double ex = p[j] * m;
        if (ex >= 5) {
            const double z = fabs(cnt[j] - ex) / sqrt(ex * (1 - p[j]) + 1e-12);
            if (z > worst_z) {
                worst_z = z;
                worst_id = j;
            }
        }
    }
    char name[96];
    snprintf(name, sizeof name, "vk_sample_%s", sc->name);
    if (g->bad) test_report(name, 0, "runtime: %s", g->e.msg);
    else
        test_report(name, outside < 0 && mismatch == 0 && worst_z <= 5 && (nkept == 1 ? distinct == 1 : distinct > 1),
                    "V=%d T=%g top_k=%d top_p=%g: drawn id outside the CPU kept set: %d; %d picks differ from the "
                    "f64 pick for the same u; worst z %.2f (id %d); %d distinct ids",
                    V, sc->temperature, sc->top_k, sc->top_p, outside, mismatch, worst_z, worst_id, distinct);
    printf("  sample %s: %d draws, CPU kept %d ids, %d distinct drawn, %d picks off the f64 pick "
           "(%d within 1e-4 of an edge), worst |z| %.2f\n",
           sc->name, m, nkept, distinct, mismatch + edge, edge, worst_z);
    if (sc->kind == 2 && sc->top_k == 1 && !g->bad) {
        const int am = cpu_argmax(l, V);
        test_report("vk_sample_top_k_1_is_argmax", cnt[am] == m, "%d of %d draws were the argmax %d", cnt[am], m, am);
    }
    *n_ok_total += m - mismatch - edge;
    *n_edge_total += edge;

    /* repeatability: the same counters again give the same ids (the first
     * 200 draws) */
    if (!g->bad && sc->kind == 0) {
        const int mr = m < 200 ? m : 200;
        uint32_t *st2 = malloc(sizeof(uint32_t) * SLOT_WORDS * mr);
        sample_batch(g, &bl, V, 1, &pc, mr, 1000, st0, st2, NULL, NULL);
        int same = 1;
        for (int i = 0; i < mr; i++)
            same &= st2[(size_t)i * SLOT_WORDS + VK_ST_CODES] == st[(size_t)i * SLOT_WORDS + VK_ST_CODES];
        snprintf(name, sizeof name, "vk_sample_%s_repeatable", sc->name);
        test_report(name, same && !g->bad, "a second run with the same seed and counters gave other ids");
        free(st2);
    }
    vk_buf_free(g->d, &bl);
    free(l), free(lc), free(p), free(cum), free(st), free(cnt);
}

static void test_sample_state(gpu *g) {
    const int V = 2048, frames = 6, G = 16, group = 5;
    float *l = malloc(sizeof(float) * V);
    fill(l, V, 4.0f);
    const int am = cpu_argmax(l, V);
    uint32_t *teach = malloc(sizeof(uint32_t) * frames * G), *seen = calloc(V, sizeof(uint32_t));
    for (int i = 0; i < frames * G; i++) teach[i] = rnd_u32() % V;
    teach[3 * G + group] = (uint32_t)am; /* frame 3: the teacher agrees with the pick */
    if (teach[2 * G + group] == (uint32_t)am) teach[2 * G + group] = (uint32_t)(am + 1) % V;
    vk_buf bl = mk(g, l, sizeof(float) * V), bt = mk(g, teach, sizeof(uint32_t) * frames * G);
    vk_buf bs = mk(g, seen, sizeof(uint32_t) * V);
    const vk_pc_sample pc = {0, 0, 0, 0, 1.0f, 1.0f, group, G, 1};
    int ok = 1;
    char why[256] = "";
    const int ks[3] = {2, 3, 4}; /* teaching (disagree), teaching (agree), past the teacher */
    uint32_t want_seen[3];
    for (int c = 0; c < 3; c++) {
        uint32_t st0[SLOT_WORDS] = {0}, st[SLOT_WORDS];
        st0[VK_ST_K] = (uint32_t)ks[c];
        st0[VK_ST_NTEACH] = 4;
        st0[VK_ST_AGREE + group] = 7; /* untouched when not teaching */
        sample_batch(g, &bl, V, 1, &pc, 1, 9, st0, st, &bt, &bs);
        const int teaching = ks[c] < 4;
        const uint32_t tc = teach[ks[c] * G + group];
        const uint32_t want_code = teaching ? tc : (uint32_t)am;
        const uint32_t want_agree = teaching ? (tc == (uint32_t)am) : 7u;
        want_seen[c] = want_code;
        if (!g->bad && (st[VK_ST_CODES + group] != want_code || st[VK_ST_AGREE + group] != want_agree ||
                        st[VK_ST_DRAWS] != 10) && ok) {
            ok = 0;
            snprintf(why, sizeof why, "k=%d: code %u agree %u draws %u, want %u %u 10", ks[c],
                     st[VK_ST_CODES + group], st[VK_ST_AGREE + group], st[VK_ST_DRAWS], want_code, want_agree);
        }
    }
    if (g->bad) test_report("vk_sample_teacher", 0, "runtime: %s", g->e.msg);
    else test_report("vk_sample_teacher", ok, "%s", why);
    get(g, &bs, seen, sizeof(uint32_t) * V);
    int seen_ok = !g->bad, nseen = 0;
    for (int j = 0; j < V; j++) {
        const int want = (uint32_t)j == want_seen[0] || (uint32_t)j == want_seen[1] || (uint32_t)j == want_seen[2];
        nseen += seen[j] != 0;
        if ((seen[j] != 0) != want) seen_ok = 0;
    }
    test_report("vk_sample_mark_seen", seen_ok, "seen marks %d ids, want exactly the 3 results", nseen);
    vk_buf_free(g->d, &bl), vk_buf_free(g->d, &bt), vk_buf_free(g->d, &bs);
    free(l), free(teach), free(seen);
}

static void test_sample(gpu *g) {
    test_sample_greedy(g);
    const samp_case cases[] = {
        {"talker_topk50", 3072, 0.9f, 1.0f, 50, 0},  {"predictor_topk50", 2048, 0.9f, 1.0f, 50, 0},
        {"topp0.8", 2048, 1.0f, 0.8f, 0, 0},         {"topk20_topp0.9", 3072, 0.7f, 0.9f, 20, 0},
        {"topk_off_V", 100, 1.3f, 1.0f, 100, 0},     {"topp_ties", 4096, 1.0f, 0.55f, 0, 1},
        {"topk_ties", 1000, 1.0f, 1.0f, 3, 1},       {"topk1", 3000, 0.9f, 1.0f, 1, 2},
        {"topp_tiny", 2048, 1.0f, 0.01f, 0, 0},
    };
    int n_ok = 0, n_edge = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_sample_draws(g, &cases[i], i == 0 ? 2000 : 500, &n_ok, &n_edge);
    printf("  sample: %d draws equal to the f64 inverse-CDF pick of the CPU kept set, %d at a rounding edge\n", n_ok,
           n_edge);
    test_sample_state(g);
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
    test_rmsnorm(&g);
    test_qk_rope(&g);
    test_attention(&g);
    test_stream_dim(&g);
    test_swiglu(&g);
    test_embed(&g);
    test_logits_talker(&g);
    test_advance(&g);
    test_sample(&g);
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
