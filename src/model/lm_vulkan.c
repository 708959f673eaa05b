/* The language model on the Vulkan backend (see lm_vulkan.h): weights
 * uploaded once, a stream's KV caches and state resident on the device, and
 * one frame recorded once into a command buffer and replayed per frame.
 * Dataflow per frame (one submission): y -> codec_head -> logits processors
 * -> draw codebook 0 -> code predictor (rows y and codec_embedding[c0] at
 * positions 0-1, then codebook g's table row at position g + 1; head g and
 * a draw after each) -> the 16 codes into the stream's code ring (read there
 * by the codec decoder) -> frame embedding + next text vector -> talker
 * layers at the stream's position -> final norm -> y; state advanced and
 * copied to a host-visible buffer (the codes for the host).
 * Must match the CPU path (src/model/generate.c gen_step, cp_predict,
 * tf_forward) operation for operation; the sums run in another order, so
 * values agree within the tolerances in docs/TESTING.md, and greedy codes
 * exactly. */
#include "model/lm_vulkan.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef QTTS_HAVE_VULKAN

#include "backend/cpu/quant.h"
#include "backend/vulkan/vk.h"
#include "backend/vulkan/vk_kernels.h"

enum { FMT_F32, FMT_BF16, FMT_Q8, FMT_Q4M };
static const char *const fmt_suffix[] = {"f32", "bf16", "q8", "q4m"};

typedef struct lmv_mat {
    vk_buf data, scales, mins;
    int rows, cols, kpad, fmt;
} lmv_mat;

typedef struct lmv_layer {
    lmv_mat wq, wk, wv, wo, wgate, wup, wdown;
    uint32_t attn_norm, q_norm, k_norm, ffn_norm; /* offsets in small */
} lmv_layer;

typedef struct lmv_tf {
    tf_config cfg;
    lmv_layer *layers;
    uint32_t final_norm;
} lmv_tf;

/* One embedding table on the device: [rows][H] in f32 or bf16. */
typedef struct lmv_table {
    vk_buf buf;
    int rows, cols, bf16;
} lmv_table;

struct lmv_model {
    vk_dev *dev;
    const qtts_model *m;
    lmv_tf talker, cp;
    lmv_mat codec_head, proj;
    int has_proj;
    uint32_t proj_b;   /* offset in small */
    lmv_mat *heads;    /* [n_groups] */
    int n_groups;      /* 15 */
    lmv_table ce;      /* codec_embedding [V][H] */
    lmv_table *cpe;    /* [n_groups] predictor input tables [Vc][H] */
    vk_buf small;      /* every norm weight and bias, f32 */
    int dp4;           /* q8/q4 decode products through int8 dot products (quantize_q8 +
                          matvec_*_dp4: the CPU's int8 arithmetic, bit for bit) */
    int kpad_max;      /* widest quantised row (for the int8 activation scratch) */
    vk_buf cp_rope;    /* [n_groups + 1][hd_c] the predictor's RoPE rows */
};

/* Scratch activations of one transformer for up to `rows` rows. */
typedef struct lmv_act {
    int rows;
    vk_buf x, xn, q, k, v, att, h1, h2;
} lmv_act;

/* Frames of a stream's code ring (lm_vulkan.h lmv_code_ring): a power of
 * two, 4096 frames (5.5 minutes of audio, 256 KiB) behind the newest. */
#define LMV_CODE_RING 4096

/* Frames a request's first cache reservation holds beyond its prompt. */
#define LMV_FIRST_FRAMES 256

#define Q_FRAME_START 0
#define Q_HEAD_END 1
#define Q_SAMPLE0_END 2
#define Q_CP_START 3
#define Q_CP_END 4
#define Q_STEP_END 5
#define Q_CP_SAMPLE 8 /* 2 per predictor draw: before, after */

struct lmv_stream {
    const lmv_model *v;
    int cap;             /* talker cache positions */
    vk_buf kc, vc;       /* talker caches [L][cap][kvd] */
    vk_buf rope;         /* [cap][hd] */
    vk_buf ckc, cvc;     /* predictor caches [Lc][n_groups + 1][kvd_c] */
    lmv_act ta;          /* talker scratch (prefill rows) */
    lmv_act ca;          /* predictor scratch (2 rows) */
    vk_buf y;            /* [H] talker post-norm hidden of the newest position */
    vk_buf logits;       /* [V] talker logits */
    vk_buf cp_in;        /* [2][H] predictor inputs in talker width */
    vk_buf cp_y;         /* [Hc] */
    vk_buf cp_logits;    /* [Vc] */
    vk_buf st;           /* state words (vk_kernels.h) */
    vk_buf seen;         /* [V] repetition-penalty history flags */
    vk_buf teach;        /* [n_teacher][G] */
    int teach_cap;
    vk_buf queue;        /* [n_queue + 1][H]: the text queue, then tts_pad */
    int queue_rows;
    vk_buf rb;           /* host-visible copy of st */
    vk_buf xq, xs;       /* int8 activations [VK_MATVEC_MAX_N][kpad_max/4] words and their
                            block scales and sums [2][VK_MATVEC_MAX_N][kpad_max/32] (dp4) */
    vk_cmd *frame;       /* the recorded frame */
    int frame_ok;        /* recorded for the current buffers and request */
    uint64_t gen;        /* changes whenever a recording of this stream's frame goes stale
                            (unique over all streams: a batch's recording keys on it) */
    vk_cmd *aux;         /* prefill and traced phases */
    qtts_sampling sp_talker, sp_pred;
    int P, nq;
    int k;               /* frames submitted since the prefill */
    int max_pos;         /* positions the request may write (prompt + frames + 1) */
    vk_buf code_ring;    /* int [LMV_CODE_RING][G]: frame f's codes at slot f % LMV_CODE_RING */
    _Atomic int64_t made;/* frames pushed to code_ring since the stream was made (host count) */
};

/* Recordings that bind this stream's buffers (its own frame, any batch's)
 * are stale: its buffers or the request's recorded parameters changed. */
static void invalidate(lmv_stream *s) {
    static uint64_t next_gen = 1;
    s->frame_ok = 0;
    s->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ upload */

typedef struct small_vec {
    float *v;
    size_t n, cap;
} small_vec;

static int small_add(small_vec *s, const float *x, int n, uint32_t *off) {
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->n + n) cap *= 2;
        float *p = realloc(s->v, sizeof(float) * cap);
        if (!p) return -1;
        s->v = p;
        s->cap = cap;
    }
    memcpy(s->v + s->n, x, sizeof(float) * n);
    *off = (uint32_t)s->n;
    s->n += n;
    return 0;
}

static qtts_status upload_bytes(vk_dev *d, vk_buf *b, const void *src, size_t n, qtts_error *e) {
    const int64_t range = vk_dev_info(d)->max_buffer_range;
    if (range > 0 && (int64_t)n > range)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "a tensor of %.1f MiB exceeds the device's largest storage binding (%.1f MiB)",
                       n / 1048576.0, range / 1048576.0);
    qtts_status s = vk_buf_alloc(d, b, n ? n : 4, 0, e);
    if (!s && n) s = vk_buf_upload(d, b, 0, src, n, e);
    return s;
}

/* Upload a float (f32/f16/bf16) or block-quantised (Q8_B32 / Q4M_B32)
 * matrix. F16 goes up as f32. */
static qtts_status upload_mat(vk_dev *d, const qt_mat *w, lmv_mat *g, const char *what, qtts_error *e) {
    memset(g, 0, sizeof *g);
    g->rows = w->rows;
    g->cols = w->cols;
    g->kpad = qt_kpad(w->cols);
    qtts_status s;
    if (qt_is_quant(w)) {
        if (w->quant != QT_Q8_B32 && w->quant != QT_Q4M_B32)
            return err_set(e, QTTS_ERR_INTERNAL, "%s: quantised layout %d has no Vulkan shader", what, (int)w->quant);
        g->fmt = w->quant == QT_Q8_B32 ? FMT_Q8 : FMT_Q4M;
        const size_t nb = (size_t)g->kpad / 32, rows = (size_t)w->rows;
        const size_t dbytes = g->fmt == FMT_Q8 ? rows * g->kpad : rows * g->kpad / 2;
        s = upload_bytes(d, &g->data, w->data, dbytes, e);
        if (!s) s = upload_bytes(d, &g->scales, w->scales, rows * nb * 2, e);
        if (!s && g->fmt == FMT_Q4M) s = upload_bytes(d, &g->mins, w->mins, rows * nb * 2, e);
    } else if (w->dtype == DT_BF16) {
        g->fmt = FMT_BF16;
        s = upload_bytes(d, &g->data, w->data, (size_t)w->rows * w->cols * 2, e);
    } else {
        g->fmt = FMT_F32;
        const size_t n = (size_t)w->rows * w->cols;
        float *f = w->dtype == DT_F32 ? NULL : malloc(sizeof(float) * n);
        if (w->dtype != DT_F32 && !f) return err_set(e, QTTS_ERR_NOMEM, "out of memory converting %s", what);
        if (f) dtype_to_f32(w->dtype, w->data, f, n);
        s = upload_bytes(d, &g->data, f ? f : w->data, sizeof(float) * n, e);
        free(f);
    }
    if (s) err_prefix(e, "%s: ", what);
    return s;
}

static void mat_free(vk_dev *d, lmv_mat *g) {
    vk_buf_free(d, &g->data);
    vk_buf_free(d, &g->scales);
    vk_buf_free(d, &g->mins);
}

static qtts_status upload_table(vk_dev *d, const qt_mat *w, lmv_table *t, const char *what, qtts_error *e) {
    memset(t, 0, sizeof *t);
    t->rows = w->rows;
    t->cols = w->cols;
    const size_t n = (size_t)w->rows * w->cols;
    if (w->dtype == DT_BF16) {
        t->bf16 = 1;
        qtts_status s = upload_bytes(d, &t->buf, w->data, n * 2, e);
        if (s) err_prefix(e, "%s: ", what);
        return s;
    }
    float *f = w->dtype == DT_F32 ? NULL : malloc(sizeof(float) * n);
    if (w->dtype != DT_F32 && !f) return err_set(e, QTTS_ERR_NOMEM, "out of memory converting %s", what);
    if (f) dtype_to_f32(w->dtype, w->data, f, n);
    qtts_status s = upload_bytes(d, &t->buf, f ? f : w->data, sizeof(float) * n, e);
    free(f);
    if (s) err_prefix(e, "%s: ", what);
    return s;
}

static qtts_status upload_tf(vk_dev *d, const tf_weights *w, lmv_tf *g, small_vec *sv, const char *who,
                             qtts_error *e) {
    g->cfg = w->cfg;
    g->layers = calloc(w->cfg.n_layers, sizeof *g->layers);
    if (!g->layers) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    const int H = w->cfg.hidden, hd = w->cfg.head_dim;
    for (int l = 0; l < w->cfg.n_layers; l++) {
        const tf_layer *L = &w->layers[l];
        lmv_layer *G = &g->layers[l];
        char what[96];
        snprintf(what, sizeof what, "%s layer %d", who, l);
        const qt_mat *src[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
        lmv_mat *dst[7] = {&G->wq, &G->wk, &G->wv, &G->wo, &G->wgate, &G->wup, &G->wdown};
        for (int i = 0; i < 7; i++) {
            qtts_status s = upload_mat(d, src[i], dst[i], what, e);
            if (s) return s;
        }
        if (small_add(sv, L->attn_norm, H, &G->attn_norm) || small_add(sv, L->q_norm, hd, &G->q_norm) ||
            small_add(sv, L->k_norm, hd, &G->k_norm) || small_add(sv, L->ffn_norm, H, &G->ffn_norm))
            return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (small_add(sv, w->final_norm, H, &g->final_norm)) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    return QTTS_OK;
}

static void tf_gpu_free(vk_dev *d, lmv_tf *g) {
    for (int l = 0; g->layers && l < g->cfg.n_layers; l++) {
        lmv_layer *G = &g->layers[l];
        lmv_mat *ms[7] = {&G->wq, &G->wk, &G->wv, &G->wo, &G->wgate, &G->wup, &G->wdown};
        for (int i = 0; i < 7; i++) mat_free(d, ms[i]);
    }
    free(g->layers);
    g->layers = NULL;
}

qtts_status lmv_create(lmv_model **out, const qtts_model *m, int device, qtts_error *e) {
    *out = NULL;
    lmv_model *v = calloc(1, sizeof *v);
    if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    v->m = m;
    small_vec sv = {0};
    qtts_status s = vk_dev_create(&v->dev, device, e);
    vk_dev *d = v->dev;
    if (!s) {
        /* int8 dot products for q8/q4 decode products: where the device
           accelerates them, or as QTTS_VULKAN_INT8_DOT (0 off, 1 on) says */
        const char *env = getenv("QTTS_VULKAN_INT8_DOT");
        v->dp4 = vk_dev_has_int_dot(d) && (env && *env ? atoi(env) != 0 : vk_dev_info(d)->int8_dot);
        const tf_config *cs[2] = {&m->cfg.talker, &m->cfg.cp};
        int w = m->cfg.talker.hidden;
        for (int i = 0; i < 2; i++) {
            const int dims[3] = {cs[i]->hidden, cs[i]->inter, cs[i]->n_heads * cs[i]->head_dim};
            for (int j = 0; j < 3; j++)
                if (dims[j] > w) w = dims[j];
        }
        v->kpad_max = qt_kpad(w);
    }
    if (!s) s = upload_tf(d, &m->talker.tf, &v->talker, &sv, "talker", e);
    if (!s) s = upload_tf(d, &m->cp.tf, &v->cp, &sv, "code predictor", e);
    if (!s) s = upload_mat(d, &m->talker.codec_head, &v->codec_head, "talker codec_head", e);
    v->n_groups = m->cp.n_groups;
    if (!s) {
        v->heads = calloc(v->n_groups, sizeof *v->heads);
        v->cpe = calloc(v->n_groups, sizeof *v->cpe);
        if (!v->heads || !v->cpe) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    for (int g = 0; g < v->n_groups && !s; g++) {
        char what[64];
        snprintf(what, sizeof what, "code predictor head %d", g);
        s = upload_mat(d, &m->cp.head[g], &v->heads[g], what, e);
        snprintf(what, sizeof what, "code predictor embedding %d", g);
        if (!s) s = upload_table(d, &m->cp.embed[g], &v->cpe[g], what, e);
    }
    if (!s) s = upload_table(d, &m->talker.codec_embedding, &v->ce, "talker codec_embedding", e);
    v->has_proj = m->cp.has_proj;
    if (!s && v->has_proj) {
        s = upload_mat(d, &m->cp.proj, &v->proj, "code predictor projection", e);
        if (!s && small_add(&sv, m->cp.proj_b, m->cp.proj.rows, &v->proj_b))
            s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (!s) s = upload_bytes(d, &v->small, sv.v, sizeof(float) * sv.n, e);
    if (!s) {
        const int hd = v->cp.cfg.head_dim, np = v->n_groups + 1;
        float *t = malloc(sizeof(float) * hd * np);
        if (!t) s = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        for (int p = 0; t && p < np; p++) ops_rope_angles(t + (size_t)p * hd, hd, p, m->cp.tf.inv_freq);
        if (!s) s = upload_bytes(d, &v->cp_rope, t, sizeof(float) * hd * np, e);
        free(t);
    }
    free(sv.v);
    if (s) {
        lmv_free(v);
        return s;
    }
    *out = v;
    return QTTS_OK;
}

void lmv_free(lmv_model *v) {
    if (!v) return;
    vk_dev *d = v->dev;
    if (d) {
        tf_gpu_free(d, &v->talker);
        tf_gpu_free(d, &v->cp);
        mat_free(d, &v->codec_head);
        mat_free(d, &v->proj);
        for (int g = 0; g < v->n_groups; g++) {
            if (v->heads) mat_free(d, &v->heads[g]);
            if (v->cpe) vk_buf_free(d, &v->cpe[g].buf);
        }
        vk_buf_free(d, &v->ce.buf);
        vk_buf_free(d, &v->small);
        vk_buf_free(d, &v->cp_rope);
    }
    free(v->heads);
    free(v->cpe);
    vk_dev_free(d);
    free(v);
}

const qtts_device_info *lmv_device(const lmv_model *v) { return vk_dev_info(v->dev); }
struct vk_dev *lmv_vk_dev(const lmv_model *v) { return v->dev; }
int64_t lmv_bytes_allocated(const lmv_model *v) { return vk_dev_bytes_allocated(v->dev); }
int64_t lmv_bytes_reserved(const lmv_model *v) { return vk_dev_bytes_reserved(v->dev); }

qtts_status lmv_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e) {
    return vk_list_devices(out, max, n, e);
}

/* ------------------------------------------------------------ streams */

static void act_free(vk_dev *d, lmv_act *a) {
    vk_buf *bs[8] = {&a->x, &a->xn, &a->q, &a->k, &a->v, &a->att, &a->h1, &a->h2};
    for (int i = 0; i < 8; i++) vk_buf_free(d, bs[i]);
    a->rows = 0;
}

static qtts_status act_init(vk_dev *d, lmv_act *a, const tf_config *c, int rows, qtts_error *e) {
    act_free(d, a);
    const size_t r = (size_t)rows, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t sz[8] = {r * c->hidden, r * c->hidden, r * qd, r * kvd, r * kvd, r * qd, r * c->inter, r * c->inter};
    vk_buf *bs[8] = {&a->x, &a->xn, &a->q, &a->k, &a->v, &a->att, &a->h1, &a->h2};
    for (int i = 0; i < 8; i++) {
        qtts_status s = vk_buf_alloc(d, bs[i], sizeof(float) * sz[i], 0, e);
        if (s) return s;
    }
    a->rows = rows;
    return QTTS_OK;
}

qtts_status lmv_stream_new(const lmv_model *v, lmv_stream **out, qtts_error *e) {
    *out = NULL;
    lmv_stream *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    s->v = v;
    invalidate(s);
    vk_dev *d = v->dev;
    const tf_config *tc = &v->talker.cfg, *cc = &v->cp.cfg;
    const size_t ckv = (size_t)cc->n_layers * (v->n_groups + 1) * cc->n_kv_heads * cc->head_dim;
    qtts_status st = act_init(d, &s->ca, cc, 2, e);
    if (!st) st = vk_buf_alloc(d, &s->ckc, sizeof(float) * ckv, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->cvc, sizeof(float) * ckv, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->y, sizeof(float) * tc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->logits, sizeof(float) * tc->vocab, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->cp_in, sizeof(float) * 2 * tc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->cp_y, sizeof(float) * cc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->cp_logits, sizeof(float) * cc->vocab, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->st, sizeof(uint32_t) * VK_ST_WORDS, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->seen, sizeof(uint32_t) * tc->vocab, 0, e);
    if (!st) st = vk_buf_alloc(d, &s->rb, sizeof(uint32_t) * VK_ST_WORDS, 1, e);
    if (!st) st = vk_buf_alloc(d, &s->code_ring, sizeof(int32_t) * LMV_CODE_RING * (v->n_groups + 1), 0, e);
    if (!st && v->dp4) st = vk_buf_alloc(d, &s->xq, (size_t)VK_MATVEC_MAX_N * v->kpad_max, 0, e);
    if (!st && v->dp4) st = vk_buf_alloc(d, &s->xs, sizeof(float) * 2 * VK_MATVEC_MAX_N * (v->kpad_max / 32), 0, e);
    if (!st) st = vk_cmd_new(d, &s->frame, e);
    if (!st) st = vk_cmd_new(d, &s->aux, e);
    if (st) {
        lmv_stream_free(s);
        return st;
    }
    *out = s;
    return QTTS_OK;
}

void lmv_stream_free(lmv_stream *s) {
    if (!s) return;
    vk_dev *d = s->v->dev;
    vk_cmd_free(s->frame);
    vk_cmd_free(s->aux);
    act_free(d, &s->ta);
    act_free(d, &s->ca);
    vk_buf *bs[] = {&s->kc, &s->vc, &s->rope, &s->ckc, &s->cvc, &s->y, &s->logits, &s->cp_in, &s->cp_y,
                    &s->cp_logits, &s->st, &s->seen, &s->teach, &s->queue, &s->rb, &s->xq, &s->xs, &s->code_ring};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) vk_buf_free(d, bs[i]);
    free(s);
}

void lmv_code_ring(lmv_stream *s, cdv_code_ring *out) {
    out->buf = &s->code_ring;
    out->frames = LMV_CODE_RING;
    out->made = &s->made;
}

int64_t lmv_frames_made(const lmv_stream *s) { return atomic_load(&s->made); }

/* ------------------------------------------------------------ recording */

/* A recording in progress. Traced: `flush` submits what was recorded, waits
 * and starts a new recording, so the host can read the results so far.
 * s: the stream of a single-stream recording (NULL for a batch); xq, xs:
 * the int8 activation scratch of the dp4 products; vec_any: weight products
 * through the matvec shaders whatever n (a batch's, so that each row's
 * result is the one its stream gets alone). */
typedef struct rec {
    const lmv_model *v;
    lmv_stream *s;
    const vk_buf *xq, *xs;
    vk_cmd *cmd;
    int traced, vec_any;
    qtts_status err;
    qtts_error *e;
    const vk_buf *tab; /* a batch's stream table (the *_tab shaders' binding VK_TAB_BINDING) */
} rec;

static int flush(rec *r) {
    if (r->err) return -1;
    if ((r->err = vk_cmd_end(r->cmd, r->e)) || (r->err = vk_cmd_submit(r->cmd, r->e)) ||
        (r->err = vk_cmd_wait(r->cmd, r->e)) || (r->err = vk_cmd_begin(r->cmd, r->e)))
        return -1;
    return 0;
}

static void rd(rec *r, const vk_buf *b, size_t off_floats, float *dst, size_t n) {
    if (!r->err) r->err = vk_buf_download(r->v->dev, b, off_floats * sizeof(float), dst, n * sizeof(float), r->e);
}

static vk_kernel *kern(rec *r, const char *name) {
    vk_kernel *k = NULL;
    if (!r->err) r->err = vk_kernel_get(r->v->dev, name, NULL, 0, &k, r->e);
    return r->err ? NULL : k;
}

static void dispatch(rec *r, const char *shader, const vk_binding *b, int nb, const void *pc, size_t pcb,
                     uint32_t gx, uint32_t gy) {
    vk_kernel *k = kern(r, shader);
    if (k) vk_cmd_dispatch(r->cmd, k, b, nb, pc, pcb, gx, gy, 1);
}

/* A *_tab shader: bindings b[0..nb) and the batch's stream table. */
static void dispatch_tab(rec *r, const char *shader, const vk_binding *b, int nb, const void *pc, size_t pcb,
                         uint32_t gx, uint32_t gy) {
    vk_binding all[VK_TAB_BINDING + 1];
    memset(all, 0, sizeof all);
    for (int i = 0; i < nb; i++) all[i] = b[i];
    all[VK_TAB_BINDING] = (vk_binding){r->tab, 0, 0};
    dispatch(r, shader, all, VK_TAB_BINDING + 1, pc, pcb, gx, gy);
}

#define B(buf) ((vk_binding){(buf), 0, 0})
#define CEILDIV(a, b) (((a) + (b) - 1) / (b))

/* Y[i] (+)= W X[i] (+ bias) for n rows. */
static void mm(rec *r, const lmv_mat *W, const vk_buf *X, uint32_t x_off, const vk_buf *Y, uint32_t y_off, int n,
               int acc, const uint32_t *bias_off) {
    const lmv_model *v = r->v;
    vk_pc_matmul pc = {(uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->kpad, x_off, (uint32_t)W->cols,
                       y_off, (uint32_t)W->rows, bias_off ? *bias_off : 0,
                       (bias_off ? VK_MM_BIAS : 0u) | (acc ? VK_MM_ACC : 0u)};
    const vk_binding b[6] = {B(&W->data), B(W->scales.buf ? &W->scales : NULL), B(W->mins.buf ? &W->mins : NULL),
                             B(X), B(Y), B(&v->small)};
    char name[32];
    const int vec = n <= VK_MATVEC_MAX_N || r->vec_any;
    if (vec && v->dp4 && (W->fmt == FMT_Q8 || W->fmt == FMT_Q4M)) {
        const vk_pc_quantize_q8 qp = {(uint32_t)W->cols, (uint32_t)W->kpad, (uint32_t)n, x_off, (uint32_t)W->cols};
        const vk_binding qb[3] = {B(X), B(r->xq), B(r->xs)};
        dispatch(r, "quantize_q8", qb, 3, &qp, sizeof qp, CEILDIV(W->kpad / 32, 64), n);
        const vk_binding db[7] = {B(&W->data), B(W->scales.buf ? &W->scales : NULL), B(W->mins.buf ? &W->mins : NULL),
                                  B(r->xq), B(Y), B(&v->small), B(r->xs)};
        dispatch(r, W->fmt == FMT_Q8 ? "matvec_q8_dp4" : "matvec_q4m_dp4", db, 7, &pc, sizeof pc,
                 CEILDIV(W->rows, VK_MATVEC_ROWS), 1);
        return;
    }
    snprintf(name, sizeof name, "%s_%s", vec ? "matvec" : "matmul", fmt_suffix[W->fmt]);
    if (vec) dispatch(r, name, b, 6, &pc, sizeof pc, CEILDIV(W->rows, VK_MATVEC_ROWS), 1);
    else dispatch(r, name, b, 6, &pc, sizeof pc, CEILDIV(W->rows, VK_MATMUL_TM), CEILDIV(n, VK_MATMUL_TN));
}

static void rmsnorm(rec *r, const vk_buf *x, uint32_t x_off, const vk_buf *y, uint32_t y_off, uint32_t g_off, int H,
                    int n, float eps) {
    vk_pc_rmsnorm pc = {(uint32_t)H, (uint32_t)n, x_off, y_off, g_off, eps, 0};
    const vk_binding b[3] = {B(x), B(&r->v->small), B(y)};
    dispatch(r, "rmsnorm", b, 3, &pc, sizeof pc, n, 1);
}

static void embed(rec *r, const lmv_table *t, uint32_t table_off, const vk_buf *ids, uint32_t id_pos, uint32_t id_add,
                  uint32_t id_max, const vk_buf *out, uint32_t out_off, int accumulate) {
    vk_pc_embed pc = {(uint32_t)t->cols, table_off, id_pos, id_add, id_max, out_off, (uint32_t)accumulate, 0, 0};
    const vk_binding b[3] = {B(&t->buf), B(ids), B(out)};
    dispatch(r, t->bf16 ? "embed_bf16" : "embed_f32", b, 3, &pc, sizeof pc, CEILDIV(t->cols, 256), 1);
}

/* Where one stream's rows of a forward sit: positions pos0 + i, or the
 * stream's position from its state st (pos_state); its caches (layer l at
 * l * cap * kvd). stride (fp[0] only): nonzero when all the forward's
 * streams share fp[0]'s caches, stream j's starting stride floats after
 * stream j - 1's, with positions from pos0 (not pos_state): then one
 * qk_rope and one attention dispatch per layer serve every stream.
 * tab (fp[0] only): one row per stream, each at the position in its state
 * over its own caches, all named by the recording's stream table
 * (qk_rope_tab, attention_tab: one dispatch each per layer); the other
 * fields are unused. */
typedef struct fwd_pos {
    uint32_t pos0, pos_state;
    const vk_buf *kc, *vc, *rope, *st;
    int cap;
    uint32_t stride;
    int tab;
} fwd_pos;

/* All layers on a->x rows [0, ns * rows) (residual stream, in place): ns
 * streams of `rows` consecutive rows each, stream j's at fp[j]. The weight
 * products take all rows at once; RoPE, the cache store and attention run
 * once over all streams when their caches share a buffer (fp[0].stride),
 * else per stream. on_layer: traced prefill: read x back after each layer. */
static void forward(rec *r, const lmv_tf *w, lmv_act *a, int ns, int rows, const fwd_pos *fp, const lmv_trace *tr,
                    float *layer_buf) {
    const lmv_model *v = r->v;
    const tf_config *c = &w->cfg;
    const uint32_t H = c->hidden, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, kvd = nkv * hd;
    const int n = ns * rows;
    for (int l = 0; l < c->n_layers; l++) {
        const lmv_layer *L = &w->layers[l];
        rmsnorm(r, &a->x, 0, &a->xn, 0, L->attn_norm, H, n, c->eps);
        mm(r, &L->wq, &a->xn, 0, &a->q, 0, n, 0, NULL);
        mm(r, &L->wk, &a->xn, 0, &a->k, 0, n, 0, NULL);
        mm(r, &L->wv, &a->xn, 0, &a->v, 0, n, 0, NULL);
        if (fp[0].tab) { /* rows = 1, pos_state = 1, cache_off = the layer */
            const vk_pc_qk_rope qp = {(uint32_t)n, nh, nkv, hd, 0, 1, (uint32_t)l, L->q_norm, L->k_norm, 0, 0, 0,
                                      c->eps, 1, 0};
            const vk_binding qb[4] = {B(&a->q), B(&a->k), B(&a->v), B(&v->small)};
            dispatch_tab(r, "qk_rope_tab", qb, 4, &qp, sizeof qp, (uint32_t)n, 1);
            const vk_pc_attention ap = {(uint32_t)n, nh, nkv, hd, 0, 1, (uint32_t)l, 0, 0, 1.0f / sqrtf((float)hd),
                                        1, 0};
            const vk_binding ab[4] = {B(&a->q), {0}, {0}, B(&a->att)};
            dispatch_tab(r, "attention_tab", ab, 4, &ap, sizeof ap, nh, (uint32_t)n);
        }
        /* per dispatch: streams j0 .. j0 + nj (all of them when they share caches) */
        const int nj = fp[0].stride ? ns : 1;
        for (int j = 0; j < ns && !fp[0].tab; j += nj) {
            const fwd_pos *f = &fp[j];
            const uint32_t cache_off = (uint32_t)((size_t)l * f->cap * kvd), row = (uint32_t)(j * rows);
            const uint32_t nr = (uint32_t)(nj * rows);
            vk_pc_qk_rope pc = {nr, nh, nkv, hd, f->pos0, f->pos_state, cache_off, L->q_norm,
                                L->k_norm, row * nh * hd, row * kvd, row * kvd, c->eps, (uint32_t)rows, f->stride};
            const vk_binding b[8] = {B(&a->q), B(&a->k), B(&a->v), B(&v->small), B(f->rope), B(f->kc), B(f->vc),
                                     B(f->st)};
            dispatch(r, "qk_rope", b, 8, &pc, sizeof pc, nr, 1);
        }
        for (int j = 0; j < ns && !fp[0].tab; j += nj) {
            const fwd_pos *f = &fp[j];
            const uint32_t cache_off = (uint32_t)((size_t)l * f->cap * kvd), row = (uint32_t)(j * rows);
            const uint32_t nr = (uint32_t)(nj * rows);
            vk_pc_attention pc = {nr, nh, nkv, hd, f->pos0, f->pos_state, cache_off, row * nh * hd,
                                  row * nh * hd, 1.0f / sqrtf((float)hd), (uint32_t)rows, f->stride};
            const vk_binding b[5] = {B(&a->q), B(f->kc), B(f->vc), B(&a->att), B(f->st)};
            dispatch(r, "attention", b, 5, &pc, sizeof pc, nh, nr);
        }
        mm(r, &L->wo, &a->att, 0, &a->x, 0, n, 1, NULL);
        rmsnorm(r, &a->x, 0, &a->xn, 0, L->ffn_norm, H, n, c->eps);
        mm(r, &L->wgate, &a->xn, 0, &a->h1, 0, n, 0, NULL);
        mm(r, &L->wup, &a->xn, 0, &a->h2, 0, n, 0, NULL);
        {
            vk_pc_swiglu pc = {(uint32_t)(n * c->inter), 0, 0, 0};
            const vk_binding b[3] = {B(&a->h1), B(&a->h2), B(&a->h1)};
            dispatch(r, "swiglu", b, 3, &pc, sizeof pc, CEILDIV(n * c->inter, 256), 1);
        }
        mm(r, &L->wdown, &a->h1, 0, &a->x, 0, n, 1, NULL);
        if (tr && tr->on_prefill_layer && layer_buf && !flush(r)) {
            rd(r, &a->x, 0, layer_buf, (size_t)n * H);
            if (!r->err) tr->on_prefill_layer(l, layer_buf, n, tr->user);
        }
    }
}

static void timestamp(rec *r, int q) {
    if (!r->traced) vk_cmd_timestamp(r->cmd, q);
}

/* Draw codebook `group` from logits (row at 0) with sp. */
static void sample(rec *r, lmv_stream *s, const vk_buf *logits, uint32_t logits_off, int V, const qtts_sampling *sp,
                   int group, int mark_seen) {
    vk_pc_sample pc = {(uint32_t)V, logits_off, (uint32_t)(sp->do_sample != 0), (uint32_t)(sp->top_k > 0 ? sp->top_k : 0),
                       sp->temperature, sp->top_p, (uint32_t)group, (uint32_t)(s->v->n_groups + 1),
                       (uint32_t)mark_seen};
    const vk_binding b[4] = {B(logits), B(&s->st), B(&s->teach), B(&s->seen)};
    dispatch(r, "sample", b, 4, &pc, sizeof pc, 1, 1);
}

/* The frame's codes into the stream's code ring (codes_push.comp). */
static void push_codes(rec *r, lmv_stream *s) {
    vk_pc_codes_push pc = {(uint32_t)(s->v->n_groups + 1), LMV_CODE_RING};
    const vk_binding b[2] = {B(&s->st), B(&s->code_ring)};
    dispatch(r, "codes_push", b, 2, &pc, sizeof pc, 1, 1);
}

/* The host's count of frames pushed, from a read-back state (mod 2^32 there). */
static void count_pushed(lmv_stream *s, const uint32_t *w) {
    const int64_t made = atomic_load(&s->made);
    atomic_store(&s->made, made + (uint32_t)(w[VK_ST_SERIAL] - (uint32_t)made));
}

/* The frame (see the file head). tr: traced run with readbacks. */
static void record_frame(rec *r, const lmv_trace *tr, int k, float *tmp) {
    lmv_stream *s = r->s;
    const lmv_model *v = s->v;
    const qtts_config *cfg = &v->m->cfg;
    const int H = v->talker.cfg.hidden, V = v->talker.cfg.vocab, Hc = v->cp.cfg.hidden, Vc = v->cp.cfg.vocab;
    const int G = v->n_groups + 1;
    timestamp(r, Q_FRAME_START);
    if (tr && tr->on_step_hidden) {
        rd(r, &s->y, 0, tmp, H);
        if (!r->err) tr->on_step_hidden(k, tmp, H, tr->user);
    }
    /* codebook 0 */
    mm(r, &v->codec_head, &s->y, 0, &s->logits, 0, 1, 0, NULL);
    timestamp(r, Q_HEAD_END);
    {
        vk_pc_logits_talker pc = {(uint32_t)V, (uint32_t)cfg->codec_eos, 2, (uint32_t)cfg->cp.vocab,
                                  s->sp_talker.repetition_penalty};
        const vk_binding b[3] = {B(&s->logits), B(&s->seen), B(&s->st)};
        dispatch(r, "logits_talker", b, 3, &pc, sizeof pc, CEILDIV(V, 256), 1);
    }
    if (tr && tr->on_talker_logits && !flush(r)) {
        rd(r, &s->logits, 0, tmp, V);
        if (!r->err) tr->on_talker_logits(k, tmp, V, tr->user);
    }
    sample(r, s, &s->logits, 0, V, &s->sp_talker, 0, 1);
    timestamp(r, Q_SAMPLE0_END);
    if (tr && tr->go_on && !flush(r)) {
        uint32_t c0 = 0;
        if (!r->err)
            r->err = vk_buf_download(v->dev, &s->st, sizeof(uint32_t) * VK_ST_CODES, &c0, sizeof c0, r->e);
        if (r->err || !tr->go_on((int)c0, tr->go_on_user)) return;
    }
    /* code predictor: rows y and codec_embedding[c0] at positions 0, 1 */
    timestamp(r, Q_CP_START);
    vk_cmd_copy(r->cmd, &s->y, 0, &s->cp_in, 0, sizeof(float) * H);
    embed(r, &v->ce, 0, &s->st, VK_ST_CODES, 0, 0xffffffffu, &s->cp_in, H, 0);
    if (tr && tr->on_cp_inputs && !flush(r)) {
        rd(r, &s->cp_in, 0, tmp, 2 * (size_t)H);
        if (!r->err) tr->on_cp_inputs(tmp, H, tr->cp_user);
    }
    const tf_config *cc = &v->cp.cfg;
    fwd_pos fp = {0, 0, &s->ckc, &s->cvc, &v->cp_rope, &s->st, v->n_groups + 1, 0, 0};
    for (int g = 0; g < v->n_groups; g++) {
        const int n = g == 0 ? 2 : 1;
        if (g > 0) embed(r, &v->cpe[g - 1], 0, &s->st, VK_ST_CODES + g, 0, 0xffffffffu, &s->cp_in, 0, 0);
        if (v->has_proj) mm(r, &v->proj, &s->cp_in, 0, &s->ca.x, 0, n, 0, &v->proj_b);
        else vk_cmd_copy(r->cmd, &s->cp_in, 0, &s->ca.x, 0, sizeof(float) * n * H);
        fp.pos0 = g == 0 ? 0 : (uint32_t)(g + 1);
        forward(r, &v->cp, &s->ca, 1, n, &fp, NULL, NULL);
        rmsnorm(r, &s->ca.x, (uint32_t)((n - 1) * Hc), &s->cp_y, 0, v->cp.final_norm, Hc, 1, cc->eps);
        mm(r, &v->heads[g], &s->cp_y, 0, &s->cp_logits, 0, 1, 0, NULL);
        if (tr && tr->on_cp_logits && !flush(r)) {
            rd(r, &s->cp_logits, 0, tmp, Vc);
            if (!r->err) tr->on_cp_logits(g, tmp, Vc, tr->cp_user);
        }
        timestamp(r, Q_CP_SAMPLE + 2 * g);
        sample(r, s, &s->cp_logits, 0, Vc, &s->sp_pred, g + 1, 0);
        timestamp(r, Q_CP_SAMPLE + 2 * g + 1);
    }
    timestamp(r, Q_CP_END);
    push_codes(r, s);
    /* the next talker input: frame embedding + next text vector (or tts_pad) */
    embed(r, &v->ce, 0, &s->st, VK_ST_CODES, 0, 0xffffffffu, &s->ta.x, 0, 0);
    for (int g = 1; g < G; g++) embed(r, &v->cpe[g - 1], 0, &s->st, VK_ST_CODES + g, 0, 0xffffffffu, &s->ta.x, 0, 1);
    {
        const lmv_table qt = {s->queue, s->queue_rows, H, 0};
        embed(r, &qt, 0, &s->st, VK_ST_K, 0, (uint32_t)s->nq, &s->ta.x, 0, 1);
    }
    fwd_pos tp = {0, 1, &s->kc, &s->vc, &s->rope, &s->st, s->cap, 0, 0};
    forward(r, &v->talker, &s->ta, 1, 1, &tp, NULL, NULL);
    rmsnorm(r, &s->ta.x, 0, &s->y, 0, v->talker.final_norm, H, 1, v->talker.cfg.eps);
    {
        vk_pc_advance pc = {0};
        const vk_binding b[1] = {B(&s->st)};
        dispatch(r, "advance", b, 1, &pc, sizeof pc, 1, 1);
    }
    timestamp(r, Q_STEP_END);
    vk_cmd_copy(r->cmd, &s->st, 0, &s->rb, 0, sizeof(uint32_t) * VK_ST_WORDS);
}

/* ------------------------------------------------------------ requests */

/* Room for `rows` prefill rows and `cap` cache positions; a grown cache
 * keeps the first `keep` positions of every layer. */
static qtts_status ensure_capacity(lmv_stream *s, int cap, int rows, int keep, qtts_error *e) {
    const lmv_model *v = s->v;
    vk_dev *d = v->dev;
    const tf_config *tc = &v->talker.cfg;
    qtts_status st = QTTS_OK;
    if (rows > s->ta.rows) {
        if (rows < 2 * s->ta.rows) rows = 2 * s->ta.rows;
        if ((st = act_init(d, &s->ta, tc, rows, e))) return st;
        invalidate(s);
    }
    if (cap <= s->cap) return QTTS_OK;
    if (cap < s->cap + s->cap / 2) cap = s->cap + s->cap / 2;
    const size_t kvd = (size_t)tc->n_kv_heads * tc->head_dim, kv = (size_t)tc->n_layers * cap * kvd;
    vk_buf kc = {0}, vc = {0}, rope = {0};
    if ((st = vk_buf_alloc(d, &kc, sizeof(float) * kv, 0, e)) || (st = vk_buf_alloc(d, &vc, sizeof(float) * kv, 0, e)))
        goto fail;
    const int hd = tc->head_dim;
    float *t = malloc(sizeof(float) * hd * (size_t)cap);
    if (!t) {
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int p = 0; p < cap; p++) ops_rope_angles(t + (size_t)p * hd, hd, p, v->m->talker.tf.inv_freq);
    st = upload_bytes(d, &rope, t, sizeof(float) * hd * (size_t)cap, e);
    free(t);
    if (st) goto fail;
    if (keep > s->cap) keep = s->cap;
    if (keep > 0) { /* each layer's first positions into the new layout */
        if ((st = vk_cmd_begin(s->aux, e))) goto fail;
        for (int l = 0; l < tc->n_layers; l++) {
            const size_t src = sizeof(float) * (size_t)l * s->cap * kvd, dst = sizeof(float) * (size_t)l * cap * kvd;
            vk_cmd_copy(s->aux, &s->kc, src, &kc, dst, sizeof(float) * keep * kvd);
            vk_cmd_copy(s->aux, &s->vc, src, &vc, dst, sizeof(float) * keep * kvd);
        }
        if ((st = vk_cmd_end(s->aux, e)) || (st = vk_cmd_submit(s->aux, e)) || (st = vk_cmd_wait(s->aux, e)))
            goto fail;
    }
    vk_buf_free(d, &s->kc);
    vk_buf_free(d, &s->vc);
    vk_buf_free(d, &s->rope);
    s->kc = kc;
    s->vc = vc;
    s->rope = rope;
    s->cap = cap;
    invalidate(s);
    return QTTS_OK;
fail:
    vk_buf_free(d, &kc);
    vk_buf_free(d, &vc);
    vk_buf_free(d, &rope);
    return st;
}

qtts_status lmv_prefill(lmv_stream *s, const lmv_request *q, const lmv_trace *tr, double *gpu_ms, qtts_error *e) {
    const lmv_model *v = s->v;
    vk_dev *d = v->dev;
    const int H = v->talker.cfg.hidden, G = v->n_groups + 1, P = q->n_pos;
    *gpu_ms = 0;
    const int L = q->reuse > 0 && q->reuse < P ? q->reuse : 0, n = P - L;
    /* the cache holds the prompt and the first frames; the frames grow it
       geometrically, as the CPU's does (a long request does not reserve
       its whole length up front) */
    s->max_pos = P + (q->max_frames > 0 ? q->max_frames : 1) + 1;
    const int cap = P + LMV_FIRST_FRAMES + 1 < s->max_pos ? P + LMV_FIRST_FRAMES + 1 : s->max_pos;
    qtts_status st = ensure_capacity(s, cap, n > 2 ? n : 2, L, e);
    if (st) return st;
    /* request buffers */
    if (q->n_queue + 1 > s->queue_rows) {
        vk_buf_free(d, &s->queue);
        s->queue_rows = 0;
        int rows = q->n_queue + 1 < 64 ? 64 : q->n_queue + 1;
        if ((st = vk_buf_alloc(d, &s->queue, sizeof(float) * H * (size_t)rows, 0, e))) return st;
        s->queue_rows = rows;
        invalidate(s);
    }
    if (q->n_queue && (st = vk_buf_upload(d, &s->queue, 0, q->queue, sizeof(float) * H * (size_t)q->n_queue, e)))
        return st;
    if ((st = vk_buf_upload(d, &s->queue, sizeof(float) * H * (size_t)q->n_queue, q->tts_pad, sizeof(float) * H, e)))
        return st;
    const int nt = q->teacher && q->n_teacher > 0 ? q->n_teacher : 0;
    if (nt * G > s->teach_cap || !s->teach.buf) {
        vk_buf_free(d, &s->teach);
        s->teach_cap = 0;
        int words = nt * G > 64 ? nt * G : 64;
        if ((st = vk_buf_alloc(d, &s->teach, sizeof(uint32_t) * words, 0, e))) return st;
        s->teach_cap = words;
        invalidate(s);
    }
    if (nt && (st = vk_buf_upload(d, &s->teach, 0, q->teacher, sizeof(int32_t) * nt * (size_t)G, e))) return st;
    uint32_t words[VK_ST_WORDS];
    memset(words, 0, sizeof words);
    words[VK_ST_K] = 0;
    words[VK_ST_POS] = (uint32_t)P;
    words[VK_ST_NQ] = (uint32_t)q->n_queue;
    words[VK_ST_NTEACH] = (uint32_t)nt;
    words[VK_ST_BAN_EOS] = (uint32_t)(q->ban_eos != 0);
    words[VK_ST_SEED_LO] = (uint32_t)q->seed;
    words[VK_ST_SEED_HI] = (uint32_t)(q->seed >> 32);
    words[VK_ST_SERIAL] = (uint32_t)atomic_load(&s->made);
    if ((st = vk_buf_upload(d, &s->st, 0, words, sizeof words, e)) ||
        (st = vk_buf_fill(d, &s->seen, 0, sizeof(uint32_t) * v->talker.cfg.vocab, 0, e)) ||
        (st = vk_buf_upload(d, &s->ta.x, 0, q->embeds + (size_t)L * H, sizeof(float) * H * (size_t)n, e)))
        return st;
    /* the frame's recording depends on the sampling parameters and the queue length */
    if (memcmp(&s->sp_talker, q->talker, sizeof s->sp_talker) || memcmp(&s->sp_pred, q->predictor, sizeof s->sp_pred) ||
        s->nq != q->n_queue)
        invalidate(s);
    s->sp_talker = *q->talker;
    s->sp_pred = *q->predictor;
    s->nq = q->n_queue;
    s->P = P;
    s->k = 0;
    /* prefill */
    float *layer_buf = NULL;
    if (tr && tr->on_prefill_layer) {
        layer_buf = malloc(sizeof(float) * H * (size_t)P);
        if (!layer_buf) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    rec r = {v, s, &s->xq, &s->xs, s->aux, tr != NULL, 0, QTTS_OK, e, NULL};
    if ((st = vk_cmd_begin(s->aux, e))) {
        free(layer_buf);
        return st;
    }
    vk_cmd_timestamp(s->aux, 0);
    fwd_pos fp = {(uint32_t)L, 0, &s->kc, &s->vc, &s->rope, &s->st, s->cap, 0, 0};
    forward(&r, &v->talker, &s->ta, 1, n, &fp, tr, layer_buf);
    rmsnorm(&r, &s->ta.x, (uint32_t)((size_t)(n - 1) * H), &s->y, 0, v->talker.final_norm, H, 1, v->talker.cfg.eps);
    vk_cmd_timestamp(s->aux, 1);
    free(layer_buf);
    if (r.err) return r.err;
    if ((st = vk_cmd_end(s->aux, e)) || (st = vk_cmd_submit(s->aux, e)) || (st = vk_cmd_wait(s->aux, e))) return st;
    if (!tr) *gpu_ms = vk_cmd_elapsed_ms(s->aux, 0, 1);
    return QTTS_OK;
}

/* Before a frame of s: room in the cache for the position its talker step
 * writes (P + k), then count the frame. */
static qtts_status frame_begin(lmv_stream *s, qtts_error *e) {
    if (s->P + s->k + 1 > s->cap) {
        int cap = 2 * s->cap < s->max_pos ? 2 * s->cap : s->max_pos;
        if (cap < s->P + s->k + 1) cap = s->P + s->k + 1;
        qtts_status st = ensure_capacity(s, cap, 0, s->P + s->k, e);
        if (st) return st;
    }
    s->k++;
    return QTTS_OK;
}

/* The phase times of a submitted recorded frame (its timestamps). */
static void frame_times(vk_cmd *c, int n_groups, lmv_times *t) {
    double cps = 0;
    for (int g = 0; g < n_groups; g++) cps += vk_cmd_elapsed_ms(c, Q_CP_SAMPLE + 2 * g, Q_CP_SAMPLE + 2 * g + 1);
    t->sampling = vk_cmd_elapsed_ms(c, Q_HEAD_END, Q_SAMPLE0_END) + cps;
    t->predictor = vk_cmd_elapsed_ms(c, Q_CP_START, Q_CP_END) - cps;
    t->talker = vk_cmd_elapsed_ms(c, Q_FRAME_START, Q_HEAD_END) + vk_cmd_elapsed_ms(c, Q_CP_END, Q_STEP_END);
}

qtts_status lmv_frame(lmv_stream *s, const lmv_trace *tr, int32_t *codes, int *agree, lmv_times *t, qtts_error *e) {
    const lmv_model *v = s->v;
    const int G = v->n_groups + 1;
    qtts_status st;
    memset(t, 0, sizeof *t);
    if ((st = frame_begin(s, e))) return st;
    const int traced = tr && (tr->on_step_hidden || tr->on_talker_logits || tr->on_cp_inputs || tr->on_cp_logits);
    if (traced) {
        const int H = v->talker.cfg.hidden, V = v->talker.cfg.vocab;
        const int n = 2 * H > V ? 2 * H : V;
        float *tmp = malloc(sizeof(float) * n);
        if (!tmp) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
        uint32_t k;
        if ((st = vk_buf_download(v->dev, &s->st, sizeof(uint32_t) * VK_ST_K, &k, sizeof k, e))) {
            free(tmp);
            return st;
        }
        rec r = {v, s, &s->xq, &s->xs, s->aux, 1, 0, QTTS_OK, e, NULL};
        if ((st = vk_cmd_begin(s->aux, e))) {
            free(tmp);
            return st;
        }
        record_frame(&r, tr, (int)k, tmp);
        free(tmp);
        if (r.err) return r.err;
        if ((st = vk_cmd_end(s->aux, e)) || (st = vk_cmd_submit(s->aux, e)) || (st = vk_cmd_wait(s->aux, e)))
            return st;
    } else {
        if (!s->frame_ok) {
            rec r = {v, s, &s->xq, &s->xs, s->frame, 0, 0, QTTS_OK, e, NULL};
            if ((st = vk_cmd_begin(s->frame, e))) return st;
            record_frame(&r, NULL, 0, NULL);
            if (r.err) return r.err;
            if ((st = vk_cmd_end(s->frame, e))) return st;
            s->frame_ok = 1;
        }
        if ((st = vk_cmd_submit(s->frame, e)) || (st = vk_cmd_wait(s->frame, e))) return st;
        frame_times(s->frame, v->n_groups, t);
        vk_cmd_counts(s->frame, &t->dispatches, &t->copies);
    }
    const uint32_t *w = s->rb.map;
    uint32_t words[VK_ST_WORDS];
    if (traced) {
        if ((st = vk_buf_download(v->dev, &s->st, 0, words, sizeof words, e))) return st;
        w = words;
    }
    for (int g = 0; g < G; g++) {
        codes[g] = (int32_t)w[VK_ST_CODES + g];
        if (agree) agree[g] = (int)w[VK_ST_AGREE + g];
    }
    count_pushed(s, w);
    return QTTS_OK;
}

/* ------------------------------------------------------------ batches */

/* One frame of B streams in one submission (lm_vulkan.h lmv_batch_frame).
 * The rows of the step live in the batch's own activation buffers, stream
 * j's at row j (the predictor's first pass: rows 2j, 2j + 1), so each
 * weight product reads its matrix once for all B rows. What touches a
 * stream's own buffers (its y, processors and draws, embeddings by its
 * codes, its text queue, RoPE, cache store and attention over its caches,
 * the code ring, advance) goes through the *_tab shaders, which find
 * stream j's buffers and request parameters in row j of the batch's
 * stream table (vk_kernels.h vk_stream_entry: device addresses), one
 * dispatch for all B streams. So the recording depends only on B: it is
 * made once per batch size, on first use, and replayed whatever streams
 * join, leave or grow their caches; the host writes the table (B x 128
 * bytes) before each submission. The *_tab shaders share their plain
 * forms' bodies, every weight product goes through the matvec shaders
 * (vec_any), whose rows are computed independently of n, and every per-row
 * op (rmsnorm, swiglu, embed) is per row, so each stream's values are, bit
 * for bit, those of its frame alone (lmv_frame). Needs buffer device
 * addresses (vk_dev_has_addresses). */
struct lmv_batch {
    const lmv_model *v;
    lmv_act ta, ca;        /* talker scratch [LMV_BATCH_MAX] rows, predictor [2 LMV_BATCH_MAX] */
    vk_buf y;              /* [B][H] post-norm hidden rows */
    vk_buf logits;         /* [B][V] */
    vk_buf cp_in;          /* [2B][H] predictor inputs in talker width */
    vk_buf cp_y;           /* [B][Hc] */
    vk_buf cp_logits;      /* [B][Vc] */
    vk_buf xq, xs;         /* dp4 activation scratch for 2 LMV_BATCH_MAX rows */
    vk_buf ckc, cvc;       /* predictor caches [LMV_BATCH_MAX][Lc][n_groups + 1][kvd_c] */
    vk_buf tab;            /* host-visible stream table [LMV_BATCH_MAX] vk_stream_entry */
    vk_buf rb;             /* host-visible states after the frame [LMV_BATCH_MAX][VK_ST_WORDS] */
    vk_cmd *frame[LMV_BATCH_MAX + 1]; /* the recording for each batch size, made on first use */
    int n_recorded;
};

int lmv_can_batch(const lmv_model *v) { return vk_dev_has_addresses(v->dev); }
int lmv_batch_recordings(const lmv_batch *b) { return b->n_recorded; }

void lmv_batch_free(lmv_batch *b) {
    if (!b) return;
    vk_dev *d = b->v->dev;
    for (int i = 0; i <= LMV_BATCH_MAX; i++) vk_cmd_free(b->frame[i]);
    act_free(d, &b->ta);
    act_free(d, &b->ca);
    vk_buf *bs[] = {&b->y,  &b->logits, &b->cp_in, &b->cp_y, &b->cp_logits, &b->xq,
                    &b->xs, &b->ckc,    &b->cvc,   &b->tab,  &b->rb};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) vk_buf_free(d, bs[i]);
    free(b);
}

qtts_status lmv_batch_new(const lmv_model *v, lmv_batch **out, qtts_error *e) {
    *out = NULL;
    if (!lmv_can_batch(v))
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "Vulkan device %s has no buffer device addresses (bufferDeviceAddress), which batched "
                       "frames need",
                       vk_dev_info(v->dev)->name);
    lmv_batch *b = calloc(1, sizeof *b);
    if (!b) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    b->v = v;
    vk_dev *d = v->dev;
    const tf_config *tc = &v->talker.cfg, *cc = &v->cp.cfg;
    const size_t M = LMV_BATCH_MAX;
    qtts_status st = act_init(d, &b->ta, tc, (int)M, e);
    if (!st) st = act_init(d, &b->ca, cc, (int)(2 * M), e);
    if (!st) st = vk_buf_alloc(d, &b->y, sizeof(float) * M * tc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->logits, sizeof(float) * M * tc->vocab, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->cp_in, sizeof(float) * 2 * M * tc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->cp_y, sizeof(float) * M * cc->hidden, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->cp_logits, sizeof(float) * M * cc->vocab, 0, e);
    if (!st && v->dp4) st = vk_buf_alloc(d, &b->xq, 2 * M * v->kpad_max, 0, e);
    if (!st && v->dp4) st = vk_buf_alloc(d, &b->xs, sizeof(float) * 2 * 2 * M * (v->kpad_max / 32), 0, e);
    const size_t ckv = (size_t)cc->n_layers * (v->n_groups + 1) * cc->n_kv_heads * cc->head_dim;
    if (!st) st = vk_buf_alloc(d, &b->ckc, sizeof(float) * M * ckv, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->cvc, sizeof(float) * M * ckv, 0, e);
    if (!st) st = vk_buf_alloc(d, &b->tab, sizeof(vk_stream_entry) * M, 1, e);
    if (!st) st = vk_buf_alloc(d, &b->rb, sizeof(uint32_t) * VK_ST_WORDS * M, 1, e);
    if (st) {
        lmv_batch_free(b);
        return st;
    }
    *out = b;
    return QTTS_OK;
}

static void put_address(uint32_t w[2], const vk_dev *d, const vk_buf *b) {
    const uint64_t a = vk_buf_address(d, b);
    w[0] = (uint32_t)a;
    w[1] = (uint32_t)(a >> 32);
}

/* Row j of the stream table: s's buffers and request parameters, as
 * record_frame binds and pushes them for s alone. */
static void table_entry(const lmv_model *v, const lmv_stream *s, vk_stream_entry *t) {
    const vk_dev *d = v->dev;
    const tf_config *tc = &v->talker.cfg;
    memset(t, 0, sizeof *t);
    put_address(t->kc, d, &s->kc);
    put_address(t->vc, d, &s->vc);
    put_address(t->rope, d, &s->rope);
    put_address(t->st, d, &s->st);
    put_address(t->seen, d, &s->seen);
    put_address(t->teach, d, &s->teach);
    put_address(t->queue, d, &s->queue);
    put_address(t->ring, d, &s->code_ring);
    put_address(t->y, d, &s->y);
    t->layer_floats = (uint32_t)((size_t)s->cap * tc->n_kv_heads * tc->head_dim);
    t->nq = (uint32_t)s->nq;
    const qtts_sampling *a = &s->sp_talker, *p = &s->sp_pred;
    t->t_do_sample = (uint32_t)(a->do_sample != 0);
    t->t_top_k = (uint32_t)(a->top_k > 0 ? a->top_k : 0);
    t->t_temperature = a->temperature;
    t->t_top_p = a->top_p;
    t->t_penalty = a->repetition_penalty;
    t->p_do_sample = (uint32_t)(p->do_sample != 0);
    t->p_top_k = (uint32_t)(p->top_k > 0 ? p->top_k : 0);
    t->p_temperature = p->temperature;
    t->p_top_p = p->top_p;
}

/* The embedding rows of n streams' ids (stream j's st[id_pos]) into out
 * rows out_off + j * out_rs; queue: from each stream's text queue. */
static void embed_tab(rec *r, const lmv_table *t, uint32_t id_pos, int n, const vk_buf *out, uint32_t out_off,
                      uint32_t out_rs, int accumulate, int queue) {
    const vk_pc_embed pc = {(uint32_t)t->cols, 0, id_pos, 0, 0xffffffffu, out_off, (uint32_t)accumulate, out_rs,
                            (uint32_t)queue};
    const vk_binding b[3] = {B(&t->buf), {0}, B(out)};
    dispatch_tab(r, t->bf16 ? "embed_bf16_tab" : "embed_f32_tab", b, 3, &pc, sizeof pc, CEILDIV(t->cols, 256),
                 (uint32_t)n);
}

/* n streams' draws of codebook `group` from logits rows logits_off + j * V. */
static void sample_tab(rec *r, const vk_buf *logits, int V, int group, int n, int mark_seen) {
    const vk_pc_sample pc = {(uint32_t)V, 0, 0, 0, 1.0f, 1.0f, (uint32_t)group, (uint32_t)(r->v->n_groups + 1),
                             (uint32_t)mark_seen};
    const vk_binding b[1] = {B(logits)};
    dispatch_tab(r, "sample_tab", b, 1, &pc, sizeof pc, (uint32_t)n, 1);
}

/* The frame of n streams (record_frame's dataflow, row j for stream j of
 * the table). */
static void record_batch(rec *r, lmv_batch *b, int n) {
    const lmv_model *v = b->v;
    const qtts_config *cfg = &v->m->cfg;
    const int H = v->talker.cfg.hidden, V = v->talker.cfg.vocab, Hc = v->cp.cfg.hidden, Vc = v->cp.cfg.vocab;
    const int G = v->n_groups + 1;
    fwd_pos fp[LMV_BATCH_MAX];
    memset(fp, 0, sizeof fp);
    timestamp(r, Q_FRAME_START);
    {
        const vk_pc_rows_tab pc = {(uint32_t)H, 0, 0};
        const vk_binding bb[1] = {B(&b->y)};
        dispatch_tab(r, "rows_tab", bb, 1, &pc, sizeof pc, CEILDIV(H, 256), (uint32_t)n);
    }
    /* codebook 0 */
    mm(r, &v->codec_head, &b->y, 0, &b->logits, 0, n, 0, NULL);
    timestamp(r, Q_HEAD_END);
    {
        const vk_pc_logits_talker pc = {(uint32_t)V, (uint32_t)cfg->codec_eos, 2, (uint32_t)cfg->cp.vocab, 1.0f};
        const vk_binding bb[1] = {B(&b->logits)};
        dispatch_tab(r, "logits_talker_tab", bb, 1, &pc, sizeof pc, CEILDIV(V, 256), (uint32_t)n);
    }
    sample_tab(r, &b->logits, V, 0, n, 1);
    timestamp(r, Q_SAMPLE0_END);
    /* code predictor: per stream rows y and codec_embedding[c0] at positions 0, 1 */
    timestamp(r, Q_CP_START);
    {
        const vk_pc_copy2d pc = {(uint32_t)n, (uint32_t)H, 0, (uint32_t)H, 1, 0, (uint32_t)(2 * H), 1};
        const vk_binding bb[2] = {B(&b->y), B(&b->cp_in)};
        dispatch(r, "copy2d_f32", bb, 2, &pc, sizeof pc, CEILDIV(H, 64), (uint32_t)n);
    }
    embed_tab(r, &v->ce, VK_ST_CODES, n, &b->cp_in, (uint32_t)H, (uint32_t)(2 * H), 0, 0);
    /* the predictor's caches are the batch's, one region per stream: every pass reads only positions this
       frame wrote, at positions pos0 + i the same for every stream, so one dispatch serves all */
    const tf_config *cc = &v->cp.cfg;
    const uint32_t ckv = (uint32_t)(cc->n_layers * G * cc->n_kv_heads * cc->head_dim);
    for (int j = 0; j < n; j++) fp[j] = (fwd_pos){0, 0, &b->ckc, &b->cvc, &v->cp_rope, NULL, G, 0, 0};
    fp[0].stride = ckv;
    for (int g = 0; g < v->n_groups; g++) {
        const int rows = g == 0 ? 2 : 1;
        if (g > 0) embed_tab(r, &v->cpe[g - 1], VK_ST_CODES + g, n, &b->cp_in, 0, (uint32_t)H, 0, 0);
        if (v->has_proj) mm(r, &v->proj, &b->cp_in, 0, &b->ca.x, 0, n * rows, 0, &v->proj_b);
        else vk_cmd_copy(r->cmd, &b->cp_in, 0, &b->ca.x, 0, sizeof(float) * H * n * rows);
        for (int j = 0; j < n; j++) fp[j].pos0 = g == 0 ? 0 : (uint32_t)(g + 1);
        forward(r, &v->cp, &b->ca, n, rows, fp, NULL, NULL);
        {   /* each stream's last row */
            const vk_pc_rmsnorm pc = {(uint32_t)Hc, (uint32_t)n, (uint32_t)((rows - 1) * Hc), 0, v->cp.final_norm,
                                      cc->eps, (uint32_t)(rows * Hc)};
            const vk_binding bb[3] = {B(&b->ca.x), B(&v->small), B(&b->cp_y)};
            dispatch(r, "rmsnorm", bb, 3, &pc, sizeof pc, (uint32_t)n, 1);
        }
        mm(r, &v->heads[g], &b->cp_y, 0, &b->cp_logits, 0, n, 0, NULL);
        timestamp(r, Q_CP_SAMPLE + 2 * g);
        sample_tab(r, &b->cp_logits, Vc, g + 1, n, 0);
        timestamp(r, Q_CP_SAMPLE + 2 * g + 1);
    }
    timestamp(r, Q_CP_END);
    {
        const vk_pc_codes_push pc = {(uint32_t)G, LMV_CODE_RING};
        dispatch_tab(r, "codes_push_tab", NULL, 0, &pc, sizeof pc, (uint32_t)n, 1);
    }
    /* the next talker inputs: frame embedding + next text vector (or tts_pad) */
    embed_tab(r, &v->ce, VK_ST_CODES, n, &b->ta.x, 0, (uint32_t)H, 0, 0);
    for (int g = 1; g < G; g++) embed_tab(r, &v->cpe[g - 1], VK_ST_CODES + g, n, &b->ta.x, 0, (uint32_t)H, 1, 0);
    {
        const lmv_table qt = {v->ce.buf, 0, H, 0}; /* binding 0 is unread: each stream's queue by address */
        embed_tab(r, &qt, VK_ST_K, n, &b->ta.x, 0, (uint32_t)H, 1, 1);
    }
    fp[0] = (fwd_pos){0};
    fp[0].tab = 1;
    forward(r, &v->talker, &b->ta, n, 1, fp, NULL, NULL);
    rmsnorm(r, &b->ta.x, 0, &b->y, 0, v->talker.final_norm, H, n, v->talker.cfg.eps);
    {
        const vk_pc_rows_tab pc = {(uint32_t)H, 0, 1};
        const vk_binding bb[1] = {B(&b->y)};
        dispatch_tab(r, "rows_tab", bb, 1, &pc, sizeof pc, CEILDIV(H, 256), (uint32_t)n);
    }
    {
        const vk_pc_advance pc = {0};
        const vk_binding bb[1] = {B(&b->rb)};
        dispatch_tab(r, "advance_tab", bb, 1, &pc, sizeof pc, (uint32_t)n, 1);
    }
    timestamp(r, Q_STEP_END);
}

qtts_status lmv_batch_frame(lmv_batch *b, lmv_stream *const *ss, int n, int32_t *codes, int *agree, lmv_times *t,
                            qtts_error *e) {
    const lmv_model *v = b->v;
    const int G = v->n_groups + 1;
    qtts_status st;
    memset(t, 0, sizeof *t);
    if (n < 1 || n > LMV_BATCH_MAX)
        return err_set(e, QTTS_ERR_INVALID_ARG, "a batched frame takes 1 to %d streams, not %d", LMV_BATCH_MAX, n);
    for (int j = 0; j < n; j++) {
        if (ss[j]->v != v) return err_set(e, QTTS_ERR_INVALID_ARG, "a batched frame's streams share its model");
        for (int i = 0; i < j; i++)
            if (ss[i] == ss[j]) return err_set(e, QTTS_ERR_INVALID_ARG, "a stream appears twice in a batched frame");
    }
    for (int j = 0; j < n; j++)
        if ((st = frame_begin(ss[j], e))) return st;
    vk_stream_entry *tab = b->tab.map;
    for (int j = 0; j < n; j++) table_entry(v, ss[j], &tab[j]);
    vk_cmd **c = &b->frame[n];
    if (!*c) {
        if ((st = vk_cmd_new(v->dev, c, e))) return st;
        rec r = {v, NULL, &b->xq, &b->xs, *c, 0, 1, QTTS_OK, e, &b->tab};
        if (!(st = vk_cmd_begin(*c, e))) {
            record_batch(&r, b, n);
            st = r.err ? r.err : vk_cmd_end(*c, e);
        }
        if (st) {
            vk_cmd_free(*c);
            *c = NULL;
            return st;
        }
        b->n_recorded++;
    }
    if ((st = vk_cmd_submit(*c, e)) || (st = vk_cmd_wait(*c, e))) return st;
    frame_times(*c, v->n_groups, t);
    vk_cmd_counts(*c, &t->dispatches, &t->copies);
    const uint32_t *rb = b->rb.map;
    for (int j = 0; j < n; j++) {
        const uint32_t *w = rb + (size_t)j * VK_ST_WORDS;
        for (int g = 0; g < G; g++) {
            codes[j * G + g] = (int32_t)w[VK_ST_CODES + g];
            if (agree) agree[j * G + g] = (int)w[VK_ST_AGREE + g];
        }
        count_pushed(ss[j], w);
    }
    return QTTS_OK;
}

#else /* no Vulkan in this build */

#define NO_VULKAN                                                                                              \
    "this build has no Vulkan backend: install libvulkan-dev and glslc (apt-get install libvulkan-dev glslc) " \
    "and rebuild"

qtts_status lmv_create(lmv_model **out, const qtts_model *m, int device, qtts_error *e) {
    *out = NULL;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void lmv_free(lmv_model *v) { (void)v; }
const qtts_device_info *lmv_device(const lmv_model *v) { return NULL; }
struct vk_dev *lmv_vk_dev(const lmv_model *v) { return NULL; }
int64_t lmv_bytes_allocated(const lmv_model *v) { return 0; }
int64_t lmv_bytes_reserved(const lmv_model *v) { return 0; }
qtts_status lmv_stream_new(const lmv_model *v, lmv_stream **out, qtts_error *e) {
    *out = NULL;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void lmv_stream_free(lmv_stream *s) { (void)s; }
qtts_status lmv_prefill(lmv_stream *s, const lmv_request *r, const lmv_trace *tr, double *gpu_ms, qtts_error *e) {
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
qtts_status lmv_frame(lmv_stream *s, const lmv_trace *tr, int32_t *codes, int *agree, lmv_times *t, qtts_error *e) {
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
int lmv_can_batch(const lmv_model *v) { return 0; }
qtts_status lmv_batch_new(const lmv_model *v, lmv_batch **out, qtts_error *e) {
    *out = NULL;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void lmv_batch_free(lmv_batch *b) { (void)b; }
int lmv_batch_recordings(const lmv_batch *b) { return 0; }
qtts_status lmv_batch_frame(lmv_batch *b, lmv_stream *const *ss, int n, int32_t *codes, int *agree, lmv_times *t,
                            qtts_error *e) {
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}
void lmv_code_ring(lmv_stream *s, cdv_code_ring *out) {
    (void)s;
    memset(out, 0, sizeof *out);
}
int64_t lmv_frames_made(const lmv_stream *s) {
    (void)s;
    return 0;
}
qtts_status lmv_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e) {
    *n = 0;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN);
}

#endif

/* ------------------------------------------------------------ public */

int qtts_backend_from_name(const char *name) {
    if (!name) return -1;
    if (!strcasecmp(name, "cpu")) return QTTS_BACKEND_CPU;
    if (!strcasecmp(name, "vulkan")) return QTTS_BACKEND_VULKAN;
    return -1;
}

const char *qtts_backend_name(qtts_backend b) {
    return b == QTTS_BACKEND_CPU ? "cpu" : b == QTTS_BACKEND_VULKAN ? "vulkan" : "unknown";
}

qtts_status qtts_backend_devices(qtts_backend b, qtts_device_info *out, int max, int *n, char *errbuf,
                                 size_t errbuf_size) {
    qtts_error e;
    err_clear(&e);
    if (errbuf && errbuf_size) errbuf[0] = 0;
    int count = 0;
    qtts_status s;
    if (b == QTTS_BACKEND_CPU) {
        count = 1;
        if (out && max > 0) {
            memset(out, 0, sizeof *out);
            snprintf(out->name, sizeof out->name, "cpu");
            snprintf(out->type, sizeof out->type, "cpu");
            out->usable = 1;
        }
        s = QTTS_OK;
    } else if (b == QTTS_BACKEND_VULKAN) {
        s = lmv_list_devices(out, out ? max : 0, &count, &e);
    } else {
        s = err_set(&e, QTTS_ERR_INVALID_ARG, "unknown backend %d (cpu, vulkan)", (int)b);
    }
    if (n) *n = count;
    if (s && errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", e.msg);
    return s;
}
