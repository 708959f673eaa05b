/* The voice of a request, resolved in one place: a qtts_voice (src/model/
 * voice.c, made by the speaker and codec encoders or loaded from a file) or
 * its parts given directly in qtts_gen_params. Generation (the prompt's
 * x-vector, reference codes and transcript) and audio priming (the codec
 * stream primed with the reference frames) both read the one voice_spec. */
#ifndef QTTS_MODEL_VOICE_H
#define QTTS_MODEL_VOICE_H

#include "model/model.h"

typedef struct voice_spec {
    const qtts_voice *voice;      /* the voice object, when one was given (caches its primed stream) */
    const float *xvector;         /* [hidden] speaker embedding, or NULL */
    const int32_t *ref_codes;     /* ICL: [n_ref_frames][n_code_groups] reference codes, or NULL */
    int n_ref_frames;
    const char *ref_text;         /* ICL transcript as text, or NULL */
    const int32_t *ref_text_ids;  /* or as ids (between the template tokens), or NULL */
    int n_ref_text_ids;
} voice_spec;

/* Resolve p's voice for model m: the voice object's parts, or the parts p
 * gives; checks that they fit the model type and each other. Pointers are
 * borrowed from p and its voice. */
qtts_status voice_resolve(const qtts_model *m, const qtts_gen_params *p, voice_spec *v, qtts_error *e);

/* 1 when the audio of an utterance in voice v starts from the reference
 * frames (in-context cloning). */
int voice_is_icl(const voice_spec *v);

/* Reset s for an utterance in voice v and, for ICL, prime it with the
 * reference frames (their audio is dropped; a voice object keeps the primed
 * state and restores it after the first time). *ref_last (may be NULL) gets
 * the reference's last sample, for the official ICL cut; 0 without ICL. */
qtts_status voice_prime(const voice_spec *v, codec_stream *s, float *ref_last, qtts_error *e);

#endif
