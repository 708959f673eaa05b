/* Speech-tokenizer decoder forward, exactly streamable (see codec_decoder.h).
 * Dataflow per chunk of n frames: codes -> dequant [CD][n] -> pre_conv (K 3)
 * -> pre-transformer [n][HID] (sliding-window attention over a KV window) ->
 * [LAT][n] -> per ConvNeXt stage: transposed conv (K = s) + dwconv (K 7) +
 * LayerNorm/MLP -> decoder.0 conv (K 7) -> per vocoder block: SnakeBeta,
 * causal transposed conv (K 2r, s r), 3 residual units (SnakeBeta, conv K 7
 * dilation 1/3/9, SnakeBeta, 1x1 conv) -> SnakeBeta, conv (K 7) -> clamp.
 * Must match Qwen3TTSTokenizerV2Decoder.forward (QwenLM/Qwen3-TTS).
 *
 * Exact streaming: every op is causal. Each causal conv keeps the last
 * (K-1)*dilation columns of its input (zeros at position 0, which is the
 * official left padding), each vocoder transposed conv keeps its previous
 * input column, and each attention layer keeps K and V of the last window-1
 * positions; RoPE positions count from the stream start, as in a whole pass.
 * Every output value is then one computation in a fixed order that does not
 * depend on the chunking (the conv kernels compute each output independently;
 * ops_matmul computes each row independently), so any split gives the same
 * bits as one pass. Kernels that replace these must keep that property.
 *
 * Memory: persistent state is small and fixed (tails, KV windows); the
 * transient scratch is sized for the largest chunk seen, up to
 * CODEC_MAX_CHUNK_FRAMES (larger requests are cut into pieces of that size).
 * Where time goes (scalar build): the vocoder convolutions at 2-24 kHz. */
#include "model/codec_decoder_impl.h"

#include "backend/cpu/conv.h"
#include "model/codec_vulkan.h"
#include "util/huge_arena.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CODEC_MAX_CHUNK_FRAMES 16 /* ~2.3 MB of scratch per frame for the real model */

struct codec_stream {
    const codec_decoder *d;
    const ops_ctx *ops;       /* compute context: the decoder's own unless set (codec_stream_set_ops) */
    int64_t pos;              /* frames decoded since reset = RoPE position of the next frame */
    codec_trace_fn trace;
    void *trace_user;
    cdv_stream *dev;          /* the state on the Vulkan device (decoder with a device copy); else NULL */
    int dev_reset;            /* the device state is to be zeroed before the next chunk */
    qtts_error dev_err;       /* a failed device restore, reported by the next decode */
    int head_only;            /* decode_chunk stops after the pre-transformer (codec_stream_prime) */

    /* persistent history, channel-major [C][hist] unless noted */
    float *state;             /* one allocation holding every tail below */
    size_t state_size;        /* floats */
    float *pre_conv_tail;     /* [CD][2] */
    float **k_hist, **v_hist; /* [n_layers] -> [window-1][NKV*HD], oldest first */
    int kv_len;               /* valid rows in k_hist/v_hist, <= window-1 */
    float *up_tail[CODEC_MAX_UP];                    /* [LAT][6] dwconv input */
    float *dec0_tail;                                /* [LAT][6] */
    float *blk_tail[CODEC_MAX_BLOCKS];               /* [cin][1] post-Snake tconv input */
    float *ru_tail[CODEC_MAX_BLOCKS][CODEC_N_RES];   /* [cout][6*dilation] post-Snake conv1 input */
    float *final_tail;                               /* [DD>>n_blocks][6] post-Snake */

    /* transient scratch for up to cap frames (contents not kept across chunks) */
    int cap;
    float *scratch;
    float *big[3];            /* [big_size] each: channel-major stage buffers */
    size_t big_size;
    float *dq_first, *dq_rest; /* [cap][VQ] */
    float *dq_out, *dq_tmp;   /* [cap][CD] */
    float *x_tm;              /* [cap][LAT] transformer input/output, time-major */
    float *h, *xn, *o;        /* [cap][HID] */
    float *q, *att;           /* [cap][NH*HD] */
    float *kn, *vn;           /* [cap][NKV*HD] new keys/values of this chunk */
    float *gate, *up;         /* [cap][INTER] */
    float *rope;              /* [cap][HD] cos, sin per frame (ops_rope_angles) */
    float *scores;            /* [window] */
    float *cv_tm;             /* [cap*UP][LAT] ConvNeXt, time-major */
    float *cv_mid;            /* [cap*UP][4*LAT] */
    float *qscratch;          /* int8 convs' packed input (decoder with int8 stages), else NULL */
};

/* ---------------------------------------------------------------- sizes */

int codec_up_total(const codec_config *c) {
    int p = 1;
    for (int i = 0; i < c->n_up; i++) p *= c->up_ratio[i];
    return p;
}

size_t codec_big_floats(const codec_decoder *d, int n) {
    const codec_config *c = &d->cfg;
    size_t mx = (size_t)c->codebook_dim * (2 + n);
    size_t steps = (size_t)n;
    for (int u = 0; u < c->n_up; u++) {
        const size_t out = steps * c->up_ratio[u];
        if ((size_t)c->latent * (6 + out) > mx) mx = (size_t)c->latent * (6 + out);
        steps = out;
    }
    if ((size_t)c->decoder_dim * steps > mx) mx = (size_t)c->decoder_dim * steps;
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        if ((size_t)bl->cin * (1 + steps) > mx) mx = (size_t)bl->cin * (1 + steps);
        steps *= bl->rate;
        const size_t hist = 6 * (size_t)bl->ru[CODEC_N_RES - 1].dilation;
        if ((size_t)bl->cout * (hist + steps) > mx) mx = (size_t)bl->cout * (hist + steps);
    }
    return mx;
}

static qtts_status ensure_scratch(codec_stream *s, int n, qtts_error *e) {
    if (n <= s->cap) return QTTS_OK;
    const codec_config *c = &s->d->cfg;
    const size_t QD = (size_t)c->n_heads * c->head_dim, KD = (size_t)c->n_kv_heads * c->head_dim;
    const size_t nu = (size_t)n * codec_up_total(c);
    const size_t bigsz = codec_big_floats(s->d, n) + 16;
    size_t sizes[] = {
        bigsz, bigsz, bigsz,
        (size_t)n * c->vq_dim, (size_t)n * c->vq_dim, (size_t)n * c->codebook_dim, (size_t)n * c->codebook_dim,
        (size_t)n * c->latent,
        (size_t)n * c->hidden, (size_t)n * c->hidden, (size_t)n * c->hidden,
        (size_t)n * QD, (size_t)n * QD, (size_t)n * KD, (size_t)n * KD,
        (size_t)n * c->inter, (size_t)n * c->inter,
        (size_t)n * c->head_dim,
        (size_t)c->window,
        nu * c->latent, nu * 4 * c->latent,
        /* the int8, int16 or bf16 scratch bytes of any conv input [cin][t] (<= bigsz floats) fit in 2 bigsz floats */
        s->d->q8 ? 2 * bigsz : 0,
    };
    float **ptrs[] = {
        &s->big[0], &s->big[1], &s->big[2],
        &s->dq_first, &s->dq_rest, &s->dq_out, &s->dq_tmp,
        &s->x_tm,
        &s->h, &s->xn, &s->o,
        &s->q, &s->att, &s->kn, &s->vn,
        &s->gate, &s->up,
        &s->rope,
        &s->scores,
        &s->cv_tm, &s->cv_mid,
        &s->qscratch,
    };
    const int np = (int)(sizeof sizes / sizeof sizes[0]);
    size_t total = 0;
    for (int i = 0; i < np; i++) total += (sizes[i] + 15) & ~(size_t)15; /* 64-byte aligned slices */
    float *mem = huge_buf_alloc(total * sizeof(float));
    if (!mem)
        return err_set(e, QTTS_ERR_NOMEM, "out of memory: codec scratch for %d frames (%zu MB)", n,
                       total * sizeof(float) >> 20);
    free(s->scratch);
    s->scratch = mem;
    for (int i = 0; i < np; i++) {
        *ptrs[i] = mem;
        mem += (sizes[i] + 15) & ~(size_t)15;
    }
    s->big_size = bigsz;
    s->cap = n;
    return QTTS_OK;
}

/* ---------------------------------------------------------------- lifecycle */

size_t codec_decoder_state_floats(const codec_decoder *d) {
    const codec_config *c = &d->cfg;
    const size_t KD = (size_t)c->n_kv_heads * c->head_dim, W1 = (size_t)c->window - 1;
    size_t n = (size_t)c->codebook_dim * 2 + 2 * (size_t)c->n_layers * W1 * KD;
    n += (size_t)c->n_up * c->latent * 6 + (size_t)c->latent * 6;
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        n += bl->cin;
        for (int r = 0; r < CODEC_N_RES; r++) n += (size_t)bl->cout * 6 * bl->ru[r].dilation;
    }
    n += (size_t)(c->decoder_dim >> c->n_blocks) * 6;
    return n;
}

qtts_status codec_stream_new(const codec_decoder *d, codec_stream **out, qtts_error *e) {
    if (!d || !out) return err_set(e, QTTS_ERR_INVALID_ARG, "codec_stream_new: NULL argument");
    *out = NULL;
    const codec_config *c = &d->cfg;
    codec_stream *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    s->d = d;
    s->ops = &d->ops;
    const size_t KD = (size_t)c->n_kv_heads * c->head_dim, W1 = (size_t)c->window - 1;
    size_t n = codec_decoder_state_floats(d);
    s->state = malloc(n * sizeof(float) + 1);
    s->k_hist = calloc((size_t)c->n_layers + 1, sizeof *s->k_hist);
    s->v_hist = calloc((size_t)c->n_layers + 1, sizeof *s->v_hist);
    if (!s->state || !s->k_hist || !s->v_hist) {
        codec_stream_free(s);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory: codec stream state");
    }
    s->state_size = n;
    float *p = s->state;
    s->pre_conv_tail = p, p += (size_t)c->codebook_dim * 2;
    for (int l = 0; l < c->n_layers; l++) {
        s->k_hist[l] = p, p += W1 * KD;
        s->v_hist[l] = p, p += W1 * KD;
    }
    for (int u = 0; u < c->n_up; u++) s->up_tail[u] = p, p += (size_t)c->latent * 6;
    s->dec0_tail = p, p += (size_t)c->latent * 6;
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        s->blk_tail[b] = p, p += bl->cin;
        for (int r = 0; r < CODEC_N_RES; r++) s->ru_tail[b][r] = p, p += (size_t)bl->cout * 6 * bl->ru[r].dilation;
    }
    s->final_tail = p;
    if (d->dev) {
        qtts_status st = cdv_stream_new(d->dev, &s->dev, e);
        if (st) {
            codec_stream_free(s);
            return st;
        }
    }
    codec_stream_reset(s);
    *out = s;
    return QTTS_OK;
}

void codec_stream_reset(codec_stream *s) {
    if (!s) return;
    memset(s->state, 0, s->state_size * sizeof(float));
    s->kv_len = 0;
    s->pos = 0;
    s->dev_reset = s->dev != NULL;
    err_clear(&s->dev_err);
}

qtts_status codec_stream_save(const codec_stream *s, codec_snapshot *snap, qtts_error *e) {
    codec_snapshot_free(snap);
    if (s->dev) {
        size_t n;
        int64_t pos;
        cdv_stream_save(s->dev, NULL, &n, &pos, e);
        snap->state = malloc(n * sizeof(float) + 1);
        if (!snap->state) return err_set(e, QTTS_ERR_NOMEM, "out of memory saving the codec state");
        qtts_status st = s->dev_reset ? QTTS_OK : cdv_stream_save(s->dev, snap->state, &n, &pos, e);
        if (s->dev_reset) memset(snap->state, 0, n * sizeof(float)), pos = 0;
        if (st) {
            codec_snapshot_free(snap);
            return st;
        }
        snap->n = n;
        snap->d = s->d;
        snap->pos = pos;
        return QTTS_OK;
    }
    snap->state = malloc(s->state_size * sizeof(float) + 1);
    if (!snap->state) return err_set(e, QTTS_ERR_NOMEM, "out of memory saving the codec state");
    memcpy(snap->state, s->state, s->state_size * sizeof(float));
    snap->n = s->state_size;
    snap->d = s->d;
    snap->pos = s->pos;
    snap->kv_len = s->kv_len;
    return QTTS_OK;
}

void codec_stream_restore(codec_stream *s, const codec_snapshot *snap) {
    if (s->dev) {
        if (!snap->state || snap->d != s->d) return;
        if (cdv_stream_restore(s->dev, snap->state, snap->n, snap->pos, &s->dev_err) == QTTS_OK) s->dev_reset = 0;
        s->pos = snap->pos;
        return;
    }
    if (!snap->state || snap->d != s->d || snap->n != s->state_size) return;
    memcpy(s->state, snap->state, s->state_size * sizeof(float));
    s->pos = snap->pos;
    s->kv_len = snap->kv_len;
}

const codec_decoder *codec_stream_decoder(const codec_stream *s) { return s->d; }

void codec_stream_set_ops(codec_stream *s, const ops_ctx *ops) {
    if (s) s->ops = ops ? ops : &s->d->ops;
}

void codec_snapshot_free(codec_snapshot *snap) {
    if (!snap) return;
    free(snap->state);
    memset(snap, 0, sizeof *snap);
}

void codec_stream_free(codec_stream *s) {
    if (!s) return;
    cdv_stream_free(s->dev);
    free(s->scratch);
    free(s->state);
    free(s->k_hist);
    free(s->v_hist);
    free(s);
}

void codec_stream_set_trace(codec_stream *s, codec_trace_fn fn, void *user) {
    s->trace = fn;
    s->trace_user = user;
}

int64_t codec_stream_position_frames(const codec_stream *s) { return s->pos; }

/* ---------------------------------------------------------------- helpers */

static void trace(const codec_stream *s, const char *stage, const float *x, int C, int T, int stride) {
    if (s->trace) s->trace(stage, x, C, T, stride, s->trace_user);
}

/* Channel-major work buffer [C][hist + n] (row stride hist + n): put the
 * saved tail in the first hist columns. */
static void tail_load(float *work, const float *tail, int C, int hist, int n) {
    if (hist == 0) return;
    for (int c = 0; c < C; c++) memcpy(work + (size_t)c * (hist + n), tail + (size_t)c * hist, hist * sizeof(float));
}

/* Save the last hist columns of work [C][hist + n] as the next tail. */
static void tail_save(float *tail, const float *work, int C, int hist, int n) {
    if (hist == 0) return;
    for (int c = 0; c < C; c++)
        memcpy(tail + (size_t)c * hist, work + (size_t)c * (hist + n) + n, hist * sizeof(float));
}

/* dst[t][c] = src[c][t] */
static void to_time_major(float *dst, const float *src, int C, int T, int src_stride) {
    for (int c = 0; c < C; c++)
        for (int t = 0; t < T; t++) dst[(size_t)t * C + c] = src[(size_t)c * src_stride + t];
}

/* dst[c][t] = src[t][c] */
static void to_channel_major(float *dst, int dst_stride, const float *src, int C, int T) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) dst[(size_t)c * dst_stride + t] = src[(size_t)t * C + c];
}

/* Causal transposed conv with kernel 2r and stride r (CausalTransConvNet:
 * full transposed conv, right trim of r). x: [cin][1 + m], column 0 is the
 * previous chunk's last input (zeros at position 0). y: [cout][m*r],
 * y[o][t*r + p] = b[o] + sum_i (x[i][t] w[i][o][p + r] + x[i][t+1] w[i][o][p]),
 * accumulated over i in order, older input first (the order of
 * ops_conv_transpose1d). */
static void tconv_causal(const ops_ctx *ops, const float *x, int cin, int m, int x_stride, const float *w,
                         const float *wc, const conv_q8_w *wq, const conv_i16_w *wi, const conv_bf16_w *wh,
                         const float *bias, int cout, int r, float *y, int y_stride, float *scratch, void *qscratch) {
    /* the full transposed conv over the m + 1 inputs, output window [r, r + m r) */
    if (wq->q && ops_conv_transpose1d_q8_ctx(ops, x, cin, m + 1, x_stride, wq, cout, 2 * r, r, r, r + m * r, y,
                                             y_stride, scratch, qscratch))
        return;
    if (wi->q && ops_conv_transpose1d_i16_ctx(ops, x, cin, m + 1, x_stride, wi, cout, 2 * r, r, r, r + m * r, y,
                                              y_stride, scratch, qscratch))
        return;
    if (wh->w && ops_conv_transpose1d_bf16_ctx(ops, x, cin, m + 1, x_stride, wh, cout, 2 * r, r, r, r + m * r, y,
                                               y_stride, scratch, qscratch))
        return;
    if (!wc || !ops_conv_transpose1d_conv_ctx(ops, x, cin, m + 1, x_stride, wc, cout, 2 * r, r, r, r + m * r, y,
                                              y_stride, scratch))
        ops_conv_transpose1d_ctx(ops, x, cin, m + 1, x_stride, w, bias, cout, 2 * r, r, 1, r, r + m * r, y, y_stride);
}

/* A stride-1 conv1d (groups 1) in the format the decoder holds for it: its
 * int8, int16 or bf16 form when made (codec_decoder_set_format), else f32;
 * i NULL where the conv has no int16 form. */
static void conv1d_fmt(const codec_stream *s, const float *x, int cin, int t_in, int x_stride, const conv_q8_w *q,
                       const conv_i16_w *i, const conv_bf16_w *h, const float *w, const float *b, int cout, int k,
                       int dilation, float *y, int y_stride) {
    if (q->q) ops_conv1d_q8_ctx(s->ops, x, cin, t_in, x_stride, q, dilation, y, y_stride, s->qscratch);
    else if (i && i->q) ops_conv1d_i16_ctx(s->ops, x, cin, t_in, x_stride, i, dilation, y, y_stride, s->qscratch);
    else if (h->w) ops_conv1d_bf16_ctx(s->ops, x, cin, t_in, x_stride, h, dilation, y, y_stride, s->qscratch);
    else ops_conv1d_ctx(s->ops, x, cin, t_in, x_stride, w, b, cout, k, 1, dilation, 1, y, y_stride);
}

/* LayerNorm over C of one time step (eps 1e-6; biased variance in double). */
static void layernorm(float *y, const float *x, const float *w, const float *b, int C, float eps) {
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

static void gelu_erf(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* ---------------------------------------------------------------- stages */

/* Split-RVQ dequantisation into work [CD][2 + n] at column 2. */
static void dequantize(codec_stream *s, const int32_t *codes, int n, float *work) {
    const codec_decoder *d = s->d;
    const codec_config *c = &d->cfg;
    const int V = c->vq_dim, Q = c->n_q;
    const size_t cb = (size_t)c->codebook_size * V;
    for (int t = 0; t < n; t++) {
        const int32_t *ct = codes + (size_t)t * Q;
        float *f = s->dq_first + (size_t)t * V, *r = s->dq_rest + (size_t)t * V;
        memcpy(f, d->codebook + (size_t)ct[0] * V, V * sizeof(float));
        memcpy(r, d->codebook + cb + (size_t)ct[1] * V, V * sizeof(float));
        for (int q = 2; q < Q; q++) {
            const float *E = d->codebook + q * cb + (size_t)ct[q] * V;
            for (int i = 0; i < V; i++) r[i] += E[i];
        }
    }
    /* project(first) + project(sum of rest), as rvq_first + rvq_rest */
    ops_matmul(s->ops, &d->proj_first, s->dq_first, n, NULL, s->dq_out);
    ops_matmul(s->ops, &d->proj_rest, s->dq_rest, n, NULL, s->dq_tmp);
    const int CD = c->codebook_dim;
    for (size_t i = 0; i < (size_t)n * CD; i++) s->dq_out[i] += s->dq_tmp[i];
    to_channel_major(work + 2, 2 + n, s->dq_out, CD, n);
}

/* Pre-transformer on x_tm [n][LAT] in place (output [n][LAT]). */
static void transformer(codec_stream *s, int n) {
    const codec_decoder *d = s->d;
    const codec_config *c = &d->cfg;
    const ops_ctx *ops = s->ops;
    const int H = c->hidden, HD = c->head_dim, NH = c->n_heads, NKV = c->n_kv_heads;
    const int QD = NH * HD, KD = NKV * HD, W1 = c->window - 1, grp = NH / NKV;
    const float scale = 1.0f / sqrtf((float)HD);
    const int hist = s->kv_len;

    for (int t = 0; t < n; t++) ops_rope_angles(s->rope + (size_t)t * HD, HD, (int)(s->pos + t), d->inv_freq);
    ops_matmul(ops, &d->in_proj, s->x_tm, n, d->in_proj_b, s->h);

    for (int l = 0; l < c->n_layers; l++) {
        const codec_layer *L = &d->layers[l];
        float *kh = s->k_hist[l], *vh = s->v_hist[l];
        for (int t = 0; t < n; t++)
            ops_rmsnorm(s->xn + (size_t)t * H, s->h + (size_t)t * H, L->attn_norm, H, c->rms_eps);
        {
            const qt_mat *const wqkv[3] = {&L->wq, &L->wk, &L->wv};
            float *const yqkv[3] = {s->q, s->kn, s->vn};
            ops_matmul_multi(ops, 3, wqkv, s->xn, n, NULL, yqkv);
        }
        for (int t = 0; t < n; t++) {
            const float *cs = s->rope + (size_t)t * HD;
            for (int h = 0; h < NH; h++) ops_rope_neox_cs(s->q + (size_t)t * QD + (size_t)h * HD, HD, cs);
            for (int h = 0; h < NKV; h++) ops_rope_neox_cs(s->kn + (size_t)t * KD + (size_t)h * HD, HD, cs);
        }
        /* Query t sits at index hist + t of [history rows ; new rows] and sees
         * indices (hist + t - window, hist + t]; as in ops_attn_head, scores
         * by the table's dot, the output by one axpy per key (so a query's
         * result depends on its keys only, not on the chunking). */
        for (int t = 0; t < n; t++) {
            const int qi = hist + t;
            const int j0 = qi - W1 > 0 ? qi - W1 : 0;
            const int nk = qi - j0 + 1;
            for (int h = 0; h < NH; h++) {
                const float *qv = s->q + (size_t)t * QD + (size_t)h * HD;
                const int kvh = h / grp;
                for (int j = j0; j <= qi; j++) {
                    const float *kv = (j < hist ? kh + (size_t)j * KD : s->kn + (size_t)(j - hist) * KD) + kvh * HD;
                    s->scores[j - j0] = ops_dot(ops, qv, kv, HD) * scale;
                }
                ops_softmax(s->scores, nk);
                float *ov = s->att + (size_t)t * QD + (size_t)h * HD;
                for (int i = 0; i < HD; i++) ov[i] = 0.0f;
                for (int j = j0; j <= qi; j++) {
                    const float *vv = (j < hist ? vh + (size_t)j * KD : s->vn + (size_t)(j - hist) * KD) + kvh * HD;
                    ops_axpy(ops, ov, s->scores[j - j0], vv, HD);
                }
            }
        }
        /* keep the last window-1 rows of [history ; new] */
        const int total = hist + n, keep = total < W1 ? total : W1;
        const int from_hist = keep > n ? keep - n : 0; /* rows still taken from history */
        if (from_hist > 0) {
            memmove(kh, kh + (size_t)(hist - from_hist) * KD, (size_t)from_hist * KD * sizeof(float));
            memmove(vh, vh + (size_t)(hist - from_hist) * KD, (size_t)from_hist * KD * sizeof(float));
        }
        const int from_new = keep - from_hist;
        memcpy(kh + (size_t)from_hist * KD, s->kn + (size_t)(n - from_new) * KD, (size_t)from_new * KD * sizeof(float));
        memcpy(vh + (size_t)from_hist * KD, s->vn + (size_t)(n - from_new) * KD, (size_t)from_new * KD * sizeof(float));

        ops_matmul(ops, &L->wo, s->att, n, NULL, s->o);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < H; i++) s->h[(size_t)t * H + i] += L->attn_scale[i] * s->o[(size_t)t * H + i];

        for (int t = 0; t < n; t++)
            ops_rmsnorm(s->xn + (size_t)t * H, s->h + (size_t)t * H, L->mlp_norm, H, c->rms_eps);
        ops_matmul_swiglu(ops, &L->w_gate, &L->w_up, s->xn, n, s->gate, s->up);
        ops_matmul(ops, &L->w_down, s->gate, n, NULL, s->o);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < H; i++) s->h[(size_t)t * H + i] += L->mlp_scale[i] * s->o[(size_t)t * H + i];
    }
    s->kv_len = hist + n < W1 ? hist + n : W1;
    for (int t = 0; t < n; t++) ops_rmsnorm(s->xn + (size_t)t * H, s->h + (size_t)t * H, d->final_norm, H, c->rms_eps);
    ops_matmul(ops, &d->out_proj, s->xn, n, d->out_proj_b, s->x_tm);
}

/* ConvNeXt upsampling stage u: in [LAT][m] (stride in_stride) -> out
 * [LAT][ratio*m] written at out (stride out_stride). work: [LAT][6 + ratio*m]. */
static void upsample_stage(codec_stream *s, int u, const float *in, int m, int in_stride, float *work, float *tmp,
                           float *out, int out_stride) {
    const codec_decoder *d = s->d;
    const codec_upsample *U = &d->up[u];
    const int C = d->cfg.latent, M = m * U->ratio, ws = 6 + M;
    tail_load(work, s->up_tail[u], C, 6, M);
    /* tmp [C][M] is free until the depthwise conv: the phases of the transposed conv */
    if (!ops_conv_transpose1d_conv_ctx(s->ops, in, C, m, in_stride, U->tconv_wc, C, U->ratio, U->ratio, 0, M,
                                       work + 6, ws, tmp))
        ops_conv_transpose1d_ctx(s->ops, in, C, m, in_stride, U->tconv_w, U->tconv_b, C, U->ratio, U->ratio, 1, 0, M,
                                 work + 6, ws);
    ops_conv1d_ctx(s->ops, work, C, ws, ws, U->dw_w, U->dw_b, C, CODEC_CONV_K, 1, 1, C, tmp, M);
    tail_save(s->up_tail[u], work, C, 6, M);
    to_time_major(s->cv_tm, tmp, C, M, M);
    for (int t = 0; t < M; t++) layernorm(s->cv_tm + (size_t)t * C, s->cv_tm + (size_t)t * C, U->ln_w, U->ln_b, C, 1e-6f);
    ops_matmul(s->ops, &U->pw1, s->cv_tm, M, U->pw1_b, s->cv_mid);
    gelu_erf(s->cv_mid, (size_t)M * 4 * C);
    ops_matmul(s->ops, &U->pw2, s->cv_mid, M, U->pw2_b, s->cv_tm);
    for (int c = 0; c < C; c++) {
        const float g = U->gamma[c];
        const float *res = work + (size_t)c * ws + 6;
        float *oc = out + (size_t)c * out_stride;
        for (int t = 0; t < M; t++) oc[t] = res[t] + g * s->cv_tm[(size_t)t * C + c];
    }
}

/* Vocoder block b: x [cin][m] (contiguous) -> out [cout][m*rate]; work is a
 * third big buffer, and x is overwritten (used as scratch once consumed). */
static void vocoder_block(codec_stream *s, int b, float *x, int m, float *work, float *out) {
    const codec_block *bl = &s->d->blocks[b];
    const int M = m * bl->rate, C = bl->cout;
    /* SnakeBeta -> [cin][1 + m] with the previous input column first */
    float *A = work;
    tail_load(A, s->blk_tail[b], bl->cin, 1, m);
    ops_snake(s->ops, x, m, A + 1, 1 + m, bl->act.a, bl->act.inv_b, bl->cin, m);
    float *y = out; /* block output / residual stream [C][M] */
    /* x is consumed (A holds its activation): scratch for the transposed conv's phases */
    tconv_causal(s->ops, A, bl->cin, m, 1 + m, bl->tconv_w, bl->tconv_wc, &bl->tconv_q, &bl->tconv_i, &bl->tconv_h,
                 bl->tconv_b, C, bl->rate, y, M, x, s->qscratch);
    tail_save(s->blk_tail[b], A, bl->cin, 1, m);
    float *tmp = x; /* free now: [C][M] fits in a big buffer */
    for (int r = 0; r < CODEC_N_RES; r++) {
        const codec_resunit *ru = &bl->ru[r];
        const int hist = 6 * ru->dilation, ws = hist + M;
        tail_load(A, s->ru_tail[b][r], C, hist, M);
        ops_snake(s->ops, y, M, A + hist, ws, ru->act1.a, ru->act1.inv_b, C, M);
        conv1d_fmt(s, A, C, ws, ws, &ru->conv1_q, NULL, &ru->conv1_h, ru->conv1_w, ru->conv1_b, C, CODEC_CONV_K,
                   ru->dilation, tmp, M);
        tail_save(s->ru_tail[b][r], A, C, hist, M);
        ops_snake(s->ops, tmp, M, tmp, M, ru->act2.a, ru->act2.inv_b, C, M);
        conv1d_fmt(s, tmp, C, M, M, &ru->conv2_q, &ru->conv2_i, &ru->conv2_h, ru->conv2_w, ru->conv2_b, C, 1, 1, A,
                   M);
        ops_add_ctx(s->ops, y, A, (size_t)C * M);
    }
}

/* Stage bookkeeping for decode_chunk: stage k runs when k > from; the output
 * of stage `from` is copied in from inj [C][T] (tests feed golden inputs to
 * isolate one stage); every stage from `from` on is traced. */
typedef struct stage_cursor {
    int k, from;
    const float *inj;
} stage_cursor;

static int stage_run(const stage_cursor *sc) { return sc->k > sc->from; }

static void stage_out(codec_stream *s, stage_cursor *sc, const char *name, float *out, int C, int T, int stride) {
    if (sc->k == sc->from)
        for (int c = 0; c < C; c++) memcpy(out + (size_t)c * stride, sc->inj + (size_t)c * T, T * sizeof(float));
    if (sc->k >= sc->from) trace(s, name, out, C, T, stride);
    sc->k++;
}

/* One chunk of n <= cap frames (codes already validated). Three big buffers
 * b0..b2 rotate through the stages; see each step for who holds what. */
static void decode_chunk(codec_stream *s, const int32_t *codes, int n, float *pcm, int from, const float *inj) {
    const codec_decoder *d = s->d;
    const codec_config *c = &d->cfg;
    const int CD = c->codebook_dim, LAT = c->latent;
    float *b0 = s->big[0], *b1 = s->big[1], *b2 = s->big[2];
    stage_cursor sc = {.k = 0, .from = from, .inj = inj};
    char name[32];

    /* dequantise into b0 [CD][2 + n] after pre_conv's left context */
    if (stage_run(&sc)) dequantize(s, codes, n, b0);
    stage_out(s, &sc, "quantizer_out", b0 + 2, CD, n, 2 + n);

    /* pre_conv (K 3): b0 -> b1 [LAT][n] */
    if (stage_run(&sc)) {
        tail_load(b0, s->pre_conv_tail, CD, 2, n);
        ops_conv1d_ctx(s->ops, b0, CD, 2 + n, 2 + n, d->pre_conv_w, d->pre_conv_b, LAT, 3, 1, 1, 1, b1, n);
        tail_save(s->pre_conv_tail, b0, CD, 2, n);
    }
    stage_out(s, &sc, "pre_conv_out", b1, LAT, n, n);

    /* pre-transformer, time-major: b1 -> b0 [LAT][n] */
    if (stage_run(&sc)) {
        to_time_major(s->x_tm, b1, LAT, n, n);
        transformer(s, n);
        to_channel_major(b0, n, s->x_tm, LAT, n);
    }
    stage_out(s, &sc, "pre_transformer_out", b0, LAT, n, n);
    if (s->head_only) { /* priming: the convolutions after it see only the last frames */
        s->pos += n;
        return;
    }

    /* ConvNeXt upsampler: in b0 -> tconv into work b1 -> dwconv into b2 ->
     * out b0 (the tconv has consumed b0 by then). The last stage writes at
     * column 6 of decoder.0's work buffer [LAT][6 + m]. */
    int m = n;
    for (int u = 0; u < c->n_up; u++) {
        const int M = m * c->up_ratio[u];
        const int last = u == c->n_up - 1;
        const int out_stride = last ? 6 + M : M;
        float *out = last ? b0 + 6 : b0;
        if (stage_run(&sc)) upsample_stage(s, u, b0, m, m, b1, b2, out, out_stride);
        snprintf(name, sizeof name, "upsample%d_out", u);
        stage_out(s, &sc, name, out, LAT, M, out_stride);
        m = M;
    }

    /* decoder.0: causal conv K 7, b0 [LAT][6 + m] -> b1 [DD][m] */
    if (stage_run(&sc)) {
        tail_load(b0, s->dec0_tail, LAT, 6, m);
        conv1d_fmt(s, b0, LAT, 6 + m, 6 + m, &d->dec0_q, &d->dec0_i, &d->dec0_h, d->dec0_w, d->dec0_b, c->decoder_dim,
                   CODEC_CONV_K, 1, b1, m);
        tail_save(s->dec0_tail, b0, LAT, 6, m);
    }
    stage_out(s, &sc, "decoder0_out", b1, c->decoder_dim, m, m);

    /* vocoder blocks: x -> fb (returned), with fa as work; then rotate */
    float *x = b1, *fa = b0, *fb = b2;
    for (int b = 0; b < c->n_blocks; b++) {
        const int M = m * d->blocks[b].rate;
        if (stage_run(&sc)) vocoder_block(s, b, x, m, fa, fb);
        snprintf(name, sizeof name, "decoder%d_out", b + 1);
        stage_out(s, &sc, name, fb, d->blocks[b].cout, M, M);
        float *old_x = x;
        x = fb;
        fb = old_x;
        m = M;
    }

    /* final SnakeBeta into fa [OD][6 + m] at column 6, causal conv K 7 -> pcm */
    const int OD = c->decoder_dim >> c->n_blocks;
    if (stage_run(&sc)) ops_snake(s->ops, x, m, fa + 6, 6 + m, d->final_act.a, d->final_act.inv_b, OD, m);
    snprintf(name, sizeof name, "decoder%d_out", c->n_blocks + 1);
    stage_out(s, &sc, name, fa + 6, OD, m, 6 + m);
    if (stage_run(&sc)) {
        tail_load(fa, s->final_tail, OD, 6, m);
        ops_conv1d_ctx(s->ops, fa, OD, 6 + m, 6 + m, d->final_w, d->final_b, 1, CODEC_CONV_K, 1, 1, 1, pcm, m);
        tail_save(s->final_tail, fa, OD, 6, m);
    }
    snprintf(name, sizeof name, "decoder%d_out", c->n_blocks + 2);
    stage_out(s, &sc, name, pcm, 1, m, m);
    for (int t = 0; t < m; t++) pcm[t] = pcm[t] < -1.0f ? -1.0f : pcm[t] > 1.0f ? 1.0f : pcm[t];
    s->pos += n;
}

/* ---------------------------------------------------------------- API */

/* The checks of codec_stream_decode; 1 when there is something to decode. */
static int decode_args_ok(const codec_stream *s, const int32_t *codes, int n_frames, const float *pcm,
                          qtts_status *st, qtts_error *e) {
    *st = QTTS_OK;
    if (!s) *st = err_set(e, QTTS_ERR_INVALID_ARG, "codec_stream_decode: NULL stream");
    else if (n_frames < 0) *st = err_set(e, QTTS_ERR_INVALID_ARG, "codec_stream_decode: n_frames = %d < 0", n_frames);
    else if (n_frames == 0) return 0;
    else if (!codes || !pcm) *st = err_set(e, QTTS_ERR_INVALID_ARG, "codec_stream_decode: NULL codes or pcm");
    if (*st) return 0;
    const codec_config *c = &s->d->cfg;
    for (int t = 0; t < n_frames; t++)
        for (int q = 0; q < c->n_q; q++) {
            const int32_t v = codes[(size_t)t * c->n_q + q];
            if (v < 0 || v >= c->codebook_size) {
                *st = err_set(e, QTTS_ERR_INPUT,
                              "codec code %d at frame %d, codebook %d is outside [0, %d); talker control tokens "
                              "must not reach the codec",
                              (int)v, t, q, c->codebook_size);
                return 0;
            }
        }
    return 1;
}

/* The device state ready for a chunk (a pending reset done, a failed restore reported). */
static qtts_status dev_ready(codec_stream *s, qtts_error *e) {
    if (s->dev_err.status) return err_set(e, s->dev_err.status, "%s", s->dev_err.msg);
    qtts_status st = s->dev_reset ? cdv_stream_reset(s->dev, e) : QTTS_OK;
    if (!st) s->dev_reset = 0;
    return st;
}

qtts_status codec_stream_link_codes(codec_stream *s, const struct cdv_code_ring *ring, qtts_error *e) {
    return s && s->dev ? cdv_stream_link(s->dev, ring, e) : QTTS_OK;
}

qtts_status codec_stream_decode_at(codec_stream *s, const int32_t *codes, int n_frames, int64_t serial0, float *pcm,
                                   int *on_device, qtts_error *e) {
    qtts_status st;
    *on_device = 0;
    if (!decode_args_ok(s, codes, n_frames, pcm, &st, e)) return st;
    if (s->dev && serial0 >= 0) {
        if ((st = dev_ready(s, e))) return st;
        st = cdv_stream_decode_ring(s->dev, serial0, n_frames, pcm, on_device, e);
        if (st || *on_device) {
            if (!st) s->pos += n_frames;
            return st;
        }
    }
    return codec_stream_decode(s, codes, n_frames, pcm, e);
}

qtts_status codec_stream_decode(codec_stream *s, const int32_t *codes, int n_frames, float *pcm, qtts_error *e) {
    qtts_status st;
    if (!decode_args_ok(s, codes, n_frames, pcm, &st, e)) return st;
    const codec_config *c = &s->d->cfg;
    if (s->dev) {
        if ((st = dev_ready(s, e))) return st;
        st = cdv_stream_decode(s->dev, codes, n_frames, pcm, e);
        if (!st) s->pos += n_frames;
        return st;
    }
    const int want = n_frames < CODEC_MAX_CHUNK_FRAMES ? n_frames : CODEC_MAX_CHUNK_FRAMES;
    st = ensure_scratch(s, want, e);
    if (st != QTTS_OK) return st;
    const size_t spf = (size_t)c->samples_per_frame;
    for (int t = 0; t < n_frames;) {
        const int n = n_frames - t < s->cap ? n_frames - t : s->cap;
        decode_chunk(s, codes + (size_t)t * c->n_q, n, pcm + (size_t)t * spf, -1, NULL);
        t += n;
    }
    return QTTS_OK;
}

/* Frames of input after which no convolution tail after the pre-transformer
 * depends on what came before them: each causal conv reaches back its
 * history (6 x dilation samples for K 7, 1 input for the transposed convs),
 * so a wrong start spoils at most the sum of those reaches, in frames at
 * each stage's rate (real codec: 9.4 frames, so 11 are decoded), plus a margin. */
static int conv_reach_frames(const codec_decoder *d) {
    const codec_config *c = &d->cfg;
    double f = 0.0, rate = 1.0;
    for (int u = 0; u < c->n_up; u++) {
        rate *= c->up_ratio[u];
        f += 6.0 / rate; /* depthwise conv (the transposed conv before it has no overlap) */
    }
    f += 6.0 / rate; /* decoder.0 */
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        f += 1.0 / rate; /* the transposed conv's previous input */
        rate *= bl->rate;
        for (int r = 0; r < CODEC_N_RES; r++) f += 6.0 * bl->ru[r].dilation / rate;
    }
    f += 6.0 / rate; /* the final conv */
    return (int)f + 2;
}

qtts_status codec_stream_prime(codec_stream *s, const int32_t *codes, int n_frames, float *last, qtts_error *e) {
    qtts_status st;
    float dummy;
    if (last) *last = 0.0f;
    if (!decode_args_ok(s, codes, n_frames, &dummy, &st, e)) return st;
    const codec_config *c = &s->d->cfg;
    const int reach = conv_reach_frames(s->d);
    const int head = s->dev || n_frames <= reach ? 0 : n_frames - reach, rest = n_frames - head;
    if (head > 0) {
        st = ensure_scratch(s, head < CODEC_MAX_CHUNK_FRAMES ? head : CODEC_MAX_CHUNK_FRAMES, e);
        if (st != QTTS_OK) return st;
        s->head_only = 1;
        for (int t = 0; t < head;) {
            const int n = head - t < s->cap ? head - t : s->cap;
            decode_chunk(s, codes + (size_t)t * c->n_q, n, NULL, -1, NULL);
            t += n;
        }
        s->head_only = 0;
    }
    const size_t spf = (size_t)c->samples_per_frame;
    float *pcm = malloc(sizeof(float) * (size_t)rest * spf);
    if (!pcm) return err_set(e, QTTS_ERR_NOMEM, "out of memory priming the codec stream");
    st = codec_stream_decode(s, codes + (size_t)head * c->n_q, rest, pcm, e);
    if (st == QTTS_OK && last) *last = pcm[(size_t)rest * spf - 1];
    free(pcm);
    return st;
}

/* Position of a stage name in decode_chunk's order, or -1. */
static int stage_index(const codec_config *c, const char *stage) {
    static const char *head[] = {"quantizer_out", "pre_conv_out", "pre_transformer_out"};
    for (int i = 0; i < 3; i++)
        if (strcmp(stage, head[i]) == 0) return i;
    char name[32];
    for (int u = 0; u < c->n_up; u++) {
        snprintf(name, sizeof name, "upsample%d_out", u);
        if (strcmp(stage, name) == 0) return 3 + u;
    }
    for (int b = 0; b <= c->n_blocks + 2; b++) {
        snprintf(name, sizeof name, "decoder%d_out", b);
        if (strcmp(stage, name) == 0) return 3 + c->n_up + b;
    }
    return -1;
}

qtts_status codec_stream_decode_from_stage(codec_stream *s, const char *stage, const float *in, int n_frames,
                                           float *pcm, qtts_error *e) {
    if (!s || !stage || !in || !pcm || n_frames < 1)
        return err_set(e, QTTS_ERR_INVALID_ARG, "codec_stream_decode_from_stage: bad argument");
    const int k = stage_index(&s->d->cfg, stage);
    if (k < 0) return err_set(e, QTTS_ERR_INVALID_ARG, "unknown codec stage '%s'", stage);
    qtts_status st = ensure_scratch(s, n_frames, e);
    if (st != QTTS_OK) return st;
    decode_chunk(s, NULL, n_frames, pcm, k, in);
    return QTTS_OK;
}

qtts_status codec_decode(const codec_decoder *d, const int32_t *codes, int n_frames, float *pcm, qtts_error *e) {
    codec_stream *s;
    qtts_status st = codec_stream_new(d, &s, e);
    if (st != QTTS_OK) return st;
    st = codec_stream_decode(s, codes, n_frames, pcm, e);
    codec_stream_free(s);
    return st;
}

qtts_status codec_decoder_use_vulkan(codec_decoder *d, struct vk_dev *dev, qtts_error *e) {
    cdv_free(d->dev);
    d->dev = NULL;
    return dev ? cdv_create(&d->dev, d, dev, e) : QTTS_OK;
}
