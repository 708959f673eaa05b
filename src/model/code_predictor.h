/* Code predictor ("sub-talker"): a small Qwen3 decoder that, given the talker's
 * post-norm hidden state and codebook-0 token of a frame, predicts codebooks
 * 1..15 one after another. Matches Qwen3TTSTalkerCodePredictorModelForConditionalGeneration
 * (qwen_tts/core/models/modeling_qwen3_tts.py):
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

#define CP_MAX_STREAMS 64 /* streams one cp_predict call can take */

/* Per-stream state: the KV cache of one frame's n_groups+1 positions. */
typedef struct cp_state {
    kv_cache cache;
} cp_state;

qtts_status cp_state_init(cp_state *s, const cp_weights *w, qtts_error *e);
void cp_state_free(cp_state *s);

/* Scratch for up to max_streams streams predicted together. */
typedef struct cp_scratch {
    int max_streams;
    tf_scratch tf;  /* 2 * max_streams rows */
    float *in;      /* [2*max][H] inputs in talker width */
    float *x;       /* [2*max][Hc] */
    float *y;       /* [max][Hc] */
    float *logits;  /* [max][cp_vocab] */
} cp_scratch;

qtts_status cp_scratch_init(cp_scratch *s, const cp_weights *w, int talker_hidden, int max_streams, qtts_error *e);
void cp_scratch_free(cp_scratch *s);

/* Observer for tests: inputs [2][H] once per frame, logits for group g. */
typedef struct cp_trace {
    void (*on_inputs)(const float *in2, int h, void *user);
    void (*on_logits)(int group, const float *logits, int n, void *user);
    void *user;
} cp_trace;

/* One stream's part of a prediction. */
typedef struct cp_job {
    cp_state *state;
    const float *y;          /* [H] talker post-norm hidden */
    const float *c0_embed;   /* [H] codec_embedding row of codebook 0 */
    const qtts_sampling *sp; /* its sampling parameters */
    sampler *rng;            /* its RNG */
    int32_t *codes;          /* out: [n_groups] codebooks 1..n_groups */
    const int32_t *force;    /* optional teacher codes [n_groups], fed forward instead of the picks */
    int *agree;              /* optional out: [n_groups] 1 where the pick equalled force */
    const cp_trace *trace;   /* optional */
} cp_job;

/* Predict codebooks 1..n_groups for n streams at once: every weight is read
 * once per step for all of them, and each stream's arithmetic is the same as
 * alone (row-independent kernels, own cache, own RNG).
 * n <= scratch streams <= CP_MAX_STREAMS. */
void cp_predict(const ops_ctx *ops, const cp_weights *w, cp_scratch *s, cp_job *jobs, int n);

#endif
