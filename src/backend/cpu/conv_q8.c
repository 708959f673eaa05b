/* int8 convolutions: weight quantisation, the scalar reference kernels, and
 * the entry points that pack the input and split output channels over
 * threads (conv_q8.h has the contract).
 * Dataflow: x f32 -> table's pack -> u8 [cin/4][t][4] + scales -> table's conv1d_q8 per channel range -> y f32. */
#include "backend/cpu/conv_q8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

static int8_t q_round(float v) {
    float r = rintf(v);
    r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
    return (int8_t)r;
}

int conv_q8_w_make(conv_q8_w *w, const float *wf, const float *bias, int cout, int cin, int k) {
    memset(w, 0, sizeof *w);
    const int cin4 = (cin + 3) & ~3;
    const size_t nq = ALIGN64((size_t)cout * k * cin4), ns = ALIGN64(sizeof(float) * (size_t)cout * k),
                 nw = ALIGN64(sizeof(int32_t) * (size_t)cout * k), nb = bias ? ALIGN64(sizeof(float) * (size_t)cout) : 0;
    char *buf = aligned_alloc(64, nq + ns + nw + nb);
    if (!buf) return 0;
    w->owned = buf;
    w->q = (int8_t *)buf;
    w->sw = (float *)(buf + nq);
    w->wsum = (int32_t *)(buf + nq + ns);
    if (bias) w->bias = memcpy(buf + nq + ns + nw, bias, sizeof(float) * (size_t)cout);
    w->cout = cout, w->cin = cin, w->cin4 = cin4, w->k = k;
    for (int o = 0; o < cout; o++) {
        const float *wo = wf + (size_t)o * cin * k;
        for (int tap = 0; tap < k; tap++) {
            float m = 0.0f;
            for (int i = 0; i < cin; i++) m = fmaxf(m, fabsf(wo[(size_t)i * k + tap]));
            const float inv = m > 0.0f ? 127.0f / m : 0.0f;
            w->sw[(size_t)o * k + tap] = m / 127.0f;
            int8_t *qo = w->q + ((size_t)o * k + tap) * cin4;
            int32_t s = 0;
            for (int i = 0; i < cin4; i++) {
                qo[i] = i < cin ? q_round(wo[(size_t)i * k + tap] * inv) : 0;
                s += qo[i];
            }
            w->wsum[(size_t)o * k + tap] = 128 * s;
        }
    }
    return 1;
}

void conv_q8_w_free(conv_q8_w *w) {
    if (!w) return;
    free(w->owned);
    memset(w, 0, sizeof *w);
}

size_t conv_q8_w_bytes(const conv_q8_w *w) {
    return (size_t)w->cout * w->k * (w->cin4 + sizeof(float) + sizeof(int32_t));
}

size_t ops_conv_q8_scratch_bytes(int cin, int t_in) {
    return ALIGN64((size_t)((cin + 3) & ~3) * (t_in > 0 ? t_in : 1)) + ALIGN64(sizeof(float) * (t_in > 0 ? t_in : 1));
}

void conv_q8_pack_cols(const float *x, int cin, int x_stride, uint8_t *xq, int xq_stride, float *sx, int t0, int t1) {
    const int cin4 = (cin + 3) & ~3;
    for (int t = t0; t < t1; t++) {
        float m = 0.0f;
        for (int i = 0; i < cin; i++) m = fmaxf(m, fabsf(x[(size_t)i * x_stride + t]));
        sx[t] = m / 127.0f;
        const float inv = m > 0.0f ? 127.0f / m : 0.0f;
        for (int i = 0; i < cin4; i++) {
            const int q = i < cin ? q_round(x[(size_t)i * x_stride + t] * inv) : 0;
            xq[((size_t)(i / 4) * xq_stride + t) * 4 + i % 4] = (uint8_t)(q + 128);
        }
    }
}

void conv_q8_pack_scalar(const float *x, int cin, int t_in, int x_stride, uint8_t *xq, int xq_stride, float *sx) {
    conv_q8_pack_cols(x, cin, x_stride, xq, xq_stride, sx, 0, t_in);
}

void conv1d_q8_scalar(const ops_conv_q8_args *a, int o0, int o1) {
    const int k = a->k, d = a->dilation, G = a->cin4 / 4, t_out = a->t_in - d * (k - 1);
    const size_t xs = (size_t)a->xq_stride * 4;
    for (int o = o0; o < o1; o++) {
        float *yo = a->y + (size_t)o * a->y_stride;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int tap = 0; tap < k; tap++) {
                const int8_t *w = a->w + ((size_t)o * k + tap) * a->cin4;
                const uint8_t *xp = a->xq + (size_t)(t + tap * d) * 4;
                int32_t s = 0;
                for (int g = 0; g < G; g++)
                    for (int j = 0; j < 4; j++) s += ((int32_t)xp[g * xs + j] - 128) * w[g * 4 + j];
                acc += (float)s * a->sx[t + tap * d] * a->sw[(size_t)o * k + tap];
            }
            yo[t] = acc + (a->bias ? a->bias[o] : 0.0f);
        }
    }
}

typedef struct q8_pack_job {
    void (*pack)(const float *, int, int, int, uint8_t *, int, float *);
    const float *x;
    int cin, x_stride, xq_stride;
    uint8_t *xq;
    float *sx;
} q8_pack_job;

static void q8_pack_run(const void *job, int t0, int t1) {
    const q8_pack_job *j = job;
    j->pack(j->x + t0, j->cin, t1 - t0, j->x_stride, j->xq + (size_t)t0 * 4, j->xq_stride, j->sx + t0);
}

typedef struct q8_job {
    void (*fn)(const ops_conv_q8_args *, int, int);
    const ops_conv_q8_args *a;
} q8_job;

static void q8_run(const void *job, int o0, int o1) {
    const q8_job *j = job;
    j->fn(j->a, o0, o1);
}

void ops_conv1d_q8_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_q8_w *w,
                       int dilation, float *y, int y_stride, void *scratch) {
    const int t_out = t_in - dilation * (w->k - 1);
    if (t_out <= 0 || w->cout <= 0 || cin != w->cin) return;
    const ops_kernels *k = c ? c->k : ops_kernels_scalar();
    uint8_t *xq = scratch;
    float *sx = (float *)((char *)scratch + ALIGN64((size_t)w->cin4 * t_in));
    void (*pack)(const float *, int, int, int, uint8_t *, int, float *) =
        k->conv_q8_pack ? k->conv_q8_pack : conv_q8_pack_scalar;
    void (*fn)(const ops_conv_q8_args *, int, int) = k->conv1d_q8 ? k->conv1d_q8 : conv1d_q8_scalar;
    const q8_pack_job pj = {pack, x, cin, x_stride, t_in, xq, sx};
    ops_conv_pack_split_ctx(c, cin, t_in, q8_pack_run, &pj);
    const ops_conv_q8_args a = {.xq = xq, .sx = sx, .cin4 = w->cin4, .t_in = t_in, .xq_stride = t_in, .w = w->q,
                                .sw = w->sw, .wsum = w->wsum, .bias = w->bias, .cout = w->cout, .k = w->k,
                                .dilation = dilation, .y = y, .y_stride = y_stride};
    const q8_job j = {fn, &a};
    ops_conv_split_ctx(c, w->cout, (long long)w->cout * w->cin4 * w->k * t_out, q8_run, &j);
}

int ops_conv_transpose1d_q8_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                const conv_q8_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                int y_stride, float *fscratch, void *qscratch) {
    int u0, nu;
    if (!wc || !fscratch || !qscratch || !ops_conv_transpose_window(t_in, k, stride, t0, t1, &u0, &nu) ||
        wc->cout != stride * cout || wc->k != k / stride)
        return 0;
    ops_conv1d_q8_ctx(c, x + u0, cin, nu + wc->k - 1, x_stride, wc, 1, fscratch, nu, qscratch);
    ops_conv_interleave_ctx(c, fscratch, y, cout, nu, stride, y_stride);
    return 1;
}
