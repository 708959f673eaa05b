/* Internal entry points of the synthesis pipeline (src/pipeline.c) for
 * qtts_synthesize (src/synthesize.c). */
#ifndef QTTS_PIPELINE_H
#define QTTS_PIPELINE_H

#include "model/generate.h"

/* A pipeline of one stream on an existing context (borrowed: not freed with
 * the pipeline; its own step scratch serves the steps, so nothing is
 * allocated per call beyond the pipeline's bookkeeping). */
qtts_status pipeline_new_on_context(qtts_context *ctx, const qtts_pipeline_params *params, qtts_pipeline **out,
                                    qtts_error *e);

/* The checks qtts_audio_params must pass (chunk sizes, split, pauses). */
qtts_status audio_params_validate(const qtts_audio_params *ap, qtts_error *e);

#endif
