/* The codec decoder on the Vulkan backend (see codec_vulkan.h): weights
 * uploaded once, a stream's history (convolution tails, the ring KV window)
 * resident on the device, and one chunk of n frames recorded once per n and
 * replayed.
 * Dataflow per chunk (one submission): codes -> codebook_f32 -> two
 * matmul_f32 projections -> pre_conv (conv1d_f32 K 3) -> pre-transformer
 * (matmul_f32, rmsnorm, rope_ring_f32, attention_window_f32, swiglu,
 * scale_add_f32) -> per ConvNeXt stage conv_transpose1d_f32, depthwise
 * conv1d_f32, layernorm_f32, matmul_f32, gelu_f32, scale_add_f32 ->
 * decoder.0 conv1d_f32 -> per vocoder block snake_f32,
 * conv_transpose1d_f32 and 3 residual units (snake, dilated conv, snake,
 * 1x1 conv, add) -> snake, conv1d_f32 with clamp -> PCM (host-visible).
 * Every causal op keeps the CPU's layout: a work buffer [C][hist + n] whose
 * first hist columns are the saved tail (copy2d_f32 in and out).
 * Must match codec_stream.c decode_chunk step for step. */
#include "model/codec_vulkan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef QTTS_HAVE_VULKAN

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_kernels.h"
#include "model/codec_decoder_impl.h"

#define CDV_MAX_CHUNK_FRAMES 16 /* frames per recorded chunk; larger requests go in pieces */
/* Frames of a code ring left alone behind its newest: a chunk's codes are
 * gathered at the start of its submission, and the generating stream may
 * push this many more frames before that runs without reaching them. */
#define CDV_RING_SLACK 64

typedef struct cdv_mat {
    vk_buf w;
    int rows, cols;
} cdv_mat;

typedef struct cdv_layer {
    cdv_mat wq, wk, wv, wo, wg, wu, wd;
    uint32_t attn_norm, attn_scale, mlp_norm, mlp_scale; /* offsets in small */
} cdv_layer;

typedef struct cdv_snake {
    uint32_t a, ib; /* offsets in small */
} cdv_snake;

typedef struct cdv_up {
    vk_buf tconv_w, dw_w;
    uint32_t tconv_b, dw_b, ln_w, ln_b, pw1_b, pw2_b, gamma;
    cdv_mat pw1, pw2;
} cdv_up;

typedef struct cdv_ru {
    cdv_snake act1, act2;
    vk_buf conv1_w, conv2_w;
    uint32_t conv1_b, conv2_b;
} cdv_ru;

typedef struct cdv_block {
    cdv_snake act;
    vk_buf tconv_w;
    uint32_t tconv_b;
    cdv_ru ru[CODEC_N_RES];
} cdv_block;

struct cdv_model {
    vk_dev *dev;
    const codec_decoder *d;
    int64_t bytes;
    vk_buf small;           /* every bias, norm, scale and folded SnakeBeta vector, f32 */
    vk_buf codebook;        /* [n_q][size][VQ] */
    cdv_mat proj_first, proj_rest, in_proj, out_proj;
    uint32_t in_proj_b, out_proj_b, final_norm;
    vk_buf pre_conv_w;
    uint32_t pre_conv_b;
    cdv_layer *layers;      /* [n_layers] */
    cdv_up up[CODEC_MAX_UP];
    vk_buf dec0_w;
    uint32_t dec0_b;
    cdv_block blocks[CODEC_MAX_BLOCKS];
    cdv_snake final_act;
    vk_buf final_w;
    uint32_t final_b;
};

struct cdv_stream {
    const cdv_model *v;
    int64_t pos;
    int ring;               /* KV slots per layer: window - 1 + CDV_MAX_CHUNK_FRAMES */
    /* history, one device buffer; offsets in floats */
    vk_buf st;
    size_t st_floats;
    uint32_t pre_conv_tail, kr, vr, up_tail[CODEC_MAX_UP], dec0_tail, blk_tail[CODEC_MAX_BLOCKS],
        ru_tail[CODEC_MAX_BLOCKS][CODEC_N_RES], final_tail;
    /* host-visible per-chunk inputs and output */
    vk_buf ctl;             /* uint [4]: ctl[0] the position of the chunk's first frame; ctl[1] its
                               frame number in the linked code ring and ctl[2] 1 to read it there */
    cdv_code_ring codes_ring; /* linked generating stream (buf NULL: none) */
    vk_buf codes;           /* int [cap][n_q] */
    vk_buf rope;            /* float [cap][HD] */
    vk_buf pcm;             /* float [cap * samples_per_frame] */
    /* device scratch */
    vk_buf big[3];          /* channel-major stage buffers */
    vk_buf dq, dqo;         /* [2][cap][VQ] (first, rest), [cap][CD] */
    vk_buf x_tm, h, xn, o, q, att, kn, vn, gate, up;
    vk_buf cv_tm, cv_mid;   /* [cap * UP][LAT], [cap * UP][4 LAT] */
    vk_cmd *cmd[CDV_MAX_CHUNK_FRAMES + 1]; /* recorded per chunk size (NULL until first used) */
};

/* ------------------------------------------------------------ upload */

typedef struct small_vec {
    float *v;
    size_t n, cap;
    int oom;
} small_vec;

static uint32_t small_add(small_vec *s, const float *x, int n) {
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->n + n) cap *= 2;
        float *p = realloc(s->v, sizeof(float) * cap);
        if (!p) {
            s->oom = 1;
            return 0;
        }
        s->v = p;
        s->cap = cap;
    }
    memcpy(s->v + s->n, x, sizeof(float) * n);
    const uint32_t off = (uint32_t)s->n;
    s->n += n;
    return off;
}

typedef struct up_ctx {
    cdv_model *v;
    const codec_decoder *d;
    qtts_error *e;
    qtts_status st;
} up_ctx;

static void up_floats(up_ctx *u, vk_buf *b, const float *x, size_t n, const char *what) {
    if (u->st) return;
    u->st = vk_buf_alloc(u->v->dev, b, n * sizeof(float), 0, u->e);
    if (!u->st) u->st = vk_buf_upload(u->v->dev, b, 0, x, n * sizeof(float), u->e);
    if (u->st) err_prefix(u->e, "codec %s: ", what);
    else u->v->bytes += (int64_t)(n * sizeof(float));
}

static void up_mat(up_ctx *u, cdv_mat *g, const qt_mat *w, const char *what) {
    if (u->st) return;
    w = codec_mat_f32(u->d, w); /* the device computes in f32 whatever the CPU's format */
    g->rows = w->rows;
    g->cols = w->cols;
    if (qt_is_quant(w)) {
        u->st = err_set(u->e, QTTS_ERR_UNSUPPORTED, "codec %s: quantised codec matrices have no Vulkan path", what);
        return;
    }
    const size_t n = (size_t)w->rows * w->cols;
    float *f = w->dtype == DT_F32 ? NULL : malloc(sizeof(float) * n);
    if (w->dtype != DT_F32 && !f) {
        u->st = err_set(u->e, QTTS_ERR_NOMEM, "out of memory converting codec %s", what);
        return;
    }
    if (f) dtype_to_f32(w->dtype, w->data, f, n);
    up_floats(u, &g->w, f ? f : (const float *)w->data, n, what);
    free(f);
}

static void mat_free(vk_dev *d, cdv_mat *m) { vk_buf_free(d, &m->w); }

static cdv_snake add_snake(small_vec *s, const codec_snake *k, int C) {
    return (cdv_snake){small_add(s, k->a, C), small_add(s, k->inv_b, C)};
}

qtts_status cdv_create(cdv_model **out, const codec_decoder *d, struct vk_dev *dev, qtts_error *e) {
    *out = NULL;
    cdv_model *v = calloc(1, sizeof *v);
    if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    const codec_config *c = &d->cfg;
    v->dev = dev;
    v->d = d;
    v->layers = calloc((size_t)c->n_layers, sizeof *v->layers);
    if (!v->layers) {
        free(v);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    small_vec s = {0};
    up_ctx u = {v, d, e, QTTS_OK};
    const int LAT = c->latent, H = c->hidden;
    up_floats(&u, &v->codebook, d->codebook, (size_t)c->n_q * c->codebook_size * c->vq_dim, "codebook");
    up_mat(&u, &v->proj_first, &d->proj_first, "rvq_first.output_proj");
    up_mat(&u, &v->proj_rest, &d->proj_rest, "rvq_rest.output_proj");
    up_floats(&u, &v->pre_conv_w, d->pre_conv_w, (size_t)LAT * c->codebook_dim * 3, "pre_conv");
    v->pre_conv_b = small_add(&s, d->pre_conv_b, LAT);
    up_mat(&u, &v->in_proj, &d->in_proj, "pre_transformer.input_proj");
    v->in_proj_b = small_add(&s, d->in_proj_b, H);
    for (int l = 0; l < c->n_layers; l++) {
        const codec_layer *L = &d->layers[l];
        cdv_layer *G = &v->layers[l];
        up_mat(&u, &G->wq, &L->wq, "q_proj");
        up_mat(&u, &G->wk, &L->wk, "k_proj");
        up_mat(&u, &G->wv, &L->wv, "v_proj");
        up_mat(&u, &G->wo, &L->wo, "o_proj");
        up_mat(&u, &G->wg, &L->w_gate, "gate_proj");
        up_mat(&u, &G->wu, &L->w_up, "up_proj");
        up_mat(&u, &G->wd, &L->w_down, "down_proj");
        G->attn_norm = small_add(&s, L->attn_norm, H);
        G->attn_scale = small_add(&s, L->attn_scale, H);
        G->mlp_norm = small_add(&s, L->mlp_norm, H);
        G->mlp_scale = small_add(&s, L->mlp_scale, H);
    }
    v->final_norm = small_add(&s, d->final_norm, H);
    up_mat(&u, &v->out_proj, &d->out_proj, "pre_transformer.output_proj");
    v->out_proj_b = small_add(&s, d->out_proj_b, LAT);
    for (int i = 0; i < c->n_up; i++) {
        const codec_upsample *U = &d->up[i];
        cdv_up *G = &v->up[i];
        up_floats(&u, &G->tconv_w, U->tconv_w, (size_t)LAT * LAT * U->ratio, "upsample transposed conv");
        up_floats(&u, &G->dw_w, U->dw_w, (size_t)LAT * CODEC_CONV_K, "upsample dwconv");
        up_mat(&u, &G->pw1, &U->pw1, "upsample pwconv1");
        up_mat(&u, &G->pw2, &U->pw2, "upsample pwconv2");
        G->tconv_b = small_add(&s, U->tconv_b, LAT);
        G->dw_b = small_add(&s, U->dw_b, LAT);
        G->ln_w = small_add(&s, U->ln_w, LAT);
        G->ln_b = small_add(&s, U->ln_b, LAT);
        G->pw1_b = small_add(&s, U->pw1_b, 4 * LAT);
        G->pw2_b = small_add(&s, U->pw2_b, LAT);
        G->gamma = small_add(&s, U->gamma, LAT);
    }
    up_floats(&u, &v->dec0_w, d->dec0_w, (size_t)c->decoder_dim * LAT * CODEC_CONV_K, "decoder.0");
    v->dec0_b = small_add(&s, d->dec0_b, c->decoder_dim);
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *B = &d->blocks[b];
        cdv_block *G = &v->blocks[b];
        G->act = add_snake(&s, &B->act, B->cin);
        up_floats(&u, &G->tconv_w, B->tconv_w, (size_t)B->cin * B->cout * 2 * B->rate, "block transposed conv");
        G->tconv_b = small_add(&s, B->tconv_b, B->cout);
        for (int r = 0; r < CODEC_N_RES; r++) {
            const codec_resunit *R = &B->ru[r];
            cdv_ru *GR = &G->ru[r];
            GR->act1 = add_snake(&s, &R->act1, B->cout);
            GR->act2 = add_snake(&s, &R->act2, B->cout);
            up_floats(&u, &GR->conv1_w, R->conv1_w, (size_t)B->cout * B->cout * CODEC_CONV_K, "residual conv1");
            up_floats(&u, &GR->conv2_w, R->conv2_w, (size_t)B->cout * B->cout, "residual conv2");
            GR->conv1_b = small_add(&s, R->conv1_b, B->cout);
            GR->conv2_b = small_add(&s, R->conv2_b, B->cout);
        }
    }
    const int OD = c->decoder_dim >> c->n_blocks;
    v->final_act = add_snake(&s, &d->final_act, OD);
    up_floats(&u, &v->final_w, d->final_w, (size_t)OD * CODEC_CONV_K, "final conv");
    v->final_b = small_add(&s, d->final_b, 1);
    if (!u.st && s.oom) u.st = err_set(e, QTTS_ERR_NOMEM, "out of memory collecting the codec's vectors");
    up_floats(&u, &v->small, s.v, s.n, "vectors");
    free(s.v);
    if (u.st) {
        cdv_free(v);
        return u.st;
    }
    *out = v;
    return QTTS_OK;
}

void cdv_free(cdv_model *v) {
    if (!v) return;
    vk_dev *d = v->dev;
    const codec_config *c = &v->d->cfg;
    vk_buf_free(d, &v->small);
    vk_buf_free(d, &v->codebook);
    mat_free(d, &v->proj_first);
    mat_free(d, &v->proj_rest);
    mat_free(d, &v->in_proj);
    mat_free(d, &v->out_proj);
    vk_buf_free(d, &v->pre_conv_w);
    for (int l = 0; v->layers && l < c->n_layers; l++) {
        cdv_layer *G = &v->layers[l];
        cdv_mat *m[] = {&G->wq, &G->wk, &G->wv, &G->wo, &G->wg, &G->wu, &G->wd};
        for (int i = 0; i < 7; i++) mat_free(d, m[i]);
    }
    free(v->layers);
    for (int i = 0; i < CODEC_MAX_UP; i++) {
        vk_buf_free(d, &v->up[i].tconv_w);
        vk_buf_free(d, &v->up[i].dw_w);
        mat_free(d, &v->up[i].pw1);
        mat_free(d, &v->up[i].pw2);
    }
    vk_buf_free(d, &v->dec0_w);
    for (int b = 0; b < CODEC_MAX_BLOCKS; b++) {
        vk_buf_free(d, &v->blocks[b].tconv_w);
        for (int r = 0; r < CODEC_N_RES; r++) {
            vk_buf_free(d, &v->blocks[b].ru[r].conv1_w);
            vk_buf_free(d, &v->blocks[b].ru[r].conv2_w);
        }
    }
    vk_buf_free(d, &v->final_w);
    free(v);
}

int64_t cdv_weight_bytes(const cdv_model *v) { return v ? v->bytes : 0; }

/* ------------------------------------------------------------ stream */

qtts_status cdv_stream_new(const cdv_model *v, cdv_stream **out, qtts_error *e) {
    *out = NULL;
    cdv_stream *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    s->v = v;
    const codec_decoder *d = v->d;
    const codec_config *c = &d->cfg;
    const int cap = CDV_MAX_CHUNK_FRAMES;
    const size_t KD = (size_t)c->n_kv_heads * c->head_dim, QD = (size_t)c->n_heads * c->head_dim;
    s->ring = c->window - 1 + cap;
    size_t n = 0;
    s->pre_conv_tail = (uint32_t)n, n += (size_t)c->codebook_dim * 2;
    /* the KV rings are bound at their offsets: 256-byte aligned (vk.h) */
    n = (n + 63) & ~(size_t)63;
    s->kr = (uint32_t)n, n += ((size_t)c->n_layers * s->ring * KD + 63) & ~(size_t)63;
    s->vr = (uint32_t)n, n += (size_t)c->n_layers * s->ring * KD;
    for (int u = 0; u < c->n_up; u++) s->up_tail[u] = (uint32_t)n, n += (size_t)c->latent * 6;
    s->dec0_tail = (uint32_t)n, n += (size_t)c->latent * 6;
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        s->blk_tail[b] = (uint32_t)n, n += bl->cin;
        for (int r = 0; r < CODEC_N_RES; r++) s->ru_tail[b][r] = (uint32_t)n, n += (size_t)bl->cout * 6 * bl->ru[r].dilation;
    }
    s->final_tail = (uint32_t)n, n += (size_t)(c->decoder_dim >> c->n_blocks) * 6;
    s->st_floats = n;
    vk_dev *dev = v->dev;
    const size_t F = sizeof(float), nu = (size_t)cap * codec_up_total(c), bf = codec_big_floats(d, cap) + 16;
    qtts_status st = vk_buf_alloc(dev, &s->st, n * F, 0, e);
    if (!st) st = vk_buf_alloc(dev, &s->ctl, 16, 1, e);
    if (!st) st = vk_buf_alloc(dev, &s->codes, (size_t)cap * c->n_q * sizeof(int32_t), 1, e);
    if (!st) st = vk_buf_alloc(dev, &s->rope, (size_t)cap * c->head_dim * F, 1, e);
    if (!st) st = vk_buf_alloc(dev, &s->pcm, (size_t)cap * c->samples_per_frame * F, 1, e);
    for (int i = 0; i < 3 && !st; i++) st = vk_buf_alloc(dev, &s->big[i], bf * F, 0, e);
    struct {
        vk_buf *b;
        size_t n;
    } sc[] = {
        {&s->dq, 2 * (size_t)cap * c->vq_dim}, {&s->dqo, (size_t)cap * c->codebook_dim},
        {&s->x_tm, (size_t)cap * c->latent},   {&s->h, (size_t)cap * c->hidden},
        {&s->xn, (size_t)cap * c->hidden},     {&s->o, (size_t)cap * c->hidden},
        {&s->q, (size_t)cap * QD},             {&s->att, (size_t)cap * QD},
        {&s->kn, (size_t)cap * KD},            {&s->vn, (size_t)cap * KD},
        {&s->gate, (size_t)cap * c->inter},    {&s->up, (size_t)cap * c->inter},
        {&s->cv_tm, nu * c->latent},           {&s->cv_mid, nu * 4 * c->latent},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0] && !st; i++) st = vk_buf_alloc(dev, sc[i].b, sc[i].n * F, 0, e);
    if (!st) st = cdv_stream_reset(s, e);
    if (st) {
        err_prefix(e, "codec stream on the device: ");
        cdv_stream_free(s);
        return st;
    }
    *out = s;
    return QTTS_OK;
}

void cdv_stream_free(cdv_stream *s) {
    if (!s) return;
    vk_dev *d = s->v->dev;
    for (int i = 0; i <= CDV_MAX_CHUNK_FRAMES; i++) vk_cmd_free(s->cmd[i]);
    vk_buf *b[] = {&s->st,  &s->ctl, &s->codes, &s->rope, &s->pcm, &s->big[0], &s->big[1], &s->big[2], &s->dq,
                   &s->dqo, &s->x_tm, &s->h,    &s->xn,   &s->o,   &s->q,      &s->att,    &s->kn,     &s->vn,
                   &s->gate, &s->up, &s->cv_tm, &s->cv_mid};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) vk_buf_free(d, b[i]);
    free(s);
}

qtts_status cdv_stream_reset(cdv_stream *s, qtts_error *e) {
    s->pos = 0;
    return vk_buf_fill(s->v->dev, &s->st, 0, s->st_floats * sizeof(float), 0, e);
}

int64_t cdv_stream_position_frames(const cdv_stream *s) { return s->pos; }

qtts_status cdv_stream_save(const cdv_stream *s, float *state, size_t *n, int64_t *pos, qtts_error *e) {
    *n = s->st_floats;
    *pos = s->pos;
    return state ? vk_buf_download(s->v->dev, &s->st, 0, state, s->st_floats * sizeof(float), e) : QTTS_OK;
}

qtts_status cdv_stream_restore(cdv_stream *s, const float *state, size_t n, int64_t pos, qtts_error *e) {
    if (n != s->st_floats) return err_set(e, QTTS_ERR_INVALID_ARG, "codec snapshot of another decoder");
    s->pos = pos;
    return vk_buf_upload(s->v->dev, &s->st, 0, state, n * sizeof(float), e);
}

/* ------------------------------------------------------------ recording */

typedef struct rec {
    cdv_stream *s;
    vk_cmd *cmd;
    qtts_error *e;
    qtts_status err;
} rec;

#define B(buf) ((vk_binding){(buf), 0, 0})
#define CEILDIV(a, b) (((a) + (b) - 1) / (b))
#define U(x) ((uint32_t)(x))

static void dispatch(rec *r, const char *shader, const vk_binding *b, int nb, const void *pc, size_t pcb, uint32_t gx,
                     uint32_t gy) {
    vk_kernel *k = NULL;
    if (!r->err) r->err = vk_kernel_get(r->s->v->dev, shader, NULL, 0, &k, r->e);
    if (k) vk_cmd_dispatch(r->cmd, k, b, nb, pc, pcb, gx, gy, 1);
}

/* Y[i] (+)= W X[i] (+ bias) for n rows, always the tiled matmul: its sum for
 * each output does not depend on n (the matvec's order differs). */
static void mm(rec *r, const cdv_mat *W, const vk_buf *X, const vk_buf *Y, int n, int acc, int has_bias, uint32_t b_off) {
    vk_pc_matmul pc = {U(W->rows), U(W->cols), U(n),        U(W->cols), 0, U(W->cols), 0, U(W->rows), b_off,
                       (has_bias ? VK_MM_BIAS : 0u) | (acc ? VK_MM_ACC : 0u)};
    const vk_binding b[6] = {B(&W->w), B(NULL), B(NULL), B(X), B(Y), B(&r->s->v->small)};
    dispatch(r, "matmul_f32", b, 6, &pc, sizeof pc, CEILDIV(W->rows, VK_MATMUL_TM), CEILDIV(n, VK_MATMUL_TN));
}

static void copy2d(rec *r, const vk_buf *src, uint32_t s_off, uint32_t s_rs, uint32_t s_cs, const vk_buf *dst,
                   uint32_t d_off, uint32_t d_rs, uint32_t d_cs, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    vk_pc_copy2d pc = {U(rows), U(cols), s_off, s_rs, s_cs, d_off, d_rs, d_cs};
    const vk_binding b[2] = {B(src), B(dst)};
    dispatch(r, "copy2d_f32", b, 2, &pc, sizeof pc, CEILDIV(cols, 64), U(rows));
}

/* the saved tail [C][hist] into the first hist columns of work [C][hist + n] */
static void tail_load(rec *r, const vk_buf *work, uint32_t tail, int C, int hist, int n) {
    copy2d(r, &r->s->st, tail, U(hist), 1, work, 0, U(hist + n), 1, C, hist);
}

/* the last hist columns of work [C][hist + n] as the next tail */
static void tail_save(rec *r, uint32_t tail, const vk_buf *work, int C, int hist, int n) {
    copy2d(r, work, U(n), U(hist + n), 1, &r->s->st, tail, U(hist), 1, C, hist);
}

static void conv1d(rec *r, const vk_buf *x, uint32_t x_off, int cin, int x_stride, const vk_buf *w, uint32_t b_off,
                   int cout, int K, int dil, int groups, const vk_buf *y, uint32_t y_off, int y_stride, int n,
                   uint32_t flags) {
    vk_pc_conv1d pc = {U(cin), U(cout), U(K), U(dil), U(groups), U(n), x_off, U(x_stride), y_off, U(y_stride), 0,
                       b_off, flags};
    const vk_binding b[4] = {B(x), B(w), B(&r->s->v->small), B(y)};
    dispatch(r, "conv1d_f32", b, 4, &pc, sizeof pc, CEILDIV(n, 64), U(cout));
}

static void tconv(rec *r, const vk_buf *x, int cin, int t_in, int x_stride, const vk_buf *w, uint32_t b_off, int cout,
                  int K, int stride, int t0, int n, const vk_buf *y, uint32_t y_off, int y_stride) {
    vk_pc_conv_transpose1d pc = {U(cin), U(cout), U(K), U(stride), U(t_in), U(t0), U(n), 0,
                                 U(x_stride), y_off, U(y_stride), 0, b_off};
    const vk_binding b[4] = {B(x), B(w), B(&r->s->v->small), B(y)};
    dispatch(r, "conv_transpose1d_f32", b, 4, &pc, sizeof pc, CEILDIV(n, 64), U(cout));
}

static void snake(rec *r, const vk_buf *x, uint32_t x_off, int x_stride, const vk_buf *y, uint32_t y_off, int y_stride,
                  cdv_snake a, int C, int n) {
    vk_pc_snake pc = {U(C), U(n), x_off, U(x_stride), y_off, U(y_stride), a.a, a.ib};
    const vk_binding b[3] = {B(x), B(&r->s->v->small), B(y)};
    dispatch(r, "snake_f32", b, 3, &pc, sizeof pc, CEILDIV(n, 64), U(C));
}

/* y = a + g b over rows x cols with (row, column) strides; g_off ~0u: no scale */
static void scale_add(rec *r, int rows, int cols, const vk_buf *a, uint32_t a_off, uint32_t a_rs, uint32_t a_cs,
                      const vk_buf *b, uint32_t b_off, uint32_t b_rs, uint32_t b_cs, const vk_buf *y, uint32_t y_off,
                      uint32_t y_rs, uint32_t y_cs, uint32_t g_off) {
    const int sc = g_off != ~0u;
    vk_pc_scale_add pc = {U(rows), U(cols), a_off, a_rs, a_cs, b_off, b_rs, b_cs, y_off, y_rs, y_cs,
                          sc ? g_off : 0u, sc ? VK_SA_SCALE : 0u};
    const vk_binding bb[4] = {B(a), B(b), B(&r->s->v->small), B(y)};
    dispatch(r, "scale_add_f32", bb, 4, &pc, sizeof pc, CEILDIV(cols, 64), U(rows));
}

static void rmsnorm(rec *r, const vk_buf *x, const vk_buf *y, uint32_t g_off, int H, int n, float eps) {
    vk_pc_rmsnorm pc = {U(H), U(n), 0, 0, g_off, eps, 0};
    const vk_binding b[3] = {B(x), B(&r->s->v->small), B(y)};
    dispatch(r, "rmsnorm", b, 3, &pc, sizeof pc, U(n), 1);
}

static void transformer(rec *r, int n) {
    cdv_stream *s = r->s;
    const cdv_model *v = s->v;
    const codec_config *c = &v->d->cfg;
    const int H = c->hidden, KD = c->n_kv_heads * c->head_dim;
    mm(r, &v->in_proj, &s->x_tm, &s->h, n, 0, 1, v->in_proj_b);
    for (int l = 0; l < c->n_layers; l++) {
        const cdv_layer *L = &v->layers[l];
        rmsnorm(r, &s->h, &s->xn, L->attn_norm, H, n, c->rms_eps);
        mm(r, &L->wq, &s->xn, &s->q, n, 0, 0, 0);
        mm(r, &L->wk, &s->xn, &s->kn, n, 0, 0, 0);
        mm(r, &L->wv, &s->xn, &s->vn, n, 0, 0, 0);
        const uint32_t cache = U((size_t)l * s->ring * KD);
        {
            vk_pc_rope_ring pc = {U(n), U(c->n_heads), U(c->n_kv_heads), U(c->head_dim), U(s->ring), cache, 0, 0, 0};
            const vk_binding b[7] = {B(&s->q), B(&s->kn), B(&s->vn), B(&s->rope),
                                     {&s->st, (size_t)s->kr * sizeof(float), 0},
                                     {&s->st, (size_t)s->vr * sizeof(float), 0}, B(&s->ctl)};
            dispatch(r, "rope_ring_f32", b, 7, &pc, sizeof pc, U(n), 1);
        }
        {
            vk_pc_attention_window pc = {U(n),      U(c->n_heads), U(c->n_kv_heads), U(c->head_dim), U(c->window),
                                         U(s->ring), cache,         0,                0,
                                         1.0f / sqrtf((float)c->head_dim)};
            const vk_binding b[5] = {B(&s->q), {&s->st, (size_t)s->kr * sizeof(float), 0},
                                     {&s->st, (size_t)s->vr * sizeof(float), 0}, B(&s->att), B(&s->ctl)};
            dispatch(r, "attention_window_f32", b, 5, &pc, sizeof pc, U(c->n_heads), U(n));
        }
        mm(r, &L->wo, &s->att, &s->o, n, 0, 0, 0);
        scale_add(r, n, H, &s->h, 0, U(H), 1, &s->o, 0, U(H), 1, &s->h, 0, U(H), 1, L->attn_scale);
        rmsnorm(r, &s->h, &s->xn, L->mlp_norm, H, n, c->rms_eps);
        mm(r, &L->wg, &s->xn, &s->gate, n, 0, 0, 0);
        mm(r, &L->wu, &s->xn, &s->up, n, 0, 0, 0);
        {
            vk_pc_swiglu pc = {U(n * c->inter), 0, 0, 0};
            const vk_binding b[3] = {B(&s->gate), B(&s->up), B(&s->gate)};
            dispatch(r, "swiglu", b, 3, &pc, sizeof pc, CEILDIV(n * c->inter, 256), 1);
        }
        mm(r, &L->wd, &s->gate, &s->o, n, 0, 0, 0);
        scale_add(r, n, H, &s->h, 0, U(H), 1, &s->o, 0, U(H), 1, &s->h, 0, U(H), 1, L->mlp_scale);
    }
    rmsnorm(r, &s->h, &s->xn, v->final_norm, H, n, c->rms_eps);
    mm(r, &v->out_proj, &s->xn, &s->x_tm, n, 0, 1, v->out_proj_b);
}

/* Record one chunk of n frames: codec_stream.c decode_chunk on the device. */
static void record_chunk(rec *r, int n) {
    cdv_stream *s = r->s;
    const cdv_model *v = s->v;
    const codec_decoder *d = v->d;
    const codec_config *c = &d->cfg;
    const int CD = c->codebook_dim, LAT = c->latent, V = c->vq_dim;
    const vk_buf *b0 = &s->big[0], *b1 = &s->big[1], *b2 = &s->big[2];
    const uint32_t rest = U((size_t)CDV_MAX_CHUNK_FRAMES * V);

    /* the codes: from the linked generating stream's ring (ctl[2] = 1) or as the host wrote them */
    if (s->codes_ring.buf) {
        vk_pc_codes_gather pc = {U(n), U(c->n_q), s->codes_ring.frames, U(c->codebook_size)};
        const vk_binding b[3] = {B(s->codes_ring.buf), B(&s->ctl), B(&s->codes)};
        dispatch(r, "codes_gather", b, 3, &pc, sizeof pc, CEILDIV(n * c->n_q, 64), 1);
    }
    /* dequantise: codebooks, the two projections summed, into b0 [CD][2 + n] at column 2 */
    {
        vk_pc_codebook pc = {U(V), U(c->n_q), U(c->codebook_size), U(n), 0, 0, rest};
        const vk_binding b[3] = {B(&v->codebook), B(&s->codes), B(&s->dq)};
        dispatch(r, "codebook_f32", b, 3, &pc, sizeof pc, CEILDIV(V, 64), U(n));
    }
    mm(r, &v->proj_first, &s->dq, &s->dqo, n, 0, 0, 0);
    {
        /* X of the second product starts at `rest`: bind the buffer there */
        vk_pc_matmul pc = {U(CD), U(V), U(n), U(V), rest, U(V), 0, U(CD), 0, VK_MM_ACC};
        const vk_binding b[6] = {B(&v->proj_rest.w), B(NULL), B(NULL), B(&s->dq), B(&s->dqo), B(&v->small)};
        dispatch(r, "matmul_f32", b, 6, &pc, sizeof pc, CEILDIV(CD, VK_MATMUL_TM), CEILDIV(n, VK_MATMUL_TN));
    }
    copy2d(r, &s->dqo, 0, 1, U(CD), b0, 2, U(2 + n), 1, CD, n); /* [n][CD] -> [CD][2 + n] */

    /* pre_conv (K 3): b0 -> b1 [LAT][n] */
    tail_load(r, b0, s->pre_conv_tail, CD, 2, n);
    conv1d(r, b0, 0, CD, 2 + n, &v->pre_conv_w, v->pre_conv_b, LAT, 3, 1, 1, b1, 0, n, n, 0);
    tail_save(r, s->pre_conv_tail, b0, CD, 2, n);

    /* pre-transformer, time-major: b1 -> b0 [LAT][n] */
    copy2d(r, b1, 0, 1, U(n), &s->x_tm, 0, U(LAT), 1, n, LAT);
    transformer(r, n);
    copy2d(r, &s->x_tm, 0, U(LAT), 1, b0, 0, 1, U(n), n, LAT);

    /* ConvNeXt upsampler: in b0 -> tconv into work b1 -> dwconv into b2 -> out b0 */
    int m = n;
    for (int u = 0; u < c->n_up; u++) {
        const cdv_up *G = &v->up[u];
        const int ratio = c->up_ratio[u], M = m * ratio, ws = 6 + M;
        const int last = u == c->n_up - 1;
        const int out_stride = last ? 6 + M : M;
        const uint32_t out_off = last ? 6 : 0;
        tail_load(r, b1, s->up_tail[u], LAT, 6, M);
        tconv(r, b0, LAT, m, m, &G->tconv_w, G->tconv_b, LAT, ratio, ratio, 0, M, b1, 6, ws);
        conv1d(r, b1, 0, LAT, ws, &G->dw_w, G->dw_b, LAT, CODEC_CONV_K, 1, LAT, b2, 0, M, M, 0);
        tail_save(r, s->up_tail[u], b1, LAT, 6, M);
        copy2d(r, b2, 0, 1, U(M), &s->cv_tm, 0, U(LAT), 1, M, LAT);
        {
            vk_pc_layernorm pc = {U(LAT), U(M), 0, 0, G->ln_w, G->ln_b, 1e-6f};
            const vk_binding b[3] = {B(&s->cv_tm), B(&v->small), B(&s->cv_tm)};
            dispatch(r, "layernorm_f32", b, 3, &pc, sizeof pc, U(M), 1);
        }
        mm(r, &G->pw1, &s->cv_tm, &s->cv_mid, M, 0, 1, G->pw1_b);
        {
            vk_pc_gelu pc = {U(M * 4 * LAT), 0};
            const vk_binding b[1] = {B(&s->cv_mid)};
            dispatch(r, "gelu_f32", b, 1, &pc, sizeof pc, CEILDIV(M * 4 * LAT, 256), 1);
        }
        mm(r, &G->pw2, &s->cv_mid, &s->cv_tm, M, 0, 1, G->pw2_b);
        /* out[c][t] = res[c][t] + gamma[c] mlp[t][c]: rows t, columns c */
        scale_add(r, M, LAT, b1, 6, 1, U(ws), &s->cv_tm, 0, U(LAT), 1, b0, out_off, 1, U(out_stride), G->gamma);
        m = M;
    }

    /* decoder.0: causal conv K 7, b0 [LAT][6 + m] -> b1 [DD][m] */
    tail_load(r, b0, s->dec0_tail, LAT, 6, m);
    conv1d(r, b0, 0, LAT, 6 + m, &v->dec0_w, v->dec0_b, c->decoder_dim, CODEC_CONV_K, 1, 1, b1, 0, m, m, 0);
    tail_save(r, s->dec0_tail, b0, LAT, 6, m);

    /* vocoder blocks: x -> fb, fa as work; then rotate */
    const vk_buf *x = b1, *fa = b0, *fb = b2;
    for (int b = 0; b < c->n_blocks; b++) {
        const codec_block *bl = &d->blocks[b];
        const cdv_block *G = &v->blocks[b];
        const int M = m * bl->rate, C = bl->cout;
        tail_load(r, fa, s->blk_tail[b], bl->cin, 1, m);
        snake(r, x, 0, m, fa, 1, 1 + m, G->act, bl->cin, m);
        tconv(r, fa, bl->cin, 1 + m, 1 + m, &G->tconv_w, G->tconv_b, C, 2 * bl->rate, bl->rate, bl->rate, M, fb, 0, M);
        tail_save(r, s->blk_tail[b], fa, bl->cin, 1, m);
        const vk_buf *tmp = x;
        for (int k = 0; k < CODEC_N_RES; k++) {
            const cdv_ru *R = &G->ru[k];
            const int dil = bl->ru[k].dilation, hist = 6 * dil, ws = hist + M;
            tail_load(r, fa, s->ru_tail[b][k], C, hist, M);
            snake(r, fb, 0, M, fa, U(hist), ws, R->act1, C, M);
            conv1d(r, fa, 0, C, ws, &R->conv1_w, R->conv1_b, C, CODEC_CONV_K, dil, 1, tmp, 0, M, M, 0);
            tail_save(r, s->ru_tail[b][k], fa, C, hist, M);
            snake(r, tmp, 0, M, tmp, 0, M, R->act2, C, M);
            conv1d(r, tmp, 0, C, M, &R->conv2_w, R->conv2_b, C, 1, 1, 1, fa, 0, M, M, 0);
            scale_add(r, C, M, fb, 0, U(M), 1, fa, 0, U(M), 1, fb, 0, U(M), 1, ~0u);
        }
        const vk_buf *old_x = x;
        x = fb;
        fb = old_x;
        m = M;
    }

    /* final SnakeBeta into fa [OD][6 + m] at column 6, causal conv K 7 with clamp -> pcm */
    const int OD = c->decoder_dim >> c->n_blocks;
    tail_load(r, fa, s->final_tail, OD, 6, m);
    snake(r, x, 0, m, fa, 6, 6 + m, v->final_act, OD, m);
    conv1d(r, fa, 0, OD, 6 + m, &v->final_w, v->final_b, 1, CODEC_CONV_K, 1, 1, &s->pcm, 0, m, m, VK_CONV_CLAMP);
    tail_save(r, s->final_tail, fa, OD, 6, m);
}

static qtts_status get_cmd(cdv_stream *s, int n, qtts_error *e) {
    if (s->cmd[n]) return QTTS_OK;
    vk_cmd *cmd;
    qtts_status st = vk_cmd_new(s->v->dev, &cmd, e);
    if (st) return st;
    st = vk_cmd_begin(cmd, e);
    if (!st) {
        rec r = {s, cmd, e, QTTS_OK};
        record_chunk(&r, n);
        st = r.err;
    }
    if (!st) st = vk_cmd_end(cmd, e);
    if (st) {
        vk_cmd_free(cmd);
        return err_prefix(e, "recording the codec chunk of %d frames: ", n);
    }
    s->cmd[n] = cmd;
    return QTTS_OK;
}

/* n_frames from codes (host) or, codes NULL, from the ring at serial0. */
static qtts_status decode(cdv_stream *s, const int32_t *codes, int64_t serial0, int n_frames, float *pcm,
                          qtts_error *e) {
    const codec_decoder *d = s->v->d;
    const codec_config *c = &d->cfg;
    const size_t spf = (size_t)c->samples_per_frame;
    for (int t = 0; t < n_frames;) {
        const int n = n_frames - t < CDV_MAX_CHUNK_FRAMES ? n_frames - t : CDV_MAX_CHUNK_FRAMES;
        qtts_status st = get_cmd(s, n, e);
        if (st) return st;
        uint32_t *ctl = s->ctl.map;
        ctl[0] = (uint32_t)s->pos;
        ctl[1] = (uint32_t)(serial0 + t); /* mod 2^32: the ring's size divides it */
        ctl[2] = codes == NULL;
        if (codes) memcpy(s->codes.map, codes + (size_t)t * c->n_q, (size_t)n * c->n_q * sizeof(int32_t));
        float *rope = s->rope.map;
        for (int i = 0; i < n; i++)
            ops_rope_angles(rope + (size_t)i * c->head_dim, c->head_dim, (int)(s->pos + i), d->inv_freq);
        st = vk_cmd_submit(s->cmd[n], e);
        if (!st) st = vk_cmd_wait(s->cmd[n], e);
        if (st) return err_prefix(e, "codec chunk on the device: ");
        memcpy(pcm + (size_t)t * spf, s->pcm.map, (size_t)n * spf * sizeof(float));
        s->pos += n;
        t += n;
    }
    return QTTS_OK;
}

qtts_status cdv_stream_decode(cdv_stream *s, const int32_t *codes, int n_frames, float *pcm, qtts_error *e) {
    if (!codes && n_frames > 0) return err_set(e, QTTS_ERR_INVALID_ARG, "cdv_stream_decode: NULL codes");
    return decode(s, codes, 0, n_frames, pcm, e);
}

qtts_status cdv_stream_link(cdv_stream *s, const cdv_code_ring *ring, qtts_error *e) {
    if (ring && (!ring->buf || !ring->made || ring->frames < 2 * CDV_RING_SLACK || (ring->frames & (ring->frames - 1))))
        return err_set(e, QTTS_ERR_INVALID_ARG, "cdv_stream_link: a code ring of %u frames (a power of two >= %d)",
                       ring->frames, 2 * CDV_RING_SLACK);
    for (int i = 0; i <= CDV_MAX_CHUNK_FRAMES; i++) {
        vk_cmd_free(s->cmd[i]);
        s->cmd[i] = NULL;
    }
    if (ring) s->codes_ring = *ring;
    else memset(&s->codes_ring, 0, sizeof s->codes_ring);
    return QTTS_OK;
}

qtts_status cdv_stream_decode_ring(cdv_stream *s, int64_t serial0, int n_frames, float *pcm, int *used,
                                   qtts_error *e) {
    *used = 0;
    if (!s->codes_ring.buf || serial0 < 0 || n_frames <= 0) return QTTS_OK;
    const int64_t made = atomic_load(s->codes_ring.made);
    if (serial0 + n_frames > made || made - serial0 > (int64_t)s->codes_ring.frames - CDV_RING_SLACK) return QTTS_OK;
    *used = 1;
    return decode(s, NULL, serial0, n_frames, pcm, e);
}

#else /* no Vulkan in this build */

#define NO_VULKAN "this build has no Vulkan backend (install libvulkan-dev and glslc, then rebuild)"

qtts_status cdv_create(cdv_model **out, const codec_decoder *d, struct vk_dev *dev, qtts_error *e) {
    (void)d, (void)dev;
    *out = NULL;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void cdv_free(cdv_model *v) { (void)v; }
int64_t cdv_weight_bytes(const cdv_model *v) { (void)v; return 0; }
qtts_status cdv_stream_new(const cdv_model *v, cdv_stream **out, qtts_error *e) {
    (void)v;
    *out = NULL;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void cdv_stream_free(cdv_stream *s) { (void)s; }
qtts_status cdv_stream_reset(cdv_stream *s, qtts_error *e) {
    (void)s;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
int64_t cdv_stream_position_frames(const cdv_stream *s) { (void)s; return 0; }
qtts_status cdv_stream_decode(cdv_stream *s, const int32_t *codes, int n_frames, float *pcm, qtts_error *e) {
    (void)s, (void)codes, (void)n_frames, (void)pcm;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
qtts_status cdv_stream_link(cdv_stream *s, const cdv_code_ring *ring, qtts_error *e) {
    (void)s, (void)ring;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
qtts_status cdv_stream_decode_ring(cdv_stream *s, int64_t serial0, int n_frames, float *pcm, int *used,
                                   qtts_error *e) {
    (void)s, (void)serial0, (void)n_frames, (void)pcm, (void)e;
    *used = 0;
    return QTTS_OK;
}
qtts_status cdv_stream_save(const cdv_stream *s, float *state, size_t *n, int64_t *pos, qtts_error *e) {
    (void)s, (void)state, (void)n, (void)pos;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
qtts_status cdv_stream_restore(cdv_stream *s, const float *state, size_t n, int64_t pos, qtts_error *e) {
    (void)s, (void)state, (void)n, (void)pos;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}

#endif
