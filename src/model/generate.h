/* qtts_context and the generation loop: request -> prompt -> talker prefill
 * -> per frame: codec_head logits, processors, pick codebook 0, code predictor
 * for codebooks 1..15, frame embedding + next text vector -> talker step.
 * Matches Qwen3TTSForConditionalGeneration.generate with HF 4.57 semantics. */
#ifndef QTTS_MODEL_GENERATE_H
#define QTTS_MODEL_GENERATE_H

#include "model/model.h"
#include "model/prompt.h"

/* Observers for golden tests; every field optional. */
typedef struct gen_trace {
    void *user;
    /* prompt embeddings [P][H] and trailing text queue [nq][H] */
    void (*on_prompt)(const prompt_out *p, int h, void *user);
    /* prefill: residual stream after layer l, x[P][H] */
    void (*on_prefill_layer)(int layer, const float *x, int n, void *user);
    /* post-norm talker hidden used at step t (t = 0: last prompt position) */
    void (*on_step_hidden)(int step, const float *y, int h, void *user);
    /* codec_head logits after the processors, before sampling */
    void (*on_talker_logits)(int step, const float *logits, int n, void *user);
    /* chosen codebook-0 token at step t */
    void (*on_talker_token)(int step, int token, void *user);
    cp_trace cp;
} gen_trace;

struct qtts_context {
    qtts_model *model;
    qtts_context_params params;
    kv_cache cache;        /* talker KV cache, grows geometrically */
    tf_scratch scratch;    /* talker scratch: rows = largest prompt so far */
    cp_state cp;
    sampler rng;
    float *x;              /* [H] talker input of a step */
    float *y;              /* [H] post-norm hidden */
    float *c0e;            /* [H] codebook-0 embedding */
    float *logits;         /* [V] */
    int32_t *hist;         /* [hist_cap] generated codebook-0 tokens */
    int hist_cap;
    codec_stream *codec;   /* audio decoder state; NULL when the model has no codec */
    const gen_trace *trace;
    qtts_stats stats;             /* of the last generate / synthesize call */
    int keep_stats;               /* set by qtts_synthesize: do not reset per piece */
    qtts_stop_reason stop_reason; /* of the last generation */
    int n_capped;                 /* pieces stopped by the length cap in the last synthesize */
    char err[QTTS_ERROR_MSG_MAX];
};

void context_set_trace(qtts_context *ctx, const gen_trace *t);

/* Monotonic clock in milliseconds. */
double now_ms(void);

/* The resolved template ids for a request (for tests and tools). */
typedef struct gen_request {
    int32_t *text_tpl, *instr_tpl, *ref_tpl;
    int n_text_tpl, n_instr_tpl, n_ref_tpl;
    int n_text_tokens;  /* tokens of the text itself (for the length cap) */
    prompt_input in;
} gen_request;

/* Fill the clone fields of p from a voice (src/voice.c). */
void voice_apply(const qtts_voice *v, qtts_gen_params *p);

qtts_status gen_resolve(const qtts_model *m, const qtts_gen_params *p, gen_request *r, qtts_error *e);
void gen_request_free(gen_request *r);

#endif
