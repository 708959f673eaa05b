/* Audio encoders for HTTP responses, fed float PCM chunk by chunk and
 * producing bytes as they go: wav and pcm (s16le, written here), flac
 * (libsndfile over virtual IO), mp3 (LAME, MPEG-2 layer III, 64 kbit/s CBR,
 * no Xing tag), opus (libopusenc, Ogg, fixed serial number). Every encoder is
 * deterministic: the same samples give the same bytes. */
#ifndef QTTS_SERVER_ENCODE_H
#define QTTS_SERVER_ENCODE_H

#include <stddef.h>

/* A byte queue: bytes are appended at the end and consumed from the front. */
typedef struct bytebuf {
    unsigned char *p;
    size_t n, cap; /* valid bytes p[0..n) */
} bytebuf;

int bytebuf_put(bytebuf *b, const void *data, size_t n);  /* 0 ok, -1 out of memory */
void bytebuf_consume(bytebuf *b, size_t n);                /* drop the first n bytes */
void bytebuf_free(bytebuf *b);

typedef enum audio_format {
    AF_MP3 = 0, /* the OpenAI default */
    AF_OPUS,
    AF_FLAC,
    AF_WAV,
    AF_PCM,     /* raw s16le, 24 kHz mono (as OpenAI's "pcm") */
    AF_COUNT
} audio_format;

int audio_format_parse(const char *name); /* -1 when unknown */
const char *audio_format_name(audio_format f);
const char *audio_format_mime(audio_format f);

typedef struct encoder encoder;

/* streaming = 1: bytes may be consumed as they come, so containers whose
 * header carries the length (wav) or gets patched at the end (flac) say
 * "unknown length" instead; streaming = 0: the output is consumed only after
 * encoder_finish and headers are exact. err says why on failure. */
int encoder_new(encoder **out, audio_format f, int sample_rate_hz, int streaming, char *err, size_t err_size);
/* Encode n samples (clipped to [-1, 1]); 0 ok, -1 error (encoder_error). */
int encoder_write(encoder *e, const float *pcm, size_t n);
/* Flush everything; no writes after. 0 ok, -1 error. */
int encoder_finish(encoder *e);
/* The encoded bytes not yet consumed. */
bytebuf *encoder_output(encoder *e);
const char *encoder_error(const encoder *e);
void encoder_free(encoder *e); /* accepts NULL */

/* float in [-1, 1] to s16 as libqtts's writer rounds it (NaN -> 0). */
short pcm_to_s16(float x);

#endif
