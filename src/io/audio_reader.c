/* Reference-audio reader: file or memory -> libsndfile -> mono -> checks ->
 * libsoxr HQ -> 24 kHz mono f32. See audio_reader.h for the upstream
 * behaviour this reproduces (librosa.load + librosa.resample "soxr_hq"). */
#include "io/audio_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Formats named in messages even when the headers predate them. */
#ifndef SF_FORMAT_MPEG
#define SF_FORMAT_MPEG 0x230000
#endif
#ifndef SF_FORMAT_OPUS
#define SF_FORMAT_OPUS 0x0064
#endif

#define CHUNK_SAMPLES 65536 /* interleaved samples decoded per sf_readf_float call */

audio_read_params audio_read_default_params(void) {
    audio_read_params p;
    p.max_seconds = AUDIO_READ_DEFAULT_MAX_SECONDS;
    p.silence_peak = AUDIO_READ_DEFAULT_SILENCE;
    return p;
}

/* ---------------------------------------------------------------- format sniffing */

/* What the first bytes of a file say it is, for messages when libsndfile
 * cannot open it. major/subtype: what libsndfile would need (0 = never). */
typedef struct sniffed {
    const char *name;
    int major;
    int subtype;
} sniffed;

static sniffed sniff(const unsigned char *b, size_t n) {
    sniffed s = {NULL, 0, 0};
    if (n >= 3 && !memcmp(b, "ID3", 3)) {
        s.name = "MP3";
        s.major = SF_FORMAT_MPEG;
    } else if (n >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && ((b[1] >> 1) & 3) != 0) {
        s.name = "MP3"; /* MPEG audio frame sync with a layer (AAC ADTS has layer 0) */
        s.major = SF_FORMAT_MPEG;
    } else if (n >= 2 && b[0] == 0xFF && (b[1] & 0xF6) == 0xF0) {
        s.name = "AAC (ADTS)";
    } else if (n >= 4 && !memcmp(b, "OggS", 4)) {
        s.major = SF_FORMAT_OGG;
        if (n >= 36 && !memcmp(b + 28, "OpusHead", 8)) {
            s.name = "OGG Opus";
            s.subtype = SF_FORMAT_OPUS;
        } else if (n >= 35 && !memcmp(b + 28, "\x01vorbis", 7)) {
            s.name = "OGG Vorbis";
            s.subtype = SF_FORMAT_VORBIS;
        } else if (n >= 33 && !memcmp(b + 28, "\x7f" "FLAC", 5)) {
            s.name = "OGG FLAC";
            s.subtype = 0;
        } else {
            s.name = "OGG";
        }
    } else if (n >= 4 && !memcmp(b, "fLaC", 4)) {
        s.name = "FLAC";
        s.major = SF_FORMAT_FLAC;
    } else if (n >= 12 && (!memcmp(b, "RIFF", 4) || !memcmp(b, "RIFX", 4)) && !memcmp(b + 8, "WAVE", 4)) {
        s.name = "WAV";
        s.major = SF_FORMAT_WAV;
    } else if (n >= 8 && !memcmp(b + 4, "ftyp", 4)) {
        s.name = "MP4/M4A (AAC or ALAC in an MP4 container)";
    } else if (n >= 4 && !memcmp(b, "\x1a\x45\xdf\xa3", 4)) {
        s.name = "WebM/Matroska";
    }
    return s;
}

static int lib_has(int cmd_count, int cmd_get, int format) {
    int count = 0;
    if (sf_command(NULL, cmd_count, &count, sizeof count) != 0) return 0;
    for (int i = 0; i < count; i++) {
        SF_FORMAT_INFO fi;
        memset(&fi, 0, sizeof fi);
        fi.format = i;
        if (sf_command(NULL, cmd_get, &fi, sizeof fi) == 0 && fi.format == format) return 1;
    }
    return 0;
}

/* 1 when the running libsndfile lists what s needs. */
static int lib_reads(const sniffed *s) {
    if (!s->major) return 0;
    if (!lib_has(SFC_GET_FORMAT_MAJOR_COUNT, SFC_GET_FORMAT_MAJOR, s->major)) return 0;
    if (s->subtype && !lib_has(SFC_GET_FORMAT_SUBTYPE_COUNT, SFC_GET_FORMAT_SUBTYPE, s->subtype)) return 0;
    return 1;
}

int audio_reader_has_mp3(void) {
    return lib_has(SFC_GET_FORMAT_MAJOR_COUNT, SFC_GET_FORMAT_MAJOR, SF_FORMAT_MPEG);
}

/* Message for a failed sf_open of label, whose first bytes are head[nhead]. */
static qtts_status open_failed(const char *label, const unsigned char *head, size_t nhead, qtts_error *e) {
    const char *why = sf_strerror(NULL);
    sniffed s = sniff(head, nhead);
    if (s.name && !lib_reads(&s)) {
        if (!strcmp(s.name, "MP3"))
            return err_set(e, QTTS_ERR_INPUT,
                           "%s looks like MP3 audio, which this build's %s cannot decode (MP3 needs "
                           "libsndfile >= 1.1 built with mpg123): convert it to WAV or FLAC first, "
                           "e.g. ffmpeg -i in.mp3 out.wav",
                           label, sf_version_string());
        return err_set(e, QTTS_ERR_INPUT,
                       "%s looks like %s audio, which %s cannot decode: convert it to WAV or FLAC "
                       "first, e.g. ffmpeg -i in.ext out.wav",
                       label, s.name, sf_version_string());
    }
    if (s.name)
        return err_set(e, QTTS_ERR_INPUT,
                       "%s looks like %s audio but cannot be decoded (libsndfile: %s): the file is "
                       "damaged or truncated; re-export it",
                       label, s.name, why);
    return err_set(e, QTTS_ERR_INPUT,
                   "%s is not a readable audio file (libsndfile: %s): give a WAV, FLAC, OGG or MP3 "
                   "recording",
                   label, why);
}

/* ---------------------------------------------------------------- resampling */

size_t audio_resampled_length(size_t n, int rate_hz) {
    if (rate_hz == AUDIO_READ_RATE_HZ || rate_hz <= 0) return n;
    /* librosa.resample: n_samples = int(np.ceil(y.shape[-1] * ratio)), ratio in double */
    double ratio = (double)AUDIO_READ_RATE_HZ / (double)rate_hz;
    return (size_t)ceil((double)n * ratio);
}

qtts_status audio_resample_24k(const float *in, size_t n, int rate_hz, float **out, size_t *n_out,
                               qtts_error *e) {
    if (!out || !n_out || (n && !in) || rate_hz <= 0)
        return err_set(e, QTTS_ERR_INVALID_ARG, "audio_resample_24k: bad arguments");
    *out = NULL;
    *n_out = 0;
    if (n == 0) return QTTS_OK;
    double want_d = ceil((double)n * ((double)AUDIO_READ_RATE_HZ / (double)rate_hz));
    if (want_d > (double)(SIZE_MAX / sizeof(float) / 2) || want_d > 1e12)
        return err_set(e, QTTS_ERR_LIMIT, "audio of %zu samples at %d Hz is too long to resample", n, rate_hz);
    size_t want = audio_resampled_length(n, rate_hz);
    float *y = NULL;
    if (rate_hz == AUDIO_READ_RATE_HZ) {
        y = malloc(n * sizeof *y);
        if (!y) return err_set(e, QTTS_ERR_NOMEM, "out of memory (%zu samples)", n);
        memcpy(y, in, n * sizeof *y);
        *out = y;
        *n_out = n;
        return QTTS_OK;
    }
    /* python-soxr gives soxr room for int(n * out / in + 1) samples; librosa
     * then cuts or zero-pads to `want` (<= that room), so `want` + 1 suffices. */
    size_t room = want + 1;
    y = calloc(room, sizeof *y);
    if (!y) return err_set(e, QTTS_ERR_NOMEM, "out of memory (%zu samples)", room);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    size_t idone = 0, odone = 0;
    soxr_error_t err = soxr_oneshot((double)rate_hz, (double)AUDIO_READ_RATE_HZ, 1, in, n, &idone, y, room,
                                    &odone, &io, &q, NULL);
    if (err) {
        free(y);
        return err_set(e, QTTS_ERR_INTERNAL, "resampling %d Hz -> %d Hz failed (libsoxr: %s)", rate_hz,
                       AUDIO_READ_RATE_HZ, err);
    }
    /* librosa.util.fix_length: trailing zeros when soxr gave fewer samples. */
    for (size_t i = odone; i < want; i++) y[i] = 0.0f;
    *out = y;
    *n_out = want;
    return QTTS_OK;
}

/* ---------------------------------------------------------------- decoding */

static void format_name(SNDFILE *sf, int format, char *dst, size_t cap) {
    SF_FORMAT_INFO major, sub;
    memset(&major, 0, sizeof major);
    memset(&sub, 0, sizeof sub);
    major.format = format & SF_FORMAT_TYPEMASK;
    sub.format = format & SF_FORMAT_SUBMASK;
    const char *mn = sf_command(sf, SFC_GET_FORMAT_INFO, &major, sizeof major) == 0 && major.name ? major.name : "?";
    const char *sn = sf_command(sf, SFC_GET_FORMAT_INFO, &sub, sizeof sub) == 0 && sub.name ? sub.name : "?";
    snprintf(dst, cap, "%s, %s", mn, sn);
}

static qtts_status check_params(const audio_read_params *p, qtts_error *e) {
    if (!(p->max_seconds > 0.0) || !(p->max_seconds <= AUDIO_READ_MAX_MAX_SECONDS))
        return err_set(e, QTTS_ERR_INVALID_ARG, "max_seconds must be in (0, %.0f], got %g",
                       AUDIO_READ_MAX_MAX_SECONDS, p->max_seconds);
    if (!(p->silence_peak >= 0.0) || !(p->silence_peak < 1.0))
        return err_set(e, QTTS_ERR_INVALID_ARG, "silence_peak must be in [0, 1), got %g", p->silence_peak);
    return QTTS_OK;
}

/* Everything after a successful sf_open: decode, downmix, check, resample. */
static qtts_status decode(SNDFILE *sf, const SF_INFO *si, const char *label, const audio_read_params *p,
                          float **pcm, size_t *n, audio_read_info *info, qtts_error *e) {
    format_name(sf, si->format, info->format, sizeof info->format);
    info->rate_hz = si->samplerate;
    info->channels = si->channels;
    info->frames = si->frames;
    if (si->channels <= 0)
        return err_set(e, QTTS_ERR_INPUT, "%s (%s) has %d channels: its header is damaged; re-export it",
                       label, info->format, si->channels);
    if (si->samplerate <= 0)
        return err_set(e, QTTS_ERR_INPUT, "%s (%s) has a sample rate of %d Hz: its header is damaged; re-export it",
                       label, info->format, si->samplerate);
    if (si->samplerate > AUDIO_READ_MAX_RATE_HZ)
        return err_set(e, QTTS_ERR_INPUT, "%s has a sample rate of %d Hz, above the %d Hz qtts accepts: "
                       "resample it (24000 Hz is best)", label, si->samplerate, AUDIO_READ_MAX_RATE_HZ);
    const int ch = si->channels;
    const double rate = (double)si->samplerate;
    const int64_t max_frames = (int64_t)floor(p->max_seconds * rate);
    info->duration_s = si->frames > 0 ? (double)si->frames / rate : 0.0;
    if (si->frames > max_frames && si->frames != SF_COUNT_MAX)
        return err_set(e, QTTS_ERR_LIMIT,
                       "%s is %.2f s long; the longest reference accepted is %.2f s: cut a shorter "
                       "clip (a few seconds of clean speech is enough)",
                       label, info->duration_s, p->max_seconds);

    size_t chunk_frames = CHUNK_SAMPLES / (size_t)ch;
    if (chunk_frames == 0) chunk_frames = 1;
    float *buf = malloc(chunk_frames * (size_t)ch * sizeof *buf);
    size_t cap = si->frames > 0 && si->frames <= max_frames ? (size_t)si->frames : 4096;
    if (cap == 0) cap = 1;
    float *mono = malloc(cap * sizeof *mono);
    if (!buf || !mono) {
        free(buf);
        free(mono);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory reading %s", label);
    }
    qtts_status st = QTTS_OK;
    size_t total = 0;
    for (;;) {
        sf_count_t got = sf_readf_float(sf, buf, (sf_count_t)chunk_frames);
        if (got <= 0) {
            if (sf_error(sf) != SF_ERR_NO_ERROR) {
                st = err_set(e, QTTS_ERR_INPUT, "%s: decoding failed after %.2f s (libsndfile: %s): the "
                             "file is damaged; re-export it", label, (double)total / rate, sf_strerror(sf));
                goto done;
            }
            break;
        }
        if ((int64_t)total + got > max_frames) {
            st = err_set(e, QTTS_ERR_LIMIT,
                         "%s is longer than %.2f s, the longest reference accepted: cut a shorter clip "
                         "(a few seconds of clean speech is enough)", label, p->max_seconds);
            info->duration_s = (double)((int64_t)total + got) / rate;
            goto done;
        }
        for (size_t i = 0; i < (size_t)got * (size_t)ch; i++) {
            if (!isfinite(buf[i])) {
                size_t fr = total + i / (size_t)ch;
                st = err_set(e, QTTS_ERR_INPUT,
                             "%s has a %s sample at %.3f s (frame %zu, channel %zu): the file is damaged; "
                             "re-export it", label, isnan(buf[i]) ? "NaN" : "infinite", (double)fr / rate, fr,
                             i % (size_t)ch);
                goto done;
            }
        }
        if (total + (size_t)got > cap) {
            size_t ncap = cap * 2;
            while (ncap < total + (size_t)got) ncap *= 2;
            if (ncap > (size_t)max_frames) ncap = (size_t)max_frames;
            float *m2 = realloc(mono, ncap * sizeof *m2);
            if (!m2) {
                st = err_set(e, QTTS_ERR_NOMEM, "out of memory reading %s", label);
                goto done;
            }
            mono = m2;
            cap = ncap;
        }
        /* Mean of channels as numpy does it in float32: sum in channel order, then
         * one division by the count. Mono is copied unchanged. */
        if (ch == 1) {
            memcpy(mono + total, buf, (size_t)got * sizeof *mono);
        } else {
            const float nch = (float)ch;
            for (sf_count_t f = 0; f < got; f++) {
                const float *x = buf + (size_t)f * (size_t)ch;
                float s = x[0];
                for (int c = 1; c < ch; c++) s += x[c];
                mono[total + (size_t)f] = s / nch;
            }
        }
        total += (size_t)got;
    }
    info->frames = (int64_t)total;
    info->duration_s = (double)total / rate;
    if (total == 0) {
        st = err_set(e, QTTS_ERR_INPUT, "%s (%s) contains no audio samples: record or choose a clip with speech",
                     label, info->format);
        goto done;
    }
    float peak = 0.0f;
    for (size_t i = 0; i < total; i++) {
        float a = fabsf(mono[i]);
        if (a > peak) peak = a;
    }
    info->peak = peak;
    if ((double)peak < p->silence_peak) {
        st = err_set(e, QTTS_ERR_INPUT,
                     "%s is silent (peak level %.2g, below %.2g): record or choose a clip with audible speech",
                     label, (double)peak, p->silence_peak);
        goto done;
    }
    info->resampled = si->samplerate != AUDIO_READ_RATE_HZ;
    if (!info->resampled) {
        *pcm = mono; /* bit-exact: no copy */
        *n = total;
        mono = NULL;
    } else {
        st = audio_resample_24k(mono, total, si->samplerate, pcm, n, e);
        if (st != QTTS_OK) err_prefix(e, "%s: ", label);
    }
    /* finite input can still overflow: huge float samples summed by the
     * channel mean or by the resampling filter */
    for (size_t i = 0; st == QTTS_OK && i < *n; i++)
        if (!isfinite((*pcm)[i])) {
            st = err_set(e, QTTS_ERR_INPUT,
                         "%s has samples too large to convert (peak %g; audio is expected in [-1, 1]): normalise "
                         "or re-export it", label, (double)peak);
            free(*pcm);
            *pcm = NULL;
            *n = 0;
        }
done:
    free(buf);
    free(mono);
    return st;
}

static qtts_status begin(const audio_read_params **p, audio_read_params *defaults, float **pcm, size_t *n,
                         audio_read_info *info, qtts_error *e) {
    if (!pcm || !n) return err_set(e, QTTS_ERR_INVALID_ARG, "audio reader: pcm and n must not be NULL");
    *pcm = NULL;
    *n = 0;
    memset(info, 0, sizeof *info);
    if (!*p) {
        *defaults = audio_read_default_params();
        *p = defaults;
    }
    return check_params(*p, e);
}

qtts_status audio_read_24k(const char *path, const audio_read_params *p, float **pcm, size_t *n,
                           audio_read_info *info_out, qtts_error *e) {
    audio_read_info scratch;
    audio_read_info *info = info_out ? info_out : &scratch;
    audio_read_params defaults;
    qtts_status st = begin(&p, &defaults, pcm, n, info, e);
    if (st != QTTS_OK) return st;
    if (!path) return err_set(e, QTTS_ERR_INVALID_ARG, "audio_read_24k: path is NULL");

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, QTTS_ERR_IO, "cannot open reference audio %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = err_set(e, QTTS_ERR_IO, "cannot read reference audio %s: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, QTTS_ERR_IO, "reference audio %s is a directory, not a file", path);
    }
    if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        close(fd);
        return err_set(e, QTTS_ERR_INPUT, "%s is empty (0 bytes), not an audio file", path);
    }
    unsigned char head[64];
    ssize_t nh = pread(fd, head, sizeof head, 0);
    if (nh < 0 && errno == ESPIPE) nh = 0; /* a pipe: no peeking, libsndfile may still read it */
    if (nh < 0) {
        st = err_set(e, QTTS_ERR_IO, "cannot read reference audio %s: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    SF_INFO si;
    memset(&si, 0, sizeof si);
    SNDFILE *sf = sf_open_fd(fd, SFM_READ, &si, 0);
    if (!sf) {
        st = open_failed(path, head, (size_t)nh, e);
        close(fd);
        return st;
    }
    st = decode(sf, &si, path, p, pcm, n, info, e);
    sf_close(sf);
    close(fd);
    return st;
}

/* libsndfile virtual I/O over a borrowed byte buffer. */
typedef struct mem_io {
    const unsigned char *data;
    sf_count_t size, pos;
} mem_io;

static sf_count_t vio_len(void *u) { return ((mem_io *)u)->size; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u) {
    mem_io *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->size;
    if ((off > 0 && base > INT64_MAX - off)) return -1;
    sf_count_t np = base + off;
    if (np < 0) return -1;
    if (np > m->size) np = m->size;
    m->pos = np;
    return np;
}

static sf_count_t vio_read(void *ptr, sf_count_t count, void *u) {
    mem_io *m = u;
    if (count <= 0 || m->pos >= m->size) return 0;
    sf_count_t k = m->size - m->pos < count ? m->size - m->pos : count;
    memcpy(ptr, m->data + m->pos, (size_t)k);
    m->pos += k;
    return k;
}

static sf_count_t vio_write(const void *ptr, sf_count_t count, void *u) {
    (void)ptr;
    (void)count;
    (void)u;
    return 0;
}

static sf_count_t vio_tell(void *u) { return ((mem_io *)u)->pos; }

qtts_status audio_decode_24k_mem(const void *data, size_t size, const char *name, const audio_read_params *p,
                                 float **pcm, size_t *n, audio_read_info *info_out, qtts_error *e) {
    audio_read_info scratch;
    audio_read_info *info = info_out ? info_out : &scratch;
    audio_read_params defaults;
    qtts_status st = begin(&p, &defaults, pcm, n, info, e);
    if (st != QTTS_OK) return st;
    const char *label = name ? name : "audio data";
    if (size && !data) return err_set(e, QTTS_ERR_INVALID_ARG, "audio_decode_24k_mem: data is NULL");
    if (size == 0) return err_set(e, QTTS_ERR_INPUT, "%s is empty (0 bytes), not an audio file", label);
    if ((uint64_t)size > (uint64_t)INT64_MAX)
        return err_set(e, QTTS_ERR_LIMIT, "%s is too large (%zu bytes)", label, size);
    mem_io m = {data, (sf_count_t)size, 0};
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO si;
    memset(&si, 0, sizeof si);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &si, &m);
    if (!sf) return open_failed(label, data, size < 64 ? size : 64, e);
    st = decode(sf, &si, label, p, pcm, n, info, e);
    sf_close(sf);
    return st;
}
