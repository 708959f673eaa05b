/* Speech-tokenizer encoder (Mimi): 24 kHz mono audio -> reference codes for ICL
 * voice cloning.
 * Dataflow: pcm [n] -> SEANet conv stack [C][n/960] (25 Hz) -> causal
 * transformer [n/960][C] -> stride-2 downsample [C][T] (12.5 Hz) -> split RVQ
 * (semantic + acoustic input projections, nearest codebook by L2 distance)
 * -> codes [T][16].
 * Must match HF transformers MimiModel.encode as wrapped by Qwen3-TTS
 * Qwen3TTSTokenizerV2Model.encode (first encoder_valid_num_quantizers codebooks,
 * T = ceil(n / encode_downsample_rate)); see spec codec.md §5. */
#ifndef QTTS_MODEL_CODEC_ENCODER_H
#define QTTS_MODEL_CODEC_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Longest reference accepted by codec_encoder_encode, in seconds of audio.
 * Activations of the whole clip are held at once (~0.5 GB per minute on the
 * real geometry); voice-cloning references are a few seconds long. */
#define CODEC_ENCODER_MAX_SECONDS 60

typedef struct codec_encoder codec_encoder;

/* Load from dir = a model's speech_tokenizer/ folder: config.json
 * (encoder_config + top-level rates) and model.safetensors (tensors
 * "encoder.*", F32/F16/BF16). Every tensor's presence and shape is checked
 * against the config. A checkpoint without encoder.* tensors (CustomVoice,
 * VoiceDesign) fails with QTTS_ERR_UNSUPPORTED. On success *out is owned by
 * the caller: free with codec_encoder_free. */
qtts_status codec_encoder_load(codec_encoder **out, const char *dir, qtts_error *e);

void codec_encoder_free(codec_encoder *c); /* accepts NULL */

/* Codebooks per frame in the output (encoder_valid_num_quantizers, 16). */
int codec_encoder_n_codebooks(const codec_encoder *c);

/* Input sample rate in Hz (24000) and samples per output frame (1920). */
int codec_encoder_sample_rate(const codec_encoder *c);
int codec_encoder_samples_per_frame(const codec_encoder *c);

/* pcm: n samples of 24 kHz mono f32 (borrowed). On success *codes is
 * malloc'ed [*n_frames][n_codebooks] row-major (caller frees) and
 * *n_frames = ceil(n / 1920). Empty or non-finite audio: QTTS_ERR_INPUT;
 * longer than CODEC_ENCODER_MAX_SECONDS: QTTS_ERR_LIMIT.
 * The encoder is not modified: one codec_encoder may serve several threads. */
qtts_status codec_encoder_encode(const codec_encoder *c, const float *pcm, size_t n, int32_t **codes,
                                 int *n_frames, qtts_error *e);

/* Stage trace, for tests and debugging: called once per stage with the
 * activations (borrowed for the call), row-major [rows][cols], in the layout
 * of the golden arrays:
 *   "enc_seanet_out"        [C][n/960]      SEANet output
 *   "enc_transformer_out"   [n/960][C]      transformer output (no final norm)
 *   "enc_downsample_out"    [C][T]          after the stride-2 replicate-padded conv
 *   "enc_semantic_proj_out" [d][T]          semantic RVQ input projection
 *   "enc_acoustic_proj_out" [d][T]          acoustic RVQ input projection */
typedef void (*codec_encoder_trace_fn)(void *user, const char *stage, const float *data, int rows, int cols);

/* codec_encoder_encode with a stage trace (trace may be NULL). */
qtts_status codec_encoder_encode_traced(const codec_encoder *c, const float *pcm, size_t n, int32_t **codes,
                                        int *n_frames, codec_encoder_trace_fn trace, void *user,
                                        qtts_error *e);

/* Compute threads for this encoder's kernels (default 1). Calls from several
 * threads at once stay correct (same bits); they just share the workers. */
void codec_encoder_set_threads(codec_encoder *c, int n_threads);

#endif
