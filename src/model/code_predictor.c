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

qtts_status cp_state_init(cp_state *s, const cp_weights *w, int talker_hidden, qtts_error *e) {
    memset(s, 0, sizeof *s);
    const int P = w->n_groups + 1, Hc = w->tf.cfg.hidden;
    qtts_status st = kv_cache_init(&s->cache, &w->tf.cfg, P, e);
    if (!st) st = tf_scratch_init(&s->scratch, &w->tf.cfg, 2, P, e);
    if (!st) {
        s->in = malloc(sizeof(float) * 2 * talker_hidden);
        s->x = malloc(sizeof(float) * 2 * Hc);
        s->y = malloc(sizeof(float) * Hc);
        s->logits = malloc(sizeof(float) * w->tf.cfg.vocab);
        if (!s->in || !s->x || !s->y || !s->logits) st = err_set(e, QTTS_ERR_NOMEM, "out of memory");
    }
    if (st) cp_state_free(s);
    return st;
}

void cp_state_free(cp_state *s) {
    if (!s) return;
    kv_cache_free(&s->cache);
    tf_scratch_free(&s->scratch);
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

void cp_predict(const ops_ctx *ops, const cp_weights *w, cp_state *s, const float *y, const float *c0_embed,
                const qtts_sampling *sp, sampler *rng, int32_t *codes, const cp_trace *trace, const int32_t *force,
                int *agree) {
    const int H = w->embed[0].cols, V = w->tf.cfg.vocab;
    memcpy(s->in, y, sizeof(float) * H);
    memcpy(s->in + H, c0_embed, sizeof(float) * H);
    if (trace && trace->on_inputs) trace->on_inputs(s->in, H, trace->user);
    const int Hc = w->tf.cfg.hidden;
    project(ops, w, s->in, 2, H, s->x);
    tf_row rows[2] = {{&s->cache, 0}, {&s->cache, 1}};
    tf_forward(ops, &w->tf, &s->scratch, rows, s->x, 2, NULL, NULL);
    const float *last = s->x + Hc;
    for (int g = 0; g < w->n_groups; g++) {
        if (g > 0) {
            ops_get_row(&w->embed[g - 1], codes[g - 1], s->in);
            project(ops, w, s->in, 1, H, s->x);
            tf_row r = {&s->cache, g + 1};
            tf_forward(ops, &w->tf, &s->scratch, &r, s->x, 1, NULL, NULL);
            last = s->x;
        }
        tf_final_norm(&w->tf, last, s->y, 1);
        ops_matmul(ops, &w->head[g], s->y, 1, NULL, s->logits);
        if (trace && trace->on_logits) trace->on_logits(g, s->logits, V, trace->user);
        codes[g] = sample_token(rng, s->logits, V, sp);
        if (force) {
            if (agree) agree[g] = codes[g] == force[g];
            codes[g] = force[g];
        }
    }
}
