/* The codec decoder (speech_tokenizer decoder: codes -> 24 kHz PCM) on the
 * Vulkan backend: the device twin of codec_stream.c, behind the same
 * codec_stream calls (a codec_stream of a decoder with a device copy
 * forwards to it).
 * Dataflow: cdv_create (every decoder.* weight uploaded once, f32) -> per
 * stream cdv_stream_new (history tails, the ring KV window, scratch; one
 * command buffer recorded per chunk size and replayed) -> cdv_stream_decode
 * (the chunk's RoPE rows and position in host-visible buffers, the codes
 * there too or, cdv_stream_decode_ring, gathered on the device from a
 * generating stream's code ring; one submission; PCM back).
 * Exactness: every shader computes each output in a fixed order that
 * depends only on its position (see the heads of codec_stream.c and of the
 * shaders), so chunked output equals whole-utterance output sample for
 * sample on one device. Against the CPU the sums run in other orders and
 * sin/exp/erf are the device's: the values agree within the tolerances of
 * tests/unit/test_vk_codec.c.
 * Without Vulkan in the build every entry point returns QTTS_ERR_UNSUPPORTED. */
#ifndef QTTS_MODEL_CODEC_VULKAN_H
#define QTTS_MODEL_CODEC_VULKAN_H

#include <stdatomic.h>
#include <stdint.h>

#include "model/codec_decoder.h"
#include "util/error.h"

struct vk_dev;
typedef struct cdv_model cdv_model;   /* the decoder's weights on one device */
typedef struct cdv_stream cdv_stream; /* one stream's device state */

/* Upload d's weights to dev (borrowed: it must outlive the result; d too).
 * Owned by the caller: free with cdv_free. */
qtts_status cdv_create(cdv_model **out, const codec_decoder *d, struct vk_dev *dev, qtts_error *e);
void cdv_free(cdv_model *v); /* accepts NULL */
int64_t cdv_weight_bytes(const cdv_model *v);

/* New stream at position 0. Owned by the caller: free with cdv_stream_free. */
qtts_status cdv_stream_new(const cdv_model *v, cdv_stream **out, qtts_error *e);
void cdv_stream_free(cdv_stream *s); /* accepts NULL */
qtts_status cdv_stream_reset(cdv_stream *s, qtts_error *e);
int64_t cdv_stream_position_frames(const cdv_stream *s);

/* Decode n_frames >= 0 validated frames codes[n][n_q] into
 * n * samples_per_frame samples of pcm (chunks above the recorded maximum
 * are cut into pieces). */
qtts_status cdv_stream_decode(cdv_stream *s, const int32_t *codes, int n_frames, float *pcm, qtts_error *e);

/* A generating stream's code ring on the same device (lm_vulkan.h
 * lmv_code_ring): the codes of the stream's frame number f (counted from
 * the stream's creation) sit in slot f % frames of buf, int [frames][n_q]. */
typedef struct cdv_code_ring {
    const struct vk_buf *buf;
    uint32_t frames;             /* a power of two */
    const _Atomic int64_t *made; /* frames pushed so far (a frame counts once its submission is done) */
} cdv_code_ring;

/* Read codes from ring (borrowed until unlinked: NULL unlinks). Recordings
 * made before are dropped. */
qtts_status cdv_stream_link(cdv_stream *s, const cdv_code_ring *ring, qtts_error *e);

/* cdv_stream_decode with the codes of the linked ring's frames serial0 ..
 * serial0 + n_frames - 1 read on the device (codes_gather.comp): nothing
 * is uploaded. *used gets 0 without decoding when those frames are not all
 * in the ring (not linked, not made yet, or too old: the ring may be
 * overwriting them); the caller then decodes from its own copy. */
qtts_status cdv_stream_decode_ring(cdv_stream *s, int64_t serial0, int n_frames, float *pcm, int *used,
                                   qtts_error *e);

/* The stream's history (tails, KV ring, position) as floats, to restore on a
 * stream of the same model: *n gets the count; state NULL: only the count. */
qtts_status cdv_stream_save(const cdv_stream *s, float *state, size_t *n, int64_t *pos, qtts_error *e);
qtts_status cdv_stream_restore(cdv_stream *s, const float *state, size_t n, int64_t pos, qtts_error *e);

#endif
