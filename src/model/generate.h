/* qtts_context and the generation loop: request -> prompt -> talker prefill
 * -> per frame: codec_head logits, processors, pick codebook 0, code predictor
 * for codebooks 1..15, frame embedding + next text vector -> talker step.
 * Matches Qwen3TTSForConditionalGeneration.generate
 * (qwen_tts/core/models/modeling_qwen3_tts.py) with HF 4.57 semantics. */
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

/* Scratch for stepping up to max streams together (a context owns one for
 * itself; a batch owns one for all its streams). */
typedef struct step_scratch {
    int max;           /* streams */
    tf_scratch tf;     /* talker rows: max(prefill rows, streams); attention over max_pos */
    cp_scratch cp;     /* code predictor for max streams */
    float *y;          /* [max][H] post-norm hidden rows */
    float *x;          /* [max][H] next talker inputs */
    float *logits;     /* [max][V] */
    float *c0e;        /* [max][H] codebook-0 embeddings */
    int32_t *frames;   /* [max][G] */
    int *agree;        /* [max][G] */
    struct lmv_batch **lmvb; /* Vulkan: the batched frames of the step's groups of up to LMV_BATCH_MAX
                                streams (made when first needed), each keeping its recording */
    int n_lmvb;
} step_scratch;

qtts_status step_scratch_init(step_scratch *s, const qtts_model *m, int max_streams, qtts_error *e);
void step_scratch_free(step_scratch *s);

/* One generation in progress on a context. */
typedef struct gen_state {
    int active;              /* between gen_begin and the step that finishes it */
    qtts_gen_params p;       /* the request (its pointers stay borrowed until the end; p.debug NULL:
                                the request's debug aids are copied to dbg) */
    qtts_gen_debug dbg;      /* the request's debug aids, defaults when it gave none
                                (dbg.teacher_codes stays borrowed until the end) */
    prompt_out pr;           /* prompt and trailing text queue */
    int P;                   /* prompt positions */
    int k;                   /* next talker step */
    int max_new, forced, cap_frames, n_text_tokens;
    int open;                /* incremental text: the queue may still grow (gen_begin_open) */
    qtts_frame_fn on_frame;
    void *user;
    int collect;             /* keep the codes */
    int32_t *codes;          /* [cap_out][G] when collecting */
    int n_out, cap_out;
    qtts_status status;      /* final status once inactive */
    qtts_error err;
} gen_state;

struct qtts_context {
    const qtts_model *model;
    qtts_context_params params;
    kv_cache cache;        /* talker KV cache, grows geometrically */
    step_scratch ss;       /* one stream's scratch; its tf also serves the prefill */
    cp_state cp;           /* code predictor cache */
    sampler rng;
    float *y;              /* [H] post-norm hidden of the newest position */
    /* Voice prefix reuse: the input rows of positions [0, n_voice_rows) of
     * the last prompt prefilled on this context, whose K/V the cache still
     * holds (nothing writes below a prompt's end until the next prefill).
     * A new prompt whose leading rows are the same bytes starts its prefill
     * after them: each position's K/V depend only on the rows up to it, so
     * the same bits as a full prefill. */
    float *voice_rows;     /* [voice_rows_cap][H] */
    int n_voice_rows, voice_rows_cap;
    gen_state gs;          /* the generation in progress */
    int32_t *hist;         /* [hist_cap] generated codebook-0 tokens */
    int hist_cap;
    codec_stream *codec;   /* audio decoder state; NULL when the model has no codec */
    struct lmv_stream *lmv; /* the stream's caches and state on the Vulkan device; NULL on the CPU */
    const gen_trace *trace;
    qtts_stats stats;             /* of the last generate / synthesize call */
    int keep_stats;               /* set by qtts_synthesize: do not reset per piece */
    qtts_stop_reason stop_reason; /* of the last generation */
    int n_capped;                 /* pieces stopped by the length cap in the last synthesize */
    char err[QTTS_ERROR_MSG_MAX];
};

void context_set_trace(qtts_context *ctx, const gen_trace *t);

/* The device code ring's number of the frame c delivered last (lmv_code_ring),
 * or -1 when its frames are not made on a device. */
int64_t gen_frame_serial(const qtts_context *c);

/* Start a generation on c: validate, resolve, build the prompt, prefill.
 * On success c->gs.active = 1 and frames come from gen_step. */
qtts_status gen_begin(qtts_context *c, const qtts_gen_params *p, qtts_frame_fn on_frame, void *user, int collect,
                      qtts_error *e);
/* gen_begin for text that arrives incrementally (streaming text mode, CPU):
 * tpl[n_tpl] are the ids committed so far of
 * "<|im_start|>assistant\n{text}" (tok_stream), without the tail. When they
 * are too few for the prefill (prompt_text_needed), nothing starts:
 * QTTS_OK with *need set to the text ids needed and c->gs.active 0. Then
 * the queue grows with gen_text_append and ends with gen_text_close; a step
 * at a frame whose text vector is not known yet must wait
 * (gen_waits_for_text). The prompt, the queue and so every frame are the
 * same as gen_begin's with the whole text. */
qtts_status gen_begin_open(qtts_context *c, const qtts_gen_params *p, const int32_t *tpl, int n_tpl,
                           qtts_frame_fn on_frame, void *user, int *need, qtts_error *e);
qtts_status gen_text_append(qtts_context *c, const int32_t *ids, int n, qtts_error *e);
qtts_status gen_text_close(qtts_context *c, qtts_error *e);
/* 1 when c's next frame needs a text vector that has not arrived. */
int gen_waits_for_text(const qtts_context *c);
/* The text mode a request resolves to: 1 streaming, 0 non-streaming. */
int gen_is_streaming(const qtts_model *m, const qtts_gen_params *p);

/* One frame for each of the n active contexts, stepped together through
 * batched kernels using ss (n <= ss->max). A context whose generation ends
 * (EOS, limits, cancel, error) becomes inactive with gs.status set. */
void gen_step(qtts_context **cs, int n, step_scratch *ss);
/* Finish: hand over the collected codes, release the prompt. Returns gs.status. */
qtts_status gen_end(qtts_context *c, int32_t **codes_out, int *n_frames, qtts_error *e);

/* The resolved template ids for a request (for tests and tools). */
typedef struct gen_request {
    int32_t *text_tpl, *instr_tpl, *ref_tpl;
    int n_text_tpl, n_instr_tpl, n_ref_tpl;
    int n_text_tokens;  /* tokens of the text itself (for the length cap) */
    prompt_input in;
} gen_request;

qtts_status gen_resolve(const qtts_model *m, const qtts_gen_params *p, gen_request *r, qtts_error *e);
void gen_request_free(gen_request *r);

#endif
