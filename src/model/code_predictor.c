/* Code predictor (see code_predictor.h).
 * Per frame: prefill [proj(y), proj(Ce(c0))] at positions 0,1 -> lm_head[0]
 * -> c1; then for g = 1..14 feed proj(Pe_{g-1}(c_g)) at position g+1 ->
 * lm_head[g] -> c_{g+1}. The cache is simply overwritten each frame. */
#include "model/code_predictor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

qtts_status cp_load(cp_weights *w, const st_set *st, const qtts_config *cfg, qtts_error *e) {
    memset(w, 0, sizeof *w);
    const int H = cfg->talker.hidden, Hc = cfg->cp.hidden, V = cfg->cp.vocab;
    w->n_groups = cfg->n_code_groups - 1;
    w->embed = calloc(w->n_groups, sizeof(qt_mat));
    w->head = calloc(w->n_groups, sizeof(qt_mat));
    if (!w->embed || !w->head) {
        cp_free(w);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    qtts_status s = QTTS_OK;
    char n[256];
    w->has_proj = st_find(st, "talker.code_predictor.small_to_mtp_projection.weight") != NULL;
    if (!w->has_proj && H != Hc)
        s = err_set(e, QTTS_ERR_MODEL,
                    "missing tensor 'talker.code_predictor.small_to_mtp_projection.weight' (talker width %d differs from code predictor width %d)",
                    H, Hc);
    if (!s && w->has_proj) {
        s = load_mat(st, "talker.code_predictor.small_to_mtp_projection.weight", Hc, H, &w->proj, e);
        if (!s) s = load_vec(st, "talker.code_predictor.small_to_mtp_projection.bias", Hc, &w->proj_b, e);
    }
    for (int g = 0; g < w->n_groups && !s; g++) {
        snprintf(n, sizeof n, "talker.code_predictor.model.codec_embedding.%d.weight", g);
        s = load_mat(st, n, V, H, &w->embed[g], e);
        if (s) break;
        snprintf(n, sizeof n, "talker.code_predictor.lm_head.%d.weight", g);
        s = load_mat(st, n, V, Hc, &w->head[g], e);
    }
    if (!s) s = tf_load(&w->tf, st, "talker.code_predictor.model.", &cfg->cp, e);
    if (s) cp_free(w);
    return s;
}

void cp_free(cp_weights *w) {
    if (!w) return;
    free(w->proj_b);
    free(w->embed);
    free(w->head);
    tf_free(&w->tf);
    memset(w, 0, sizeof *w);
}

qtts_status cp_state_init(cp_state *s, const cp_weights *w, qtts_error *e) {
    memset(s, 0, sizeof *s);
    return kv_cache_init(&s->cache, &w->tf.cfg, w->n_groups + 1, e);
}

void cp_state_free(cp_state *s) {
    if (!s) return;
    kv_cache_free(&s->cache);
}

qtts_status cp_scratch_init(cp_scratch *s, const cp_weights *w, int talker_hidden, int max_streams, qtts_error *e) {
    memset(s, 0, sizeof *s);
    const int Hc = w->tf.cfg.hidden, P = w->n_groups + 1;
    s->max_streams = max_streams;
    qtts_status st = tf_scratch_init(&s->tf, &w->tf.cfg, 2 * max_streams, P, e);
    if (!st) {
        s->in = malloc(sizeof(float) * 2 * max_streams * talker_hidden);
        s->x = malloc(sizeof(float) * 2 * max_streams * Hc);
        s->y = malloc(sizeof(float) * max_streams * Hc);
        s->logits = malloc(sizeof(float) * max_streams * w->tf.cfg.vocab);
        if (!s->in || !s->x || !s->y || !s->logits) st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (st) cp_scratch_free(s);
    return st;
}

void cp_scratch_free(cp_scratch *s) {
    if (!s) return;
    tf_scratch_free(&s->tf);
    free(s->in);
    free(s->x);
    free(s->y);
    free(s->logits);
    memset(s, 0, sizeof *s);
}

/* x[n][Hc] = proj(in[n][H]) */
static void project(const ops_ctx *ops, const cp_weights *w, const float *in, int n, int H, float *x) {
    if (w->has_proj) ops_matmul(ops, &w->proj, in, n, w->proj_b, x);
    else memcpy(x, in, sizeof(float) * n * H);
}

/* Codebook g of every stream from its logits: each stream's draw uses its own
 * sampler and logits row, so with several streams the draws are split over
 * the pool (the same picks in any split). A trace's callbacks run on the
 * calling thread, in stream order. */
typedef struct draw_job {
    cp_job *jobs;
    float *logits;
    int n, V, g;
} draw_job;

static void draw_range(const draw_job *d, int a, int b) {
    for (int i = a; i < b; i++) {
        float *lg = d->logits + (size_t)i * d->V;
        cp_job *j = &d->jobs[i];
        if (j->trace && j->trace->on_logits) j->trace->on_logits(d->g, lg, d->V, j->trace->user);
        j->codes[d->g] = sample_token(j->rng, lg, d->V, j->sp);
        if (j->force) {
            if (j->agree) j->agree[d->g] = j->codes[d->g] == j->force[d->g];
            j->codes[d->g] = j->force[d->g];
        }
    }
}

static void draw_task(void *arg, int t, int n_tasks) {
    const draw_job *d = arg;
    draw_range(d, (int)((long long)d->n * t / n_tasks), (int)((long long)d->n * (t + 1) / n_tasks));
}

static void draw(const ops_ctx *ops, cp_job *jobs, float *logits, int n, int V, int g) {
    draw_job d = {jobs, logits, n, V, g};
    int traced = 0;
    for (int i = 0; i < n; i++) traced |= jobs[i].trace != NULL;
    const int tasks = n < ops->n_threads ? n : ops->n_threads;
    if (traced || tasks <= 1) draw_range(&d, 0, n);
    else ops_parallel(ops, draw_task, &d, tasks);
}

void cp_predict(const ops_ctx *ops, const cp_weights *w, cp_scratch *s, cp_job *jobs, int n) {
    const int H = w->embed[0].cols, V = w->tf.cfg.vocab, Hc = w->tf.cfg.hidden;
    tf_row rows[2 * CP_MAX_STREAMS];
    /* prefill: rows (stream i, pos 0) = y_i, (stream i, pos 1) = Ce(c0_i) */
    for (int i = 0; i < n; i++) {
        memcpy(s->in + (size_t)(2 * i) * H, jobs[i].y, sizeof(float) * H);
        memcpy(s->in + (size_t)(2 * i + 1) * H, jobs[i].c0_embed, sizeof(float) * H);
        if (jobs[i].trace && jobs[i].trace->on_inputs) jobs[i].trace->on_inputs(s->in + (size_t)2 * i * H, H, jobs[i].trace->user);
        rows[2 * i] = (tf_row){&jobs[i].state->cache, 0};
        rows[2 * i + 1] = (tf_row){&jobs[i].state->cache, 1};
    }
    project(ops, w, s->in, 2 * n, H, s->x);
    tf_forward(ops, &w->tf, &s->tf, rows, s->x, 2 * n, NULL, NULL);
    for (int i = 0; i < n; i++) tf_final_norm(&w->tf, s->x + (size_t)(2 * i + 1) * Hc, s->y + (size_t)i * Hc, 1);
    for (int g = 0; g < w->n_groups; g++) {
        if (g > 0) {
            for (int i = 0; i < n; i++) {
                ops_get_row(&w->embed[g - 1], jobs[i].codes[g - 1], s->in + (size_t)i * H);
                rows[i] = (tf_row){&jobs[i].state->cache, g + 1};
            }
            project(ops, w, s->in, n, H, s->x);
            tf_forward(ops, &w->tf, &s->tf, rows, s->x, n, NULL, NULL);
            tf_final_norm(&w->tf, s->x, s->y, n);
        }
        ops_matmul(ops, &w->head[g], s->y, n, NULL, s->logits);
        draw(ops, jobs, s->logits, n, V, g);
    }
}
