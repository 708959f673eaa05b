/* Qwen3 decoder stack (see transformer.h).
 * Where time goes: the seven matmuls per layer (weights read once per call
 * for all rows); attention is O(pos) per row and small at TTS lengths. */
#include "model/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

qtts_status load_vec(const st_set *st, const char *name, int n, float **out, qtts_error *e) {
    const st_tensor *t;
    int64_t shape[1] = {n};
    qtts_status s = st_get_float(st, name, 1, shape, &t, e);
    if (s) return s;
    float *v = malloc(sizeof(float) * n);
    if (!v) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", name);
    dtype_to_f32(t->dtype, t->data, v, n);
    *out = v;
    return QTTS_OK;
}

qtts_status load_mat(const st_set *st, const char *name, int rows, int cols, qt_mat *out, qtts_error *e) {
    const st_tensor *t;
    int64_t shape[2] = {rows, cols};
    qtts_status s = st_get_float(st, name, 2, shape, &t, e);
    if (s) return s;
    out->data = t->data;
    out->dtype = t->dtype;
    out->rows = rows;
    out->cols = cols;
    return QTTS_OK;
}

static qtts_status own_vec(tf_weights *w, const st_set *st, const char *name, int n, const float **out,
                           qtts_error *e) {
    float *v;
    qtts_status s = load_vec(st, name, n, &v, e);
    if (s) return s;
    float **o = realloc(w->owned, sizeof(float *) * (w->n_owned + 1));
    if (!o) {
        free(v);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    w->owned = o;
    w->owned[w->n_owned++] = v;
    *out = v;
    return QTTS_OK;
}

qtts_status tf_load(tf_weights *w, const st_set *st, const char *prefix, const tf_config *cfg, qtts_error *e) {
    memset(w, 0, sizeof *w);
    w->cfg = *cfg;
    const int H = cfg->hidden, qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    w->layers = calloc(cfg->n_layers, sizeof(tf_layer));
    w->inv_freq = malloc(sizeof(float) * (cfg->head_dim / 2));
    if (!w->layers || !w->inv_freq) {
        tf_free(w);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    /* inv_freq[i] = 1 / theta^(2i/d), computed in f32 as torch does */
    for (int i = 0; i < cfg->head_dim / 2; i++)
        w->inv_freq[i] = 1.0f / powf(cfg->rope_theta, (float)(2 * i) / (float)cfg->head_dim);
    char n[512];
    qtts_status s = QTTS_OK;
#define P(fmt, ...) (snprintf(n, sizeof n, "%s" fmt, prefix, __VA_ARGS__), n)
    for (int l = 0; l < cfg->n_layers && !s; l++) {
        tf_layer *L = &w->layers[l];
        if (!s) s = own_vec(w, st, P("layers.%d.input_layernorm.weight", l), H, &L->attn_norm, e);
        if (!s) s = own_vec(w, st, P("layers.%d.post_attention_layernorm.weight", l), H, &L->ffn_norm, e);
        if (!s) s = own_vec(w, st, P("layers.%d.self_attn.q_norm.weight", l), cfg->head_dim, &L->q_norm, e);
        if (!s) s = own_vec(w, st, P("layers.%d.self_attn.k_norm.weight", l), cfg->head_dim, &L->k_norm, e);
        if (!s) s = load_mat(st, P("layers.%d.self_attn.q_proj.weight", l), qd, H, &L->wq, e);
        if (!s) s = load_mat(st, P("layers.%d.self_attn.k_proj.weight", l), kvd, H, &L->wk, e);
        if (!s) s = load_mat(st, P("layers.%d.self_attn.v_proj.weight", l), kvd, H, &L->wv, e);
        if (!s) s = load_mat(st, P("layers.%d.self_attn.o_proj.weight", l), H, qd, &L->wo, e);
        if (!s) s = load_mat(st, P("layers.%d.mlp.gate_proj.weight", l), cfg->inter, H, &L->wgate, e);
        if (!s) s = load_mat(st, P("layers.%d.mlp.up_proj.weight", l), cfg->inter, H, &L->wup, e);
        if (!s) s = load_mat(st, P("layers.%d.mlp.down_proj.weight", l), H, cfg->inter, &L->wdown, e);
    }
    if (!s) s = own_vec(w, st, P("norm.weight%s", ""), H, &w->final_norm, e);
#undef P
    if (s) tf_free(w);
    return s;
}

void tf_free(tf_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n_owned; i++) free(w->owned[i]);
    free(w->owned);
    free(w->layers);
    free(w->inv_freq);
    memset(w, 0, sizeof *w);
}

qtts_status kv_cache_init(kv_cache *c, const tf_config *cfg, int cap, qtts_error *e) {
    memset(c, 0, sizeof *c);
    c->n_layers = cfg->n_layers;
    c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    c->cap = cap;
    size_t n = (size_t)c->n_layers * cap * c->kv_dim;
    c->k = malloc(sizeof(float) * n);
    c->v = malloc(sizeof(float) * n);
    if (!c->k || !c->v) {
        kv_cache_free(c);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory for a KV cache of %d positions (%.1f MiB)", cap,
                       2.0 * n * sizeof(float) / 1048576.0);
    }
    return QTTS_OK;
}

qtts_status kv_cache_reserve(kv_cache *c, int cap, int keep, qtts_error *e) {
    if (cap <= c->cap) return QTTS_OK;
    const size_t n = (size_t)c->n_layers * cap * c->kv_dim;
    float *k = malloc(sizeof(float) * n), *v = malloc(sizeof(float) * n);
    if (!k || !v) {
        free(k);
        free(v);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory growing a KV cache to %d positions (%.1f MiB)", cap,
                       2.0 * n * sizeof(float) / 1048576.0);
    }
    if (keep > c->cap) keep = c->cap;
    for (int l = 0; l < c->n_layers && keep > 0; l++) {
        memcpy(k + (size_t)l * cap * c->kv_dim, c->k + (size_t)l * c->cap * c->kv_dim, sizeof(float) * keep * c->kv_dim);
        memcpy(v + (size_t)l * cap * c->kv_dim, c->v + (size_t)l * c->cap * c->kv_dim, sizeof(float) * keep * c->kv_dim);
    }
    free(c->k);
    free(c->v);
    c->k = k;
    c->v = v;
    c->cap = cap;
    c->mapped = keep > 0 ? keep : 0; /* the copy wrote those */
    return QTTS_OK;
}

void kv_cache_prefault(kv_cache *c, int p0, int p1) {
    if (p1 > c->cap) p1 = c->cap;
    if (p0 < c->mapped) p0 = c->mapped;
    if (!c->k || !c->v || p0 >= p1) return;
    c->mapped = p1;
#ifdef MADV_POPULATE_WRITE
    const long psz = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = psz > 0 ? (uintptr_t)psz : 4096;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < 2; h++) {
            float *base = (h ? c->v : c->k) + (size_t)l * c->cap * c->kv_dim;
            const uintptr_t a = (uintptr_t)(base + (size_t)p0 * c->kv_dim), b = (uintptr_t)(base + (size_t)p1 * c->kv_dim);
            const uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = b & ~(pg - 1);
            if (lo < hi) (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
        }
#endif
}

void kv_cache_free(kv_cache *c) {
    if (!c) return;
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

qtts_status tf_scratch_init(tf_scratch *s, const tf_config *cfg, int max_rows, int max_pos, qtts_error *e) {
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->max_pos = max_pos;
    const size_t r = (size_t)max_rows, qd = (size_t)cfg->n_heads * cfg->head_dim,
                 kvd = (size_t)cfg->n_kv_heads * cfg->head_dim;
    s->xn = malloc(sizeof(float) * r * cfg->hidden);
    s->q = malloc(sizeof(float) * r * qd);
    s->kv = malloc(sizeof(float) * r * 2 * kvd);
    s->att = malloc(sizeof(float) * r * qd);
    s->h1 = malloc(sizeof(float) * r * cfg->inter);
    s->h2 = malloc(sizeof(float) * r * cfg->inter);
    s->tmp = malloc(sizeof(float) * r * cfg->hidden);
    s->scores = malloc(sizeof(float) * TF_ATTN_TASKS * (size_t)(max_pos > 0 ? max_pos : 1));
    s->rope = malloc(sizeof(float) * r * cfg->head_dim);
    if (!s->xn || !s->q || !s->kv || !s->att || !s->h1 || !s->h2 || !s->tmp || !s->scores || !s->rope) {
        tf_scratch_free(s);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory for transformer scratch (%d rows)", max_rows);
    }
    return QTTS_OK;
}

void tf_scratch_free(tf_scratch *s) {
    if (!s) return;
    free(s->xn);
    free(s->q);
    free(s->kv);
    free(s->att);
    free(s->h1);
    free(s->h2);
    free(s->tmp);
    free(s->scores);
    free(s->rope);
    memset(s, 0, sizeof *s);
}

/* Attention of layer l: (row, head) pairs split into tasks on the pool; each
 * pair is one ops_attn_head over its own cache, so the split changes no bit. */
typedef struct attn_job {
    const ops_ctx *ops;
    const tf_row *rows;
    const float *q;
    float *att, *scores;
    size_t scores_stride;
    int l, n, nh, hd, kvd, group;
    float scale;
} attn_job;

static void attn_task(void *arg, int t, int n_tasks) {
    const attn_job *j = arg;
    const int total = j->n * j->nh, per = (total + n_tasks - 1) / n_tasks;
    const int a = t * per, b = a + per < total ? a + per : total;
    float *sc = j->scores + (size_t)t * j->scores_stride;
    const int qd = j->nh * j->hd;
    for (int u = a; u < b; u++) {
        const int i = u / j->nh, h = u % j->nh, kh = h / j->group;
        const kv_cache *kc = j->rows[i].cache;
        const size_t base = (size_t)j->l * kc->cap * j->kvd + (size_t)kh * j->hd;
        ops_attn_head(j->ops, j->q + (size_t)i * qd + (size_t)h * j->hd, kc->k + base, kc->v + base, (size_t)j->kvd,
                      j->rows[i].pos + 1, j->hd, j->scale, sc, j->att + (size_t)i * qd + (size_t)h * j->hd);
    }
}

/* The per-row work between the pooled matrix products (the residual add of
 * the last product, norms, q/k norm + RoPE + the K/V writes), split over the
 * pool by rows when there are several (prefill, batched streams); each row's
 * operations are unchanged, so the split changes no bit. The residual add
 * x += tmp rides with the norm that reads x next: one pass over x instead of
 * two, and with several rows on every thread instead of the caller alone
 * reading the product that the other threads just wrote. */
typedef enum { ROWS_ATTN_NORM, ROWS_QK, ROWS_FFN_NORM, ROWS_ADD } rows_stage;

typedef struct rows_job {
    const tf_weights *w;
    tf_scratch *s;
    const tf_row *rows;
    float *x;
    int n, l;
    int add;     /* 1: x += s->tmp first (the residual of the last product) */
    rows_stage stage;
} rows_job;

static void rows_range(const rows_job *j, int a, int b) {
    const tf_config *c = &j->w->cfg;
    const tf_layer *L = &j->w->layers[j->l];
    const int H = c->hidden, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int qd = nh * hd, kvd = nkv * hd;
    tf_scratch *s = j->s;
    for (int i = a; i < b; i++) {
        if (j->add) ops_add(j->x + (size_t)i * H, s->tmp + (size_t)i * H, H);
        if (j->stage == ROWS_ADD) continue;
        if (j->stage != ROWS_QK) {
            const float *g = j->stage == ROWS_ATTN_NORM ? L->attn_norm : L->ffn_norm;
            ops_rmsnorm(s->xn + (size_t)i * H, j->x + (size_t)i * H, g, H, c->eps);
            continue;
        }
        const int pos = j->rows[i].pos;
        float *q = s->q + (size_t)i * qd, *k = s->kv + (size_t)i * kvd;
        const float *v = s->kv + (size_t)j->n * kvd + (size_t)i * kvd;
        const float *cs = s->rope + (size_t)i * hd;
        for (int h = 0; h < nh; h++) {
            ops_rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, c->eps);
            ops_rope_neox_cs(q + h * hd, hd, cs);
        }
        for (int h = 0; h < nkv; h++) {
            ops_rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, c->eps);
            ops_rope_neox_cs(k + h * hd, hd, cs);
        }
        kv_cache *kc = j->rows[i].cache;
        const size_t off = ((size_t)j->l * kc->cap + pos) * kvd;
        memcpy(kc->k + off, k, sizeof(float) * kvd);
        memcpy(kc->v + off, v, sizeof(float) * kvd);
    }
}

static void rows_task(void *arg, int t, int n_tasks) {
    const rows_job *j = arg;
    rows_range(j, (int)((long long)j->n * t / n_tasks), (int)((long long)j->n * (t + 1) / n_tasks));
}

/* add: 1 to apply the pending residual add first (ROWS_ATTN_NORM,
 * ROWS_FFN_NORM, ROWS_ADD). */
static void rows_run(const ops_ctx *ops, rows_job *j, rows_stage stage, int add) {
    j->stage = stage;
    j->add = add;
    const int tasks = j->n < ops->n_threads ? j->n : ops->n_threads;
    if (tasks <= 1) rows_range(j, 0, j->n);
    else ops_parallel(ops, rows_task, j, tasks);
}

/* Attention below this many query-key multiply-adds (per layer, all rows and
 * heads; the same again for the values) runs on the calling thread. */
#define TF_ATTN_MIN_POOL (1 << 16)

void tf_forward(const ops_ctx *ops, const tf_weights *w, tf_scratch *s, const tf_row *rows, float *x, int n,
                tf_layer_fn on_layer, void *user) {
    const tf_config *c = &w->cfg;
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int kvd = nkv * hd, group = nh / nkv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *k_new = s->kv, *v_new = s->kv + (size_t)n * kvd;
    /* each row's RoPE angles once for every layer and head */
    for (int i = 0; i < n; i++) ops_rope_angles(s->rope + (size_t)i * hd, hd, rows[i].pos, w->inv_freq);
    rows_job rj = {.w = w, .s = s, .rows = rows, .x = x, .n = n};
    /* a few short sequences (the code predictor's <= 17 positions) cost less
     * than waking the pool: the calling thread does their attention */
    long long attn_work = 0;
    for (int i = 0; i < n; i++) attn_work += (long long)(rows[i].pos + 1) * nh * hd;
    int pending = 0; /* x += s->tmp (the last layer's down product) not yet done */
    for (int l = 0; l < c->n_layers; l++) {
        const tf_layer *L = &w->layers[l];
        rj.l = l;
        rows_run(ops, &rj, ROWS_ATTN_NORM, pending);
        {
            const qt_mat *const wqkv[3] = {&L->wq, &L->wk, &L->wv};
            float *const yqkv[3] = {s->q, k_new, v_new};
            ops_matmul_multi(ops, 3, wqkv, s->xn, n, NULL, yqkv);
        }
        /* q/k norm + RoPE, then store K/V at each row's position */
        rows_run(ops, &rj, ROWS_QK, 0);
        /* attention: row i attends to its cache positions 0..pos */
        {
            int tasks = ops->n_threads * 2;
            if (tasks > TF_ATTN_TASKS) tasks = TF_ATTN_TASKS;
            if (tasks > n * nh) tasks = n * nh;
            if (attn_work < TF_ATTN_MIN_POOL) tasks = 1;
            attn_job job = {ops, rows, s->q, s->att, s->scores, (size_t)(s->max_pos > 0 ? s->max_pos : 1), l, n, nh, hd, kvd, group, scale};
            ops_parallel(ops, attn_task, &job, tasks);
        }
        ops_matmul(ops, &L->wo, s->att, n, NULL, s->tmp);
        /* MLP (the o product's residual added first, row by row) */
        rows_run(ops, &rj, ROWS_FFN_NORM, 1);
        ops_matmul_swiglu(ops, &L->wgate, &L->wup, s->xn, n, s->h1, s->h2);
        ops_matmul(ops, &L->wdown, s->h1, n, NULL, s->tmp);
        pending = 1;
        if (on_layer) {
            rows_run(ops, &rj, ROWS_ADD, 1);
            pending = 0;
            on_layer(l, x, n, user);
        }
    }
    if (pending) rows_run(ops, &rj, ROWS_ADD, 1);
}

void tf_final_norm(const tf_weights *w, const float *x, float *y, int n) {
    const int H = w->cfg.hidden;
    for (int i = 0; i < n; i++) ops_rmsnorm(y + (size_t)i * H, x + (size_t)i * H, w->final_norm, H, w->cfg.eps);
}
