/* ECAPA-TDNN speaker encoder of the Base models (see speaker_encoder.h).
 * Dataflow: pcm -> log-mel [T][mel] -> block0 TDNN [T][C0] -> SE-Res2Net x (n-2), each
 * [T][Ci] -> concat -> MFA TDNN [T][CL] -> attentive statistics pooling [2 CL] -> fc [enc_dim].
 * Must match Qwen3TTSSpeakerEncoder (QwenLM/Qwen3-TTS qwen_tts/core/models/modeling_qwen3_tts.py).
 *
 * Activations are time-major [T][C] so that every convolution is one ops_matmul:
 * a kernel-1 conv multiplies [T][Cin] by the stored weight [Cout][Cin]; a wider conv
 * first gathers reflect-padded taps into im2col rows [t][Cin*K] (index i*K + tap, the
 * PyTorch weight layout [Cout][Cin][K] flattened), in chunks of CONV_CHUNK frames.
 * Weights stay in the mmap in their stored dtype; biases are widened to f32 at load.
 * Where time goes (real geometry, 10 s = 937 frames, 5.0 GMAC): MFA 1536x1536 (44%), the
 * three SE-Res2Net blocks (34%), ASP 4608->128->1536 (15%), block0 (6%); the mel is ~10 ms.
 * All of it is ops_matmul: 4.4 s with the scalar reference kernel (1.1 GMAC/s, one
 * thread), so it speeds up with the op layer's kernels. */
#include "model/speaker_encoder.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "model/mel.h"

#define CONV_CHUNK 256      /* frames per im2col / ASP gather chunk (bounds scratch) */
#define ASP_EPS 1e-12       /* AttentiveStatisticsPooling.eps, clamp before sqrt */
#define SPK_PREFIX "speaker_encoder."

/* One Conv1d (stride 1, "same" reflect padding), optionally followed by ReLU. */
typedef struct conv_layer {
    qt_mat w;  /* [cout][cin*k]: the stored [cout][cin][k] tensor, in place */
    float *b;  /* [cout] f32, owned */
    int cin, cout, k, dil;
} conv_layer;

/* SqueezeExcitationRes2NetBlock. */
typedef struct se_block {
    conv_layer tdnn1;   /* C_prev -> C, k 1, + ReLU */
    conv_layer *res2;   /* [scale-1] C/scale -> C/scale, kernel k_i, dilation d_i, + ReLU */
    conv_layer tdnn2;   /* C -> C, k 1, + ReLU */
    conv_layer se1;     /* C -> se_channels, k 1, + ReLU (on the time mean) */
    conv_layer se2;     /* se_channels -> C, k 1, + sigmoid */
} se_block;

struct speaker_encoder {
    speaker_encoder_config cfg;
    ops_ctx ops;
    mel_params mel;
    float *mel_basis;    /* [mel_dim][n_fft/2+1] */
    conv_layer block0;   /* mel_dim -> C0, kernel k0, dilation d0, + ReLU */
    int n_se;            /* n_layers - 2 */
    se_block *se;        /* [n_se] */
    conv_layer mfa;      /* CL -> CL, kernel kL, dilation dL, + ReLU */
    conv_layer asp_tdnn; /* 3 CL -> attention_channels, k 1, + ReLU (then tanh) */
    conv_layer asp_conv; /* attention_channels -> CL, k 1 */
    conv_layer fc;       /* 2 CL -> enc_dim, k 1 */
    int min_frames;      /* every reflect pad must be < frames */
    int max_col;         /* widest im2col row (cin*k over convs with k > 1) */
};

/* ------------------------------------------------------------ config */

speaker_encoder_config speaker_encoder_default_config(int enc_dim) {
    speaker_encoder_config c = {
        .mel_dim = 128,
        .enc_dim = enc_dim,
        .n_layers = 5,
        .channels = {512, 512, 512, 512, 1536},
        .kernel_sizes = {5, 3, 3, 3, 1},
        .dilations = {1, 2, 3, 4, 1},
        .attention_channels = 128,
        .res2net_scale = 8,
        .se_channels = 128,
        .sample_rate = 24000,
    };
    return c;
}

static qtts_status json_int(const json_t *v, const char *key, int lo, int hi, int *out, qtts_error *e) {
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v)) d = json_real_value(v);
    else return err_set(e, QTTS_ERR_FORMAT, "speaker_encoder_config.%s: expected an integer", key);
    if (d != floor(d) || d < lo || d > hi)
        return err_set(e, QTTS_ERR_FORMAT, "speaker_encoder_config.%s = %g: expected an integer in [%d, %d]",
                       key, d, lo, hi);
    *out = (int)d;
    return QTTS_OK;
}

static qtts_status json_int_list(const json_t *v, const char *key, int lo, int hi, int *out, int *n,
                                 qtts_error *e) {
    if (!json_is_array(v))
        return err_set(e, QTTS_ERR_FORMAT, "speaker_encoder_config.%s: expected a list of integers", key);
    const size_t len = json_array_size(v);
    if (len < 3 || len > SPK_MAX_LAYERS)
        return err_set(e, QTTS_ERR_FORMAT, "speaker_encoder_config.%s: %zu entries, expected 3..%d", key,
                       len, SPK_MAX_LAYERS);
    for (size_t i = 0; i < len; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s[%zu]", key, i);
        qtts_status st = json_int(json_array_get(v, i), name, lo, hi, &out[i], e);
        if (st != QTTS_OK) return st;
    }
    *n = (int)len;
    return QTTS_OK;
}

qtts_status speaker_encoder_config_from_json(speaker_encoder_config *c, const struct json_t *obj,
                                             qtts_error *e) {
    if (!json_is_object(obj))
        return err_set(e, QTTS_ERR_FORMAT, "speaker_encoder_config: expected a JSON object");
    static const struct {
        const char *key;
        size_t off;
        int lo, hi;
    } scalars[] = {
        {"mel_dim", offsetof(speaker_encoder_config, mel_dim), 1, 4096},
        {"enc_dim", offsetof(speaker_encoder_config, enc_dim), 1, 65536},
        {"enc_attention_channels", offsetof(speaker_encoder_config, attention_channels), 1, 65536},
        {"enc_res2net_scale", offsetof(speaker_encoder_config, res2net_scale), 1, 64},
        {"enc_se_channels", offsetof(speaker_encoder_config, se_channels), 1, 65536},
        {"sample_rate", offsetof(speaker_encoder_config, sample_rate), 1, 384000},
    };
    speaker_encoder_config t = *c;
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        const json_t *v = json_object_get(obj, scalars[i].key);
        if (!v) continue;
        qtts_status st = json_int(v, scalars[i].key, scalars[i].lo, scalars[i].hi,
                                  (int *)((char *)&t + scalars[i].off), e);
        if (st != QTTS_OK) return st;
    }
    static const struct {
        const char *key;
        size_t off;
        int lo, hi;
    } lists[] = {
        {"enc_channels", offsetof(speaker_encoder_config, channels), 1, 65536},
        {"enc_kernel_sizes", offsetof(speaker_encoder_config, kernel_sizes), 1, 64},
        {"enc_dilations", offsetof(speaker_encoder_config, dilations), 1, 64},
    };
    /* A list that is absent keeps its current entries (n_layers of them); the official
     * constructor rejects lists of different lengths, and so do we. */
    int len[3];
    for (size_t i = 0; i < 3; i++) {
        len[i] = t.n_layers;
        const json_t *v = json_object_get(obj, lists[i].key);
        if (!v) continue;
        qtts_status st = json_int_list(v, lists[i].key, lists[i].lo, lists[i].hi,
                                       (int *)((char *)&t + lists[i].off), &len[i], e);
        if (st != QTTS_OK) return st;
    }
    if (len[0] != len[1] || len[0] != len[2])
        return err_set(e, QTTS_ERR_FORMAT,
                       "speaker_encoder_config: enc_channels, enc_kernel_sizes and enc_dilations have "
                       "%d, %d and %d entries; they must have the same length",
                       len[0], len[1], len[2]);
    t.n_layers = len[0];
    *c = t;
    return QTTS_OK;
}

qtts_status speaker_encoder_config_from_file(speaker_encoder_config *c, const char *path, qtts_error *e) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return err_set(e, json_error_code(&jerr) == json_error_cannot_open_file ? QTTS_ERR_IO : QTTS_ERR_FORMAT,
                       "%s:%d: %s", path, jerr.line, jerr.text);
    qtts_status st = QTTS_OK;
    const json_t *obj = json_object_get(root, "speaker_encoder_config");
    if (obj && !json_is_null(obj)) {
        st = speaker_encoder_config_from_json(c, obj, e);
        if (st != QTTS_OK) err_prefix(e, "%s: ", path);
    }
    json_decref(root);
    return st;
}

/* Structural checks the official constructor relies on. */
static qtts_status config_validate(const speaker_encoder_config *c, qtts_error *e) {
    const int n = c->n_layers;
    if (n < 3 || n > SPK_MAX_LAYERS)
        return err_set(e, QTTS_ERR_MODEL, "speaker encoder: %d layers, expected 3..%d", n, SPK_MAX_LAYERS);
    if (c->mel_dim < 1 || c->enc_dim < 1 || c->attention_channels < 1 || c->se_channels < 1 ||
        c->res2net_scale < 1)
        return err_set(e, QTTS_ERR_MODEL,
                       "speaker encoder: mel_dim %d, enc_dim %d, attention %d, se %d, res2net scale %d "
                       "must all be >= 1",
                       c->mel_dim, c->enc_dim, c->attention_channels, c->se_channels, c->res2net_scale);
    if (c->sample_rate != 24000)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "speaker encoder: sample_rate %d Hz; only 24000 Hz is supported", c->sample_rate);
    for (int i = 0; i < n; i++) {
        if (c->channels[i] < 1 || c->kernel_sizes[i] < 1 || c->dilations[i] < 1)
            return err_set(e, QTTS_ERR_MODEL,
                           "speaker encoder layer %d: channels %d, kernel %d, dilation %d must be >= 1", i,
                           c->channels[i], c->kernel_sizes[i], c->dilations[i]);
    }
    long cat = 0;
    for (int i = 1; i < n - 1; i++) {
        if (c->channels[i] != c->channels[i - 1])
            return err_set(e, QTTS_ERR_MODEL,
                           "speaker encoder block %d: %d channels in, %d out; the residual needs them equal",
                           i, c->channels[i - 1], c->channels[i]);
        if (c->channels[i] % c->res2net_scale != 0)
            return err_set(e, QTTS_ERR_UNSUPPORTED,
                           "speaker encoder block %d: %d channels not divisible by res2net scale %d", i,
                           c->channels[i], c->res2net_scale);
        cat += c->channels[i];
    }
    if (cat != c->channels[n - 1])
        return err_set(e, QTTS_ERR_MODEL,
                       "speaker encoder: MFA takes %d channels but the SE blocks give %ld",
                       c->channels[n - 1], cat);
    return QTTS_OK;
}

/* ------------------------------------------------------------ loading */

static qtts_status conv_load(conv_layer *l, const st_set *st, const char *name, int cout, int cin, int k,
                             int dil, qtts_error *e) {
    char wn[256], bn[256];
    snprintf(wn, sizeof wn, SPK_PREFIX "%s.weight", name);
    snprintf(bn, sizeof bn, SPK_PREFIX "%s.bias", name);
    const int64_t wshape[3] = {cout, cin, k}, bshape[1] = {cout};
    const st_tensor *w, *b;
    qtts_status s = st_get_float(st, wn, 3, wshape, &w, e);
    if (s != QTTS_OK) return s;
    s = st_get_float(st, bn, 1, bshape, &b, e);
    if (s != QTTS_OK) return s;
    l->b = malloc((size_t)cout * sizeof *l->b);
    if (!l->b) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading %s", bn);
    dtype_to_f32(b->dtype, b->data, l->b, (size_t)cout);
    l->w = (qt_mat){.data = w->data, .dtype = w->dtype, .rows = cout, .cols = cin * k};
    l->cin = cin;
    l->cout = cout;
    l->k = k;
    l->dil = dil;
    return QTTS_OK;
}

static void conv_free(conv_layer *l) {
    free(l->b);
    l->b = NULL;
}

/* Right (larger) reflect pad of a "same" conv: total d(K-1), left total/2. */
static int conv_pad_right(const conv_layer *l) {
    const int total = l->dil * (l->k - 1);
    return total - total / 2;
}

static void track_conv(speaker_encoder *s, const conv_layer *l) {
    if (l->k > 1) {
        if (conv_pad_right(l) + 1 > s->min_frames) s->min_frames = conv_pad_right(l) + 1;
        if (l->cin * l->k > s->max_col) s->max_col = l->cin * l->k;
    }
}

void speaker_encoder_free(speaker_encoder *s) {
    if (!s) return;
    ops_free(&s->ops);
    free(s->mel_basis);
    conv_free(&s->block0);
    if (s->se) {
        for (int i = 0; i < s->n_se; i++) {
            se_block *b = &s->se[i];
            conv_free(&b->tdnn1);
            if (b->res2)
                for (int j = 0; j < s->cfg.res2net_scale - 1; j++) conv_free(&b->res2[j]);
            free(b->res2);
            conv_free(&b->tdnn2);
            conv_free(&b->se1);
            conv_free(&b->se2);
        }
        free(s->se);
    }
    conv_free(&s->mfa);
    conv_free(&s->asp_tdnn);
    conv_free(&s->asp_conv);
    conv_free(&s->fc);
    free(s);
}

qtts_status speaker_encoder_load_config(speaker_encoder **out, const st_set *st,
                                        const speaker_encoder_config *cfg, int n_threads,
                                        qtts_error *e) {
    *out = NULL;
    if (!st || !cfg) return err_set(e, QTTS_ERR_INVALID_ARG, "speaker_encoder_load: NULL argument");
    qtts_status r = config_validate(cfg, e);
    if (r != QTTS_OK) return r;
    speaker_encoder *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, QTTS_ERR_NOMEM, "out of memory for the speaker encoder");
    s->cfg = *cfg;
    ops_init(&s->ops, n_threads, 0);
    s->min_frames = 1;

    /* The official extract_speaker_embedding hard-codes this front-end; n_mels
     * follows mel_dim (the official code only runs with mel_dim = 128). */
    s->mel = mel_speaker_default_params();
    s->mel.n_mels = cfg->mel_dim;
    s->mel.sample_rate = cfg->sample_rate;
    r = mel_filterbank(&s->mel, &s->mel_basis, e);
    if (r != QTTS_OK) goto fail;

    const int n = cfg->n_layers, scale = cfg->res2net_scale;
    const int *ch = cfg->channels, *ks = cfg->kernel_sizes, *dl = cfg->dilations;
    const int cl = ch[n - 1];
    r = conv_load(&s->block0, st, "blocks.0.conv", ch[0], cfg->mel_dim, ks[0], dl[0], e);
    if (r != QTTS_OK) goto fail;
    track_conv(s, &s->block0);

    s->n_se = n - 2;
    s->se = calloc((size_t)s->n_se, sizeof *s->se);
    if (!s->se) {
        r = err_set(e, QTTS_ERR_NOMEM, "out of memory for the speaker encoder");
        goto fail;
    }
    for (int i = 1; i <= s->n_se; i++) {
        se_block *b = &s->se[i - 1];
        const int c = ch[i], w = c / scale;
        char name[128];
        snprintf(name, sizeof name, "blocks.%d.tdnn1.conv", i);
        if ((r = conv_load(&b->tdnn1, st, name, c, ch[i - 1], 1, 1, e)) != QTTS_OK) goto fail;
        if (scale > 1) {
            b->res2 = calloc((size_t)(scale - 1), sizeof *b->res2);
            if (!b->res2) {
                r = err_set(e, QTTS_ERR_NOMEM, "out of memory for the speaker encoder");
                goto fail;
            }
        }
        for (int j = 0; j < scale - 1; j++) {
            snprintf(name, sizeof name, "blocks.%d.res2net_block.blocks.%d.conv", i, j);
            if ((r = conv_load(&b->res2[j], st, name, w, w, ks[i], dl[i], e)) != QTTS_OK) goto fail;
            track_conv(s, &b->res2[j]);
        }
        snprintf(name, sizeof name, "blocks.%d.tdnn2.conv", i);
        if ((r = conv_load(&b->tdnn2, st, name, c, c, 1, 1, e)) != QTTS_OK) goto fail;
        snprintf(name, sizeof name, "blocks.%d.se_block.conv1", i);
        if ((r = conv_load(&b->se1, st, name, cfg->se_channels, c, 1, 1, e)) != QTTS_OK) goto fail;
        snprintf(name, sizeof name, "blocks.%d.se_block.conv2", i);
        if ((r = conv_load(&b->se2, st, name, c, cfg->se_channels, 1, 1, e)) != QTTS_OK) goto fail;
    }
    if ((r = conv_load(&s->mfa, st, "mfa.conv", cl, cl, ks[n - 1], dl[n - 1], e)) != QTTS_OK) goto fail;
    track_conv(s, &s->mfa);
    if ((r = conv_load(&s->asp_tdnn, st, "asp.tdnn.conv", cfg->attention_channels, 3 * cl, 1, 1, e)) !=
        QTTS_OK)
        goto fail;
    if ((r = conv_load(&s->asp_conv, st, "asp.conv", cl, cfg->attention_channels, 1, 1, e)) != QTTS_OK)
        goto fail;
    if ((r = conv_load(&s->fc, st, "fc", cfg->enc_dim, 2 * cl, 1, 1, e)) != QTTS_OK) goto fail;
    *out = s;
    return QTTS_OK;
fail:
    speaker_encoder_free(s);
    return r;
}

qtts_status speaker_encoder_load(speaker_encoder **out, const st_set *st, int enc_dim, qtts_error *e) {
    speaker_encoder_config c = speaker_encoder_default_config(enc_dim);
    return speaker_encoder_load_config(out, st, &c, 1, e);
}

const speaker_encoder_config *speaker_encoder_get_config(const speaker_encoder *s) { return &s->cfg; }

size_t speaker_encoder_min_samples(const speaker_encoder *s) {
    const mel_params *p = &s->mel;
    const size_t pad = (size_t)((p->n_fft - p->hop) / 2);
    /* frames = (n + 2 pad - n_fft) / hop + 1 >= min_frames */
    const size_t need = (size_t)(s->min_frames - 1) * (size_t)p->hop + (size_t)p->n_fft - 2 * pad;
    const size_t mel_min = mel_min_samples(p);
    return need > mel_min ? need : mel_min;
}

/* ------------------------------------------------------------ forward */

static int reflect(int j, int T) {
    if (j < 0) return -j;
    if (j >= T) return 2 * (T - 1) - j;
    return j;
}

/* y[T][cout] = conv(x[T][cin]) (+ ReLU). col: scratch [CONV_CHUNK][max_col]. */
static void conv_forward(const speaker_encoder *s, const conv_layer *l, const float *x, int T, float *y,
                         float *col, int relu) {
    if (l->k == 1) {
        ops_matmul(&s->ops, &l->w, x, T, l->b, y);
    } else {
        const int K = l->k, cin = l->cin, left = l->dil * (K - 1) / 2;
        for (int t0 = 0; t0 < T; t0 += CONV_CHUNK) {
            const int nt = T - t0 < CONV_CHUNK ? T - t0 : CONV_CHUNK;
            for (int t = 0; t < nt; t++) {
                float *row = col + (size_t)t * cin * K;
                for (int tap = 0; tap < K; tap++) {
                    const float *src = x + (size_t)reflect(t0 + t + tap * l->dil - left, T) * cin;
                    for (int i = 0; i < cin; i++) row[i * K + tap] = src[i];
                }
            }
            ops_matmul(&s->ops, &l->w, col, nt, l->b, y + (size_t)t0 * l->cout);
        }
    }
    if (relu) {
        const size_t m = (size_t)T * l->cout;
        for (size_t i = 0; i < m; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    }
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Scratch of one embed call; every buffer is time-major. */
typedef struct spk_scratch {
    float *col;    /* [CONV_CHUNK][max_col] im2col rows */
    float **h;     /* [n_se+1] block outputs, [T][C_i] */
    float *a;      /* [T][Cmax] tdnn1 output */
    float *r;      /* [T][Cmax] res2net output */
    float *part;   /* [T][Cmax/scale] res2net sub-conv input */
    float *cat;    /* [T][CL] MFA input; reused for the attention logits */
    float *hm;     /* [T][CL] MFA output */
    float *asp_in; /* [CONV_CHUNK][3 CL] ASP attention input rows */
    float *att;    /* [T][attention_channels] */
    float *vec;    /* [4 CL + se + Cmax] pooled vectors and SE temporaries */
} spk_scratch;

static void scratch_free(spk_scratch *w, int n_h) {
    free(w->col);
    if (w->h)
        for (int i = 0; i < n_h; i++) free(w->h[i]);
    free(w->h);
    free(w->a);
    free(w->r);
    free(w->part);
    free(w->cat);
    free(w->hm);
    free(w->asp_in);
    free(w->att);
    free(w->vec);
}

static int scratch_alloc(const speaker_encoder *s, int T, spk_scratch *w) {
    const speaker_encoder_config *c = &s->cfg;
    const size_t t = (size_t)T, cl = (size_t)c->channels[c->n_layers - 1];
    size_t cmax = 0;
    for (int i = 0; i < c->n_layers - 1; i++)
        if ((size_t)c->channels[i] > cmax) cmax = (size_t)c->channels[i];
    memset(w, 0, sizeof *w);
    w->col = malloc((size_t)CONV_CHUNK * (size_t)(s->max_col > 0 ? s->max_col : 1) * sizeof(float));
    w->h = calloc((size_t)s->n_se + 1, sizeof *w->h);
    if (!w->col || !w->h) return -1;
    for (int i = 0; i <= s->n_se; i++)
        if (!(w->h[i] = malloc(t * (size_t)c->channels[i] * sizeof(float)))) return -1;
    w->a = malloc(t * cmax * sizeof(float));
    w->r = malloc(t * cmax * sizeof(float));
    w->part = malloc(t * (cmax / (size_t)c->res2net_scale + 1) * sizeof(float));
    w->cat = malloc(t * cl * sizeof(float));
    w->hm = malloc(t * cl * sizeof(float));
    w->asp_in = malloc((size_t)CONV_CHUNK * 3 * cl * sizeof(float));
    w->att = malloc(t * (size_t)c->attention_channels * sizeof(float));
    w->vec = malloc((4 * cl + (size_t)c->se_channels + cmax) * sizeof(float));
    return (w->a && w->r && w->part && w->cat && w->hm && w->asp_in && w->att && w->vec) ? 0 : -1;
}

/* SqueezeExcitationRes2NetBlock: out[T][C] = SE(tdnn2(res2net(tdnn1(x)))) + x. */
static void se_block_forward(const speaker_encoder *s, const se_block *b, const float *x, int T,
                             float *out, spk_scratch *w) {
    const int C = b->tdnn1.cout, scale = s->cfg.res2net_scale, wd = C / scale;
    const size_t t = (size_t)T;
    conv_forward(s, &b->tdnn1, x, T, w->a, w->col, 1);

    /* Res2Net: chunk 0 passes through; chunk k >= 1 is TDNN_k(chunk_k + y_{k-1}) (no
     * sum for k = 1); y_k lands in the columns of chunk k of r. */
    for (size_t i = 0; i < t; i++) memcpy(w->r + i * C, w->a + i * C, (size_t)wd * sizeof(float));
    for (int k = 1; k < scale; k++) {
        for (size_t i = 0; i < t; i++) {
            const float *src = w->a + i * C + (size_t)k * wd;
            float *dst = w->part + i * wd;
            if (k == 1) {
                memcpy(dst, src, (size_t)wd * sizeof(float));
            } else {
                const float *prev = w->r + i * C + (size_t)(k - 1) * wd;
                for (int j = 0; j < wd; j++) dst[j] = src[j] + prev[j];
            }
        }
        /* The sub-conv output goes to `out` (free until the residual), then into r. */
        conv_forward(s, &b->res2[k - 1], w->part, T, out, w->col, 1);
        for (size_t i = 0; i < t; i++)
            memcpy(w->r + i * C + (size_t)k * wd, out + i * wd, (size_t)wd * sizeof(float));
    }

    conv_forward(s, &b->tdnn2, w->r, T, out, w->col, 1);

    /* Squeeze-excitation on the time mean, then the residual. */
    float *mean = w->vec, *z = mean + C, *g = z + s->cfg.se_channels;
    for (int c = 0; c < C; c++) {
        double acc = 0.0;
        for (size_t i = 0; i < t; i++) acc += out[i * C + c];
        mean[c] = (float)(acc / T);
    }
    ops_matmul(&s->ops, &b->se1.w, mean, 1, b->se1.b, z);
    for (int j = 0; j < s->cfg.se_channels; j++) z[j] = z[j] > 0.0f ? z[j] : 0.0f;
    ops_matmul(&s->ops, &b->se2.w, z, 1, b->se2.b, g);
    for (int c = 0; c < C; c++) g[c] = sigmoidf(g[c]);
    for (size_t i = 0; i < t; i++)
        for (int c = 0; c < C; c++) out[i * C + c] = out[i * C + c] * g[c] + x[i * C + c];
}

/* Per-channel weighted mean and std over time of h[T][C] (weights wt[T][C], or
 * uniform 1/T when wt is NULL): mean = sum w h, std = sqrt(max(sum w (h - mean)^2, eps)). */
static void weighted_stats(const float *h, const float *wt, int T, int C, float *mean, float *std) {
    for (int c = 0; c < C; c++) {
        double m = 0.0;
        for (int i = 0; i < T; i++)
            m += (wt ? (double)wt[(size_t)i * C + c] : 1.0 / T) * h[(size_t)i * C + c];
        double v = 0.0;
        for (int i = 0; i < T; i++) {
            const double d = h[(size_t)i * C + c] - m;
            v += (wt ? (double)wt[(size_t)i * C + c] : 1.0 / T) * d * d;
        }
        mean[c] = (float)m;
        std[c] = (float)sqrt(v > ASP_EPS ? v : ASP_EPS);
    }
}

qtts_status speaker_encoder_embed_trace(const speaker_encoder *s, const float *pcm, size_t n,
                                        float *xvector, speaker_encoder_trace_fn trace, void *user,
                                        qtts_error *e) {
    if (!s || !xvector) return err_set(e, QTTS_ERR_INVALID_ARG, "speaker_encoder_embed: NULL argument");
    const size_t min_n = speaker_encoder_min_samples(s);
    if (!pcm || n == 0)
        return err_set(e, QTTS_ERR_INPUT,
                       "reference audio is empty; give at least %zu samples (%.0f ms) of 24 kHz audio",
                       min_n, 1000.0 * (double)min_n / s->mel.sample_rate);
    if (n < min_n)
        return err_set(e, QTTS_ERR_INPUT,
                       "reference audio too short: %zu samples (%.1f ms); the speaker encoder needs at "
                       "least %zu samples (%.0f ms) of 24 kHz audio",
                       n, 1000.0 * (double)n / s->mel.sample_rate, min_n,
                       1000.0 * (double)min_n / s->mel.sample_rate);

    float *mel = NULL;
    int T = 0;
    qtts_status r = mel_log_spectrogram(&s->mel, s->mel_basis, pcm, n, &mel, &T, e);
    if (r != QTTS_OK) return r;
    if (trace) trace("spk_mel", mel, T, s->cfg.mel_dim, user);

    spk_scratch w;
    if (scratch_alloc(s, T, &w) != 0) {
        scratch_free(&w, s->n_se + 1);
        free(mel);
        return err_set(e, QTTS_ERR_NOMEM, "out of memory embedding %d frames of reference audio", T);
    }
    const speaker_encoder_config *c = &s->cfg;
    const int cl = c->channels[c->n_layers - 1];
    char stage[32];

    conv_forward(s, &s->block0, mel, T, w.h[0], w.col, 1);
    if (trace) trace("spk_block0_out", w.h[0], T, c->channels[0], user);
    for (int i = 1; i <= s->n_se; i++) {
        se_block_forward(s, &s->se[i - 1], w.h[i - 1], T, w.h[i], &w);
        snprintf(stage, sizeof stage, "spk_block%d_out", i);
        if (trace) trace(stage, w.h[i], T, c->channels[i], user);
    }

    /* MFA on the channel concat of the SE block outputs. */
    for (int t = 0; t < T; t++) {
        float *dst = w.cat + (size_t)t * cl;
        for (int i = 1; i <= s->n_se; i++) {
            memcpy(dst, w.h[i] + (size_t)t * c->channels[i], (size_t)c->channels[i] * sizeof(float));
            dst += c->channels[i];
        }
    }
    conv_forward(s, &s->mfa, w.cat, T, w.hm, w.col, 1);
    if (trace) trace("spk_mfa_out", w.hm, T, cl, user);

    /* Attentive statistics pooling. */
    float *mu = w.vec, *sd = mu + cl, *pooled = sd + cl; /* pooled: [2 CL] */
    weighted_stats(w.hm, NULL, T, cl, mu, sd);
    for (int t0 = 0; t0 < T; t0 += CONV_CHUNK) {
        const int nt = T - t0 < CONV_CHUNK ? T - t0 : CONV_CHUNK;
        for (int t = 0; t < nt; t++) {
            float *row = w.asp_in + (size_t)t * 3 * cl;
            memcpy(row, w.hm + (size_t)(t0 + t) * cl, (size_t)cl * sizeof(float));
            memcpy(row + cl, mu, (size_t)cl * sizeof(float));
            memcpy(row + 2 * cl, sd, (size_t)cl * sizeof(float));
        }
        ops_matmul(&s->ops, &s->asp_tdnn.w, w.asp_in, nt, s->asp_tdnn.b,
                   w.att + (size_t)t0 * c->attention_channels);
    }
    const size_t n_att = (size_t)T * c->attention_channels;
    for (size_t i = 0; i < n_att; i++) w.att[i] = tanhf(w.att[i] > 0.0f ? w.att[i] : 0.0f);
    float *logits = w.cat; /* [T][CL], the MFA input is no longer needed */
    conv_forward(s, &s->asp_conv, w.att, T, logits, w.col, 0);
    /* softmax over time, per channel */
    for (int ch = 0; ch < cl; ch++) {
        float mx = -INFINITY;
        for (int t = 0; t < T; t++)
            if (logits[(size_t)t * cl + ch] > mx) mx = logits[(size_t)t * cl + ch];
        double sum = 0.0;
        for (int t = 0; t < T; t++) sum += exp((double)logits[(size_t)t * cl + ch] - mx);
        for (int t = 0; t < T; t++)
            logits[(size_t)t * cl + ch] = (float)(exp((double)logits[(size_t)t * cl + ch] - mx) / sum);
    }
    weighted_stats(w.hm, logits, T, cl, pooled, pooled + cl);
    if (trace) trace("spk_asp_out", pooled, 1, 2 * cl, user);

    ops_matmul(&s->ops, &s->fc.w, pooled, 1, s->fc.b, xvector);
    if (trace) trace("spk_fc_out", xvector, 1, c->enc_dim, user);

    scratch_free(&w, s->n_se + 1);
    free(mel);
    return QTTS_OK;
}

qtts_status speaker_encoder_embed(const speaker_encoder *s, const float *pcm, size_t n, float *xvector,
                                  qtts_error *e) {
    return speaker_encoder_embed_trace(s, pcm, n, xvector, NULL, NULL, e);
}
