/* The quality arm (../shared/BENCHMARKING.md, procedure 9): a lower-precision weight
 * format against the reference path on the same inputs, greedy, same seed.
 * Dataflow per case: reference run -> codes + waveform; test run fed the
 * reference codes (teacher forcing) -> per-codebook agreement; free test run
 * -> waveform -> log-mel correlation and SNR against the reference; speaker
 * embeddings (Base) of both outputs against the reference clip -> cosine;
 * optional recogniser (--asr-cmd) on both WAVs -> WER against the text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* ---------------------------------------------------------------- signal metrics */

static void fft(double *re, double *im, int n) { /* in place, radix 2, n a power of two */
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i];
            re[i] = re[j], re[j] = t;
            t = im[i], im[i] = im[j], im[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        const double a = -2 * 3.14159265358979323846 / len;
        const double wr = cos(a), wi = sin(a);
        for (int i = 0; i < n; i += len) {
            double cr = 1, ci = 0;
            for (int k = 0; k < len / 2; k++) {
                const int p = i + k, q = i + k + len / 2;
                const double xr = re[q] * cr - im[q] * ci, xi = re[q] * ci + im[q] * cr;
                re[q] = re[p] - xr, im[q] = im[p] - xi;
                re[p] += xr, im[p] += xi;
                const double t = cr * wr - ci * wi;
                ci = cr * wi + ci * wr;
                cr = t;
            }
        }
    }
}

#define MEL_NFFT 1024
#define MEL_HOP 256
#define MEL_BANDS 80

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* log-mel [frames][80] of x (24 kHz): Hann 1024, hop 256, HTK mel 0-12 kHz. */
static double *logmel(const float *x, size_t n, int *n_frames) {
    const int nb = MEL_NFFT / 2 + 1;
    const int nf = n >= MEL_NFFT ? (int)((n - MEL_NFFT) / MEL_HOP) + 1 : 0;
    *n_frames = nf;
    double *out = malloc(sizeof(double) * (size_t)(nf > 0 ? nf : 1) * MEL_BANDS);
    double *fb = calloc((size_t)MEL_BANDS * nb, sizeof(double));
    double re[MEL_NFFT], im[MEL_NFFT], win[MEL_NFFT];
    if (!out || !fb) {
        free(out), free(fb);
        *n_frames = 0;
        return NULL;
    }
    double pts[MEL_BANDS + 2];
    for (int i = 0; i < MEL_BANDS + 2; i++) pts[i] = mel_to_hz(hz_to_mel(12000.0) * i / (MEL_BANDS + 1));
    for (int m = 0; m < MEL_BANDS; m++)
        for (int k = 0; k < nb; k++) {
            const double f = k * 24000.0 / MEL_NFFT;
            const double up = (f - pts[m]) / (pts[m + 1] - pts[m]), down = (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]);
            fb[m * nb + k] = fmax(0, fmin(up, down));
        }
    for (int i = 0; i < MEL_NFFT; i++) win[i] = 0.5 - 0.5 * cos(2 * 3.14159265358979323846 * i / MEL_NFFT);
    for (int t = 0; t < nf; t++) {
        for (int i = 0; i < MEL_NFFT; i++) re[i] = x[(size_t)t * MEL_HOP + i] * win[i], im[i] = 0;
        fft(re, im, MEL_NFFT);
        for (int m = 0; m < MEL_BANDS; m++) {
            double e = 0;
            for (int k = 0; k < nb; k++)
                if (fb[m * nb + k] > 0) e += fb[m * nb + k] * sqrt(re[k] * re[k] + im[k] * im[k]);
            out[(size_t)t * MEL_BANDS + m] = log(fmax(e, 1e-5));
        }
    }
    free(fb);
    return out;
}

double quality_logmel_corr(const float *a, const float *b, size_t n) {
    int na, nb;
    double *ma = logmel(a, n, &na), *mb = logmel(b, n, &nb);
    double r = NAN;
    if (ma && mb && na > 0 && na == nb) {
        const size_t k = (size_t)na * MEL_BANDS;
        /* floor both at 80 dB below the louder peak, so that silent bands
         * (log of nothing) do not dominate the correlation */
        double peak = -1e300;
        for (size_t i = 0; i < k; i++) peak = fmax(peak, fmax(ma[i], mb[i]));
        const double floor_log = peak - 80.0 / 20.0 * log(10.0);
        for (size_t i = 0; i < k; i++) ma[i] = fmax(ma[i], floor_log), mb[i] = fmax(mb[i], floor_log);
        double sa = 0, sb = 0;
        for (size_t i = 0; i < k; i++) sa += ma[i], sb += mb[i];
        sa /= k, sb /= k;
        double cab = 0, caa = 0, cbb = 0;
        for (size_t i = 0; i < k; i++) {
            const double x = ma[i] - sa, y = mb[i] - sb;
            cab += x * y, caa += x * x, cbb += y * y;
        }
        r = caa > 0 && cbb > 0 ? cab / sqrt(caa * cbb) : (caa == cbb ? 1.0 : 0.0);
    }
    free(ma);
    free(mb);
    return r;
}

double quality_logmel_l1(const float *a, const float *b, size_t n) {
    int na, nb;
    double *ma = logmel(a, n, &na), *mb = logmel(b, n, &nb);
    double r = NAN;
    if (ma && mb && na > 0 && na == nb) {
        const size_t k = (size_t)na * MEL_BANDS;
        double peak = -1e300, s = 0;
        for (size_t i = 0; i < k; i++) peak = fmax(peak, fmax(ma[i], mb[i]));
        const double floor_log = peak - 80.0 / 20.0 * log(10.0); /* the floor of quality_logmel_corr */
        for (size_t i = 0; i < k; i++) s += fabs(fmax(ma[i], floor_log) - fmax(mb[i], floor_log));
        r = s / k;
    }
    free(ma);
    free(mb);
    return r;
}

double quality_snr_db(const float *ref, const float *test, size_t n) {
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)ref[i] - test[i];
        s += (double)ref[i] * ref[i];
        e += d * d;
    }
    if (n == 0) return NAN;
    if (e == 0) return INFINITY;
    return 10 * log10(s / e);
}

double quality_cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : NAN;
}

/* ---------------------------------------------------------------- speaker, ASR */

int quality_speaker_embedding(qtts_model *model, const float *pcm, size_t n, float *emb, int max, char *err,
                              size_t es) {
    qtts_voice_params vp = qtts_voice_default_params();
    vp.xvector_only = 1;
    qtts_voice *v = NULL;
    if (qtts_voice_from_pcm(model, pcm, n, 24000, &vp, &v, err, es)) return -1;
    unsigned char *data = NULL;
    size_t size = 0;
    int len = -1;
    if (qtts_voice_save_memory(v, &data, &size, err, es) == QTTS_OK && size >= 64) {
        /* saved-voice layout v1 (docs/API.md): u32 x-vector length at 60, f32 values from 64 */
        const uint32_t x = (uint32_t)data[60] | (uint32_t)data[61] << 8 | (uint32_t)data[62] << 16 |
                           (uint32_t)data[63] << 24;
        if (x > 0 && (int)x <= max && 64 + 4 * (size_t)x <= size) {
            for (uint32_t i = 0; i < x; i++) {
                const unsigned char *p = data + 64 + 4 * i;
                const uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                memcpy(&emb[i], &u, 4);
            }
            len = (int)x;
        } else {
            snprintf(err, es, "unexpected voice layout (x-vector length %u)", x);
        }
    }
    free(data);
    qtts_voice_free(v);
    return len;
}

char *asr_transcribe(const char *cmd, const char *wav, char *err, size_t es) {
    size_t cap = strlen(cmd) + 4 * strlen(wav) + 64, l = 0;
    char *full = malloc(cap);
    if (!full) return NULL;
    int replaced = 0;
    for (const char *p = cmd; *p;) {
        if (strncmp(p, "{wav}", 5) == 0) {
            full[l++] = '\'';
            for (const char *w = wav; *w; w++) {
                if (*w == '\'') {
                    memcpy(full + l, "'\\''", 4);
                    l += 4;
                } else full[l++] = *w;
            }
            full[l++] = '\'';
            p += 5;
            replaced = 1;
        } else full[l++] = *p++;
    }
    full[l] = 0;
    if (!replaced) {
        snprintf(err, es, "--asr-cmd must contain {wav}");
        free(full);
        return NULL;
    }
    FILE *p = popen(full, "r");
    free(full);
    if (!p) {
        snprintf(err, es, "cannot run the recogniser");
        return NULL;
    }
    size_t n = 0, c = 1024;
    char *out = malloc(c);
    int ch;
    while (out && (ch = fgetc(p)) != EOF) {
        if (n + 2 > c) {
            char *q = realloc(out, c *= 2);
            if (!q) break;
            out = q;
        }
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
        if (ch == ' ' && (n == 0 || out[n - 1] == ' ')) continue;
        out[n++] = (char)ch;
    }
    const int rc = pclose(p);
    if (!out) return NULL;
    while (n > 0 && out[n - 1] == ' ') n--;
    out[n] = 0;
    if (rc != 0) {
        snprintf(err, es, "the recogniser exited with status %d", rc);
        free(out);
        return NULL;
    }
    return out;
}

static int write_wav(const char *path, const float *pcm, size_t n) {
    qtts_audio_writer *w = NULL;
    char err[256];
    if (qtts_audio_writer_open(&w, path, QTTS_FILE_WAV, QTTS_SAMPLE_S16, 24000, err, sizeof err)) return -1;
    int rc = qtts_audio_writer_write(w, pcm, n) ? -1 : 0;
    if (qtts_audio_writer_close(w)) rc = -1;
    return rc;
}

/* ---------------------------------------------------------------- driver */

typedef struct ref_out {
    float *pcm;
    size_t n;
    int32_t *codes;
    int n_frames;
    double wer;
    char hyp[256];
    double spk;
    char err[256];
} ref_out;

static void log_quiet(qtts_log_level level, const char *msg, void *user) {
    (void)level, (void)msg, (void)user;
}

static qtts_model *load(const char *dir, const char *weights, int n_threads, const bench_backend *be, char *err,
                        size_t es) {
    qtts_model_params mp = qtts_model_default_params();
    bench_apply_backend(be, &mp);
    const char *canon;
    if (bench_parse_weights(weights, &mp.weights, &canon)) {
        snprintf(err, es, "unknown weight format %s", weights);
        return NULL;
    }
    mp.n_threads = n_threads;
    mp.log = log_quiet;
    qtts_model *m = NULL;
    if (qtts_model_load(&m, dir, &mp, err, es)) return NULL;
    return m;
}

static void asr_score(const quality_options *o, const bench_case *c, const char *tag, const char *wtag,
                      const float *pcm, size_t n, double *wer, char *hyp, size_t hn) {
    *wer = NAN;
    if (!o->asr_cmd) return;
    char path[4096];
    if (o->wav_dir) snprintf(path, sizeof path, "%s/%s_%s_%s.wav", o->wav_dir, c->name, tag, wtag);
    else snprintf(path, sizeof path, "/tmp/qtts-bench-%d-%s-%s.wav", (int)getpid(), c->name, tag);
    char err[256];
    if (write_wav(path, pcm, n)) {
        snprintf(hyp, hn, "(cannot write %.200s)", path);
        return;
    }
    char *t = asr_transcribe(o->asr_cmd, path, err, sizeof err);
    if (!o->wav_dir) unlink(path);
    if (!t) {
        snprintf(hyp, hn, "(recogniser failed: %.200s)", err);
        return;
    }
    snprintf(hyp, hn, "%s", t);
    *wer = wer_compute(c->text, t, NULL, NULL);
    free(t);
}

int quality_run(const char *dir, const char *const *weights, int n_weights, const bench_case *const *cases,
                int n_cases, const quality_options *o, bench_report *r) {
    char err[512];
    qtts_model *ref = load(dir, o->ref_weights, o->n_threads, &o->backend, err, sizeof err);
    if (!ref) {
        fprintf(stderr, "quality: %s (%s): %s\n", dir, o->ref_weights, err);
        return -1;
    }
    qtts_model_info info;
    qtts_model_get_info(ref, &info);
    const int base = info.type == QTTS_MODEL_BASE;
    float *clip;
    size_t n_clip;
    const char *transcript;
    bench_ref_clip(&clip, &n_clip, &transcript);
    float clip_emb[8192];
    int emb_n = -1;
    if (base) emb_n = quality_speaker_embedding(ref, clip, n_clip, clip_emb, 8192, err, sizeof err);
    /* voices made once with the reference model, handed to the others as bytes */
    unsigned char *vx = NULL, *vi = NULL;
    size_t nvx = 0, nvi = 0;
    qtts_voice *ref_vx = NULL, *ref_vi = NULL;
    if (base) {
        qtts_voice_params vp = qtts_voice_default_params();
        vp.xvector_only = 1;
        if (!qtts_voice_from_pcm(ref, clip, n_clip, 24000, &vp, &ref_vx, err, sizeof err))
            qtts_voice_save_memory(ref_vx, &vx, &nvx, err, sizeof err);
        vp = qtts_voice_default_params();
        vp.ref_text = transcript;
        if (!qtts_voice_from_pcm(ref, clip, n_clip, 24000, &vp, &ref_vi, err, sizeof err))
            qtts_voice_save_memory(ref_vi, &vi, &nvi, err, sizeof err);
    }
    ref_out *R = calloc((size_t)(n_cases > 0 ? n_cases : 1), sizeof *R);
    bench_config cfg = {dir, 0, o->ref_weights, o->n_threads, 1, 4, QTTS_TEXT_MODE_DEFAULT, "default",
                        BENCH_DECODE_INLINE};
    for (int ci = 0; ci < n_cases && R; ci++) {
        const bench_case *c = cases[ci];
        if (c->clone && !base) {
            snprintf(R[ci].err, sizeof R[ci].err, "skipped: the clone case needs a Base model");
            continue;
        }
        run_request rq = {c, o->frames, o->seed, 1, c->clone ? ref_vi : ref_vx, NULL, 0, 1, 1};
        run_output out;
        if (bench_run_once(ref, &cfg, &rq, 0, &out)) {
            snprintf(R[ci].err, sizeof R[ci].err, "reference run: %.200s", out.err);
            run_output_free(&out);
            continue;
        }
        R[ci].pcm = out.pcm, R[ci].n = out.n_pcm, R[ci].codes = out.codes, R[ci].n_frames = out.n_codes_frames;
        R[ci].spk = NAN;
        if (emb_n > 0) {
            float e[8192];
            if (quality_speaker_embedding(ref, R[ci].pcm, R[ci].n, e, 8192, err, sizeof err) == emb_n)
                R[ci].spk = quality_cosine(e, clip_emb, emb_n);
        }
        asr_score(o, c, "ref", o->ref_weights, R[ci].pcm, R[ci].n, &R[ci].wer, R[ci].hyp, sizeof R[ci].hyp);
    }
    int rc = 0;
    for (int wi = 0; wi < n_weights && R; wi++) {
        const int is_ref = strcmp(weights[wi], o->ref_weights) == 0;
        if (is_ref && n_weights > 1) continue; /* the reference against itself only when nothing else is asked */
        qtts_model *tm = load(dir, weights[wi], o->n_threads, &o->backend, err, sizeof err);
        if (!tm) {
            fprintf(stderr, "quality: %s (%s): %s\n", dir, weights[wi], err);
            rc = -1;
            continue;
        }
        qtts_voice *tvx = NULL, *tvi = NULL;
        if (vx) qtts_voice_load_memory(tm, vx, nvx, "bench voice", &tvx, err, sizeof err);
        if (vi) qtts_voice_load_memory(tm, vi, nvi, "bench ICL voice", &tvi, err, sizeof err);
        bench_config tcfg = cfg;
        tcfg.weights_name = weights[wi];
        for (int ci = 0; ci < n_cases; ci++) {
            const bench_case *c = cases[ci];
            quality_record *qs = realloc(r->q, sizeof *r->q * (size_t)(r->n_q + 1));
            if (!qs) break;
            r->q = qs;
            quality_record *q = &r->q[r->n_q++];
            memset(q, 0, sizeof *q);
            snprintf(q->model_name, sizeof q->model_name, "%s", strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
            if (!q->model_name[0]) snprintf(q->model_name, sizeof q->model_name, "%s", dir);
            snprintf(q->size_name, sizeof q->size_name, "%s", info.size_name);
            snprintf(q->type_name, sizeof q->type_name, "%s", info.type_name);
            snprintf(q->weights, sizeof q->weights, "%s", weights[wi]);
            snprintf(q->ref_weights, sizeof q->ref_weights, "%s", o->ref_weights);
            snprintf(q->case_name, sizeof q->case_name, "%s", c->name);
            snprintf(q->language, sizeof q->language, "%s", c->language);
            q->frames = o->frames;
            q->mel_corr = q->snr_db = q->spk_sim_ref = q->spk_sim_test = q->wer_ref = q->wer_test = q->agree_mean =
                NAN;
            for (int g = 0; g < 16; g++) q->agree[g] = NAN;
            if (R[ci].err[0]) {
                snprintf(q->error, sizeof q->error, "%s", R[ci].err);
                continue;
            }
            const qtts_voice *voice = c->clone ? tvi : tvx;
            /* teacher forcing: the reference codes fed back, the test path's own choices compared */
            run_request tq = {c, R[ci].n_frames, o->seed, 1, voice, R[ci].codes, R[ci].n_frames, 0, 0};
            run_output out;
            if (bench_run_once(tm, &tcfg, &tq, 0, &out)) {
                snprintf(q->error, sizeof q->error, "teacher-forced run: %.200s", out.err);
                run_output_free(&out);
                continue;
            }
            q->n_groups = info.n_code_groups < 16 ? info.n_code_groups : 16;
            q->teacher_frames = out.stats.teacher_frames;
            double sum = 0;
            for (int g = 0; g < q->n_groups; g++) {
                q->agree[g] = q->teacher_frames > 0 ? (double)out.stats.teacher_agree[g] / q->teacher_frames : NAN;
                sum += q->agree[g];
            }
            q->agree_mean = sum / q->n_groups;
            run_output_free(&out);
            /* free run of the test path */
            run_request fq = {c, R[ci].n_frames, o->seed, 1, voice, NULL, 0, 1, 0};
            if (bench_run_once(tm, &tcfg, &fq, 0, &out)) {
                snprintf(q->error, sizeof q->error, "free run: %.200s", out.err);
                run_output_free(&out);
                continue;
            }
            const size_t n = out.n_pcm < R[ci].n ? out.n_pcm : R[ci].n;
            q->mel_corr = quality_logmel_corr(R[ci].pcm, out.pcm, n);
            q->snr_db = quality_snr_db(R[ci].pcm, out.pcm, n);
            q->spk_sim_ref = R[ci].spk;
            if (emb_n > 0) {
                float e[8192];
                if (quality_speaker_embedding(ref, out.pcm, out.n_pcm, e, 8192, err, sizeof err) == emb_n)
                    q->spk_sim_test = quality_cosine(e, clip_emb, emb_n);
            }
            q->wer_ref = R[ci].wer;
            snprintf(q->hyp_ref, sizeof q->hyp_ref, "%s", R[ci].hyp);
            asr_score(o, c, "test", weights[wi], out.pcm, out.n_pcm, &q->wer_test, q->hyp_test, sizeof q->hyp_test);
            run_output_free(&out);
        }
        qtts_voice_free(tvx);
        qtts_voice_free(tvi);
        qtts_model_free(tm);
    }
    for (int ci = 0; ci < n_cases && R; ci++) {
        free(R[ci].pcm);
        free(R[ci].codes);
    }
    free(R);
    free(vx);
    free(vi);
    qtts_voice_free(ref_vx);
    qtts_voice_free(ref_vi);
    free(clip);
    qtts_model_free(ref);
    return rc;
}
