/* Unit test of the reference-audio reader (src/io/audio_reader.c): files
 * written here with libsndfile (WAV s16/f32 mono and stereo at 24 kHz, WAV
 * stereo at 44.1 kHz, FLAC at 16 kHz, OGG Vorbis and MP3 when this libsndfile
 * can write them) read back as 24 kHz mono: exact where no conversion is due,
 * the mean of channels for a downmix, the librosa output length and a sine's
 * frequency and amplitude after resampling. Every refusal (not audio, named
 * unsupported formats, empty, silent, NaN/Inf, too long, missing file, bad
 * headers, bad parameters) and the in-memory variant. Files go to a mkdtemp()
 * folder under /tmp, removed at the end. */
#include <math.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/audio_reader.h"
#include "test.h"
#include "test_tmp.h"

static int writable(int format, int rate, int channels) {
    SF_INFO si;
    memset(&si, 0, sizeof si);
    si.format = format;
    si.samplerate = rate;
    si.channels = channels;
    return sf_format_check(&si);
}

/* Write frames of interleaved float (data) or short (sdata) samples. */
static int write_sf(const char *path, int format, int rate, int channels, const float *data, const short *sdata,
                    size_t frames) {
    SF_INFO si;
    memset(&si, 0, sizeof si);
    si.format = format;
    si.samplerate = rate;
    si.channels = channels;
    SNDFILE *sf = sf_open(path, SFM_WRITE, &si);
    if (!sf) {
        printf("# cannot write %s: %s\n", path, sf_strerror(NULL));
        return -1;
    }
    sf_count_t w = frames == 0 ? 0
                   : data      ? sf_writef_float(sf, data, (sf_count_t)frames)
                               : sf_writef_short(sf, sdata, (sf_count_t)frames);
    sf_close(sf);
    return w == (sf_count_t)frames ? 0 : -1;
}

static uint32_t g_rng = 12345u;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((double)(g_rng >> 8) / 8388608.0 - 1.0);
}

/* Read path (or, when mem, its bytes through the in-memory decoder) and expect
 * status want with a message containing sub1 and sub2 (when not NULL). */
static qtts_status expect_read(const char *name, const char *path, int mem, const audio_read_params *p,
                               qtts_status want, const char *sub1, const char *sub2) {
    float *pcm = (float *)&g_rng; /* must be reset to NULL on failure */
    size_t n = 77;
    audio_read_info info;
    qtts_error e;
    err_clear(&e);
    qtts_status st;
    if (mem) {
        size_t nb = 0;
        unsigned char *b = test_read_file(path, &nb);
        st = audio_decode_24k_mem(b, nb, path, p, &pcm, &n, &info, &e);
        free(b);
    } else {
        st = audio_read_24k(path, p, &pcm, &n, &info, &e);
    }
    int ok = st == want;
    const char *why = "wrong status";
    if (ok && want != QTTS_OK && (pcm != NULL || n != 0)) ok = 0, why = "output not cleared on failure";
    if (ok && sub1 && !strstr(e.msg, sub1)) ok = 0, why = "message lacks the first expected text";
    if (ok && sub2 && !strstr(e.msg, sub2)) ok = 0, why = "message lacks the second expected text";
    test_report(name, ok, "%s: got %d (%s) want %d, message \"%s\" (expected \"%s\" / \"%s\")", why, (int)st,
                qtts_status_str(st), (int)want, e.msg, sub1 ? sub1 : "", sub2 ? sub2 : "");
    if (st == QTTS_OK) free(pcm);
    return st;
}

/* ---------------------------------------------------------------- exact paths */

static void test_f32_exact(void) {
    const size_t n = 24000 + 123;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = 0.9f * frand();
    x[10] = 1.5f; /* above full scale: upstream does not normalise, neither do we */
    x[11] = -1.25f;
    const char *p = test_tmp_path("f32_24k_mono.wav");
    if (write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, 1, x, NULL, n) != 0) {
        test_report("ar_f32_24k_bit_exact", 0, "cannot write %s", p);
        free(x);
        return;
    }
    for (int mem = 0; mem < 2; mem++) {
        float *pcm = NULL;
        size_t m = 0;
        audio_read_info info;
        qtts_error e;
        err_clear(&e);
        size_t nb = 0;
        unsigned char *b = mem ? test_read_file(p, &nb) : NULL;
        qtts_status st = mem ? audio_decode_24k_mem(b, nb, "upload.wav", NULL, &pcm, &m, &info, &e)
                             : audio_read_24k(p, NULL, &pcm, &m, &info, &e);
        free(b);
        int ok = st == QTTS_OK && m == n && pcm && !memcmp(pcm, x, n * sizeof *x);
        test_report(mem ? "ar_mem_f32_24k_bit_exact" : "ar_f32_24k_bit_exact", ok,
                    "status %d (%s), n %zu (want %zu), %s", (int)st, e.msg, m, n,
                    st == QTTS_OK && m == n ? "samples differ" : "");
        ok = st == QTTS_OK && info.rate_hz == 24000 && info.channels == 1 && info.frames == (int64_t)n &&
             !info.resampled && fabs(info.duration_s - (double)n / 24000.0) < 1e-9 && info.peak == 1.5f &&
             strstr(info.format, "WAV") && strstr(info.format, "32 bit float");
        test_report(mem ? "ar_mem_f32_info" : "ar_f32_info", ok,
                    "rate %d ch %d frames %lld resampled %d dur %g peak %g format \"%s\"", info.rate_hz,
                    info.channels, (long long)info.frames, info.resampled, info.duration_s, (double)info.peak,
                    info.format);
        free(pcm);
    }
    free(x);
}

static void test_s16_exact(void) {
    const size_t n = 5000;
    short *s = malloc(n * sizeof *s);
    for (size_t i = 0; i < n; i++) s[i] = (short)(frand() * 32767.0f);
    s[0] = -32768;
    s[1] = 32767;
    const char *p = test_tmp_path("s16_24k_mono.wav");
    if (write_sf(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 24000, 1, NULL, s, n) != 0) {
        test_report("ar_s16_24k_exact", 0, "cannot write %s", p);
        free(s);
        return;
    }
    float *pcm = NULL;
    size_t m = 0;
    audio_read_info info;
    qtts_error e;
    err_clear(&e);
    qtts_status st = audio_read_24k(p, NULL, &pcm, &m, &info, &e);
    size_t bad = n;
    if (st == QTTS_OK && m == n)
        for (size_t i = 0; i < n; i++)
            if (pcm[i] != (float)s[i] / 32768.0f) {
                bad = i;
                break;
            }
    CHECK("ar_s16_24k_exact", st == QTTS_OK && m == n && bad == n,
          "status %d (%s), n %zu, first mismatch at %zu", (int)st, e.msg, m, bad);
    CHECK("ar_s16_info", st == QTTS_OK && strstr(info.format, "Signed 16 bit PCM") != NULL, "format \"%s\"",
          info.format);
    free(pcm);
    free(s);
}

static void test_downmix_exact(void) {
    for (int ch = 2; ch <= 3; ch++) {
        const size_t n = 7001;
        float *x = malloc(n * (size_t)ch * sizeof *x);
        for (size_t i = 0; i < n * (size_t)ch; i++) x[i] = 0.8f * frand();
        const char *p = test_tmp_path(ch == 2 ? "stereo_24k.wav" : "three_24k.wav");
        char name[64];
        snprintf(name, sizeof name, "ar_downmix_%dch_is_mean", ch);
        if (write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, ch, x, NULL, n) != 0) {
            test_report(name, 0, "cannot write %s", p);
            free(x);
            continue;
        }
        float *pcm = NULL;
        size_t m = 0;
        audio_read_info info;
        qtts_error e;
        err_clear(&e);
        qtts_status st = audio_read_24k(p, NULL, &pcm, &m, &info, &e);
        size_t bad = n;
        if (st == QTTS_OK && m == n)
            for (size_t i = 0; i < n; i++) {
                float s = x[i * (size_t)ch];
                for (int c = 1; c < ch; c++) s += x[i * (size_t)ch + (size_t)c];
                if (pcm[i] != s / (float)ch) {
                    bad = i;
                    break;
                }
            }
        test_report(name, st == QTTS_OK && m == n && bad == n && info.channels == ch,
                    "status %d (%s), n %zu, channels %d, first mismatch at %zu", (int)st, e.msg, m, info.channels,
                    bad);
        free(pcm);
        free(x);
    }
}

/* ---------------------------------------------------------------- resampling */

/* Max |pcm - amp*sin(2 pi f t)| over the interior (edges: filter warm-up) and
 * the fitted amplitude (least-squares against the reference sine and cosine). */
static void sine_fit(const float *pcm, size_t n, double f_hz, double amp, double *max_err, double *fit_amp,
                     double *fit_phase) {
    size_t skip = 600;
    double me = 0.0, ss = 0.0, sc = 0.0, nn = 0.0;
    for (size_t i = skip; i + skip < n; i++) {
        double ph = 2.0 * M_PI * f_hz * (double)i / 24000.0;
        double d = fabs((double)pcm[i] - amp * sin(ph));
        if (d > me) me = d;
        ss += pcm[i] * sin(ph);
        sc += pcm[i] * cos(ph);
        nn += 1.0;
    }
    *max_err = me;
    *fit_amp = 2.0 * sqrt(ss * ss + sc * sc) / (nn > 0 ? nn : 1);
    *fit_phase = atan2(sc, ss);
}

static void check_resampled(const char *tag, const char *path, int mem, int rate, size_t frames, double f_hz,
                            double amp, double tol, int exact_len) {
    float *pcm = NULL;
    size_t m = 0;
    audio_read_info info;
    qtts_error e;
    err_clear(&e);
    size_t nb = 0;
    unsigned char *b = mem ? test_read_file(path, &nb) : NULL;
    qtts_status st = mem ? audio_decode_24k_mem(b, nb, tag, NULL, &pcm, &m, &info, &e)
                         : audio_read_24k(path, NULL, &pcm, &m, &info, &e);
    free(b);
    char name[96];
    snprintf(name, sizeof name, "%s_read", tag);
    CHECK(name, st == QTTS_OK && info.rate_hz == rate && info.resampled == 1, "status %d (%s), rate %d, resampled %d",
          (int)st, e.msg, info.rate_hz, info.resampled);
    if (st != QTTS_OK) return;
    double want = (double)info.frames * 24000.0 / (double)rate;
    snprintf(name, sizeof name, "%s_length", tag);
    if (exact_len) /* lossless input: frames as written; librosa length; within 1 of round() */
        CHECK(name, info.frames == (int64_t)frames && m == audio_resampled_length(frames, rate) &&
                        fabs((double)m - floor(want + 0.5)) <= 1.0,
              "frames %lld (wrote %zu), got %zu samples, want ceil(%.3f)", (long long)info.frames, frames, m, want);
    else /* lossy codecs may add or drop priming samples */
        CHECK(name, fabs((double)m - (double)frames * 24000.0 / rate) <= 0.1 * (double)frames * 24000.0 / rate &&
                        m == audio_resampled_length((size_t)info.frames, rate),
              "got %zu samples for %lld frames at %d Hz", m, (long long)info.frames, rate);
    double me, fa, fp;
    sine_fit(pcm, m, f_hz, amp, &me, &fa, &fp);
    printf("# %s: %zu samples, max error %.3g, amplitude %.6f, phase %.3g rad\n", tag, m, me, fa, fp);
    snprintf(name, sizeof name, "%s_sine", tag);
    if (exact_len)
        CHECK(name, me < tol && fabs(fa - amp) < 1e-3 && fabs(fp) < 1e-3,
              "max error %.3g (tol %.3g), amplitude %.6f (want %.3f), phase %.3g rad", me, tol, fa, amp, fp);
    else /* lossy: check frequency and level through the least-squares fit only */
        CHECK(name, fabs(fa - amp) < 0.05 * amp, "fitted amplitude %.4f at %.0f Hz (want %.3f)", fa, f_hz, amp);
    free(pcm);
}

static float *make_sine(size_t frames, int channels, int rate, double f_hz, const double *amps) {
    float *x = malloc(frames * (size_t)channels * sizeof *x);
    for (size_t i = 0; i < frames; i++)
        for (int c = 0; c < channels; c++)
            x[i * (size_t)channels + (size_t)c] = (float)(amps[c] * sin(2.0 * M_PI * f_hz * (double)i / rate));
    return x;
}

static void test_resample(void) {
    /* 44.1 kHz stereo: L = 0.6 sin, R = 0.4 sin -> mean 0.5 sin at 440 Hz */
    const double amps[2] = {0.6, 0.4};
    size_t frames = 66150 + 7;
    float *x = make_sine(frames, 2, 44100, 440.0, amps);
    const char *p = test_tmp_path("stereo_44k1.wav");
    if (write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 44100, 2, x, NULL, frames) == 0) {
        check_resampled("ar_44k1_stereo", p, 0, 44100, frames, 440.0, 0.5, 1e-5, 1);
        check_resampled("ar_mem_44k1_stereo", p, 1, 44100, frames, 440.0, 0.5, 1e-5, 1);
    } else {
        test_report("ar_44k1_stereo_write", 0, "cannot write %s", p);
    }
    free(x);

    /* the filter is a high-quality band limit: 10.5 kHz (in HQ's passband) keeps
     * its level, 15 kHz (above the new 12 kHz Nyquist) is removed, not aliased */
    const double a2[1] = {0.5};
    frames = 44100;
    for (int k = 0; k < 2; k++) {
        double f = k == 0 ? 10500.0 : 15000.0;
        x = make_sine(frames, 1, 44100, f, a2);
        p = test_tmp_path("band.wav");
        char name[64];
        snprintf(name, sizeof name, k == 0 ? "ar_passband_10k5" : "ar_stopband_15k");
        if (write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 44100, 1, x, NULL, frames) != 0) {
            test_report(name, 0, "cannot write %s", p);
            free(x);
            continue;
        }
        float *pcm = NULL;
        size_t m = 0;
        qtts_error e;
        err_clear(&e);
        qtts_status st = audio_read_24k(p, NULL, &pcm, &m, NULL, &e);
        double rms = 0.0, cnt = 0.0;
        for (size_t i = 600; st == QTTS_OK && i + 600 < m; i++, cnt += 1.0) rms += (double)pcm[i] * pcm[i];
        rms = cnt > 0 ? sqrt(rms / cnt) : -1.0;
        double want = k == 0 ? 0.5 / sqrt(2.0) : 0.0;
        printf("# %s: rms %.3g (want %.3g)\n", name, rms, want);
        if (k == 0)
            CHECK(name, st == QTTS_OK && fabs(rms - want) < 1e-3 * want, "status %d (%s), rms %.6f want %.6f", (int)st,
                  e.msg, rms, want);
        else
            CHECK(name, st == QTTS_OK && rms >= 0 && rms < 1e-4, "status %d (%s), rms %.3g of aliasing (want < 1e-4)",
                  (int)st, e.msg, rms);
        free(pcm);
        free(x);
    }

    /* 16 kHz FLAC (16-bit): 300 Hz at 0.5 */
    const double a1[1] = {0.5};
    frames = 16000 * 2 + 3;
    x = make_sine(frames, 1, 16000, 300.0, a1);
    p = test_tmp_path("mono_16k.flac");
    if (write_sf(p, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, x, NULL, frames) == 0)
        check_resampled("ar_16k_flac", p, 0, 16000, frames, 300.0, 0.5, 1e-4, 1);
    else
        test_report("ar_16k_flac_write", 0, "cannot write %s", p);
    free(x);

    /* OGG Vorbis at 48 kHz, when this libsndfile writes it */
    frames = 48000 * 2;
    if (writable(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 48000, 1)) {
        x = make_sine(frames, 1, 48000, 500.0, a1);
        p = test_tmp_path("mono_48k.ogg");
        if (write_sf(p, SF_FORMAT_OGG | SF_FORMAT_VORBIS, 48000, 1, x, NULL, frames) == 0)
            check_resampled("ar_48k_vorbis", p, 0, 48000, frames, 500.0, 0.5, 0, 0);
        else
            test_report("ar_48k_vorbis_write", 0, "cannot write %s", p);
        free(x);
    } else {
        test_skip("ar_48k_vorbis", "this libsndfile (%s) cannot write OGG Vorbis", sf_version_string());
    }

    /* MP3 at 22.05 kHz, when this libsndfile writes it (LAME) */
    frames = 22050 * 2;
    if (writable(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 22050, 1)) {
        x = make_sine(frames, 1, 22050, 400.0, a1);
        p = test_tmp_path("mono_22k.mp3");
        if (write_sf(p, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 22050, 1, x, NULL, frames) == 0)
            check_resampled("ar_22k_mp3", p, 0, 22050, frames, 400.0, 0.5, 0, 0);
        else
            test_report("ar_22k_mp3_write", 0, "cannot write %s", p);
        free(x);
    } else {
        test_skip("ar_22k_mp3", "this libsndfile (%s) cannot write MP3", sf_version_string());
    }
    int count = 0, listed = 0;
    sf_command(NULL, SFC_GET_FORMAT_MAJOR_COUNT, &count, sizeof count);
    for (int i = 0; i < count; i++) {
        SF_FORMAT_INFO fi;
        memset(&fi, 0, sizeof fi);
        fi.format = i;
        sf_command(NULL, SFC_GET_FORMAT_MAJOR, &fi, sizeof fi);
        if (fi.format == SF_FORMAT_MPEG) listed = 1;
    }
    CHECK("ar_has_mp3_matches_lib", audio_reader_has_mp3() == listed, "audio_reader_has_mp3 %d, listed %d",
          audio_reader_has_mp3(), listed);

    /* the low-level resampler: 24 kHz copies; empty stays empty; librosa length */
    float in[5] = {0.1f, -0.2f, 0.3f, 1.7f, -4.0f};
    float *out = NULL;
    size_t m = 0;
    qtts_error e;
    err_clear(&e);
    qtts_status st = audio_resample_24k(in, 5, 24000, &out, &m, &e);
    CHECK("ar_resample_24k_copies", st == QTTS_OK && m == 5 && out != in && !memcmp(out, in, sizeof in),
          "status %d, n %zu", (int)st, m);
    free(out);
    st = audio_resample_24k(NULL, 0, 16000, &out, &m, &e);
    CHECK("ar_resample_empty", st == QTTS_OK && m == 0 && out == NULL, "status %d, n %zu", (int)st, m);
    /* librosa computes ceil(n * (24000 / rate)) in double: one second at
     * 44.1 kHz gives 44100 * 0.54421768707483 = 24000.000000000004 -> 24001 */
    CHECK("ar_resampled_length", audio_resampled_length(16000, 16000) == 24000 &&
                                     audio_resampled_length(44100, 44100) == 24001 &&
                                     audio_resampled_length(1, 48000) == 1 && audio_resampled_length(7, 24000) == 7 &&
                                     audio_resampled_length(3, 8000) == 9,
          "lengths %zu %zu %zu %zu %zu", audio_resampled_length(16000, 16000), audio_resampled_length(44100, 44100),
          audio_resampled_length(1, 48000), audio_resampled_length(7, 24000), audio_resampled_length(3, 8000));
    st = audio_resample_24k(in, 5, 0, &out, &m, &e);
    CHECK("ar_resample_rate0", st == QTTS_ERR_INVALID_ARG, "status %d", (int)st);
}

/* ---------------------------------------------------------------- refusals */

/* A 44-byte PCM WAV header + 4 data bytes with the given channels and rate. */
static void write_wav_header(const char *path, int channels, int rate) {
    unsigned char h[48];
    memset(h, 0, sizeof h);
    memcpy(h, "RIFF", 4);
    uint32_t riff = 40;
    memcpy(h + 8, "WAVEfmt ", 8);
    h[16] = 16;
    h[20] = 1; /* PCM */
    h[22] = (unsigned char)channels;
    uint32_t r = (uint32_t)rate, br = r * 2u * (uint32_t)channels;
    for (int i = 0; i < 4; i++) {
        h[4 + i] = (unsigned char)(riff >> (8 * i));
        h[24 + i] = (unsigned char)(r >> (8 * i));
        h[28 + i] = (unsigned char)(br >> (8 * i));
    }
    h[32] = (unsigned char)(2 * channels);
    h[34] = 16;
    memcpy(h + 36, "data", 4);
    h[40] = 4;
    h[44] = 0x10;
    h[46] = 0x20;
    test_write_file(path, h, sizeof h);
}

static void test_refusals(void) {
    audio_read_params def = audio_read_default_params();
    CHECK("ar_default_params", def.max_seconds == 60.0 && def.silence_peak == 1e-4, "max %g silence %g",
          def.max_seconds, def.silence_peak);

    for (int mem = 0; mem < 2; mem++) {
        char name[96];
#define NAME(s) (snprintf(name, sizeof name, "%s%s", mem ? "ar_mem_" : "ar_", (s)), name)
        /* a text file renamed .wav */
        const char *p = test_tmp_path("notes.wav");
        const char *txt = "These are my notes, not audio.\n";
        test_write_file(p, txt, strlen(txt));
        expect_read(NAME("text_as_wav"), p, mem, NULL, QTTS_ERR_INPUT, p, "not a readable audio file");

        /* 0 bytes */
        p = test_tmp_path("zero.wav");
        test_write_file(p, "", 0);
        expect_read(NAME("zero_bytes"), p, mem, NULL, QTTS_ERR_INPUT, p, "empty");

        /* a valid WAV with no samples */
        p = test_tmp_path("empty.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 24000, 1, NULL, NULL, 0);
        expect_read(NAME("empty_wav"), p, mem, NULL, QTTS_ERR_INPUT, p, "no audio samples");

        /* silence: zeros with a little noise below 1e-4 */
        size_t n = 24000;
        float *x = calloc(n * 2, sizeof *x);
        for (size_t i = 0; i < n * 2; i++) x[i] = 9e-5f * frand();
        p = test_tmp_path("silent.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, 2, x, NULL, n);
        expect_read(NAME("silent"), p, mem, NULL, QTTS_ERR_INPUT, p, "silent");
        /* the same clip passes with the check off, and one louder sample passes */
        audio_read_params q = def;
        q.silence_peak = 0.0;
        expect_read(NAME("silent_check_off"), p, mem, &q, QTTS_OK, NULL, NULL);
        x[1000] = 0.5f;
        p = test_tmp_path("nearly_silent.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, 2, x, NULL, n);
        expect_read(NAME("one_loud_sample_not_silent"), p, mem, NULL, QTTS_OK, NULL, NULL);

        /* NaN and Inf samples */
        for (size_t i = 0; i < n * 2; i++) x[i] = 0.3f * frand();
        x[2 * 12000 + 1] = NAN;
        p = test_tmp_path("nan.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, 2, x, NULL, n);
        expect_read(NAME("nan_sample"), p, mem, NULL, QTTS_ERR_INPUT, p, "NaN sample at 0.500 s");
        x[2 * 12000 + 1] = 0.0f;
        x[3] = -INFINITY;
        p = test_tmp_path("inf.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 24000, 2, x, NULL, n);
        expect_read(NAME("inf_sample"), p, mem, NULL, QTTS_ERR_INPUT, p, "infinite");
        free(x);

        /* too long: 2 s at 16 kHz with a 1 s limit; exactly 1 s passes */
        n = 32000;
        x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = 0.3f * frand();
        p = test_tmp_path("two_seconds.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 1, x, NULL, n);
        q = def;
        q.max_seconds = 1.0;
        expect_read(NAME("too_long"), p, mem, &q, QTTS_ERR_LIMIT, "2.00 s", "1.00 s");
        p = test_tmp_path("one_second.wav");
        write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 1, x, NULL, n / 2);
        expect_read(NAME("exactly_max_ok"), p, mem, &q, QTTS_OK, NULL, NULL);
        /* the default limit passes 2 s; FLAC too (frames known from STREAMINFO) */
        p = test_tmp_path("two_seconds.flac");
        write_sf(p, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, x, NULL, n);
        expect_read(NAME("flac_too_long"), p, mem, &q, QTTS_ERR_LIMIT, "2.00 s", "1.00 s");
        expect_read(NAME("flac_default_limit_ok"), p, mem, NULL, QTTS_OK, NULL, NULL);
        free(x);

        /* formats named when they cannot be decoded */
        unsigned char junk[600];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(frand() * 127.0f + 128.0f);
        memcpy(junk, "ID3\x03\0\0\0\0\0\x0a", 10);
        memset(junk + 10, 0, 10);
        p = test_tmp_path("fake.mp3");
        test_write_file(p, junk, sizeof junk);
        expect_read(NAME("fake_mp3_named"), p, mem, NULL, QTTS_ERR_INPUT, p, "MP3");
        memcpy(junk, "\0\0\0\x20" "ftypM4A \0\0\0\0", 16);
        p = test_tmp_path("voice.m4a");
        test_write_file(p, junk, sizeof junk);
        expect_read(NAME("m4a_named"), p, mem, NULL, QTTS_ERR_INPUT, p, "MP4/M4A");
        memcpy(junk, "\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81", 12);
        p = test_tmp_path("voice.webm");
        test_write_file(p, junk, sizeof junk);
        expect_read(NAME("webm_named"), p, mem, NULL, QTTS_ERR_INPUT, p, "WebM");

        /* damaged headers: zero channels, zero rate */
        p = test_tmp_path("zero_channels.wav");
        write_wav_header(p, 0, 24000);
        expect_read(NAME("zero_channels"), p, mem, NULL, QTTS_ERR_INPUT, p, NULL);
        p = test_tmp_path("zero_rate.wav");
        write_wav_header(p, 1, 0);
        expect_read(NAME("zero_rate"), p, mem, NULL, QTTS_ERR_INPUT, p, NULL);
        p = test_tmp_path("ok_header.wav"); /* control: the same writer makes a readable file */
        write_wav_header(p, 1, 24000);
        expect_read(NAME("handmade_header_control"), p, mem, NULL, QTTS_OK, NULL, NULL);

        /* bad parameters */
        q = def;
        q.max_seconds = 0.0;
        expect_read(NAME("max_seconds_zero"), test_tmp_path("one_second.wav"), mem, &q, QTTS_ERR_INVALID_ARG, "max_seconds",
                    NULL);
        q.max_seconds = NAN;
        expect_read(NAME("max_seconds_nan"), test_tmp_path("one_second.wav"), mem, &q, QTTS_ERR_INVALID_ARG, "max_seconds",
                    NULL);
        q = def;
        q.silence_peak = 1.0;
        expect_read(NAME("silence_peak_one"), test_tmp_path("one_second.wav"), mem, &q, QTTS_ERR_INVALID_ARG,
                    "silence_peak", NULL);
#undef NAME
    }

    /* file-only: missing file and a directory are I/O errors */
    const char *missing = test_tmp_path("no_such_file.wav");
    expect_read("ar_missing_file", missing, 0, NULL, QTTS_ERR_IO, missing, "No such file");
    expect_read("ar_directory", test_tmp_dir(), 0, NULL, QTTS_ERR_IO, test_tmp_dir(), "directory");

    /* memory-only: NULL name gets a label, NULL data with a size is a bad argument */
    float *pcm = NULL;
    size_t n = 0;
    qtts_error e;
    err_clear(&e);
    qtts_status st = audio_decode_24k_mem("garbage!", 8, NULL, NULL, &pcm, &n, NULL, &e);
    CHECK("ar_mem_default_label", st == QTTS_ERR_INPUT && strstr(e.msg, "audio data") != NULL,
          "status %d, message \"%s\"", (int)st, e.msg);
    st = audio_decode_24k_mem(NULL, 8, NULL, NULL, &pcm, &n, NULL, &e);
    CHECK("ar_mem_null_data", st == QTTS_ERR_INVALID_ARG, "status %d", (int)st);
    st = audio_read_24k(test_tmp_path("one_second.wav"), NULL, NULL, &n, NULL, &e);
    CHECK("ar_null_out", st == QTTS_ERR_INVALID_ARG, "status %d", (int)st);
}

int main(void) {
    if (test_tmp_make("qtts_audio_reader") != 0) return test_finish();
    printf("# %s\n", sf_version_string());
    test_f32_exact();
    test_s16_exact();
    test_downmix_exact();
    test_resample();
    test_refusals();
    test_tmp_remove();
    return test_finish();
}
