/* Audio file output through libsndfile (WAV s16/f32, FLAC s16) and raw
 * little-endian PCM to a file or standard output. The WAV/FLAC header is kept
 * current after every write (SFC_SET_UPDATE_HEADER_AUTO), so a file being
 * streamed is playable at any moment. */
#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "qtts.h"
#include "util/error.h"

struct qtts_audio_writer {
    qtts_file_format format;
    qtts_sample_format sample;
    SNDFILE *sf;       /* WAV / FLAC */
    FILE *raw;         /* raw PCM */
    int raw_is_stdout;
    char path[512];
    char err[QTTS_ERROR_MSG_MAX];
    unsigned char buf[8192];
};

int qtts_file_format_from_path(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot) return -1;
    if (!strcasecmp(dot, ".wav") || !strcasecmp(dot, ".wave")) return QTTS_FILE_WAV;
    if (!strcasecmp(dot, ".flac")) return QTTS_FILE_FLAC;
    if (!strcasecmp(dot, ".raw") || !strcasecmp(dot, ".pcm")) return QTTS_FILE_RAW;
    return -1;
}

qtts_status qtts_audio_writer_open(qtts_audio_writer **out, const char *path, qtts_file_format format,
                                   qtts_sample_format sample, int rate, char *errbuf, size_t errbuf_size) {
    qtts_error e;
    err_clear(&e);
    qtts_status st = QTTS_OK;
    qtts_audio_writer *w = NULL;
    if (!out || !path || rate <= 0) {
        st = err_set(&e, QTTS_ERR_INVALID_ARG, "qtts_audio_writer_open: bad arguments");
        goto fail;
    }
    *out = NULL;
    if (format == QTTS_FILE_FLAC && sample == QTTS_SAMPLE_F32) {
        st = err_set(&e, QTTS_ERR_UNSUPPORTED, "FLAC stores integer samples: use 16-bit samples (s16) or WAV for float");
        goto fail;
    }
    if (!strcmp(path, "-") && format != QTTS_FILE_RAW) {
        st = err_set(&e, QTTS_ERR_UNSUPPORTED, "standard output takes raw PCM only (WAV/FLAC need a seekable file)");
        goto fail;
    }
    w = calloc(1, sizeof *w);
    if (!w) {
        st = err_set(&e, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    w->format = format;
    w->sample = sample;
    snprintf(w->path, sizeof w->path, "%s", path);
    if (format == QTTS_FILE_RAW) {
        if (!strcmp(path, "-")) {
            w->raw = stdout;
            w->raw_is_stdout = 1;
        } else if (!(w->raw = fopen(path, "wb"))) {
            st = err_set(&e, QTTS_ERR_IO, "cannot write %s: %s", path, strerror(errno));
            goto fail;
        }
    } else {
        SF_INFO info;
        memset(&info, 0, sizeof info);
        info.samplerate = rate;
        info.channels = 1;
        info.format = (format == QTTS_FILE_WAV ? SF_FORMAT_WAV : SF_FORMAT_FLAC) |
                      (sample == QTTS_SAMPLE_F32 ? SF_FORMAT_FLOAT : SF_FORMAT_PCM_16);
        if (!sf_format_check(&info)) {
            st = err_set(&e, QTTS_ERR_UNSUPPORTED, "this libsndfile cannot write %s", format == QTTS_FILE_WAV ? "WAV" : "FLAC");
            goto fail;
        }
        w->sf = sf_open(path, SFM_WRITE, &info);
        if (!w->sf) {
            st = err_set(&e, QTTS_ERR_IO, "cannot write %s: %s", path, sf_strerror(NULL));
            goto fail;
        }
        sf_command(w->sf, SFC_SET_CLIPPING, NULL, SF_TRUE);
        sf_command(w->sf, SFC_SET_UPDATE_HEADER_AUTO, NULL, SF_TRUE);
    }
    *out = w;
    return QTTS_OK;
fail:
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", e.msg);
    if (w) {
        if (w->raw && !w->raw_is_stdout) fclose(w->raw);
        free(w);
    }
    return st;
}

static int16_t to_s16(float x) {
    if (!(x == x)) return 0; /* NaN */
    if (x > 1.0f) x = 1.0f;
    if (x < -1.0f) x = -1.0f;
    return (int16_t)lrintf(x * 32767.0f);
}

qtts_status qtts_audio_writer_write(qtts_audio_writer *w, const float *pcm, size_t n) {
    if (!w || (!pcm && n)) return QTTS_ERR_INVALID_ARG;
    if (w->sf) {
        if (sf_write_float(w->sf, pcm, (sf_count_t)n) != (sf_count_t)n) {
            snprintf(w->err, sizeof w->err, "writing %s failed: %s", w->path, sf_strerror(w->sf));
            return QTTS_ERR_IO;
        }
        return QTTS_OK;
    }
    size_t done = 0;
    while (done < n) {
        size_t k = 0, bytes = 0;
        if (w->sample == QTTS_SAMPLE_S16) {
            for (; done + k < n && bytes + 2 <= sizeof w->buf; k++, bytes += 2) {
                int16_t v = to_s16(pcm[done + k]);
                w->buf[bytes] = (unsigned char)(v & 0xff);
                w->buf[bytes + 1] = (unsigned char)((uint16_t)v >> 8);
            }
        } else {
            for (; done + k < n && bytes + 4 <= sizeof w->buf; k++, bytes += 4) {
                uint32_t u;
                memcpy(&u, &pcm[done + k], 4);
                for (int b = 0; b < 4; b++) w->buf[bytes + b] = (unsigned char)(u >> (8 * b));
            }
        }
        if (fwrite(w->buf, 1, bytes, w->raw) != bytes) {
            snprintf(w->err, sizeof w->err, "writing %s failed: %s", w->raw_is_stdout ? "standard output" : w->path,
                     strerror(errno));
            return QTTS_ERR_IO;
        }
        done += k;
    }
    if (fflush(w->raw) != 0) {
        snprintf(w->err, sizeof w->err, "writing %s failed: %s", w->path, strerror(errno));
        return QTTS_ERR_IO;
    }
    return QTTS_OK;
}

qtts_status qtts_audio_writer_close(qtts_audio_writer *w) {
    if (!w) return QTTS_OK;
    qtts_status st = QTTS_OK;
    if (w->sf && sf_close(w->sf) != 0) st = QTTS_ERR_IO;
    if (w->raw && !w->raw_is_stdout && fclose(w->raw) != 0) st = QTTS_ERR_IO;
    free(w);
    return st;
}

const char *qtts_audio_writer_last_error(const qtts_audio_writer *w) { return w ? w->err : ""; }
