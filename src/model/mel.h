/* Log-mel spectrogram front-end of the speaker encoder.
 * Dataflow: pcm -> reflect pad (n_fft-hop)/2 -> framed periodic Hann STFT
 * (center off) -> magnitude sqrt(re^2+im^2+1e-9) -> Slaney mel basis -> log(max(., 1e-5)).
 * Must match `mel_spectrogram` in QwenLM/Qwen3-TTS qwen_tts/core/models/modeling_qwen3_tts.py
 * and `librosa.filters.mel` defaults (Slaney scale, Slaney area norm, float32). */
#ifndef QTTS_MODEL_MEL_H
#define QTTS_MODEL_MEL_H

#include <stddef.h>

#include "util/error.h"

typedef struct mel_params {
    int sample_rate; /* input rate in Hz; default 24000 */
    int n_fft;       /* FFT size, a power of two in [16, 65536]; default 1024 */
    int hop;         /* frame step in samples, in [1, n_fft]; default 256 */
    int win;         /* Hann window length, in [1, n_fft], centred in the frame; default 1024 */
    int n_mels;      /* mel bands; default 128 */
    float fmin;      /* lowest filter edge in Hz, >= 0; default 0 */
    float fmax;      /* highest filter edge in Hz, <= sample_rate/2; default 12000 */
} mel_params;

/* The values the official speaker-encoder front-end hard-codes. */
mel_params mel_speaker_default_params(void);

/* Checks every field of p; QTTS_ERR_INVALID_ARG with the field named otherwise. */
qtts_status mel_params_validate(const mel_params *p, qtts_error *e);

/* Fewest pcm samples mel_log_spectrogram accepts (reflect padding needs more
 * samples than the pad, and at least one frame must fit). */
size_t mel_min_samples(const mel_params *p);

/* Frames produced for n samples: (n + 2*pad - n_fft)/hop + 1, pad = (n_fft-hop)/2;
 * 0 when n < mel_min_samples(p). */
int mel_n_frames(const mel_params *p, size_t n);

/* Mel filterbank *basis [n_mels][n_fft/2+1], float32 as librosa returns it.
 * malloc'ed; the caller frees it with free(). */
qtts_status mel_filterbank(const mel_params *p, float **basis, qtts_error *e);

/* Log-mel *mel [*n_frames][n_mels] of pcm[n] (mono f32 at p->sample_rate).
 * basis is mel_filterbank's output for the same p. malloc'ed; the caller frees
 * it with free(). Too-short audio or NaN/Inf samples give QTTS_ERR_INPUT. */
qtts_status mel_log_spectrogram(const mel_params *p, const float *basis, const float *pcm, size_t n,
                                float **mel, int *n_frames, qtts_error *e);

#endif
