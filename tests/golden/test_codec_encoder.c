/* Golden test of the speech-tokenizer encoder (Mimi) against the official
 * fp32 reference (base_clone case): every enc_* stage within max|d|/max|ref|
 * <= 1e-5 and ref_codes exactly, for the runs that hold them; plus input
 * validation, load errors, frame counts and causality (a prefix encodes to
 * the same first frames). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "model/codec_encoder.h"
#include "model/codec_encoder_impl.h"
#include "util/dtype.h"
#include "npy.h"
#include "test.h"

#define TOL 1e-5

static const char *const STAGES[] = {"enc_seanet_out", "enc_transformer_out", "enc_downsample_out",
                                     "enc_semantic_proj_out", "enc_acoustic_proj_out"};
#define N_STAGES 5

typedef struct trace_store {
    float *data[N_STAGES];
    int rows[N_STAGES], cols[N_STAGES];
} trace_store;

static void on_trace(void *user, const char *stage, const float *data, int rows, int cols) {
    trace_store *s = user;
    for (int i = 0; i < N_STAGES; i++)
        if (strcmp(stage, STAGES[i]) == 0) {
            free(s->data[i]);
            s->data[i] = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
            if (s->data[i]) memcpy(s->data[i], data, sizeof(float) * (size_t)rows * (size_t)cols);
            s->rows[i] = rows;
            s->cols[i] = cols;
        }
}

static void trace_free(trace_store *s) {
    for (int i = 0; i < N_STAGES; i++) free(s->data[i]);
    memset(s, 0, sizeof *s);
}

static int load_npy(const char *name, const char *path, npy_array *a) {
    char err[256];
    if (npy_load(path, a, err, sizeof err) != 0) {
        test_report(name, 0, "cannot load %s: %s", path, err);
        return -1;
    }
    return 0;
}

static void check_run(const codec_encoder *enc, const char *tag, const char *run_name) {
    char name[256], run[160];
    snprintf(run, sizeof run, "%s%s", tag, run_name);
    npy_array audio = {0}, ref_codes = {0};
    snprintf(name, sizeof name, "%s/load_inputs", run);
    if (load_npy(name, test_path("golden/data/base_clone/golden/%s/ref_audio.npy", run_name), &audio)) return;
    if (load_npy(name, test_path("golden/data/base_clone/golden/%s/ref_codes.npy", run_name), &ref_codes)) {
        npy_free(&audio);
        return;
    }
    trace_store tr = {0};
    int32_t *codes = NULL;
    int n_frames = 0;
    qtts_error e = {0};
    qtts_status st = codec_encoder_encode_traced(enc, audio.f32, (size_t)audio.n, &codes, &n_frames, on_trace, &tr, &e);
    snprintf(name, sizeof name, "%s/encode", run);
    CHECK(name, st == QTTS_OK, "status %d: %s", st, e.msg);
    if (st == QTTS_OK) {
        for (int i = 0; i < N_STAGES; i++) {
            npy_array g = {0};
            snprintf(name, sizeof name, "%s/%s", run, STAGES[i]);
            if (load_npy(name, test_path("golden/data/base_clone/golden/%s/%s.npy", run_name, STAGES[i]), &g)) continue;
            if (!tr.data[i] || g.ndim != 2 || g.shape[0] != tr.rows[i] || g.shape[1] != tr.cols[i]) {
                test_report(name, 0, "shape [%d, %d], golden [%ld, %ld]", tr.rows[i], tr.cols[i],
                            g.ndim > 0 ? g.shape[0] : -1L, g.ndim > 1 ? g.shape[1] : -1L);
            } else {
                double max_abs = 0;
                const double rel = rel_err(tr.data[i], g.f32, g.n, &max_abs);
                printf("# %-29s %-22s [%3ld x %3ld] max|d| %.3e  rel %.3e\n", run, STAGES[i], g.shape[0], g.shape[1],
                       max_abs, rel);
                CHECK(name, rel <= TOL, "max|d|/max|ref| = %.3e > %.0e (max|d| %.3e)", rel, TOL, max_abs);
            }
            npy_free(&g);
        }
        const int nq = codec_encoder_n_codebooks(enc);
        snprintf(name, sizeof name, "%s/ref_codes", run);
        if (ref_codes.ndim != 2 || ref_codes.shape[0] != n_frames || ref_codes.shape[1] != nq) {
            test_report(name, 0, "codes [%d, %d], golden [%ld, %ld]", n_frames, nq, ref_codes.shape[0],
                        ref_codes.ndim > 1 ? ref_codes.shape[1] : -1L);
        } else {
            int bad = 0, first = -1;
            for (long i = 0; i < ref_codes.n; i++)
                if (codes[i] != ref_codes.i64[i]) {
                    if (first < 0) first = (int)i;
                    bad++;
                }
            printf("# %-29s ref_codes              [%3d x %3d] %d mismatches\n", run, n_frames, nq, bad);
            CHECK(name, bad == 0, "%d of %ld codes differ; first at frame %d codebook %d: %d, golden %lld", bad,
                  ref_codes.n, first / nq, first % nq, first >= 0 ? codes[first] : 0,
                  first >= 0 ? (long long)ref_codes.i64[first] : 0LL);
        }
        /* Causality: the first half (a whole number of frames) encodes to the
         * same first frames, bit for bit. */
        const int spf = codec_encoder_samples_per_frame(enc);
        const int half_frames = n_frames / 2;
        if (half_frames > 0) {
            int32_t *pc = NULL;
            int pn = 0;
            st = codec_encoder_encode(enc, audio.f32, (size_t)half_frames * (size_t)spf, &pc, &pn, &e);
            snprintf(name, sizeof name, "%s/prefix_causal", run);
            CHECK(name, st == QTTS_OK && pn == half_frames && memcmp(pc, codes, sizeof(int32_t) * (size_t)pn * nq) == 0,
                  "status %d, %d frames (want %d), or the codes differ from the full encode", st, pn, half_frames);
            free(pc);
        }
    }
    free(codes);
    trace_free(&tr);
    npy_free(&audio);
    npy_free(&ref_codes);
}

static void check_input_errors(const codec_encoder *enc) {
    qtts_error e = {0};
    int32_t *codes = NULL;
    int nf = 0;
    float buf[8000];
    for (int i = 0; i < 8000; i++) buf[i] = 0.1f * sinf(0.01f * i);

    qtts_status st = codec_encoder_encode(enc, buf, 0, &codes, &nf, &e);
    CHECK("input/empty", st == QTTS_ERR_INPUT && codes == NULL && strstr(e.msg, "empty"), "status %d: %s", st, e.msg);
    printf("# empty: %s\n", e.msg);

    buf[1234] = NAN;
    st = codec_encoder_encode(enc, buf, 4000, &codes, &nf, &e);
    CHECK("input/nan", st == QTTS_ERR_INPUT && codes == NULL && strstr(e.msg, "1234") && strstr(e.msg, "NaN"),
          "status %d: %s", st, e.msg);
    printf("# nan: %s\n", e.msg);

    buf[1234] = 0.0f;
    buf[3999] = -INFINITY;
    st = codec_encoder_encode(enc, buf, 4000, &codes, &nf, &e);
    CHECK("input/inf", st == QTTS_ERR_INPUT && codes == NULL && strstr(e.msg, "infinite"), "status %d: %s", st, e.msg);
    buf[3999] = 0.0f;

    const size_t too_long = (size_t)CODEC_ENCODER_MAX_SECONDS * codec_encoder_sample_rate(enc) + 1;
    float *big = calloc(too_long, sizeof(float));
    if (big) {
        st = codec_encoder_encode(enc, big, too_long, &codes, &nf, &e);
        CHECK("input/too_long", st == QTTS_ERR_LIMIT && codes == NULL, "status %d: %s", st, e.msg);
        free(big);
    }

    /* Frame counts: ceil(n / 1920), including lengths that are not a whole
     * number of SEANet strides. */
    const size_t lens[] = {1, 959, 961, 1919, 1920, 1921, 3840 + 777};
    int ok = 1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        st = codec_encoder_encode(enc, buf, lens[i], &codes, &nf, &e);
        const int want = (int)((lens[i] + 1919) / 1920);
        int in_range = 1;
        for (int k = 0; st == QTTS_OK && k < nf * codec_encoder_n_codebooks(enc); k++)
            if (codes[k] < 0 || codes[k] >= 2048) in_range = 0;
        if (st != QTTS_OK || nf != want || !in_range) {
            ok = 0;
            printf("# n=%zu: status %d (%s), %d frames, want %d\n", lens[i], st, e.msg, nf, want);
        }
        free(codes);
        codes = NULL;
    }
    CHECK("input/frame_counts", ok, "see the lines above");
}

/* A copy of the base_clone speech_tokenizer folder with config.json replaced. */
static int make_dir_with_config(char *dir, size_t dir_size, const char *config) {
    snprintf(dir, dir_size, "/tmp/qtts_enc_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char path[512], target[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(config, f);
    fclose(f);
    const char *src = test_path("golden/data/base_clone/speech_tokenizer/model.safetensors");
    if (src[0] == '/') snprintf(target, sizeof target, "%s", src);
    else {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) return -1;
        snprintf(target, sizeof target, "%s/%s", cwd, src);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return symlink(target, path);
}

static void remove_dir(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* Replace the first occurrence of `from` in s (malloc'ed result). */
static char *replace(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    if (!p) return NULL;
    size_t n = strlen(s) - strlen(from) + strlen(to);
    char *r = malloc(n + 1);
    if (!r) return NULL;
    size_t k = (size_t)(p - s);
    memcpy(r, s, k);
    strcpy(r + k, to);
    strcat(r, p + strlen(from));
    return r;
}

static void check_load_errors(void) {
    codec_encoder *c = NULL;
    qtts_error e = {0};
    qtts_status st = codec_encoder_load(&c, test_path("golden/data/custom_voice/speech_tokenizer"), &e);
    CHECK("load/no_encoder_tensors", st == QTTS_ERR_UNSUPPORTED && c == NULL && strstr(e.msg, "no codec encoder") &&
                                         strstr(e.msg, "Base model"),
          "status %d: %s", st, e.msg);
    printf("# custom_voice: %s\n", e.msg);
    codec_encoder_free(c);

    st = codec_encoder_load(&c, test_path("golden/data/no_such_folder"), &e);
    CHECK("load/missing_dir", st == QTTS_ERR_IO && c == NULL, "status %d: %s", st, e.msg);

    char *cfg = read_text(test_path("golden/data/base_clone/speech_tokenizer/config.json"));
    if (!cfg) {
        test_report("load/bad_config", 0, "cannot read the base_clone speech tokenizer config");
        return;
    }
    struct {
        const char *name, *from, *to;
        qtts_status want;
        const char *needle;
    } cases[] = {
        /* hidden 48: the SEANet's last conv no longer fits */
        {"load/wrong_hidden", "\"hidden_size\": 32,\n    \"num_filters\"", "\"hidden_size\": 48,\n    \"num_filters\"",
         QTTS_ERR_MODEL, "encoder.encoder.layers.14.conv.weight"},
        /* a second semantic codebook that the file does not have */
        {"load/missing_codebook", "\"num_semantic_quantizers\": 1,\n    \"upsample_groups\"",
         "\"num_semantic_quantizers\": 2,\n    \"upsample_groups\"",
         QTTS_ERR_MODEL, "semantic_residual_vector_quantizer.layers.1.codebook"},
        {"load/no_encoder_config", "\"encoder_config\"", "\"encoder_config_x\"", QTTS_ERR_FORMAT, "encoder_config"},
        {"load/bad_json", "{", "{{", QTTS_ERR_FORMAT, "JSON"},
        {"load/frame_size", "\"encode_downsample_rate\": 1920", "\"encode_downsample_rate\": 960", QTTS_ERR_FORMAT,
         "encode_downsample_rate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *mod = replace(cfg, cases[i].from, cases[i].to);
        char dir[64];
        if (!mod || make_dir_with_config(dir, sizeof dir, mod) != 0) {
            test_report(cases[i].name, 0, "cannot prepare the test folder (pattern '%s' not found?)", cases[i].from);
            free(mod);
            continue;
        }
        c = NULL;
        st = codec_encoder_load(&c, dir, &e);
        CHECK(cases[i].name, st == cases[i].want && c == NULL && strstr(e.msg, cases[i].needle),
              "status %d (want %d): %s", st, cases[i].want, e.msg);
        printf("# %s: %s\n", cases[i].name, e.msg);
        codec_encoder_free(c);
        remove_dir(dir);
        free(mod);
    }
    free(cfg);
}

/* Write dst_dir/model.safetensors: src with every F32 tensor stored as BF16
 * (the golden weights are bf16-representable, so the values do not change). */
static int write_bf16_copy(const char *src, const char *dst_dir) {
    int rc = -1;
    FILE *f = fopen(src, "rb");
    unsigned char *buf = NULL;
    json_t *hdr = NULL, *out = NULL;
    char *text = NULL;
    FILE *o = NULL;
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    hdr = json_loadb((const char *)buf + 8, (size_t)hlen, 0, NULL);
    out = json_object();
    if (!hdr || !out) goto done;
    const unsigned char *data = buf + 8 + hlen;
    /* first pass: new header with BF16 dtypes and packed offsets */
    size_t off = 0;
    const char *key;
    json_t *v;
    json_object_foreach(hdr, key, v) {
        if (strcmp(key, "__metadata__") == 0) continue;
        json_t *offs = json_object_get(v, "data_offsets");
        const size_t b0 = (size_t)json_integer_value(json_array_get(offs, 0));
        const size_t b1 = (size_t)json_integer_value(json_array_get(offs, 1));
        const int f32 = strcmp(json_string_value(json_object_get(v, "dtype")), "F32") == 0;
        const size_t sz = f32 ? (b1 - b0) / 2 : b1 - b0;
        json_t *t = json_pack("{s:s, s:O, s:[I, I]}", "dtype", f32 ? "BF16" : json_string_value(json_object_get(v, "dtype")),
                              "shape", json_object_get(v, "shape"), "data_offsets", (json_int_t)off, (json_int_t)(off + sz));
        json_object_set_new(out, key, t);
        off += sz;
    }
    text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dst_dir);
    o = fopen(path, "wb");
    if (!text || !o) goto done;
    const uint64_t new_hlen = strlen(text);
    for (int i = 0; i < 8; i++) fputc((int)((new_hlen >> (8 * i)) & 0xff), o);
    fwrite(text, 1, (size_t)new_hlen, o);
    /* second pass, in the same (sorted) order as the header offsets */
    json_object_foreach(out, key, v) {
        json_t *sv = json_object_get(hdr, key);
        json_t *offs = json_object_get(sv, "data_offsets");
        const size_t b0 = (size_t)json_integer_value(json_array_get(offs, 0));
        const size_t b1 = (size_t)json_integer_value(json_array_get(offs, 1));
        if (strcmp(json_string_value(json_object_get(sv, "dtype")), "F32") == 0) {
            for (size_t k = b0; k < b1; k += 4) {
                float x;
                memcpy(&x, data + k, 4);
                const uint16_t h = f32_to_bf16(x);
                fwrite(&h, 2, 1, o);
            }
        } else {
            fwrite(data + b0, 1, b1 - b0, o);
        }
    }
    rc = 0;
done:
    if (o) fclose(o);
    fclose(f);
    free(buf);
    free(text);
    json_decref(hdr);
    json_decref(out);
    return rc;
}

/* The same goldens from BF16-stored weights: exercises the widening paths. */
static void check_bf16_weights(void) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/qtts_enc_XXXXXX");
    char *cfg = read_text(test_path("golden/data/base_clone/speech_tokenizer/config.json"));
    char path[512];
    int ok = cfg && mkdtemp(dir);
    if (ok) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "wb");
        ok = f && fputs(cfg, f) >= 0;
        if (f) fclose(f);
    }
    ok = ok && write_bf16_copy(test_path("golden/data/base_clone/speech_tokenizer/model.safetensors"), dir) == 0;
    free(cfg);
    if (!ok) {
        test_report("bf16/prepare", 0, "cannot write a BF16 copy of the speech tokenizer");
        return;
    }
    codec_encoder *enc = NULL;
    qtts_error e = {0};
    qtts_status st = codec_encoder_load(&enc, dir, &e);
    CHECK("bf16/load", st == QTTS_OK, "status %d: %s", st, e.msg);
    if (st == QTTS_OK) check_run(enc, "bf16/", "icl_stream_shortref_en");
    codec_encoder_free(enc);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

/* sqdist of codec_encoder_forward.c: four partial sums of squared
 * differences in double */
static double ref_sqdist(const float *e, const float *x, int d) {
    double s4[4] = {0, 0, 0, 0};
    int k = 0;
    for (; k + 4 <= d; k += 4)
        for (int l = 0; l < 4; l++) {
            const double t = (double)x[k + l] - (double)e[k + l];
            s4[l] += t * t;
        }
    for (; k < d; k++) {
        const double t = (double)x[k] - (double)e[k];
        s4[0] += t * t;
    }
    return (s4[0] + s4[1]) + (s4[2] + s4[3]);
}

/* enc_vq_nearest (scores by the table's f32 product, then exact compares)
 * against the exhaustive search in double, first on ties, on seeded data
 * full of near ties: duplicate rows, rows one ulp apart, queries at the
 * rounded midpoints of two rows and on rows; every kernel table, 1 and 2
 * threads. */
static void check_vq_nearest(void) {
    enum { K = 301, D = 37, T = 120 };
    float *E = malloc(sizeof(float) * K * D), *R = malloc(sizeof(float) * T * D), *S = malloc(sizeof(float) * T * K);
    double e2[K];
    int32_t idx[T], want[T];
    uint32_t seed = 12345u;
    for (int i = 0; i < K * D; i++) {
        seed = seed * 1664525u + 1013904223u;
        E[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 4.0f;
    }
    memcpy(E + 1 * D, E + 0 * D, sizeof(float) * D); /* exact duplicate: row 0 must win */
    memcpy(E + 3 * D, E + 2 * D, sizeof(float) * D);
    E[3 * D + 5] = nextafterf(E[3 * D + 5], 10.0f); /* one ulp apart */
    for (int t = 0; t < T; t++) {
        float *r = R + (size_t)t * D;
        const int a = (t * 7) % K, b = (t * 13 + 1) % K;
        for (int k = 0; k < D; k++) {
            if (t % 3 == 0) r[k] = 0.5f * (E[(size_t)a * D + k] + E[(size_t)b * D + k]); /* near tie of a and b */
            else if (t % 3 == 1) r[k] = E[(size_t)a * D + k];                            /* on a row */
            else {
                seed = seed * 1664525u + 1013904223u;
                r[k] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 4.0f;
            }
        }
    }
    for (int t = 0; t < 4; t++) memcpy(R + (size_t)t * D, E + (size_t)(t % 4) * D, sizeof(float) * D);
    for (int j = 0; j < K; j++) {
        double a = 0;
        for (int k = 0; k < D; k++) a += (double)E[(size_t)j * D + k] * E[(size_t)j * D + k];
        e2[j] = a;
    }
    for (int t = 0; t < T; t++) {
        double best = INFINITY;
        for (int j = 0; j < K; j++) {
            const double m = ref_sqdist(E + (size_t)j * D, R + (size_t)t * D, D);
            if (m < best) best = m, want[t] = j;
        }
    }
    for (int scalar = 0; scalar <= 1; scalar++)
        for (int nt = 1; nt <= 2; nt++) {
            ops_ctx c;
            ops_init(&c, nt, scalar);
            enc_vq_nearest(&c, E, e2, K, D, R, T, S, idx);
            int bad = -1;
            for (int t = 0; t < T && bad < 0; t++)
                if (idx[t] != want[t]) bad = t;
            char name[64];
            snprintf(name, sizeof name, "vq_nearest/%s_t%d", c.k->name, nt);
            CHECK(name, bad < 0, "frame %d: %d, the exhaustive search %d", bad, bad >= 0 ? idx[bad] : 0,
                  bad >= 0 ? want[bad] : 0);
            ops_free(&c);
        }
    free(E), free(R), free(S);
}

int main(void) {
    check_vq_nearest();
    codec_encoder *enc = NULL;
    qtts_error e = {0};
    qtts_status st = codec_encoder_load(&enc, test_path("golden/data/base_clone/speech_tokenizer"), &e);
    CHECK("load/base_clone", st == QTTS_OK, "status %d: %s", st, e.msg);
    if (st == QTTS_OK) {
        CHECK("load/geometry",
              codec_encoder_n_codebooks(enc) == 16 && codec_encoder_sample_rate(enc) == 24000 &&
                  codec_encoder_samples_per_frame(enc) == 1920,
              "%d codebooks, %d Hz, %d samples per frame", codec_encoder_n_codebooks(enc),
              codec_encoder_sample_rate(enc), codec_encoder_samples_per_frame(enc));
        check_run(enc, "", "icl_stream_en");
        check_run(enc, "", "icl_stream_shortref_en");
        check_run(enc, "", "icl_nonstream_auto");
        check_input_errors(enc);
    }
    codec_encoder_free(enc);
    codec_encoder_free(NULL);
    check_load_errors();
    check_bf16_weights();
    return test_finish();
}
