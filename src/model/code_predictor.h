/* Code predictor ("sub-talker"): a small Qwen3 decoder that, given the talker's
 * post-norm hidden state and codebook-0 token of a frame, predicts codebooks
 * 1..15 one after another. Matches Qwen3TTSTalkerCodePredictorModelForConditionalGeneration:
 * optional small_to_mtp_projection (1.7B: talker width -> predictor width),
 * 15 input embedding tables (talker width) and 15 output heads. */
#ifndef QTTS_MODEL_CODE_PREDICTOR_H
#define QTTS_MODEL_CODE_PREDICTOR_H

#include "model/sampling.h"
#include "model/transformer.h"

typedef struct cp_weights {
    int n_groups;       /* codebooks predicted (n_code_groups - 1 = 15) */
    int has_proj;       /* small_to_mtp_projection present */
    qt_mat proj;        /* [Hc, H] */
    float *proj_b;      /* [Hc] */
    qt_mat *embed;      /* [n_groups] each [cp_vocab, H] */
    qt_mat *head;       /* [n_groups] each [cp_vocab, Hc] */
    tf_weights tf;      /* talker.code_predictor.model.* */
} cp_weights;

qtts_status cp_load(cp_weights *w, const st_set *st, const qtts_config *cfg, qtts_error *e);
void cp_free(cp_weights *w);

/* Per-stream state: a KV cache of n_groups+1 positions and scratch. */
typedef struct cp_state {
    kv_cache cache;
    tf_scratch scratch;
    float *in;      /* [2][H] inputs in talker width */
    float *x;       /* [2][Hc] */
    float *y;       /* [Hc] */
    float *logits;  /* [cp_vocab] */
} cp_state;

qtts_status cp_state_init(cp_state *s, const cp_weights *w, int talker_hidden, qtts_error *e);
void cp_state_free(cp_state *s);

/* Observer for tests: inputs [2][H] once per frame, logits for group g. */
typedef struct cp_trace {
    void (*on_inputs)(const float *in2, int h, void *user);
    void (*on_logits)(int group, const float *logits, int n, void *user);
    void *user;
} cp_trace;

/* Predict codes[1..n_groups] of a frame from the talker hidden y[H] and the
 * codebook-0 embedding c0_embed[H]. */
/* force (optional, [n_groups]): teacher codes fed forward instead of the
 * model's picks; agree[g] (optional) gets 1 where the pick equalled force[g]. */
void cp_predict(const ops_ctx *ops, const cp_weights *w, cp_state *s, const float *y, const float *c0_embed,
                const qtts_sampling *sp, sampler *rng, int32_t *codes, const cp_trace *trace, const int32_t *force,
                int *agree);

#endif
