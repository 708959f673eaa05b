/* Speech-tokenizer decoder: loading and validation (see codec_decoder.h).
 * Dataflow: speech_tokenizer/config.json (decoder_config) -> codec_config;
 * model.safetensors decoder.* -> weights checked against the config, F32
 * tensors used in place from the mmap, F16/BF16 widened to owned f32, and two
 * load-time folds: codebooks (embedding_sum / max(cluster_usage, 1e-5)) and
 * SnakeBeta (exp(alpha), 1 / (exp(beta) + 1e-9)).
 * Matches Qwen3TTSTokenizerV2DecoderConfig / Qwen3TTSTokenizerV2Decoder
 * (QwenLM/Qwen3-TTS, qwen_tts/core/tokenizer_12hz/). */
#include "backend/cpu/conv.h"
#include "model/codec_decoder_impl.h"
#include "model/codec_vulkan.h"
#include "util/dtype.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- config */

/* Integer key with a default (has_def = 0: required). Accepts JSON integers
 * and integral reals; range [lo, hi]. */
static qtts_status cfg_int(const json_t *o, const char *key, int has_def, int def, int lo, int hi, int *out,
                           const char *path, qtts_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (!has_def)
            return err_set(e, QTTS_ERR_MODEL, "%s: decoder_config.%s is missing; it has no default", path, key);
        *out = def;
        return QTTS_OK;
    }
    double x;
    if (json_is_integer(v)) x = (double)json_integer_value(v);
    else if (json_is_real(v)) x = json_real_value(v);
    else return err_set(e, QTTS_ERR_FORMAT, "%s: decoder_config.%s must be a number", path, key);
    if (x != floor(x) || x < lo || x > hi)
        return err_set(e, QTTS_ERR_MODEL, "%s: decoder_config.%s = %g is outside the supported range [%d, %d]", path,
                       key, x, lo, hi);
    *out = (int)x;
    return QTTS_OK;
}

static qtts_status cfg_float(const json_t *o, const char *key, double def, double lo, double hi, float *out,
                             const char *path, qtts_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = (float)def;
        return QTTS_OK;
    }
    if (!json_is_number(v)) return err_set(e, QTTS_ERR_FORMAT, "%s: decoder_config.%s must be a number", path, key);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return err_set(e, QTTS_ERR_MODEL, "%s: decoder_config.%s = %g is outside [%g, %g]", path, key, x, lo, hi);
    *out = (float)x;
    return QTTS_OK;
}

/* Integer list with a default, 1..max entries, each in [1, 64]. */
static qtts_status cfg_list(const json_t *o, const char *key, const int *def, int n_def, int max, int *out,
                            int *n_out, const char *path, qtts_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        memcpy(out, def, (size_t)n_def * sizeof *def);
        *n_out = n_def;
        return QTTS_OK;
    }
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > (size_t)max)
        return err_set(e, QTTS_ERR_MODEL, "%s: decoder_config.%s must be a list of 1 to %d integers", path, key, max);
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 64)
            return err_set(e, QTTS_ERR_MODEL, "%s: decoder_config.%s[%zu] must be an integer in [1, 64]", path, key, i);
        out[i] = (int)json_integer_value(x);
    }
    *n_out = (int)json_array_size(v);
    return QTTS_OK;
}

/* Defaults are those of Qwen3TTSTokenizerV2DecoderConfig; codebook_dim has
 * none there (it arrives through **kwargs), so it is required. */
static qtts_status parse_config(codec_config *c, const char *dir, qtts_error *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        FILE *f = fopen(path, "rb");
        if (!f)
            return err_set(e, QTTS_ERR_IO, "%s: cannot open; expected the speech_tokenizer/ folder of a Qwen3-TTS model",
                           path);
        fclose(f);
        return err_set(e, QTTS_ERR_FORMAT, "%s:%d: invalid JSON: %s", path, jerr.line, jerr.text);
    }
    qtts_status st = QTTS_OK;
    memset(c, 0, sizeof *c);
    const json_t *dc = json_object_get(root, "decoder_config");
    if (!json_is_object(dc)) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: no decoder_config object; is this a 12 Hz speech tokenizer config?", path);
        goto done;
    }
    const int big = 1 << 16;
    static const int def_rates[] = {8, 5, 4, 3}, def_ratios[] = {2, 2};
#define TRY(x)                                                                                                        \
    do {                                                                                                               \
        if ((st = (x)) != QTTS_OK) goto done;                                                                          \
    } while (0)
    TRY(cfg_int(dc, "num_quantizers", 1, 16, 2, 64, &c->n_q, path, e));
    TRY(cfg_int(dc, "codebook_size", 1, 2048, 1, 1 << 20, &c->codebook_size, path, e));
    TRY(cfg_int(dc, "codebook_dim", 0, 0, 2, big, &c->codebook_dim, path, e));
    TRY(cfg_int(dc, "latent_dim", 1, 1024, 1, big, &c->latent, path, e));
    TRY(cfg_int(dc, "hidden_size", 1, 1024, 1, big, &c->hidden, path, e));
    TRY(cfg_int(dc, "num_hidden_layers", 1, 8, 0, 256, &c->n_layers, path, e));
    TRY(cfg_int(dc, "num_attention_heads", 1, 16, 1, 1024, &c->n_heads, path, e));
    TRY(cfg_int(dc, "num_key_value_heads", 1, 16, 1, 1024, &c->n_kv_heads, path, e));
    TRY(cfg_int(dc, "head_dim", 1, c->hidden / c->n_heads, 2, 4096, &c->head_dim, path, e));
    TRY(cfg_int(dc, "intermediate_size", 1, 3072, 1, 1 << 20, &c->inter, path, e));
    TRY(cfg_int(dc, "sliding_window", 1, 72, 1, big, &c->window, path, e));
    TRY(cfg_int(dc, "decoder_dim", 1, 1536, 1, big, &c->decoder_dim, path, e));
    TRY(cfg_float(dc, "rms_norm_eps", 1e-5, 0.0, 1.0, &c->rms_eps, path, e));
    TRY(cfg_float(dc, "rope_theta", 10000.0, 1.0, 1e12, &c->rope_theta, path, e));
    TRY(cfg_list(dc, "upsampling_ratios", def_ratios, 2, CODEC_MAX_UP, c->up_ratio, &c->n_up, path, e));
    TRY(cfg_list(dc, "upsample_rates", def_rates, 4, CODEC_MAX_BLOCKS, c->rate, &c->n_blocks, path, e));
    int n_sem = 1;
    TRY(cfg_int(dc, "num_semantic_quantizers", 1, 1, 1, 64, &n_sem, path, e));
#undef TRY
    if (n_sem != 1) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: num_semantic_quantizers = %d; the decoder is built with 1", path,
                     n_sem);
        goto done;
    }
    if (c->codebook_dim % 2) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: codebook_dim = %d must be even (codebook vectors are codebook_dim/2)",
                     path, c->codebook_dim);
        goto done;
    }
    c->vq_dim = c->codebook_dim / 2;
    if (c->n_heads % c->n_kv_heads || c->head_dim % 2) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: %d heads over %d kv heads of dim %d is not a valid attention layout", path,
                     c->n_heads, c->n_kv_heads, c->head_dim);
        goto done;
    }
    if (c->decoder_dim % (1 << c->n_blocks)) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: decoder_dim %d is not divisible by 2^%d (one halving per block)", path,
                     c->decoder_dim, c->n_blocks);
        goto done;
    }
    const json_t *act = json_object_get(dc, "hidden_act");
    if (act && !json_is_null(act) && !(json_is_string(act) && strcmp(json_string_value(act), "silu") == 0)) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: decoder_config.hidden_act must be \"silu\"", path);
        goto done;
    }
    if (json_is_true(json_object_get(dc, "attention_bias"))) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: decoder_config.attention_bias = true is not supported", path);
        goto done;
    }
    const json_t *rs = json_object_get(dc, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: decoder_config.rope_scaling is set; only default RoPE is supported",
                     path);
        goto done;
    }
    long spf = 1;
    for (int i = 0; i < c->n_up; i++) spf *= c->up_ratio[i];
    for (int i = 0; i < c->n_blocks; i++) spf *= c->rate[i];
    if (spf > 1 << 20) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: %ld samples per frame is implausible", path, spf);
        goto done;
    }
    c->samples_per_frame = (int)spf;
    const json_t *dur = json_object_get(root, "decode_upsample_rate");
    if (json_is_integer(dur) && json_integer_value(dur) != spf) {
        st = err_set(e, QTTS_ERR_MODEL, "%s: decode_upsample_rate %lld disagrees with the decoder's rates (%ld)", path,
                     (long long)json_integer_value(dur), spf);
        goto done;
    }
    const json_t *sr = json_object_get(root, "output_sample_rate");
    c->sample_rate_hz = json_is_integer(sr) ? (int)json_integer_value(sr) : 24000;
done:
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------------- weights */

static void *own(codec_decoder *d, void *p) {
    if (!p) return NULL;
    if (d->n_owned == d->cap_owned) {
        const int cap = d->cap_owned ? 2 * d->cap_owned : 64;
        void **n = realloc(d->owned, (size_t)cap * sizeof *n);
        if (!n) {
            free(p);
            return NULL;
        }
        d->owned = n;
        d->cap_owned = cap;
    }
    d->owned[d->n_owned++] = p;
    return p;
}

/* f32 view of tensor "decoder.<fmt...>" with shape {s0, s1, s2}[:ndim]: for
 * F32, in place; other dtypes widened into an owned buffer. runtime 0: read
 * only at load (folded or repacked). */
static qtts_status weight(codec_decoder *d, qtts_error *e, const float **out, int runtime, int ndim, int64_t s0,
                          int64_t s1, int64_t s2, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 9, 10)))
#endif
    ;
static qtts_status weight(codec_decoder *d, qtts_error *e, const float **out, int runtime, int ndim, int64_t s0,
                          int64_t s1, int64_t s2, const char *fmt, ...) {
    char name[256] = "decoder.";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name + 8, sizeof name - 8, fmt, ap);
    va_end(ap);
    const int64_t shape[3] = {s0, s1, s2};
    const st_tensor *t;
    qtts_status st = st_get_float(&d->st, name, ndim, shape, &t, e);
    if (st != QTTS_OK) return st;
    if (t->dtype == DT_F32) {
        *out = t->data; /* in place: the mapping is advised for huge pages (codec_decoder_load) */
        return QTTS_OK;
    }
    float *buf = own(d, malloc((size_t)t->n_elems * sizeof(float) + 1));
    if (!buf) return err_set(e, QTTS_ERR_NOMEM, "out of memory widening '%s' to f32", name);
    dtype_to_f32(t->dtype, t->data, buf, (size_t)t->n_elems);
    *out = buf;
    return QTTS_OK;
}

/* A transposed conv's weights and bias packed as a conv1d over its input (see
 * ops_conv_transpose1d_pack_conv); the mapped original is then released, as
 * the decoder reads only the copy (a call the packed form cannot take would
 * fault it back in). */
/* Floats in a packed transposed conv: its weights, then stride * cout biases. */
static size_t tconv_pack_floats(int cin, int cout, int k, int stride) {
    return (size_t)cin * cout * k + (size_t)stride * cout;
}

static qtts_status pack_tconv(codec_decoder *d, qtts_error *e, const float *w, const float *bias, int cin, int cout,
                              int k, int stride, const float **out) {
    const size_t n = tconv_pack_floats(cin, cout, k, stride), nb = sizeof(float) * n;
    const float *cached = wcache_get_f32(&d->tcache, d->n_tconv++, n);
    if (cached) { /* prepared at an earlier load */
        st_release(&d->st, w, sizeof(float) * (size_t)cin * cout * k);
        *out = cached;
        return QTTS_OK;
    }
    float *wc = ops_conv_transpose1d_pack_conv(w, bias, cin, cout, k, stride);
    if (!wc) return err_set(e, QTTS_ERR_NOMEM, "out of memory packing a transposed convolution");
    if (d->tw) wcache_put_f32(d->tw, wc, n);
    float *h = huge_arena_copy(&d->arena, wc, nb);
    if (h) {
        free(wc);
        wc = h;
    } else if (!own(d, wc)) {
        return err_set(e, QTTS_ERR_NOMEM, "out of memory packing a transposed convolution");
    }
    st_release(&d->st, w, sizeof(float) * (size_t)cin * cout * k);
    *out = wc;
    return QTTS_OK;
}

static qt_mat mat(const float *w, int rows, int cols) {
    qt_mat m = {.data = w, .dtype = DT_F32, .rows = rows, .cols = cols};
    return m;
}

/* SnakeBeta "<prefix>.alpha" / ".beta" of C channels, folded. */
static qtts_status snake(codec_decoder *d, qtts_error *e, codec_snake *s, int C, const char *prefix) {
    const float *alpha, *beta;
    qtts_status st;
    if ((st = weight(d, e, &alpha, 0, 1, C, 0, 0, "%s.alpha", prefix)) != QTTS_OK) return st;
    if ((st = weight(d, e, &beta, 0, 1, C, 0, 0, "%s.beta", prefix)) != QTTS_OK) return st;
    s->a = own(d, malloc((size_t)C * sizeof(float)));
    s->inv_b = own(d, malloc((size_t)C * sizeof(float)));
    if (!s->a || !s->inv_b) return err_set(e, QTTS_ERR_NOMEM, "out of memory folding decoder.%s", prefix);
    for (int c = 0; c < C; c++) {
        s->a[c] = expf(alpha[c]);
        s->inv_b[c] = 1.0f / (expf(beta[c]) + 1e-9f);
    }
    return QTTS_OK;
}

static qtts_status load_quantizer(codec_decoder *d, qtts_error *e) {
    const codec_config *c = &d->cfg;
    const int K = c->codebook_size, V = c->vq_dim;
    d->codebook = own(d, malloc((size_t)c->n_q * K * V * sizeof(float)));
    if (!d->codebook) return err_set(e, QTTS_ERR_NOMEM, "out of memory for %d codebooks", c->n_q);
    qtts_status st;
    for (int q = 0; q < c->n_q; q++) {
        char pre[96];
        if (q == 0) snprintf(pre, sizeof pre, "quantizer.rvq_first.vq.layers.0._codebook");
        else snprintf(pre, sizeof pre, "quantizer.rvq_rest.vq.layers.%d._codebook", q - 1);
        const float *sum, *usage;
        if ((st = weight(d, e, &sum, 0, 2, K, V, 0, "%s.embedding_sum", pre)) != QTTS_OK) return st;
        if ((st = weight(d, e, &usage, 0, 1, K, 0, 0, "%s.cluster_usage", pre)) != QTTS_OK) return st;
        float *E = d->codebook + (size_t)q * K * V;
        for (int j = 0; j < K; j++) {
            const float u = usage[j] > 1e-5f ? usage[j] : 1e-5f;
            for (int i = 0; i < V; i++) E[(size_t)j * V + i] = sum[(size_t)j * V + i] / u;
        }
        st_release(&d->st, sum, sizeof(float) * (size_t)K * V); /* folded: the mapped pages can go */
    }
    const float *w;
    if ((st = weight(d, e, &w, 1, 3, c->codebook_dim, V, 1, "quantizer.rvq_first.output_proj.weight")) != QTTS_OK)
        return st;
    d->proj_first = mat(w, c->codebook_dim, V);
    if ((st = weight(d, e, &w, 1, 3, c->codebook_dim, V, 1, "quantizer.rvq_rest.output_proj.weight")) != QTTS_OK)
        return st;
    d->proj_rest = mat(w, c->codebook_dim, V);
    return QTTS_OK;
}

static qtts_status load_transformer(codec_decoder *d, qtts_error *e) {
    const codec_config *c = &d->cfg;
    const int H = c->hidden, L = c->latent, QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const float *w;
    qtts_status st;
#define W(dst, nd, a, b, fmt, ...)                                                                                     \
    do {                                                                                                               \
        if ((st = weight(d, e, &(dst), 1, nd, a, b, 0, fmt, __VA_ARGS__)) != QTTS_OK) return st;                       \
    } while (0)
    W(w, 2, H, L, "%s", "pre_transformer.input_proj.weight");
    d->in_proj = mat(w, H, L);
    W(d->in_proj_b, 1, H, 0, "%s", "pre_transformer.input_proj.bias");
    W(w, 2, L, H, "%s", "pre_transformer.output_proj.weight");
    d->out_proj = mat(w, L, H);
    W(d->out_proj_b, 1, L, 0, "%s", "pre_transformer.output_proj.bias");
    W(d->final_norm, 1, H, 0, "%s", "pre_transformer.norm.weight");
    d->layers = own(d, calloc((size_t)c->n_layers + 1, sizeof *d->layers));
    if (!d->layers) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++) {
        codec_layer *y = &d->layers[l];
        const char *p = "pre_transformer.layers";
        W(y->attn_norm, 1, H, 0, "%s.%d.input_layernorm.weight", p, l);
        W(w, 2, QD, H, "%s.%d.self_attn.q_proj.weight", p, l);
        y->wq = mat(w, QD, H);
        W(w, 2, KD, H, "%s.%d.self_attn.k_proj.weight", p, l);
        y->wk = mat(w, KD, H);
        W(w, 2, KD, H, "%s.%d.self_attn.v_proj.weight", p, l);
        y->wv = mat(w, KD, H);
        W(w, 2, H, QD, "%s.%d.self_attn.o_proj.weight", p, l);
        y->wo = mat(w, H, QD);
        W(y->attn_scale, 1, H, 0, "%s.%d.self_attn_layer_scale.scale", p, l);
        W(y->mlp_norm, 1, H, 0, "%s.%d.post_attention_layernorm.weight", p, l);
        W(w, 2, c->inter, H, "%s.%d.mlp.gate_proj.weight", p, l);
        y->w_gate = mat(w, c->inter, H);
        W(w, 2, c->inter, H, "%s.%d.mlp.up_proj.weight", p, l);
        y->w_up = mat(w, c->inter, H);
        W(w, 2, H, c->inter, "%s.%d.mlp.down_proj.weight", p, l);
        y->w_down = mat(w, H, c->inter);
        W(y->mlp_scale, 1, H, 0, "%s.%d.mlp_layer_scale.scale", p, l);
    }
#undef W
    /* HF default RoPE init, in f32: 1 / theta^(2i / head_dim). */
    const int half = c->head_dim / 2;
    d->inv_freq = own(d, malloc((size_t)half * sizeof(float)));
    if (!d->inv_freq) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < half; i++)
        d->inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
    return QTTS_OK;
}

static qtts_status load_convs(codec_decoder *d, qtts_error *e) {
    const codec_config *c = &d->cfg;
    const int L = c->latent, K = CODEC_CONV_K;
    qtts_status st;
#define W3(dst, a, b, k, ...)                                                                                          \
    do {                                                                                                               \
        if ((st = weight(d, e, &(dst), 1, 3, a, b, k, __VA_ARGS__)) != QTTS_OK) return st;                             \
    } while (0)
#define W1(dst, a, ...)                                                                                                \
    do {                                                                                                               \
        if ((st = weight(d, e, &(dst), 1, 1, a, 0, 0, __VA_ARGS__)) != QTTS_OK) return st;                             \
    } while (0)
    W3(d->pre_conv_w, L, c->codebook_dim, 3, "pre_conv.conv.weight");
    W1(d->pre_conv_b, L, "pre_conv.conv.bias");
    for (int u = 0; u < c->n_up; u++) {
        codec_upsample *up = &d->up[u];
        const float *w;
        up->ratio = c->up_ratio[u];
        if ((st = weight(d, e, &up->tconv_w, 0, 3, L, L, up->ratio, "upsample.%d.0.conv.weight", u)) != QTTS_OK)
            return st; /* read at load only: repacked below */
        W1(up->tconv_b, L, "upsample.%d.0.conv.bias", u);
        if ((st = pack_tconv(d, e, up->tconv_w, up->tconv_b, L, L, up->ratio, up->ratio, &up->tconv_wc)) != QTTS_OK)
            return st;
        W3(up->dw_w, L, 1, K, "upsample.%d.1.dwconv.conv.weight", u);
        W1(up->dw_b, L, "upsample.%d.1.dwconv.conv.bias", u);
        W1(up->ln_w, L, "upsample.%d.1.norm.weight", u);
        W1(up->ln_b, L, "upsample.%d.1.norm.bias", u);
        if ((st = weight(d, e, &w, 1, 2, 4 * L, L, 0, "upsample.%d.1.pwconv1.weight", u)) != QTTS_OK) return st;
        up->pw1 = mat(w, 4 * L, L);
        W1(up->pw1_b, 4 * L, "upsample.%d.1.pwconv1.bias", u);
        if ((st = weight(d, e, &w, 1, 2, L, 4 * L, 0, "upsample.%d.1.pwconv2.weight", u)) != QTTS_OK) return st;
        up->pw2 = mat(w, L, 4 * L);
        W1(up->pw2_b, L, "upsample.%d.1.pwconv2.bias", u);
        W1(up->gamma, L, "upsample.%d.1.gamma", u);
    }
    W3(d->dec0_w, c->decoder_dim, L, K, "decoder.0.conv.weight");
    W1(d->dec0_b, c->decoder_dim, "decoder.0.conv.bias");
    static const int dil[CODEC_N_RES] = {1, 3, 9};
    for (int b = 0; b < c->n_blocks; b++) {
        codec_block *bl = &d->blocks[b];
        bl->cin = c->decoder_dim >> b;
        bl->cout = c->decoder_dim >> (b + 1);
        bl->rate = c->rate[b];
        char pre[64];
        snprintf(pre, sizeof pre, "decoder.%d.block.0", b + 1);
        if ((st = snake(d, e, &bl->act, bl->cin, pre)) != QTTS_OK) return st;
        if ((st = weight(d, e, &bl->tconv_w, 0, 3, bl->cin, bl->cout, 2 * bl->rate, "decoder.%d.block.1.conv.weight",
                         b + 1)) != QTTS_OK)
            return st; /* read at load only: repacked below */
        W1(bl->tconv_b, bl->cout, "decoder.%d.block.1.conv.bias", b + 1);
        if ((st = pack_tconv(d, e, bl->tconv_w, bl->tconv_b, bl->cin, bl->cout, 2 * bl->rate, bl->rate,
                             &bl->tconv_wc)) != QTTS_OK)
            return st;
        for (int r = 0; r < CODEC_N_RES; r++) {
            codec_resunit *ru = &bl->ru[r];
            const int C = bl->cout;
            ru->dilation = dil[r];
            snprintf(pre, sizeof pre, "decoder.%d.block.%d.act1", b + 1, r + 2);
            if ((st = snake(d, e, &ru->act1, C, pre)) != QTTS_OK) return st;
            snprintf(pre, sizeof pre, "decoder.%d.block.%d.act2", b + 1, r + 2);
            if ((st = snake(d, e, &ru->act2, C, pre)) != QTTS_OK) return st;
            W3(ru->conv1_w, C, C, K, "decoder.%d.block.%d.conv1.conv.weight", b + 1, r + 2);
            W1(ru->conv1_b, C, "decoder.%d.block.%d.conv1.conv.bias", b + 1, r + 2);
            W3(ru->conv2_w, C, C, 1, "decoder.%d.block.%d.conv2.conv.weight", b + 1, r + 2);
            W1(ru->conv2_b, C, "decoder.%d.block.%d.conv2.conv.bias", b + 1, r + 2);
        }
    }
    const int out_dim = c->decoder_dim >> c->n_blocks;
    char pre[32];
    snprintf(pre, sizeof pre, "decoder.%d", c->n_blocks + 1);
    if ((st = snake(d, e, &d->final_act, out_dim, pre)) != QTTS_OK) return st;
    W3(d->final_w, 1, out_dim, K, "decoder.%d.conv.weight", c->n_blocks + 2);
    W1(d->final_b, 1, "decoder.%d.conv.bias", c->n_blocks + 2);
#undef W3
#undef W1
    return QTTS_OK;
}

/* FNV-1a, 64-bit: continue h over p[n]. */
static uint64_t fnv64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The decoder.* tensors' names, dtypes, shapes, sizes and first and last 64
 * bytes (a few pages of the file: cheap at load, and any retrained or
 * different checkpoint changes them). */
static uint64_t fingerprint(const st_set *st) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < st->n_tensors; i++) {
        const st_tensor *t = &st->tensors[i];
        if (strncmp(t->name, "decoder.", 8) != 0) continue;
        int64_t meta[2 + ST_MAX_DIMS] = {t->dtype, t->ndim};
        for (int k = 0; k < t->ndim && k < ST_MAX_DIMS; k++) meta[2 + k] = t->shape[k];
        h = fnv64(h, t->name, strlen(t->name) + 1);
        h = fnv64(h, meta, sizeof meta);
        h = fnv64(h, &t->nbytes, sizeof t->nbytes);
        size_t k = t->nbytes < 64 ? t->nbytes : 64;
        h = fnv64(h, t->data, k);
        h = fnv64(h, (const unsigned char *)t->data + t->nbytes - k, k);
    }
    return h;
}

uint64_t codec_decoder_state_key(const codec_decoder *d) {
    uint64_t h = d->fingerprint;
    const char *isa = d->ops.k ? d->ops.k->name : "?";
    const uint32_t layout = CODEC_STATE_LAYOUT, dev = d->dev != NULL;
    const uint64_t n = codec_decoder_state_floats(d);
    h = fnv64(h, isa, strlen(isa) + 1);
    h = fnv64(h, &layout, sizeof layout);
    h = fnv64(h, &dev, sizeof dev);
    h = fnv64(h, &n, sizeof n);
    return h;
}

qtts_status codec_decoder_load(codec_decoder **out, const char *dir, int huge_pages, qtts_error *e) {
    return codec_decoder_load_cached(out, dir, huge_pages, NULL, NULL, 0, e);
}

qtts_status codec_decoder_load_cached(codec_decoder **out, const char *dir, int huge_pages, const char *cache_path,
                                      char *status, size_t cap, qtts_error *e) {
    if (status && cap) snprintf(status, cap, "off");
    if (!out || !dir) return err_set(e, QTTS_ERR_INVALID_ARG, "codec_decoder_load: NULL argument");
    *out = NULL;
    codec_decoder *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, QTTS_ERR_NOMEM, "out of memory");
    qtts_status st = parse_config(&d->cfg, dir, e);
    if (st == QTTS_OK) st = st_open(&d->st, dir, e);
    if (st == QTTS_OK) d->fingerprint = fingerprint(&d->st);
    if (st == QTTS_OK && huge_pages) {
        /* F32 weights read in place, the mapping advised for 2 MiB pages: the
         * decoder is arithmetic-bound, its CPU time per frame was the same as
         * from a huge-page copy (47.4-47.8 vs 47.6 ms, 1 thread, 0.6B codec,
         * 2 MiB or 4 KiB page-cache folios), and the copy cost ~0.4 s of
         * zeroing and copying at load (docs/BENCH.md "What limits what").
         * The packed transposed convs made here go in a huge-page arena. */
        st_advise_huge(&d->st);
        size_t bytes = 0;
        for (int i = 0; i < d->st.n_files; i++) bytes += d->st.map_sizes[i];
        (void)huge_arena_reserve(&d->arena, bytes);
    }
    wcache_writer tw;
    if (st == QTTS_OK && cache_path && *cache_path) {
        const uint64_t key = wcache_key_tag(&d->st, "codec-tconv", CODEC_TCONV_LAYOUT);
        const int n = d->cfg.n_up + d->cfg.n_blocks;
        char why[64];
        if (wcache_open(cache_path, key, n, &d->tcache, why, sizeof why) == 0) {
            if (huge_pages) huge_advise(d->tcache.map, d->tcache.len);
            if (status && cap) snprintf(status, cap, "mapped %s", cache_path);
        } else if (wcache_begin(&tw, cache_path, key, n) == 0) {
            d->tw = &tw;
        }
    }
    if (st == QTTS_OK) st = load_quantizer(d, e);
    if (st == QTTS_OK) st = load_transformer(d, e);
    if (st == QTTS_OK) st = load_convs(d, e);
    if (d->tw) {
        const int ok = st == QTTS_OK && wcache_commit(d->tw) == 0;
        if (st != QTTS_OK) wcache_abort(d->tw);
        if (status && cap) snprintf(status, cap, ok ? "written %s" : "not written (%s)", cache_path);
        d->tw = NULL;
    }
    if (st != QTTS_OK) {
        codec_decoder_free(d);
        return st;
    }
    huge_arena_trim(&d->arena);
    ops_init(&d->ops, 1, 0);
    *out = d;
    return QTTS_OK;
}

/* Gives back the memory of block bl's f32 packed transposed conv while its
 * int8 or bf16 form stands in (the decoder then never reads the pack; block
 * 1's is 75 MB at the 12 Hz codec's size): freed when owned, else (the
 * huge-page arena, the prepared-weights cache's mapping) its whole pages
 * dropped with MADV_DONTNEED. */
static void release_pack(codec_decoder *d, codec_block *bl) {
    for (int i = 0; i < d->n_owned; i++)
        if (d->owned[i] == bl->tconv_wc) {
            free(d->owned[i]);
            d->owned[i] = NULL;
            bl->tconv_wc = NULL;
            return;
        }
    pages_drop(bl->tconv_wc, sizeof(float) * tconv_pack_floats(bl->cin, bl->cout, 2 * bl->rate, bl->rate));
    bl->tconv_wc = NULL;
}

/* Packs again the transposed convs whose packs were given back (for a
 * format that reads them), from the mapped originals. */
static qtts_status restore_packs(codec_decoder *d, qtts_error *e) {
    for (int b = 0; b < d->cfg.n_blocks; b++) {
        codec_block *bl = &d->blocks[b];
        if (bl->tconv_wc || !bl->tconv_w) continue;
        float *wc = own(d, ops_conv_transpose1d_pack_conv(bl->tconv_w, bl->tconv_b, bl->cin, bl->cout, 2 * bl->rate,
                                                          bl->rate));
        if (!wc) return err_set(e, QTTS_ERR_NOMEM, "out of memory packing a transposed convolution");
        bl->tconv_wc = wc;
    }
    return QTTS_OK;
}

/* Every Linear matrix of the decoder, in a fixed order: the quantizer's
 * output projections, the pre-transformer's, the ConvNeXt pointwise layers.
 * Their count; out (NULL: count only) gets their addresses. */
static int codec_mats(codec_decoder *d, qt_mat **out) {
    int n = 0;
#define CODEC_MAT(m) (out ? (void)(out[n] = &(m)) : (void)0, n++)
    CODEC_MAT(d->proj_first), CODEC_MAT(d->proj_rest), CODEC_MAT(d->in_proj), CODEC_MAT(d->out_proj);
    for (int l = 0; l < d->cfg.n_layers; l++) {
        codec_layer *y = &d->layers[l];
        CODEC_MAT(y->wq), CODEC_MAT(y->wk), CODEC_MAT(y->wv), CODEC_MAT(y->wo);
        CODEC_MAT(y->w_gate), CODEC_MAT(y->w_up), CODEC_MAT(y->w_down);
    }
    for (int u = 0; u < d->cfg.n_up; u++) CODEC_MAT(d->up[u].pw1), CODEC_MAT(d->up[u].pw2);
#undef CODEC_MAT
    return n;
}

static int is_owned(const codec_decoder *d, const void *p) {
    for (int i = 0; i < d->n_owned; i++)
        if (d->owned[i] == p) return 1;
    return 0;
}

/* The Linear matrices back to their f32 forms (the mapped ones fault back
 * in from the file on their next read). */
static void drop_mats_bf16(codec_decoder *d) {
    for (int i = 0; i < d->n_mats_f32; i++) *d->mats_f32[i].at = d->mats_f32[i].f32;
    free(d->mats_f32);
    free(d->mats_bf16);
    d->mats_f32 = NULL;
    d->mats_bf16 = NULL;
    d->n_mats_f32 = 0;
}

const qt_mat *codec_mat_f32(const codec_decoder *d, const qt_mat *m) {
    for (int i = 0; i < d->n_mats_f32; i++)
        if (d->mats_f32[i].at == m) return &d->mats_f32[i].f32;
    return m;
}

/* The Linear matrices in bf16 (rounded to nearest even, the talker's bf16
 * dtype): the matmul kernels then read half the bytes. The mapped f32 pages
 * are given back. 0: out of memory (nothing changed). */
static int make_mats_bf16(codec_decoder *d) {
    if (d->mats_f32) return 1;
    const int n = codec_mats(d, NULL);
    qt_mat **m = malloc(sizeof *m * (size_t)n);
    codec_mat_keep *keep = malloc(sizeof *keep * (size_t)n);
    size_t total = 0;
    if (m) {
        codec_mats(d, m);
        for (int i = 0; i < n; i++) total += ((size_t)m[i]->rows * m[i]->cols + 31) & ~(size_t)31;
    }
    uint16_t *buf = m && keep ? aligned_alloc(64, sizeof(uint16_t) * (total ? total : 32)) : NULL;
    if (!buf) {
        free(m), free(keep), free(buf);
        return 0;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        keep[i] = (codec_mat_keep){m[i], *m[i]};
        const size_t ne = (size_t)m[i]->rows * m[i]->cols;
        const float *f = m[i]->data;
        for (size_t j = 0; j < ne; j++) buf[off + j] = f32_to_bf16(f[j]);
        if (!is_owned(d, f)) st_release(&d->st, f, sizeof(float) * ne);
        m[i]->data = buf + off;
        m[i]->dtype = DT_BF16;
        off += (ne + 31) & ~(size_t)31;
    }
    free(m);
    d->mats_f32 = keep;
    d->n_mats_f32 = n;
    d->mats_bf16 = buf;
    return 1;
}

static void drop_q8(codec_decoder *d) {
    drop_mats_bf16(d);
    conv_q8_w_free(&d->dec0_q);
    conv_bf16_w_free(&d->dec0_h);
    conv_i16_w_free(&d->dec0_i);
    for (int b = 0; b < CODEC_MAX_BLOCKS; b++) {
        conv_q8_w_free(&d->blocks[b].tconv_q);
        conv_bf16_w_free(&d->blocks[b].tconv_h);
        conv_i16_w_free(&d->blocks[b].tconv_i);
        for (int r = 0; r < CODEC_N_RES; r++) {
            conv_q8_w_free(&d->blocks[b].ru[r].conv1_q);
            conv_q8_w_free(&d->blocks[b].ru[r].conv2_q);
            conv_bf16_w_free(&d->blocks[b].ru[r].conv1_h);
            conv_bf16_w_free(&d->blocks[b].ru[r].conv2_h);
            conv_i16_w_free(&d->blocks[b].ru[r].conv2_i);
        }
    }
    d->q8 = 0;
}

/* The part of mask m that applies to a conv of cin input channels: all of
 * it from CODEC_Q8_MIN_CIN up, below that only with CODEC_Q8_ANY_WIDTH. */
static unsigned width_mask(unsigned m, int cin) { return cin >= CODEC_Q8_MIN_CIN || (m & CODEC_Q8_ANY_WIDTH) ? m : 0; }

/* The requested forms of one conv of cin inputs (masks as in
 * codec_decoder.h); iw NULL where the conv has no int16 form. */
typedef struct conv_forms {
    unsigned q8, i16, h;
} conv_forms;

/* One conv of cin inputs: its int8 form when bit is in f.q8 (at that
 * width), else its int16 form when in f.i16, else its bf16 form when in
 * f.h; *made set when it made one. 0 when out of memory. */
static int make_form(unsigned bit, conv_forms f, conv_q8_w *q, conv_i16_w *iw, conv_bf16_w *hw, const float *w,
                     const float *b, int cout, int cin, int k, int *made) {
    const unsigned q8 = width_mask(f.q8, cin) & bit, h = width_mask(f.h, cin) & bit;
    const unsigned i16 = iw ? width_mask(f.i16, cin) & bit : 0;
    *made |= (q8 | i16 | h) != 0;
    if (q8) return conv_q8_w_make(q, w, b, cout, cin, k);
    if (i16) return conv_i16_w_make(iw, w, b, cout, cin, k);
    if (h) return conv_bf16_w_make(hw, w, b, cout, cin, k);
    return 1;
}

int codec_decoder_format_parts(int fmt, unsigned *q8_parts, unsigned *i16_parts, unsigned *bf16_parts) {
    const unsigned q = fmt == QTTS_CODEC_Q8 || fmt == QTTS_CODEC_Q8BF16 ? CODEC_Q8_DEFAULT : 0;
    *i16_parts = fmt == QTTS_CODEC_Q8 ? CODEC_I16_DEFAULT : 0;
    const unsigned h = fmt == QTTS_CODEC_BF16 || fmt == QTTS_CODEC_Q8BF16 ? CODEC_BF16_DEFAULT
                       : fmt == QTTS_CODEC_Q8                              ? CODEC_BF16_MATS
                                                                           : 0;
    if (fmt != QTTS_CODEC_F32 && !q && !h) return -1;
    *q8_parts = q;
    *bf16_parts = h;
    return 0;
}

/* A mask from the environment variable name in place of a nonzero one. */
static unsigned env_parts(const char *name, unsigned parts) {
    const char *pe = getenv(name);
    return parts && pe && *pe ? (unsigned)strtoul(pe, NULL, 0) : parts;
}

qtts_status codec_decoder_set_forms(codec_decoder *d, unsigned q8_parts, unsigned i16_parts, unsigned bf16_parts,
                                    qtts_error *e) {
    qtts_status st = restore_packs(d, e);
    if (st != QTTS_OK) return st;
    drop_q8(d);
    const conv_forms f = {env_parts("QTTS_CODEC_Q8_PARTS", q8_parts), env_parts("QTTS_CODEC_I16_PARTS", i16_parts),
                          env_parts("QTTS_CODEC_BF16_PARTS", bf16_parts)};
    const codec_config *c = &d->cfg;
    int ok = 1, any = 0;
    ok &= make_form(CODEC_Q8_DEC0, f, &d->dec0_q, &d->dec0_i, &d->dec0_h, d->dec0_w, d->dec0_b, c->decoder_dim, c->latent,
                    CODEC_CONV_K, &any);
    for (int b = 0; b < c->n_blocks && ok; b++) {
        codec_block *bl = &d->blocks[b];
        const int r2 = bl->rate * bl->cout;
        /* tconv_wc: [rate * cout][cin][2] then the rate * cout biases */
        if (bl->tconv_wc) {
            int made = 0;
            ok &= make_form(CODEC_Q8_TCONV, f, &bl->tconv_q, &bl->tconv_i, &bl->tconv_h, bl->tconv_wc,
                            bl->tconv_wc + (size_t)r2 * bl->cin * 2, r2, bl->cin, 2, &made);
            /* here, not at the end: the load's peak holds one pack's two forms at most */
            if (ok && made) release_pack(d, bl);
            any |= made;
        }
        for (int r = 0; r < CODEC_N_RES && ok; r++) {
            codec_resunit *ru = &bl->ru[r];
            ok &= make_form(CODEC_Q8_CONV1, f, &ru->conv1_q, NULL, &ru->conv1_h, ru->conv1_w, ru->conv1_b, bl->cout,
                            bl->cout, CODEC_CONV_K, &any);
            ok &= make_form(CODEC_Q8_CONV2, f, &ru->conv2_q, &ru->conv2_i, &ru->conv2_h, ru->conv2_w, ru->conv2_b, bl->cout,
                            bl->cout, 1, &any);
        }
    }
    if (ok && (f.h & CODEC_BF16_MATS)) ok = make_mats_bf16(d);
    if (!ok) {
        drop_q8(d);
        (void)restore_packs(d, e); /* out of memory either way */
        return err_set(e, QTTS_ERR_NOMEM, "out of memory: int8, int16 or bf16 codec decoder weights");
    }
    d->q8 = any;
    return QTTS_OK;
}

void codec_decoder_free(codec_decoder *d) {
    if (!d) return;
    drop_q8(d);
    cdv_free(d->dev);
    ops_free(&d->ops);
    for (int i = 0; i < d->n_owned; i++) free(d->owned[i]);
    free(d->owned);
    st_close(&d->st);
    huge_arena_release(&d->arena);
    wcache_close(&d->tcache);
    free(d);
}

int64_t codec_decoder_weight_bytes(const codec_decoder *d) {
    int64_t b = 0;
    for (int i = 0; i < d->st.n_tensors; i++)
        if (!strncmp(d->st.tensors[i].name, "decoder.", 8)) b += (int64_t)d->st.tensors[i].nbytes;
    return b;
}

int qtts_codec_weights_from_name(const char *name) {
    if (!name) return -1;
    if (!strcasecmp(name, "f32")) return QTTS_CODEC_F32;
    if (!strcasecmp(name, "bf16")) return QTTS_CODEC_BF16;
    if (!strcasecmp(name, "q8")) return QTTS_CODEC_Q8;
    if (!strcasecmp(name, "q8bf16")) return QTTS_CODEC_Q8BF16;
    return -1;
}

const char *qtts_codec_weights_name(qtts_codec_weights w) {
    return w == QTTS_CODEC_BF16 ? "bf16" : w == QTTS_CODEC_Q8 ? "q8" : w == QTTS_CODEC_Q8BF16 ? "q8bf16" : "f32";
}

int codec_decoder_samples_per_frame(const codec_decoder *d) { return d->cfg.samples_per_frame; }
int codec_decoder_n_blocks(const codec_decoder *d) { return d->cfg.n_blocks; }
int codec_decoder_n_codebooks(const codec_decoder *d) { return d->cfg.n_q; }
int codec_decoder_codebook_size(const codec_decoder *d) { return d->cfg.codebook_size; }
int codec_decoder_sample_rate_hz(const codec_decoder *d) { return d->cfg.sample_rate_hz; }

size_t codec_icl_cut_samples(int ref_frames, int total_frames, size_t n_samples) {
    /* int(ref_len / max(total_len, 1) * wav.shape[0]) in Python doubles. */
    const double frac = (double)ref_frames / (double)(total_frames > 1 ? total_frames : 1);
    const double cut = frac * (double)n_samples;
    if (!(cut > 0.0)) return 0;
    if (cut >= (double)n_samples) return n_samples;
    return (size_t)cut;
}

void codec_decoder_set_threads(codec_decoder *d, int n_threads) {
    ops_free(&d->ops);
    ops_init(&d->ops, n_threads < 1 ? 1 : n_threads, 0);
}
