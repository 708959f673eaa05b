/* Streaming audio encoders (see encode.h). PCM -> s16 (wav, pcm, flac) or
 * float (mp3, opus) -> the format's library -> a byte queue the HTTP side
 * drains. FLAC goes through libsndfile's virtual IO over that queue: bytes
 * already sent cannot be patched, so when streaming the final STREAMINFO
 * rewrite (total samples, MD5) is dropped and the header keeps "unknown",
 * which the format allows. */
#include "encode.h"

#include <lame/lame.h>
#include <math.h>
#include <opus/opusenc.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bytebuf_put(bytebuf *b, const void *data, size_t n) {
    if (!n) return 0;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

void bytebuf_consume(bytebuf *b, size_t n) {
    if (n >= b->n) {
        b->n = 0;
        return;
    }
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
}

void bytebuf_free(bytebuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static const char *const fmt_names[AF_COUNT] = {"mp3", "opus", "flac", "wav", "pcm"};
static const char *const fmt_mimes[AF_COUNT] = {"audio/mpeg", "audio/ogg", "audio/flac", "audio/wav", "audio/pcm"};

int audio_format_parse(const char *name) {
    for (int i = 0; name && i < AF_COUNT; i++)
        if (!strcmp(name, fmt_names[i])) return i;
    return -1;
}

const char *audio_format_name(audio_format f) { return f < AF_COUNT ? fmt_names[f] : "?"; }
const char *audio_format_mime(audio_format f) { return f < AF_COUNT ? fmt_mimes[f] : "application/octet-stream"; }

short pcm_to_s16(float x) {
    if (!(x == x)) return 0;
    if (x > 1.0f) x = 1.0f;
    if (x < -1.0f) x = -1.0f;
    return (short)lrintf(x * 32767.0f);
}

struct encoder {
    audio_format fmt;
    int rate, streaming, finished;
    bytebuf out;
    char err[256];
    size_t n_samples;  /* samples written */
    /* flac: virtual file; out holds its bytes [vsize - out.n, vsize) */
    SNDFILE *sf;
    sf_count_t vpos, vsize;
    /* mp3 */
    lame_global_flags *lame;
    unsigned char *mp3buf;
    size_t mp3cap;
    /* opus */
    OggOpusEnc *ope;
    int ope_failed;
    /* scratch */
    short *s16;
    size_t s16cap;
};

static int fail(encoder *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- wav */

static void le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void wav_header(unsigned char h[44], int rate, uint32_t data_bytes, int unknown) {
    memcpy(h, "RIFF", 4);
    le32(h + 4, unknown ? 0xFFFFFFFFu : 36u + data_bytes);
    memcpy(h + 8, "WAVEfmt ", 8);
    le32(h + 16, 16);
    h[20] = 1; /* PCM */
    h[21] = 0;
    h[22] = 1; /* mono */
    h[23] = 0;
    le32(h + 24, (uint32_t)rate);
    le32(h + 28, (uint32_t)rate * 2);
    h[32] = 2; /* block align */
    h[33] = 0;
    h[34] = 16; /* bits */
    h[35] = 0;
    memcpy(h + 36, "data", 4);
    le32(h + 40, unknown ? 0xFFFFFFFFu : data_bytes);
}

static int put_s16(encoder *e, const float *pcm, size_t n) {
    unsigned char tmp[4096];
    size_t done = 0;
    while (done < n) {
        size_t k = n - done < sizeof tmp / 2 ? n - done : sizeof tmp / 2;
        for (size_t i = 0; i < k; i++) {
            uint16_t v = (uint16_t)pcm_to_s16(pcm[done + i]);
            tmp[2 * i] = (unsigned char)(v & 0xff);
            tmp[2 * i + 1] = (unsigned char)(v >> 8);
        }
        if (bytebuf_put(&e->out, tmp, 2 * k)) return fail(e, "out of memory");
        done += k;
    }
    return 0;
}

/* ---------------------------------------------------------------- flac */

static sf_count_t vio_len(void *u) { return ((encoder *)u)->vsize; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u) {
    encoder *e = u;
    sf_count_t p = whence == SEEK_SET ? off : whence == SEEK_CUR ? e->vpos + off : e->vsize + off;
    if (p < 0) return -1;
    e->vpos = p;
    return p;
}

static sf_count_t vio_read(void *ptr, sf_count_t n, void *u) {
    encoder *e = u;
    const sf_count_t base = e->vsize - (sf_count_t)e->out.n;
    if (e->vpos < base || n <= 0) return 0;
    sf_count_t avail = e->vsize - e->vpos;
    if (n > avail) n = avail;
    if (n <= 0) return 0;
    memcpy(ptr, e->out.p + (e->vpos - base), (size_t)n);
    e->vpos += n;
    return n;
}

static sf_count_t vio_write(const void *ptr, sf_count_t n, void *u) {
    encoder *e = u;
    const unsigned char *src = ptr;
    const sf_count_t base = e->vsize - (sf_count_t)e->out.n;
    sf_count_t pos = e->vpos, len = n;
    if (pos < base) { /* patching bytes already sent: impossible when streaming, drop them */
        sf_count_t skip = base - pos < len ? base - pos : len;
        src += skip;
        pos += skip;
        len -= skip;
    }
    if (len > 0) {
        const sf_count_t end = pos + len;
        if (end > e->vsize) { /* grow (zero-filling any gap) */
            const size_t grow = (size_t)(end - e->vsize);
            unsigned char zeros[256] = {0};
            for (size_t g = 0; g < grow;) {
                size_t k = grow - g < sizeof zeros ? grow - g : sizeof zeros;
                if (bytebuf_put(&e->out, zeros, k)) return 0;
                g += k;
            }
            e->vsize = end;
        }
        memcpy(e->out.p + (pos - base), src, (size_t)len);
    }
    e->vpos += n;
    return n;
}

static sf_count_t vio_tell(void *u) { return ((encoder *)u)->vpos; }

static SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};

static int flac_write(encoder *e, const float *pcm, size_t n) {
    if (n > e->s16cap) {
        short *s = realloc(e->s16, sizeof(short) * n);
        if (!s) return fail(e, "out of memory");
        e->s16 = s;
        e->s16cap = n;
    }
    for (size_t i = 0; i < n; i++) e->s16[i] = pcm_to_s16(pcm[i]);
    if (sf_write_short(e->sf, e->s16, (sf_count_t)n) != (sf_count_t)n)
        return fail(e, "FLAC encoding failed: %s", sf_strerror(e->sf));
    return 0;
}

/* ---------------------------------------------------------------- mp3 */

static void lame_quiet(const char *fmt, va_list ap) {
    (void)fmt;
    (void)ap;
}

static int mp3_reserve(encoder *e, size_t n) {
    size_t need = n + n / 4 + 7200; /* LAME's documented worst case */
    if (need <= e->mp3cap) return 0;
    unsigned char *p = realloc(e->mp3buf, need);
    if (!p) return fail(e, "out of memory");
    e->mp3buf = p;
    e->mp3cap = need;
    return 0;
}

static int mp3_write(encoder *e, const float *pcm, size_t n) {
    while (n > 0) {
        int k = n > 65536 ? 65536 : (int)n;
        if (mp3_reserve(e, (size_t)k)) return -1;
        /* LAME wants full scale +-1 and does not clip: clip here */
        float tmp[4096];
        for (int done = 0; done < k;) {
            int c = k - done < 4096 ? k - done : 4096;
            for (int i = 0; i < c; i++) {
                float x = pcm[done + i];
                tmp[i] = !(x == x) ? 0.0f : x > 1.0f ? 1.0f : x < -1.0f ? -1.0f : x;
            }
            int r = lame_encode_buffer_ieee_float(e->lame, tmp, tmp, c, e->mp3buf, (int)e->mp3cap);
            if (r < 0) return fail(e, "MP3 encoding failed (LAME error %d)", r);
            if (bytebuf_put(&e->out, e->mp3buf, (size_t)r)) return fail(e, "out of memory");
            done += c;
        }
        pcm += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---------------------------------------------------------------- opus */

static int ope_write_cb(void *u, const unsigned char *p, opus_int32 len) {
    encoder *e = u;
    if (bytebuf_put(&e->out, p, (size_t)len)) {
        e->ope_failed = 1;
        return 1;
    }
    return 0;
}

static int ope_close_cb(void *u) {
    (void)u;
    return 0;
}

/* ---------------------------------------------------------------- API */

int encoder_new(encoder **out, audio_format f, int rate, int streaming, char *err, size_t err_size) {
    *out = NULL;
    encoder *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    e->fmt = f;
    e->rate = rate;
    e->streaming = streaming;
    int rc = 0;
    switch (f) {
    case AF_WAV: {
        unsigned char h[44];
        wav_header(h, rate, 0, streaming);
        if (bytebuf_put(&e->out, h, sizeof h)) rc = fail(e, "out of memory");
        break;
    }
    case AF_PCM:
        break;
    case AF_FLAC: {
        SF_INFO info;
        memset(&info, 0, sizeof info);
        info.samplerate = rate;
        info.channels = 1;
        info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
        e->sf = sf_open_virtual(&vio, SFM_WRITE, &info, e);
        if (!e->sf) rc = fail(e, "cannot start the FLAC encoder: %s", sf_strerror(NULL));
        break;
    }
    case AF_MP3:
        e->lame = lame_init();
        if (!e->lame) {
            rc = fail(e, "cannot start the MP3 encoder");
            break;
        }
        lame_set_errorf(e->lame, lame_quiet);
        lame_set_debugf(e->lame, lame_quiet);
        lame_set_msgf(e->lame, lame_quiet);
        lame_set_in_samplerate(e->lame, rate);
        lame_set_out_samplerate(e->lame, rate);
        lame_set_num_channels(e->lame, 1);
        lame_set_mode(e->lame, MONO);
        lame_set_brate(e->lame, 64);
        lame_set_quality(e->lame, 5);
        lame_set_bWriteVbrTag(e->lame, 0); /* a Xing tag needs a seek back to the start */
        if (lame_init_params(e->lame) < 0) rc = fail(e, "cannot configure the MP3 encoder for %d Hz mono", rate);
        break;
    case AF_OPUS: {
        OggOpusComments *c = ope_comments_create();
        if (!c) {
            rc = fail(e, "out of memory");
            break;
        }
        ope_comments_add(c, "ENCODER", "qtts-server");
        OpusEncCallbacks cb = {ope_write_cb, ope_close_cb};
        int oerr = 0;
        e->ope = ope_encoder_create_callbacks(&cb, e, c, rate, 1, 0, &oerr);
        ope_comments_destroy(c);
        if (!e->ope) {
            rc = fail(e, "cannot start the Opus encoder: %s", ope_strerror(oerr));
            break;
        }
        ope_encoder_ctl(e->ope, OPE_SET_SERIALNO(0x71747473)); /* deterministic bytes */
        ope_encoder_ctl(e->ope, OPUS_SET_BITRATE(32000));
        ope_encoder_ctl(e->ope, OPUS_SET_APPLICATION(OPUS_APPLICATION_VOIP));
        if (streaming) { /* a page per packet rather than one per second */
            ope_encoder_ctl(e->ope, OPE_SET_DECISION_DELAY(0));
            ope_encoder_ctl(e->ope, OPE_SET_MUXING_DELAY(0));
        }
        if (streaming && ope_encoder_flush_header(e->ope) != OPE_OK) rc = fail(e, "Opus header failed");
        break;
    }
    default:
        rc = fail(e, "unknown format %d", (int)f);
    }
    if (rc) {
        snprintf(err, err_size, "%s", e->err);
        encoder_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

int encoder_write(encoder *e, const float *pcm, size_t n) {
    if (e->finished) return fail(e, "write after finish");
    if (!n) return 0;
    e->n_samples += n;
    switch (e->fmt) {
    case AF_WAV:
    case AF_PCM:
        return put_s16(e, pcm, n);
    case AF_FLAC:
        return flac_write(e, pcm, n);
    case AF_MP3:
        return mp3_write(e, pcm, n);
    case AF_OPUS:
        while (n > 0) {
            int k = n > 48000 ? 48000 : (int)n;
            int r = ope_encoder_write_float(e->ope, pcm, k);
            if (r != OPE_OK || e->ope_failed) return fail(e, "Opus encoding failed: %s", ope_strerror(r));
            pcm += k;
            n -= (size_t)k;
        }
        return 0;
    default:
        return fail(e, "bad format");
    }
}

int encoder_finish(encoder *e) {
    if (e->finished) return 0;
    e->finished = 1;
    switch (e->fmt) {
    case AF_WAV:
        if (!e->streaming) {
            const uint64_t bytes = (uint64_t)e->n_samples * 2;
            if (bytes > 0xFFFFFFFFu - 36) return fail(e, "too long for a WAV file (4 GiB)");
            wav_header(e->out.p, e->rate, (uint32_t)bytes, 0);
        }
        return 0;
    case AF_PCM:
        return 0;
    case AF_FLAC: {
        int r = sf_close(e->sf);
        e->sf = NULL;
        return r ? fail(e, "FLAC encoding failed at the end: %s", sf_error_number(r)) : 0;
    }
    case AF_MP3: {
        if (mp3_reserve(e, 0)) return -1;
        int r = lame_encode_flush(e->lame, e->mp3buf, (int)e->mp3cap);
        if (r < 0) return fail(e, "MP3 encoding failed at the end (LAME error %d)", r);
        return bytebuf_put(&e->out, e->mp3buf, (size_t)r) ? fail(e, "out of memory") : 0;
    }
    case AF_OPUS: {
        int r = ope_encoder_drain(e->ope);
        if (r != OPE_OK || e->ope_failed) return fail(e, "Opus encoding failed at the end: %s", ope_strerror(r));
        return 0;
    }
    default:
        return fail(e, "bad format");
    }
}

bytebuf *encoder_output(encoder *e) { return &e->out; }
const char *encoder_error(const encoder *e) { return e->err; }

void encoder_free(encoder *e) {
    if (!e) return;
    if (e->sf) sf_close(e->sf);
    if (e->lame) lame_close(e->lame);
    if (e->ope) ope_encoder_destroy(e->ope);
    free(e->mp3buf);
    free(e->s16);
    bytebuf_free(&e->out);
    free(e);
}
