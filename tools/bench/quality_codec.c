/* The codec arm of the quality measurements: the codec decoder in a lower
 * precision (qtts_model_params.codec_weights) against the f32 decoder on the
 * same codes, so the language model plays no part.
 * Dataflow per model: codes (each DIR/golden/<run>/codes.npy, then random
 * codes) -> qtts_decode_codes with f32 and with each format -> waveform SNR,
 * log-mel correlation and log-mel L1 -> a markdown table. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_CASES 64

typedef struct codec_case {
    char name[288];
    int32_t *codes;
    int n_frames;
} codec_case;

static qtts_context *open_ctx(const char *dir, qtts_codec_weights w, int n_threads, qtts_model **m, char *err,
                              size_t es) {
    qtts_model_params mp = qtts_model_default_params();
    mp.n_threads = n_threads;
    mp.codec_weights = w;
    mp.backend = QTTS_BACKEND_CPU;
    if (qtts_model_load(m, dir, &mp, err, es)) return NULL;
    qtts_context_params cp = qtts_context_default_params();
    qtts_context *ctx = NULL;
    if (qtts_context_new(*m, &cp, &ctx, err, es)) {
        qtts_model_free(*m);
        *m = NULL;
        return NULL;
    }
    return ctx;
}

/* A [n][G] little-endian int64 .npy (v1/v2, C order), the golden codes'
 * format, as int32 in [0, K); NULL otherwise. */
static int32_t *read_codes_npy(const char *path, int G, int K, int *n_frames) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char h[12];
    int32_t *codes = NULL;
    if (fread(h, 1, 10, f) == 10 && !memcmp(h, "\x93NUMPY", 6)) {
        size_t hl = h[8] | (size_t)h[9] << 8;
        if (h[6] >= 2 && fread(h + 10, 1, 2, f) == 2) hl |= (size_t)h[10] << 16 | (size_t)h[11] << 24;
        char *hd = hl < 65536 ? calloc(1, hl + 1) : NULL;
        long rows = 0, cols = 0;
        const char *sh;
        if (hd && fread(hd, 1, hl, f) == hl && strstr(hd, "'<i8'") && strstr(hd, "'fortran_order': False") &&
            (sh = strstr(hd, "'shape': (")) && sscanf(sh, "'shape': (%ld, %ld)", &rows, &cols) == 2 && cols == G &&
            rows > 0 && rows < 1000000) {
            int64_t *v = malloc(sizeof(int64_t) * rows * cols);
            codes = malloc(sizeof(int32_t) * rows * cols);
            int ok = v && codes && fread(v, sizeof(int64_t), (size_t)(rows * cols), f) == (size_t)(rows * cols);
            for (long i = 0; ok && i < rows * cols; i++) {
                ok = v[i] >= 0 && v[i] < K;
                codes[i] = (int32_t)v[i];
            }
            free(v);
            if (!ok) free(codes), codes = NULL;
            else *n_frames = (int)rows;
        }
        free(hd);
    }
    fclose(f);
    return codes;
}

static int load_cases(const char *dir, int frames, uint64_t seed, int G, int K, codec_case *cs) {
    int n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/golden", dir);
    DIR *dd = opendir(path);
    struct dirent *de;
    while (dd && (de = readdir(dd)) && n < MAX_CASES - 1) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/golden/%s/codes.npy", dir, de->d_name);
        codec_case *c = &cs[n];
        if ((c->codes = read_codes_npy(path, G, K, &c->n_frames))) {
            snprintf(c->name, sizeof c->name, "%s", de->d_name);
            n++;
        }
    }
    if (dd) closedir(dd);
    /* sorted by name, so tables of different runs line up */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(cs[j - 1].name, cs[j].name) > 0; j--) {
            codec_case t = cs[j];
            cs[j] = cs[j - 1];
            cs[j - 1] = t;
        }
    codec_case *c = &cs[n];
    c->n_frames = frames;
    c->codes = malloc(sizeof(int32_t) * (size_t)frames * G);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int i = 0; c->codes && i < frames * G; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        c->codes[i] = (int32_t)((s >> 33) % (uint64_t)K);
    }
    snprintf(c->name, sizeof c->name, "random_%d", frames);
    if (c->codes) n++;
    return n;
}

int quality_codec_run(const char *dir, const char *const *codec_weights, int n, int frames, int n_threads,
                      uint64_t seed, FILE *out) {
    char err[512];
    qtts_model *mref = NULL;
    qtts_context *ref = open_ctx(dir, QTTS_CODEC_F32, n_threads, &mref, err, sizeof err);
    if (!ref) {
        fprintf(stderr, "quality: %s: %s\n", dir, err);
        return -1;
    }
    qtts_model_info info;
    qtts_model_get_info(mref, &info);
    codec_case cs[MAX_CASES];
    const int nc = load_cases(dir, frames, seed, info.n_code_groups, info.codebook_size, cs);
    float *rpcm[MAX_CASES] = {0};
    size_t rn[MAX_CASES] = {0};
    for (int c = 0; c < nc; c++)
        if (qtts_decode_codes(ref, cs[c].codes, cs[c].n_frames, &rpcm[c], &rn[c])) rpcm[c] = NULL;
    fprintf(out, "\nCodec decoder against f32 on the same codes: %s (%s kernels)\n\n", dir, info.kernels);
    fprintf(out, "| codec_weights | case | frames | SNR dB | log-mel corr | log-mel L1 | accept |\n");
    fprintf(out, "|---|---|---:|---:|---:|---:|---|\n");
    int below = 0;
    for (int f = 0; f < n; f++) {
        const int w = qtts_codec_weights_from_name(codec_weights[f]);
        qtts_model *m = NULL;
        qtts_context *ctx = w < 0 ? NULL : open_ctx(dir, (qtts_codec_weights)w, n_threads, &m, err, sizeof err);
        if (!ctx) {
            fprintf(out, "| %s | (%s) | | | | | |\n", codec_weights[f], w < 0 ? "unknown format" : err);
            below = below >= 0 ? below + 1 : below;
            continue;
        }
        for (int c = 0; c < nc; c++) {
            float *pcm = NULL;
            size_t np = 0;
            if (!rpcm[c] || qtts_decode_codes(ctx, cs[c].codes, cs[c].n_frames, &pcm, &np) || np != rn[c]) {
                fprintf(out, "| %s | %s | %d | (decode failed) | | | |\n", codec_weights[f], cs[c].name, cs[c].n_frames);
                free(pcm);
                below++;
                continue;
            }
            const double snr = quality_snr_db(rpcm[c], pcm, np), corr = quality_logmel_corr(rpcm[c], pcm, np),
                         l1 = quality_logmel_l1(rpcm[c], pcm, np);
            const int ok = snr >= 30.0 && corr >= 0.999;
            below += !ok;
            fprintf(out, "| %s | %s | %d | %.1f | %.5f | %.4f | %s |\n", codec_weights[f], cs[c].name,
                    cs[c].n_frames, snr, corr, l1, ok ? "yes" : "NO");
            free(pcm);
        }
        qtts_context_free(ctx);
        qtts_model_free(m);
    }
    for (int c = 0; c < nc; c++) free(rpcm[c]), free(cs[c].codes);
    qtts_context_free(ref);
    qtts_model_free(mref);
    return below;
}
