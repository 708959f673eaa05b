/* Talker prompt construction for every released mode, as
 * Qwen3TTSForConditionalGeneration.generate
 * (qwen_tts/core/models/modeling_qwen3_tts.py) builds it: instruction block,
 * role, codec control block (think/language/speaker or x-vector/pad/bos),
 * then the text block in the streaming-text, non-streaming or ICL layout,
 * plus the queue of text-track vectors fed one per generated frame.
 * Inputs are the full chat-template id lists, exactly as the official wrapper
 * hands them to generate. */
#ifndef QTTS_MODEL_PROMPT_H
#define QTTS_MODEL_PROMPT_H

#include "model/code_predictor.h"
#include "model/talker.h"

typedef struct prompt_input {
    const int32_t *text_tpl;    /* <|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n */
    int n_text_tpl;
    const int32_t *instr_tpl;   /* <|im_start|>user\n{instruct}<|im_end|>\n, or NULL */
    int n_instr_tpl;
    const int32_t *ref_tpl;     /* ICL: <|im_start|>assistant\n{ref_text}<|im_end|>\n, or NULL */
    int n_ref_tpl;
    int lang_id;                /* codec language id, or -1 for "auto" */
    int speaker_id;             /* codec id of a preset speaker, or -1 */
    const float *xvector;       /* [H] or NULL */
    const int32_t *ref_codes;   /* ICL [n_ref_frames][n_code_groups] or NULL */
    int n_ref_frames;
    int non_streaming;          /* 1 = whole text in the prompt */
    int open;                   /* streaming only: text_tpl is the head and the text tokens known so
                                   far, without the tail; the queue grows with prompt_append_text
                                   and ends with prompt_close_text (incremental text) */
} prompt_input;

typedef struct prompt_out {
    int n_pos;       /* prompt positions P */
    int n_voice;     /* leading positions that do not depend on the text to speak
                        (instruction, role, codec control with language and speaker,
                        an ICL reference's transcript part): the same for every
                        request with the same voice, instruction and language */
    float *embeds;   /* [P][H] (malloc'ed) */
    int n_queue;     /* trailing text vectors */
    float *queue;    /* [n_queue][H] (malloc'ed) */
    float *tts_pad;  /* [H] (malloc'ed) */
    int queue_cap;   /* rows queue has room for */
} prompt_out;

qtts_status prompt_build(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, const cp_weights *cw,
                         const prompt_input *in, prompt_out *out, qtts_error *e);
void prompt_free(prompt_out *p);

/* Open prompts (incremental text): the text tokens the prefill needs before
 * it can run: the first one, or with an ICL reference as many as fill the
 * reference's codec positions (its prefill lays text beside them). */
int prompt_text_needed(const prompt_input *in);
/* Append the text vectors of n more text ids to an open prompt's queue, then
 * (close) the end of text. The same rows as the whole text's prompt. */
qtts_status prompt_append_text(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, prompt_out *p,
                               const int32_t *ids, int n, qtts_error *e);
qtts_status prompt_close_text(const ops_ctx *ops, const qtts_config *cfg, const talker_weights *tw, prompt_out *p,
                              qtts_error *e);

/* out[H] = Ce(codes[0]) + sum_g Pe_g(codes[g+1]): the talker input of a frame. */
void frame_embed(const talker_weights *tw, const cp_weights *cw, const int32_t *codes, int n_groups, float *out);

#endif
