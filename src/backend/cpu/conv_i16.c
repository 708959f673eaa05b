/* int16 convolutions: weight quantisation, the scalar reference kernels, and
 * the entry points that pack the input and split output channels (or time
 * pieces) over threads (conv_i16.h has the contract).
 * Dataflow: x f32 -> table's pack -> i16 [cin/2][t][2] + scales -> table's conv1d_i16 per channel range -> y f32. */
#include "backend/cpu/conv_i16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

int conv_i16_qmax(int cin) {
    if (cin < 1) return 0;
    const long long cin2 = (cin + 1) & ~1, lim = 2147483647LL;
    long long q = (long long)sqrt((double)(lim / cin2));
    while (q > 0 && cin2 * q * q > lim) q--;
    while (cin2 * (q + 1) * (q + 1) <= lim) q++;
    return q > 32767 ? 32767 : (int)q;
}

static int16_t q_round(float v, float qm) {
    float r = rintf(v);
    r = r > qm ? qm : r < -qm ? -qm : r;
    return (int16_t)r;
}

int conv_i16_w_make(conv_i16_w *w, const float *wf, const float *bias, int cout, int cin, int k) {
    memset(w, 0, sizeof *w);
    const int cin2 = (cin + 1) & ~1, qmax = conv_i16_qmax(cin);
    const float qm = (float)qmax;
    const size_t nq = ALIGN64(sizeof(int16_t) * (size_t)cout * k * cin2), ns = ALIGN64(sizeof(float) * (size_t)cout * k),
                 nb = bias ? ALIGN64(sizeof(float) * (size_t)cout) : 0;
    char *buf = aligned_alloc(64, nq + ns + nb);
    if (!buf) return 0;
    w->owned = buf;
    w->q = (int16_t *)buf;
    w->sw = (float *)(buf + nq);
    if (bias) w->bias = memcpy(buf + nq + ns, bias, sizeof(float) * (size_t)cout);
    w->cout = cout, w->cin = cin, w->cin2 = cin2, w->k = k, w->qmax = qmax;
    for (int o = 0; o < cout; o++) {
        const float *wo = wf + (size_t)o * cin * k;
        for (int tap = 0; tap < k; tap++) {
            float m = 0.0f;
            for (int i = 0; i < cin; i++) m = fmaxf(m, fabsf(wo[(size_t)i * k + tap]));
            const float inv = m > 0.0f ? qm / m : 0.0f;
            w->sw[(size_t)o * k + tap] = m / qm;
            int16_t *qo = w->q + ((size_t)o * k + tap) * cin2;
            for (int i = 0; i < cin2; i++) qo[i] = i < cin ? q_round(wo[(size_t)i * k + tap] * inv, qm) : 0;
        }
    }
    return 1;
}

void conv_i16_w_free(conv_i16_w *w) {
    if (!w) return;
    free(w->owned);
    memset(w, 0, sizeof *w);
}

/* Time pieces. The packed input is [cin2 / 2][steps][2]: a tile reads one
 * row per channel pair, so over a long input its rows lie far apart and the
 * tile waits on its loads. A conv of at least I16_PIECE_MIN_CIN2 channels
 * and a short span (the transposed convs' K 2, the 1x1 convs) over more than
 * two pieces therefore runs piece by piece, one task each: pack I16_PIECE
 * output steps' input, [cin2 / 2][I16_PIECE + span][2] with its own scales
 * (the span columns are packed again by the next piece: a step's packing
 * depends on its column only, so no bit changes), then every output channel
 * over it while it is in cache. kbench's int16 table and docs/BENCH.md give
 * the rates with and without. */
#define I16_PIECE 64
#define I16_PIECE_MAX_SPAN 8
#define I16_PIECE_MIN_CIN2 16

typedef struct i16_pieces {
    int n;       /* pieces (1: the whole input, unpieced) */
    int steps;   /* output steps of a piece (the last may have fewer) */
    int len;     /* input steps of a whole piece: steps + span */
    size_t q_el; /* int16 elements from one piece's packed input to the next */
} i16_pieces;

static i16_pieces i16_pieces_of(int cin2, int t_in, int span) {
    const int t_out = t_in - span;
    i16_pieces p = {1, t_out, t_in, 0};
    if (cin2 >= I16_PIECE_MIN_CIN2 && span <= I16_PIECE_MAX_SPAN && t_out > 2 * I16_PIECE) {
        p.n = (t_out + I16_PIECE - 1) / I16_PIECE;
        p.steps = I16_PIECE;
        p.len = I16_PIECE + span;
    }
    p.q_el = ALIGN64(sizeof(int16_t) * (size_t)cin2 * p.len) / sizeof(int16_t);
    return p;
}

size_t ops_conv_i16_scratch_bytes(int cin, int t_in) {
    const size_t t = t_in > 0 ? (size_t)t_in : 1, cin2 = (size_t)((cin + 1) & ~1);
    const size_t whole = ALIGN64(sizeof(int16_t) * cin2 * t) + ALIGN64(sizeof(float) * t);
    if (cin2 < I16_PIECE_MIN_CIN2) return whole;
    /* pieces: at most ceil(t / I16_PIECE) of I16_PIECE + I16_PIECE_MAX_SPAN steps */
    const size_t n = (t + I16_PIECE - 1) / I16_PIECE, len = I16_PIECE + I16_PIECE_MAX_SPAN;
    const size_t pieced = n * ALIGN64(sizeof(int16_t) * cin2 * len) + ALIGN64(sizeof(float) * n * len);
    return whole > pieced ? whole : pieced;
}

void conv_i16_pack_cols(const float *x, int cin, int x_stride, int qmax, int16_t *xq, int xq_stride, float *sx,
                        int t0, int t1) {
    const int cin2 = (cin + 1) & ~1;
    const float qm = (float)qmax;
    for (int t = t0; t < t1; t++) {
        float m = 0.0f;
        for (int i = 0; i < cin; i++) m = fmaxf(m, fabsf(x[(size_t)i * x_stride + t]));
        sx[t] = m / qm;
        const float inv = m > 0.0f ? qm / m : 0.0f;
        for (int i = 0; i < cin2; i++) {
            const int16_t q = i < cin ? q_round(x[(size_t)i * x_stride + t] * inv, qm) : 0;
            xq[((size_t)(i / 2) * xq_stride + t) * 2 + i % 2] = q;
        }
    }
}

void conv_i16_pack_scalar(const float *x, int cin, int t_in, int x_stride, int qmax, int16_t *xq, int xq_stride,
                          float *sx) {
    conv_i16_pack_cols(x, cin, x_stride, qmax, xq, xq_stride, sx, 0, t_in);
}

void conv1d_i16_scalar(const ops_conv_i16_args *a, int o0, int o1) {
    const int k = a->k, d = a->dilation, G = a->cin2 / 2, t_out = a->t_in - d * (k - 1);
    const size_t xs = (size_t)a->xq_stride * 2;
    for (int o = o0; o < o1; o++) {
        float *yo = a->y + (size_t)o * a->y_stride;
        for (int t = 0; t < t_out; t++) {
            float acc = 0.0f;
            for (int tap = 0; tap < k; tap++) {
                const int16_t *w = a->w + ((size_t)o * k + tap) * a->cin2;
                const int16_t *xp = a->xq + (size_t)(t + tap * d) * 2;
                int32_t s = 0;
                for (int g = 0; g < G; g++) s += xp[g * xs] * w[2 * g] + xp[g * xs + 1] * w[2 * g + 1];
                acc += (float)s * a->sx[t + tap * d] * a->sw[(size_t)o * k + tap];
            }
            yo[t] = acc + (a->bias ? a->bias[o] : 0.0f);
        }
    }
}

typedef struct i16_pack_job {
    void (*pack)(const float *, int, int, int, int, int16_t *, int, float *);
    const float *x;
    int cin, x_stride, qmax, xq_stride;
    int16_t *xq;
    float *sx;
} i16_pack_job;

static void i16_pack_run(const void *job, int t0, int t1) {
    const i16_pack_job *j = job;
    j->pack(j->x + t0, j->cin, t1 - t0, j->x_stride, j->qmax, j->xq + (size_t)t0 * 2, j->xq_stride, j->sx + t0);
}

typedef struct i16_job {
    void (*fn)(const ops_conv_i16_args *, int, int);
    const ops_conv_i16_args *a;
} i16_job;

static void i16_run(const void *job, int o0, int o1) {
    const i16_job *j = job;
    j->fn(j->a, o0, o1);
}

typedef struct i16_piece_job {
    i16_pack_job pk; /* xq, sx: piece 0's */
    i16_job cv;      /* a: the whole conv's arguments (t_in the whole input's) */
    i16_pieces pc;
} i16_piece_job;

/* Task p: pack piece p, then run every output channel over it. */
static void i16_piece_task(void *arg, int p, int n_tasks) {
    (void)n_tasks;
    const i16_piece_job *j = arg;
    const int span = j->cv.a->dilation * (j->cv.a->k - 1), t0 = p * j->pc.steps;
    const int n_out = j->cv.a->t_in - span - t0;
    int16_t *xq = j->pk.xq + p * j->pc.q_el;
    float *sx = j->pk.sx + (size_t)p * j->pc.len;
    ops_conv_i16_args a = *j->cv.a;
    a.t_in = (n_out < j->pc.steps ? n_out : j->pc.steps) + span;
    j->pk.pack(j->pk.x + t0, j->pk.cin, a.t_in, j->pk.x_stride, j->pk.qmax, xq, j->pc.len, sx);
    a.xq = xq, a.sx = sx, a.y += t0;
    j->cv.fn(&a, 0, a.cout);
}

void ops_conv1d_i16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride, const conv_i16_w *w,
                        int dilation, float *y, int y_stride, void *scratch) {
    const int span = dilation * (w->k - 1), t_out = t_in - span;
    if (t_out <= 0 || w->cout <= 0 || cin != w->cin) return;
    const ops_kernels *k = c ? c->k : ops_kernels_scalar();
    const i16_pieces pc = i16_pieces_of(w->cin2, t_in, span);
    int16_t *xq = scratch;
    float *sx = (float *)((char *)scratch + sizeof(int16_t) * pc.q_el * pc.n);
    void (*pack)(const float *, int, int, int, int, int16_t *, int, float *) =
        k->conv_i16_pack ? k->conv_i16_pack : conv_i16_pack_scalar;
    void (*fn)(const ops_conv_i16_args *, int, int) = k->conv1d_i16 ? k->conv1d_i16 : conv1d_i16_scalar;
    const i16_pack_job pj = {pack, x, cin, x_stride, w->qmax, pc.len, xq, sx};
    const ops_conv_i16_args a = {.xq = xq, .sx = sx, .cin2 = w->cin2, .t_in = t_in, .xq_stride = pc.len, .w = w->q,
                                 .sw = w->sw, .bias = w->bias, .cout = w->cout, .k = w->k, .dilation = dilation,
                                 .y = y, .y_stride = y_stride};
    const i16_job j = {fn, &a};
    if (pc.n > 1) { /* pieces: one task each, over threads */
        i16_piece_job job = {pj, j, pc};
        ops_parallel(c, i16_piece_task, &job, pc.n);
        return;
    }
    ops_conv_pack_split_ctx(c, cin, t_in, i16_pack_run, &pj);
    ops_conv_split_ctx(c, w->cout, (long long)w->cout * w->cin2 * w->k * t_out, i16_run, &j);
}

int ops_conv_transpose1d_i16_ctx(const ops_ctx *c, const float *x, int cin, int t_in, int x_stride,
                                 const conv_i16_w *wc, int cout, int k, int stride, int t0, int t1, float *y,
                                 int y_stride, float *fscratch, void *qscratch) {
    int u0, nu;
    if (!wc || !fscratch || !qscratch || !ops_conv_transpose_window(t_in, k, stride, t0, t1, &u0, &nu) ||
        wc->cout != stride * cout || wc->k != k / stride)
        return 0;
    ops_conv1d_i16_ctx(c, x + u0, cin, nu + wc->k - 1, x_stride, wc, 1, fscratch, nu, qscratch);
    ops_conv_interleave_ctx(c, fscratch, y, cout, nu, stride, y_stride);
    return 1;
}
