/* Golden test of the speaker encoder (model/mel.c, model/speaker_encoder.c) against
 * the official Qwen3-TTS outputs of the base_clone case: the Slaney mel basis, the
 * log-mel, every ECAPA-TDNN stage and the x-vector of each run that recorded them,
 * at max|d|/max|ref| <= 1e-5. Also: input validation (empty, too short, NaN/Inf),
 * config parsing and shape validation at load. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/mel.h"
#include "model/speaker_encoder.h"
#include "npy.h"
#include "test.h"

#define TOL 1e-5
#define CASE "golden/data/base_clone"

static const char *const RUNS[] = {"xvec_en", "icl_stream_en", "icl_stream_shortref_en",
                                   "icl_nonstream_auto"};

static int load_npy(const char *path, npy_array *a) {
    char err[256];
    if (npy_load(path, a, err, sizeof err) != 0) {
        test_report(path, 0, "cannot load: %s", err);
        return -1;
    }
    if (a->is_int) {
        test_report(path, 0, "expected float data");
        npy_free(a);
        return -1;
    }
    return 0;
}

/* Compare a[n] against ref[n] and report "<what> (rel R, abs A)". */
static void compare(const char *what, const float *a, const float *ref, long n) {
    double abs_err = 0.0;
    const double rel = rel_err(a, ref, n, &abs_err);
    char name[256];
    snprintf(name, sizeof name, "%s (rel %.2e, abs %.2e)", what, rel, abs_err);
    CHECK(name, rel <= TOL, "max|d|/max|ref| = %.3e > %.0e", rel, TOL);
}

/* ------------------------------------------------------------ stage trace */

typedef struct trace_ctx {
    const char *run;
    int n_seen;
} trace_ctx;

static void on_stage(const char *stage, const float *data, int n_frames, int n_channels, void *user) {
    trace_ctx *tc = user;
    tc->n_seen++;
    char what[128];
    snprintf(what, sizeof what, "%s/%s", tc->run, stage);
    npy_array ref;
    if (load_npy(test_path(CASE "/golden/%s/%s.npy", tc->run, stage), &ref) != 0) return;
    /* spk_mel is [frames][mel] like ours; the other stages are [C][frames]. */
    const int time_major = strcmp(stage, "spk_mel") == 0;
    const long want0 = time_major ? n_frames : n_channels, want1 = time_major ? n_channels : n_frames;
    if (ref.ndim != 2 || ref.shape[0] != want0 || ref.shape[1] != want1) {
        test_report(what, 0, "shape [%ld, %ld] in the golden, ours gives [%ld, %ld]",
                    ref.ndim > 0 ? ref.shape[0] : -1, ref.ndim > 1 ? ref.shape[1] : -1, want0, want1);
        npy_free(&ref);
        return;
    }
    const long n = (long)n_frames * n_channels;
    float *ours = malloc((size_t)n * sizeof *ours);
    if (!ours) {
        test_report(what, 0, "out of memory");
        npy_free(&ref);
        return;
    }
    for (int t = 0; t < n_frames; t++)
        for (int c = 0; c < n_channels; c++)
            ours[time_major ? (long)t * n_channels + c : (long)c * n_frames + t] =
                data[(long)t * n_channels + c];
    compare(what, ours, ref.f32, n);
    free(ours);
    npy_free(&ref);
}

/* ------------------------------------------------------------ tests */

static void test_mel_basis(void) {
    mel_params p = mel_speaker_default_params();
    qtts_error e = {0};
    float *basis = NULL;
    if (mel_filterbank(&p, &basis, &e) != QTTS_OK) {
        test_report("mel_filterbank", 0, "%s", e.msg);
        return;
    }
    for (size_t r = 0; r < sizeof RUNS / sizeof RUNS[0]; r++) {
        npy_array ref;
        if (load_npy(test_path(CASE "/golden/%s/spk_mel_basis.npy", RUNS[r]), &ref) != 0) continue;
        char what[128];
        snprintf(what, sizeof what, "%s/spk_mel_basis", RUNS[r]);
        if (ref.n != (long)p.n_mels * (p.n_fft / 2 + 1))
            test_report(what, 0, "golden has %ld values, expected %d", ref.n, p.n_mels * (p.n_fft / 2 + 1));
        else
            compare(what, basis, ref.f32, ref.n);
        npy_free(&ref);
    }
    free(basis);
}

/* The mel front-end alone against a direct O(n^2) double DFT of one frame: n_fft 1024
 * (radix-4 passes only) and 512 with a shorter, centred window (adds the radix-2 pass). */
static void test_fft_against_dft(int n_fft, int win) {
    mel_params p = mel_speaker_default_params();
    p.n_fft = n_fft;
    p.win = win;
    p.hop = n_fft / 4;
    p.n_mels = 16;
    const size_t n = 8 * (size_t)n_fft;
    float *pcm = malloc(n * sizeof *pcm), *basis = NULL, *mel = NULL;
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        pcm[i] = (float)((double)(s >> 8) / (1 << 24) - 0.5) + 0.3f * sinf(0.05f * (float)i);
    }
    char what[96];
    snprintf(what, sizeof what, "mel frame vs direct DFT, n_fft %d win %d", n_fft, win);
    qtts_error e = {0};
    int T = 0;
    if (mel_filterbank(&p, &basis, &e) != QTTS_OK ||
        mel_log_spectrogram(&p, basis, pcm, n, &mel, &T, &e) != QTTS_OK) {
        test_report(what, 0, "%s", e.msg);
        goto done;
    }
    /* frame 5 lies inside pcm (no reflection); the window is centred in the frame */
    const int f = 5, nb = n_fft / 2 + 1, pad = (n_fft - p.hop) / 2, off = (n_fft - win) / 2;
    double *mag = malloc((size_t)nb * sizeof *mag);
    float *want = malloc((size_t)p.n_mels * sizeof *want);
    for (int k = 0; k < nb; k++) {
        double re = 0.0, im = 0.0;
        for (int j = off; j < off + win; j++) {
            const double w = 0.5 - 0.5 * cos(2.0 * M_PI * (j - off) / win);
            const double x = w * pcm[f * p.hop - pad + j];
            re += x * cos(2.0 * M_PI * (double)k * j / n_fft);
            im -= x * sin(2.0 * M_PI * (double)k * j / n_fft);
        }
        mag[k] = sqrt(re * re + im * im + 1e-9);
    }
    for (int b = 0; b < p.n_mels; b++) {
        double acc = 0.0;
        for (int k = 0; k < nb; k++) acc += (double)basis[b * nb + k] * mag[k];
        want[b] = (float)log(acc > 1e-5 ? acc : 1e-5);
    }
    compare(what, mel + (size_t)f * p.n_mels, want, p.n_mels);
    snprintf(what, sizeof what, "mel frame count, n_fft %d", n_fft);
    CHECK(what, T == (int)((n + 2 * pad - n_fft) / p.hop + 1), "%d frames for %zu samples", T, n);
    free(mag);
    free(want);
done:
    free(pcm);
    free(basis);
    free(mel);
}

static void test_runs(const speaker_encoder *enc) {
    const int enc_dim = speaker_encoder_get_config(enc)->enc_dim;
    for (size_t r = 0; r < sizeof RUNS / sizeof RUNS[0]; r++) {
        npy_array audio, xref;
        if (load_npy(test_path(CASE "/golden/%s/ref_audio.npy", RUNS[r]), &audio) != 0) continue;
        if (load_npy(test_path(CASE "/golden/%s/xvector.npy", RUNS[r]), &xref) != 0) {
            npy_free(&audio);
            continue;
        }
        float *xv = calloc((size_t)enc_dim, sizeof *xv);
        trace_ctx tc = {.run = RUNS[r]};
        qtts_error e = {0};
        char what[128];
        snprintf(what, sizeof what, "%s/embed", RUNS[r]);
        qtts_status st = speaker_encoder_embed_trace(enc, audio.f32, (size_t)audio.n, xv, on_stage, &tc, &e);
        CHECK(what, st == QTTS_OK, "%s", e.msg);
        if (st == QTTS_OK) {
            snprintf(what, sizeof what, "%s/stages traced", RUNS[r]);
            CHECK(what, tc.n_seen == 8, "%d stages, expected 8", tc.n_seen);
            snprintf(what, sizeof what, "%s/xvector", RUNS[r]);
            if (xref.n != enc_dim)
                test_report(what, 0, "golden has %ld values, expected %d", xref.n, enc_dim);
            else
                compare(what, xv, xref.f32, enc_dim);
            /* The plain entry point gives the same bits. */
            float *xv2 = calloc((size_t)enc_dim, sizeof *xv2);
            st = speaker_encoder_embed(enc, audio.f32, (size_t)audio.n, xv2, &e);
            snprintf(what, sizeof what, "%s/embed without trace is identical", RUNS[r]);
            CHECK(what, st == QTTS_OK && memcmp(xv, xv2, (size_t)enc_dim * sizeof *xv) == 0, "%s",
                  st == QTTS_OK ? "x-vectors differ" : e.msg);
            free(xv2);
        }
        free(xv);
        npy_free(&audio);
        npy_free(&xref);
    }
}

static void test_bad_input(const speaker_encoder *enc) {
    const int enc_dim = speaker_encoder_get_config(enc)->enc_dim;
    const size_t min_n = speaker_encoder_min_samples(enc);
    CHECK("min samples = 5 frames (1280)", min_n == 1280, "got %zu", min_n);
    float *xv = calloc((size_t)enc_dim, sizeof *xv);
    float *pcm = calloc(min_n + 16, sizeof *pcm);
    for (size_t i = 0; i < min_n + 16; i++) pcm[i] = 0.1f * sinf(0.01f * (float)i);
    qtts_error e = {0};

    qtts_status st = speaker_encoder_embed(enc, pcm, 0, xv, &e);
    CHECK("empty audio -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT && strstr(e.msg, "empty"), "status %d: %s",
          st, e.msg);
    st = speaker_encoder_embed(enc, NULL, 100, xv, &e);
    CHECK("NULL audio -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT, "status %d: %s", st, e.msg);
    st = speaker_encoder_embed(enc, pcm, 100, xv, &e);
    CHECK("100 samples -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT && strstr(e.msg, "too short"),
          "status %d: %s", st, e.msg);
    st = speaker_encoder_embed(enc, pcm, min_n - 1, xv, &e);
    CHECK("min-1 samples -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT, "status %d: %s", st, e.msg);
    st = speaker_encoder_embed(enc, pcm, min_n, xv, &e);
    int finite = 1;
    for (int i = 0; i < enc_dim; i++) finite &= isfinite(xv[i]) != 0;
    CHECK("min samples accepted, finite x-vector", st == QTTS_OK && finite, "status %d: %s", st, e.msg);

    pcm[700] = NAN;
    st = speaker_encoder_embed(enc, pcm, min_n + 16, xv, &e);
    CHECK("NaN sample -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT && strstr(e.msg, "NaN"), "status %d: %s", st,
          e.msg);
    pcm[700] = -INFINITY;
    st = speaker_encoder_embed(enc, pcm, min_n + 16, xv, &e);
    CHECK("Inf sample -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT && strstr(e.msg, "infinite"),
          "status %d: %s", st, e.msg);

    /* The mel front-end validates on its own too. */
    mel_params p = mel_speaker_default_params();
    float *basis = NULL, *mel = NULL;
    int T = 0;
    if (mel_filterbank(&p, &basis, &e) == QTTS_OK) {
        st = mel_log_spectrogram(&p, basis, pcm, 384, &mel, &T, &e);
        CHECK("mel: 384 samples -> QTTS_ERR_INPUT", st == QTTS_ERR_INPUT && !mel, "status %d", st);
        st = mel_log_spectrogram(&p, basis, pcm, 385, &mel, &T, &e);
        CHECK("mel: 385 samples -> 1 frame", st == QTTS_OK && T == 1, "status %d, %d frames: %s", st, T,
              e.msg);
        free(mel);
    }
    p.n_fft = 1000;
    float *bad = NULL;
    st = mel_filterbank(&p, &bad, &e);
    CHECK("mel: n_fft 1000 rejected", st == QTTS_ERR_INVALID_ARG && !bad, "status %d", st);
    free(bad);
    free(basis);
    free(pcm);
    free(xv);
}

static void test_config(const st_set *st, const speaker_encoder_config *good) {
    qtts_error e = {0};
    /* Every key of the golden config was read. */
    CHECK("config: golden geometry read",
          good->mel_dim == 128 && good->enc_dim == 64 && good->n_layers == 5 && good->channels[0] == 32 &&
              good->channels[4] == 96 && good->kernel_sizes[0] == 5 && good->dilations[3] == 4 &&
              good->attention_channels == 16 && good->res2net_scale == 4 && good->se_channels == 16 &&
              good->sample_rate == 24000,
          "unexpected values");

    /* Absent keys keep the defaults. */
    json_t *obj = json_pack("{s:i, s:i}", "enc_dim", 2048, "sample_rate", 24000);
    speaker_encoder_config c = speaker_encoder_default_config(1024);
    qtts_status s = speaker_encoder_config_from_json(&c, obj, &e);
    CHECK("config: published 1.7B keys keep the class defaults",
          s == QTTS_OK && c.enc_dim == 2048 && c.channels[4] == 1536 && c.res2net_scale == 8 &&
              c.attention_channels == 128 && c.n_layers == 5,
          "status %d: %s", s, e.msg);
    json_decref(obj);

    obj = json_pack("{s:s}", "enc_se_channels", "many");
    c = speaker_encoder_default_config(1024);
    s = speaker_encoder_config_from_json(&c, obj, &e);
    CHECK("config: string value -> QTTS_ERR_FORMAT", s == QTTS_ERR_FORMAT && strstr(e.msg, "enc_se_channels"),
          "status %d: %s", s, e.msg);
    json_decref(obj);

    obj = json_pack("{s:[i,i,i,i,i], s:[i,i,i]}", "enc_channels", 8, 8, 8, 8, 24, "enc_dilations", 1, 2, 1);
    c = speaker_encoder_default_config(1024);
    s = speaker_encoder_config_from_json(&c, obj, &e);
    CHECK("config: lists of unequal length -> QTTS_ERR_FORMAT", s == QTTS_ERR_FORMAT, "status %d: %s", s,
          e.msg);
    json_decref(obj);

    /* Loading with the wrong geometry fails on shapes, naming the tensor. */
    speaker_encoder *enc = NULL;
    s = speaker_encoder_load(&enc, st, 64, &e);
    CHECK("load: default geometry on tiny weights -> QTTS_ERR_MODEL",
          s == QTTS_ERR_MODEL && !enc && strstr(e.msg, "speaker_encoder."), "status %d: %s", s, e.msg);
    speaker_encoder_free(enc);
    c = *good;
    c.enc_dim = 65;
    s = speaker_encoder_load_config(&enc, st, &c, 1, &e);
    CHECK("load: wrong enc_dim -> QTTS_ERR_MODEL", s == QTTS_ERR_MODEL && !enc && strstr(e.msg, "fc.weight"),
          "status %d: %s", s, e.msg);
    speaker_encoder_free(enc);
    c = *good;
    c.channels[4] = 64;
    s = speaker_encoder_load_config(&enc, st, &c, 1, &e);
    CHECK("load: MFA channels != sum of blocks -> QTTS_ERR_MODEL", s == QTTS_ERR_MODEL && !enc,
          "status %d: %s", s, e.msg);
    speaker_encoder_free(enc);
    c = *good;
    c.sample_rate = 16000;
    s = speaker_encoder_load_config(&enc, st, &c, 1, &e);
    CHECK("load: 16 kHz -> QTTS_ERR_UNSUPPORTED", s == QTTS_ERR_UNSUPPORTED && !enc, "status %d: %s", s, e.msg);
    speaker_encoder_free(enc);
}

int main(void) {
    test_mel_basis();
    test_fft_against_dft(1024, 1024);
    test_fft_against_dft(512, 400);

    st_set st = {0};
    qtts_error e = {0};
    if (st_open_file(&st, test_path(CASE "/model.safetensors"), &e) != QTTS_OK) {
        test_skip("speaker encoder golden", "cannot open base_clone weights: %s", e.msg);
        return test_finish();
    }
    speaker_encoder_config cfg = speaker_encoder_default_config(1024);
    qtts_status s = speaker_encoder_config_from_file(&cfg, test_path(CASE "/config.json"), &e);
    CHECK("config.json speaker_encoder_config", s == QTTS_OK, "%s", e.msg);
    speaker_encoder *enc = NULL;
    s = speaker_encoder_load_config(&enc, &st, &cfg, 1, &e);
    CHECK("speaker_encoder_load", s == QTTS_OK, "%s", e.msg);
    if (s == QTTS_OK) {
        test_runs(enc);
        test_bad_input(enc);
    }
    test_config(&st, &cfg);
    speaker_encoder_free(enc);
    st_close(&st);
    return test_finish();
}
