/* Reference-audio reader for voice cloning: any audio file libsndfile can
 * decode (WAV/RF64/W64, FLAC, OGG Vorbis/Opus, MP3 with libsndfile >= 1.1,
 * AIFF, ...) -> 24 kHz mono f32, the input of the speaker encoder and of the
 * codec encoder.
 * Dataflow: file or byte buffer -> libsndfile (sf_readf_float, integer
 * samples scaled to [-1, 1) as libsndfile does) -> mono (mean of channels)
 * -> checks (empty, non-finite, silent, too long) -> libsoxr HQ to 24000 Hz
 * (bit-exact copy when already 24 kHz).
 *
 * Must match what the official wrapper (QwenLM/Qwen3-TTS, qwen_tts/inference/)
 * does to a reference before its encoders:
 *   - qwen3_tts_model.py Qwen3TTSModel._load_audio_to_np: a path is read with
 *     librosa.load(x, sr=None, mono=True) (soundfile -> libsndfile float read,
 *     then librosa.to_mono = np.mean over channels in float32: summed in
 *     channel order, divided once by the count); bytes from a
 *     URL or base64 go through soundfile.read(dtype="float32") and np.mean over
 *     channels. No peak normalisation, no trimming of silence, no clipping.
 *   - qwen3_tts_model.py create_voice_clone_prompt: for the speaker encoder,
 *     librosa.resample(orig_sr -> speaker_encoder_sample_rate = 24000) when the
 *     rate differs; the speech tokenizer's encode (qwen3_tts_tokenizer.py
 *     Qwen3TTSTokenizer._normalize_audio_inputs) resamples the same waveform
 *     the same way to its 24000 Hz input. One 24 kHz signal serves both.
 *   - librosa.resample's default res_type (librosa >= 0.10) is "soxr_hq": python-soxr's
 *     resample with soxr_quality_spec(SOXR_HQ, 0) (linear phase) on float32
 *     I/O, fed in chunks then flushed (bit-identical to the soxr_oneshot used
 *     here, checked with libsoxr 0.1.3); librosa then fixes the length to
 *     ceil(n * (24000 / rate)) (computed in double), dropping extra output or
 *     padding with zeros at the end. Reproduced here exactly, with the
 *     system's libsoxr (python-soxr bundles its own libsoxr build, so the
 *     last bits may differ; not measured here).
 *   - The Gradio demo (qwen_tts/cli/demo.py _normalize_audio) divides float
 *     input whose peak exceeds 1 by that peak and clips to [-1, 1]; that is
 *     the demo's microphone/upload path only, not the library's, so it is not
 *     reproduced: float files with |x| > 1 pass through unchanged.
 *   - Maximum length: neither qwen3_tts_model.py nor qwen3_tts_tokenizer.py
 *     limits the reference length (they encode whatever they get). qtts
 *     therefore picks 60 s (AUDIO_READ_DEFAULT_MAX_SECONDS), which is also the
 *     codec encoder's limit (CODEC_ENCODER_MAX_SECONDS); longer input is an
 *     error, never silently truncated.
 *
 * Errors (each message names the file and says what to do):
 *   QTTS_ERR_IO     the file is missing or cannot be opened/read
 *   QTTS_ERR_INPUT  not audio / undecodable (with libsndfile's reason), a
 *                   format this libsndfile cannot read (named, e.g. MP3),
 *                   zero channels or rate, no samples, silent, NaN/Inf
 *   QTTS_ERR_LIMIT  longer than max_seconds (actual and maximum durations)
 *   QTTS_ERR_INVALID_ARG / QTTS_ERR_NOMEM as usual.
 * Thread safety: calls are independent; libsndfile keeps the reason of a
 * failed open in a process-wide variable, so with concurrent failing opens a
 * message may carry another call's reason. */
#ifndef QTTS_IO_AUDIO_READER_H
#define QTTS_IO_AUDIO_READER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define AUDIO_READ_RATE_HZ 24000            /* output rate of every reader call */
#define AUDIO_READ_DEFAULT_MAX_SECONDS 60.0 /* no upstream limit exists: see above */
#define AUDIO_READ_MAX_MAX_SECONDS 600.0    /* largest max_seconds accepted */
#define AUDIO_READ_DEFAULT_SILENCE 1e-4     /* peak below which a clip is "silent" (-80 dBFS) */
#define AUDIO_READ_MAX_RATE_HZ 768000       /* input rates above this are refused */

typedef struct audio_read_params {
    double max_seconds;  /* longest accepted input, seconds; (0, 600]; default 60 */
    double silence_peak; /* the clip is refused as silent when every mono sample has
                            |x| below this; [0, 1); 0 = never; default 1e-4 */
} audio_read_params;

audio_read_params audio_read_default_params(void);

/* What the input was, before conversion. */
typedef struct audio_read_info {
    int rate_hz;         /* original sample rate */
    int channels;        /* original channel count */
    int64_t frames;      /* original frames (samples per channel) */
    double duration_s;   /* frames / rate_hz */
    float peak;          /* max |x| of the mono signal before resampling */
    int resampled;       /* 1 when the rate differed from 24000 */
    char format[96];     /* libsndfile's names: "WAV (Microsoft), Signed 16 bit PCM" */
} audio_read_info;

/* Read the audio file at path as 24 kHz mono. p may be NULL (defaults); info
 * may be NULL. On success *pcm is malloc'ed [*n] (caller frees with free());
 * on failure *pcm is NULL, *n is 0 and info is left partly filled (what was
 * known when the error was found). */
qtts_status audio_read_24k(const char *path, const audio_read_params *p, float **pcm, size_t *n,
                           audio_read_info *info, qtts_error *e);

/* The same from an encoded file held in memory (an HTTP upload). data is
 * borrowed for the call; name labels the data in messages (e.g. the upload's
 * file name; NULL = "audio data"). */
qtts_status audio_decode_24k_mem(const void *data, size_t size, const char *name,
                                 const audio_read_params *p, float **pcm, size_t *n,
                                 audio_read_info *info, qtts_error *e);

/* Lower level: resample mono f32 in[n] at rate_hz to 24 kHz exactly as the
 * readers do (soxr HQ, librosa's output length ceil(n * (24000 / rate_hz)));
 * rate_hz == 24000 copies. *out is malloc'ed [*n_out] (caller frees). No
 * content checks: n == 0 gives an empty result (*out NULL). */
qtts_status audio_resample_24k(const float *in, size_t n, int rate_hz, float **out, size_t *n_out,
                               qtts_error *e);

/* Output length of audio_resample_24k for n samples at rate_hz. */
size_t audio_resampled_length(size_t n, int rate_hz);

/* 1 when the running libsndfile can decode MP3 (MPEG-1/2 audio). */
int audio_reader_has_mp3(void);

#endif
