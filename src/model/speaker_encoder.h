/* Speaker encoder of the Base models: 24 kHz reference audio -> x-vector.
 * Dataflow: pcm -> log-mel [T][mel_dim] (model/mel.h) -> TDNN -> SE-Res2Net blocks ->
 * multi-layer feature aggregation -> attentive statistics pooling -> fc -> [enc_dim].
 * Must match `Qwen3TTSSpeakerEncoder` + `extract_speaker_embedding` in QwenLM/Qwen3-TTS
 * qwen_tts/core/models/modeling_qwen3_tts.py (ECAPA-TDNN without BatchNorm, every conv
 * "same"-padded with reflect padding). Spec: codec.md section 6. */
#ifndef QTTS_MODEL_SPEAKER_ENCODER_H
#define QTTS_MODEL_SPEAKER_ENCODER_H

#include <stddef.h>

#include "io/safetensors.h"
#include "util/error.h"

struct json_t; /* jansson */

#define SPK_MAX_LAYERS 16 /* entries of enc_channels / enc_kernel_sizes / enc_dilations */

/* Geometry: `speaker_encoder_config` of the main config.json (Qwen3TTSSpeakerEncoderConfig). */
typedef struct speaker_encoder_config {
    int mel_dim;            /* mel bands of the input; default 128 */
    int enc_dim;            /* x-vector size, = talker hidden size; default 1024 (0.6B), 2048 (1.7B) */
    int n_layers;           /* entries in the three lists below, in [3, SPK_MAX_LAYERS]; default 5:
                               initial TDNN, n_layers-2 SE-Res2Net blocks, MFA */
    int channels[SPK_MAX_LAYERS];     /* enc_channels; default 512 512 512 512 1536 */
    int kernel_sizes[SPK_MAX_LAYERS]; /* enc_kernel_sizes; default 5 3 3 3 1 */
    int dilations[SPK_MAX_LAYERS];    /* enc_dilations; default 1 2 3 4 1 */
    int attention_channels; /* enc_attention_channels; default 128 */
    int res2net_scale;      /* enc_res2net_scale; default 8 */
    int se_channels;        /* enc_se_channels; default 128 */
    int sample_rate;        /* Hz of the reference audio; only 24000 is supported; default 24000 */
} speaker_encoder_config;

/* The class defaults of the official config (codec.md 1.5) with the given enc_dim. */
speaker_encoder_config speaker_encoder_default_config(int enc_dim);

/* Overwrites *c with every key present in obj, the `speaker_encoder_config` JSON
 * object (absent keys keep their value in *c, so start from the defaults).
 * A key of the wrong type or range gives QTTS_ERR_FORMAT naming it. */
qtts_status speaker_encoder_config_from_json(speaker_encoder_config *c, const struct json_t *obj,
                                             qtts_error *e);

/* Reads the `speaker_encoder_config` object of the config.json at path into *c
 * (as speaker_encoder_config_from_json). A file without that object leaves *c as is. */
qtts_status speaker_encoder_config_from_file(speaker_encoder_config *c, const char *path, qtts_error *e);

typedef struct speaker_encoder speaker_encoder;

/* Loads the 'speaker_encoder.*' tensors of st (the main model.safetensors set),
 * validating every shape against cfg. Weights stay in st's mmap in their stored
 * dtype (BF16/F16/F32): st must outlive *out. n_threads >= 1 for compute.
 * The caller frees *out with speaker_encoder_free. */
qtts_status speaker_encoder_load_config(speaker_encoder **out, const st_set *st,
                                        const speaker_encoder_config *cfg, int n_threads,
                                        qtts_error *e);

/* Same, with the official default geometry and the given enc_dim, one thread. */
qtts_status speaker_encoder_load(speaker_encoder **out, const st_set *st, int enc_dim, qtts_error *e);

/* Frees s; accepts NULL. */
void speaker_encoder_free(speaker_encoder *s);

/* Geometry the encoder was loaded with. */
const speaker_encoder_config *speaker_encoder_get_config(const speaker_encoder *s);

/* Fewest samples of 24 kHz audio speaker_encoder_embed accepts: the mel needs
 * more samples than its reflect pad, and every reflect-padded conv needs more
 * frames than its pad. */
size_t speaker_encoder_min_samples(const speaker_encoder *s);

/* Receives intermediate results during speaker_encoder_embed. stage is the golden
 * file name ("spk_mel", "spk_block0_out".."spk_block{n_layers-2}_out", "spk_mfa_out",
 * "spk_asp_out", "spk_fc_out"); data is borrowed for the call and TIME-MAJOR:
 * [n_frames][n_channels] (the pooled stages have n_frames = 1). */
typedef void (*speaker_encoder_trace_fn)(const char *stage, const float *data, int n_frames,
                                         int n_channels, void *user);

/* xvector[enc_dim] from pcm[n], 24 kHz mono f32 (not normalised or clipped, as
 * upstream). Empty or too-short audio and NaN/Inf samples give QTTS_ERR_INPUT.
 * Scratch is allocated per call (O(frames x channels)); s is not modified, so
 * threads may share it. */
qtts_status speaker_encoder_embed(const speaker_encoder *s, const float *pcm, size_t n, float *xvector,
                                  qtts_error *e);

/* speaker_encoder_embed with a trace hook (trace may be NULL). */
qtts_status speaker_encoder_embed_trace(const speaker_encoder *s, const float *pcm, size_t n,
                                        float *xvector, speaker_encoder_trace_fn trace, void *user,
                                        qtts_error *e);

#endif
