/* Talker: the 28-layer (0.6B/1.7B) Qwen3 decoder that predicts codebook 0 of
 * each frame, with its text track (text_embedding -> text_projection MLP) and
 * codec track (codec_embedding). Matches Qwen3TTSTalkerForConditionalGeneration
 * (modeling_qwen3_tts.py): text_projection, codec_embedding, model, codec_head. */
#ifndef QTTS_MODEL_TALKER_H
#define QTTS_MODEL_TALKER_H

#include "model/transformer.h"

typedef struct talker_weights {
    qt_mat text_embedding;  /* [text_vocab, text_hidden] */
    qt_mat fc1;             /* [text_hidden, text_hidden] */
    float *fc1_b;           /* [text_hidden] */
    qt_mat fc2;             /* [H, text_hidden] */
    float *fc2_b;           /* [H] */
    qt_mat codec_embedding; /* [V, H] */
    qt_mat codec_head;      /* [V, H] */
    tf_weights tf;          /* talker.model.* */
} talker_weights;

qtts_status talker_load(talker_weights *w, const st_set *st, const qtts_config *cfg, qtts_error *e);
void talker_free(talker_weights *w);

/* out[n][H] = text_projection(text_embedding[ids[i]]). tmp: [n][text_hidden] x2.
 * ids must be in range (checked by the caller). */
void talker_text_project(const ops_ctx *ops, const talker_weights *w, const int32_t *ids, int n, float *tmp_a,
                         float *tmp_b, float *out);

#endif
