/* Speech-tokenizer decoder (Qwen3-TTS-Tokenizer-12Hz "decoder.*"): codes
 * [T][16] at 12.5 Hz -> 24 kHz mono PCM, 1920 samples per frame.
 * Dataflow: split-RVQ dequantise -> causal pre_conv -> sliding-window
 * pre-transformer -> 2 x (transposed conv + ConvNeXt) -> causal conv ->
 * 4 x SnakeBeta vocoder blocks -> SnakeBeta + causal conv -> clamp.
 * Must match Qwen3TTSTokenizerV2Decoder (QwenLM/Qwen3-TTS,
 * qwen_tts/core/tokenizer_12hz/modeling_qwen3_tts_tokenizer_v2.py).
 *
 * Every op is causal, so decoding is exactly streamable: a codec_stream carries
 * the attention window and every convolution's left context, and any split of
 * the frames into chunks produces the same bits as one pass (same build).
 * codec_decoder is immutable after load and may be shared by many streams on
 * many threads; a codec_stream belongs to one thread at a time. */
#ifndef QTTS_MODEL_CODEC_DECODER_H
#define QTTS_MODEL_CODEC_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct codec_decoder codec_decoder; /* immutable weights, shared by streams */
typedef struct codec_stream codec_stream;   /* per-stream state: attention window, conv tails */

/* Load dir/config.json (decoder_config) and dir/model.safetensors (decoder.*,
 * F32, F16 or BF16). dir is the model's speech_tokenizer/ folder. Every tensor
 * is checked for presence, float dtype and the shape the config implies.
 * F32 weights are read in place from the mmap; huge_pages 1 advises it for
 * 2 MiB pages (huge_advise) and puts the packed transposed convs in a
 * huge-page arena (util/huge_arena.h). Same values either way.
 * On success *out is owned by the caller: free with codec_decoder_free. */
qtts_status codec_decoder_load(codec_decoder **out, const char *dir, int huge_pages, qtts_error *e);

/* codec_decoder_load, with the packed transposed convs (the load's costly
 * preparation: a strided gather of ~90 MB on the real codec) mapped from the
 * prepared-weights file cache_path (model/weights_cache.h, kind-2 entries)
 * when it is valid for these files, else packed and written there
 * (cache_path NULL: neither). status (cap bytes, may be NULL) says which:
 * "mapped PATH", "written PATH", "not written (PATH)", "off". */
qtts_status codec_decoder_load_cached(codec_decoder **out, const char *dir, int huge_pages, const char *cache_path,
                                      char *status, size_t cap, qtts_error *e);
void codec_decoder_free(codec_decoder *d); /* accepts NULL */

/* Which convs the int8 format takes (a mask): decoder.0, the vocoder
 * blocks' transposed convs, their residual units' K 7 dilated convs (conv1)
 * and 1x1 convs (conv2); only those with CODEC_Q8_MIN_CIN input channels or
 * more (narrower ones have little arithmetic, and a step's scale shared by
 * few channels loses most). The default, conv1 alone (74 % of the convs'
 * multiply-adds), is the largest set that keeps the waveform SNR >= 30 dB on
 * the real-size synthetic codec (docs/BENCH.md "Codec decoder formats" has
 * each set's figures). The environment variable QTTS_CODEC_Q8_PARTS (a
 * number) replaces it, for measuring. */
#define CODEC_Q8_DEC0 1u
#define CODEC_Q8_TCONV 2u
#define CODEC_Q8_CONV1 4u
#define CODEC_Q8_CONV2 8u
#define CODEC_Q8_ANY_WIDTH 16u /* also the convs under CODEC_Q8_MIN_CIN (tests: the small golden codecs) */
#define CODEC_Q8_DEFAULT CODEC_Q8_CONV1
#define CODEC_Q8_MIN_CIN 64
/* The bf16 format takes the same mask, and one more bit: CODEC_BF16_MATS,
 * the Linear layers (the quantizer's output projections, the
 * pre-transformer, the ConvNeXt pointwise layers) with bf16 weights and f32
 * activations (half the bytes they read a frame). Its default, every conv
 * above (any width) and the Linear layers, keeps SNR and log-mel correlation
 * within the acceptance on every case (docs/BENCH.md "Codec decoder
 * formats"); the environment variable QTTS_CODEC_BF16_PARTS replaces it, for
 * measuring. */
#define CODEC_BF16_MATS 32u
#define CODEC_BF16_DEFAULT \
    (CODEC_Q8_DEC0 | CODEC_Q8_TCONV | CODEC_Q8_CONV1 | CODEC_Q8_CONV2 | CODEC_Q8_ANY_WIDTH | CODEC_BF16_MATS)
/* The int16 format (backend/cpu/conv_i16.h: 10-12 bit levels; the q8 set in
 * int16 alone keeps 47 dB of waveform SNR on the real-size synthetic codec,
 * where one conv in int8 keeps 28-33 dB) takes the same mask but CONV1 (the
 * K 7 convs are int8's). The q8 format puts every conv it keeps out of int8
 * in int16 (CODEC_I16_DEFAULT); QTTS_CODEC_I16_PARTS replaces it, for
 * measuring. */
#define CODEC_I16_DEFAULT (CODEC_Q8_DEC0 | CODEC_Q8_TCONV | CODEC_Q8_CONV2)
/* The parts (masks as above) a public format puts in int8, int16 and bf16:
 * f32 none; bf16 CODEC_BF16_DEFAULT; q8 CODEC_Q8_DEFAULT in int8,
 * CODEC_I16_DEFAULT in int16 and the Linear layers in bf16; q8bf16 the int8
 * and bf16 defaults (a conv in several masks takes int8, else int16, else
 * bf16). -1 for an unknown format. */
int codec_decoder_format_parts(int fmt, unsigned *q8_parts, unsigned *i16_parts, unsigned *bf16_parts);
/* Make the int8 forms of the convs in q8_parts, the int16 forms of those in
 * i16_parts without an int8 form, the bf16 forms of those in bf16_parts
 * without either, and the Linear layers' bf16 weights when bf16_parts has
 * CODEC_BF16_MATS; drop every other form (all 0: all f32); before any stream
 * is made. QTTS_CODEC_Q8_PARTS / QTTS_CODEC_I16_PARTS /
 * QTTS_CODEC_BF16_PARTS in the environment replace a nonzero mask. */
qtts_status codec_decoder_set_forms(codec_decoder *d, unsigned q8_parts, unsigned i16_parts, unsigned bf16_parts,
                                    qtts_error *e);

int codec_decoder_samples_per_frame(const codec_decoder *d); /* 1920 */
int codec_decoder_n_codebooks(const codec_decoder *d);       /* 16 */
int codec_decoder_n_blocks(const codec_decoder *d);          /* vocoder blocks, 4 */
int codec_decoder_codebook_size(const codec_decoder *d);     /* 2048 */
int codec_decoder_sample_rate_hz(const codec_decoder *d);    /* 24000 */
int64_t codec_decoder_weight_bytes(const codec_decoder *d);  /* bytes of the decoder.* tensors */

/* New stream at position 0 (silence history). Owned by the caller: free with
 * codec_stream_free. The stream borrows d, which must outlive it. */
qtts_status codec_stream_new(const codec_decoder *d, codec_stream **out, qtts_error *e);
/* Back to position 0: forget all history (keeps the scratch buffers). */
void codec_stream_reset(codec_stream *s);
void codec_stream_free(codec_stream *s); /* accepts NULL */

/* Decode n_frames >= 0 frames codes[n_frames][n_codebooks] (codebook 0 first)
 * and write exactly n_frames * samples_per_frame samples to pcm. Each code must
 * lie in [0, codebook_size): otherwise QTTS_ERR_INPUT and the stream is left
 * unchanged. Scratch grows only when a chunk larger than any before arrives
 * (up to an internal cap; larger requests are processed in pieces), so steady
 * streaming allocates nothing. */
qtts_status codec_stream_decode(codec_stream *s, const int32_t *codes, int n_frames, float *pcm, qtts_error *e);

/* The stream's state after codec_stream_decode of these frames, bit for
 * bit, without making most of their audio: the pre-transformer runs over
 * all of them (its attention window reaches far back), the convolutions
 * after it only over the last few (11 on the real codec: their reach is
 * finite, so the tails they leave are the same). For priming a stream with an ICL voice's
 * reference frames. *last (may be NULL): the last sample that decode would
 * have written. Same checks as codec_stream_decode. */
qtts_status codec_stream_prime(codec_stream *s, const int32_t *codes, int n_frames, float *last, qtts_error *e);

/* Codes on the device: with a Vulkan decoder, link a generating stream's
 * code ring (codec_vulkan.h cdv_code_ring, borrowed until unlinked with
 * NULL); a no-op on the CPU. codec_stream_decode_at then decodes frames
 * serial0 .. serial0 + n_frames - 1 of that ring without uploading codes
 * (*on_device = 1) when they are still there, else from codes as
 * codec_stream_decode does (*on_device = 0; serial0 < 0: always). codes
 * must be those frames' codes either way: they are checked the same. */
struct cdv_code_ring;
qtts_status codec_stream_link_codes(codec_stream *s, const struct cdv_code_ring *ring, qtts_error *e);
qtts_status codec_stream_decode_at(codec_stream *s, const int32_t *codes, int n_frames, int64_t serial0, float *pcm,
                                   int *on_device, qtts_error *e);

/* A copy of a stream's history (attention window, convolution tails,
 * position), to restore later on any stream of the same decoder: e.g. a
 * stream primed with an ICL voice's reference frames, reused per request. */
typedef struct codec_snapshot {
    const codec_decoder *d;
    int64_t pos;
    int kv_len;
    size_t n;       /* floats in state */
    float *state;   /* owned */
} codec_snapshot;

qtts_status codec_stream_save(const codec_stream *s, codec_snapshot *snap, qtts_error *e);

/* What a snapshot's bits depend on, as one 64-bit key: a fingerprint of the
 * decoder.* tensors (names, dtypes, shapes, sizes and the first and last 64
 * bytes of each), the kernel table (ISA), the backend (CPU or Vulkan) and the
 * state layout (CODEC_STATE_LAYOUT and the state's size). A snapshot stored
 * away from the process (a saved voice) is restored only on a decoder with
 * the same key; otherwise the caller recomputes it. */
#define CODEC_STATE_LAYOUT 1u
uint64_t codec_decoder_state_key(const codec_decoder *d);
/* Floats a CPU stream's snapshot holds (codec_snapshot.n). */
size_t codec_decoder_state_floats(const codec_decoder *d);
void codec_stream_restore(codec_stream *s, const codec_snapshot *snap);
void codec_snapshot_free(codec_snapshot *snap); /* accepts a zeroed snapshot */

/* Compute on ops (its threads and kernels) instead of the decoder's own
 * context; NULL goes back to the decoder's. The samples are the same either
 * way (every kernel's result is independent of how its work is split). ops
 * must outlive the setting, and a pool shared with other threads falls back to
 * one thread while another holds it. */
struct ops_ctx;
void codec_stream_set_ops(codec_stream *s, const struct ops_ctx *ops);

/* The decoder a stream belongs to. */
const codec_decoder *codec_stream_decoder(const codec_stream *s);

/* Frames decoded since creation or the last reset. */
int64_t codec_stream_position_frames(const codec_stream *s);

/* Optional stage trace, for tests: called during codec_stream_decode with a
 * stage name and that stage's output for the current chunk as
 * data[c * stride + t], c < channels, t < steps. data is borrowed for the
 * call. Stage names match the golden dec_* files: "quantizer_out",
 * "pre_conv_out", "pre_transformer_out", "upsample0_out", "upsample1_out",
 * "decoder0_out" .. "decoder6_out" (decoder6 is before the final clamp). */
typedef void (*codec_trace_fn)(const char *stage, const float *data, int channels, int steps, int stride,
                               void *user);
void codec_stream_set_trace(codec_stream *s, codec_trace_fn fn, void *user);

/* Whole utterance: a fresh stream over all frames. pcm holds
 * n_frames * samples_per_frame samples. Same bits as any chunked stream. */
qtts_status codec_decode(const codec_decoder *d, const int32_t *codes, int n_frames, float *pcm, qtts_error *e);

/* Test hook: decode one chunk of n_frames frames on s, starting after
 * `stage` (a trace name) whose output is given as in[c * T + t] (channel-
 * major, T = that stage's steps for n_frames). Later stages run and are
 * traced as usual; this isolates one stage's arithmetic from the rounding of
 * the stages before it. Meant for a fresh stream. */
qtts_status codec_stream_decode_from_stage(codec_stream *s, const char *stage, const float *in, int n_frames,
                                           float *pcm, qtts_error *e);

/* ICL (voice clone): the official wrapper decodes cat(ref_codes, codes) and
 * drops the first int(ref_frames / max(total_frames, 1) * n_samples) samples,
 * evaluated in double as Python does. Returns that count. */
size_t codec_icl_cut_samples(int ref_frames, int total_frames, size_t n_samples);

/* Decode on a Vulkan device: upload the weights to dev (borrowed; it must
 * outlive the decoder or a later call with dev NULL, which drops the device
 * copy). Streams created afterwards keep their state on the device and
 * decode there (codec_stream_decode, reset, save and restore as before;
 * traces, codec_stream_set_ops and codec_stream_decode_from_stage stay on
 * the CPU). QTTS_ERR_UNSUPPORTED in a build without Vulkan. */
struct vk_dev;
qtts_status codec_decoder_use_vulkan(codec_decoder *d, struct vk_dev *dev, qtts_error *e);

/* Compute threads for this decoder's kernels (default 1). Calls from several
 * threads at once stay correct (same bits); they just share the workers. */
void codec_decoder_set_threads(codec_decoder *d, int n_threads);

#endif
