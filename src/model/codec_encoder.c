/* Speech-tokenizer encoder (Mimi): config parsing and weight loading.
 * Dataflow: speech_tokenizer/config.json (encoder_config + top-level rates)
 * -> codec_encoder_config; speech_tokenizer/model.safetensors (mmap) ->
 * per-layer pointers, each tensor checked against the shape the config
 * implies. Matches the module tree of HF transformers MimiModel (encoder half)
 * as loaded by Qwen3-TTS Qwen3TTSTokenizerV2Encoder. */
#include "model/codec_encoder_impl.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ config */

typedef struct cfg_reader {
    const char *file;  /* for messages */
    const char *where; /* "encoder_config" or "" (top level) */
    json_t *obj;
} cfg_reader;

static qtts_status cfg_missing(const cfg_reader *r, const char *key, qtts_error *e) {
    return err_set(e, QTTS_ERR_FORMAT, "%s: %s%s%s is missing; the speech tokenizer config is incomplete", r->file,
                   r->where, *r->where ? "." : "", key);
}

/* Integer key in [lo, hi]; def is used when absent and required == 0. */
static qtts_status cfg_int(const cfg_reader *r, const char *key, int required, int def, int lo, int hi, int *out,
                           qtts_error *e) {
    json_t *v = json_object_get(r->obj, key);
    if (!v || json_is_null(v)) {
        if (required) return cfg_missing(r, key, e);
        *out = def;
        return QTTS_OK;
    }
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) d = json_real_value(v);
    else return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s must be an integer", r->file, r->where, key);
    if (d < lo || d > hi)
        return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s = %.0f is out of range [%d, %d]", r->file, r->where, key, d, lo,
                       hi);
    *out = (int)d;
    return QTTS_OK;
}

static qtts_status cfg_num(const cfg_reader *r, const char *key, double def, double lo, double hi, double *out,
                           qtts_error *e) {
    json_t *v = json_object_get(r->obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return QTTS_OK;
    }
    if (!json_is_number(v)) return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s must be a number", r->file, r->where, key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s = %g is out of range [%g, %g]", r->file, r->where, key, d, lo,
                       hi);
    *out = d;
    return QTTS_OK;
}

/* Boolean key that this engine supports only with value `want`. */
static qtts_status cfg_bool_is(const cfg_reader *r, const char *key, int def, int want, const char *why,
                               qtts_error *e) {
    json_t *v = json_object_get(r->obj, key);
    int b = def;
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s must be true or false", r->file, r->where, key);
        b = json_is_true(v);
    }
    if (b != want)
        return err_set(e, QTTS_ERR_UNSUPPORTED, "%s: %s.%s = %s is not supported (%s)", r->file, r->where, key,
                       b ? "true" : "false", why);
    return QTTS_OK;
}

/* String key that this engine supports only with value `want`. */
static qtts_status cfg_str_is(const cfg_reader *r, const char *key, const char *want, qtts_error *e) {
    json_t *v = json_object_get(r->obj, key);
    if (!v || json_is_null(v)) return QTTS_OK; /* the MimiConfig default is `want` */
    if (!json_is_string(v)) return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s must be a string", r->file, r->where, key);
    if (strcmp(json_string_value(v), want) != 0)
        return err_set(e, QTTS_ERR_UNSUPPORTED, "%s: %s.%s = \"%s\" is not supported (only \"%s\")", r->file, r->where,
                       key, json_string_value(v), want);
    return QTTS_OK;
}

/* RoPE: only the default (unscaled) kind exists in Mimi checkpoints. Newer
 * configs nest theta and type in rope_parameters; older ones use rope_theta
 * and rope_scaling. */
static qtts_status cfg_rope(const cfg_reader *r, double *theta, qtts_error *e) {
    qtts_status st = cfg_num(r, "rope_theta", 10000.0, 1.0, 1e12, theta, e);
    if (st) return st;
    const char *keys[2] = {"rope_scaling", "rope_parameters"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(r->obj, keys[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_object(v)) return err_set(e, QTTS_ERR_FORMAT, "%s: %s.%s must be an object", r->file, r->where, keys[i]);
        json_t *t = json_object_get(v, "rope_type");
        if (!t) t = json_object_get(v, "type");
        if (t && (!json_is_string(t) || strcmp(json_string_value(t), "default") != 0))
            return err_set(e, QTTS_ERR_UNSUPPORTED, "%s: %s.%s: only default RoPE is supported in the codec encoder",
                           r->file, r->where, keys[i]);
        json_t *th = json_object_get(v, "rope_theta");
        if (th) {
            cfg_reader sub = {r->file, keys[i], v};
            if ((st = cfg_num(&sub, "rope_theta", 10000.0, 1.0, 1e12, theta, e))) return st;
        }
    }
    return QTTS_OK;
}

static qtts_status parse_config(codec_encoder_config *cfg, const char *dir, qtts_error *e) {
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", dir);
    FILE *f = fopen(file, "rb");
    if (!f) return err_set(e, QTTS_ERR_IO, "%s: cannot open: is this a speech_tokenizer folder?", file);
    json_error_t jerr;
    json_t *root = json_loadf(f, 0, &jerr);
    fclose(f);
    if (!root) return err_set(e, QTTS_ERR_FORMAT, "%s:%d: malformed JSON: %s", file, jerr.line, jerr.text);
    qtts_status st = QTTS_OK;
    json_t *enc = json_object_get(root, "encoder_config");
    if (!json_is_object(root) || !json_is_object(enc)) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: no \"encoder_config\" object; this is not a Qwen3-TTS 12 Hz speech tokenizer config",
                     file);
        goto done;
    }
    const cfg_reader top = {file, "", root}, r = {file, "encoder_config", enc};
    memset(cfg, 0, sizeof *cfg);
    int audio_channels, input_sr;
    double eps, theta, frame_rate;
#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        if ((st = (x)) != QTTS_OK) goto done;                                                                          \
    } while (0)
    TRY(cfg_int(&r, "hidden_size", 1, 0, 2, 1 << 16, &cfg->hidden, e));
    TRY(cfg_int(&r, "num_filters", 1, 0, 1, 1 << 14, &cfg->num_filters, e));
    TRY(cfg_int(&r, "num_hidden_layers", 1, 0, 0, 1024, &cfg->n_layers, e));
    TRY(cfg_int(&r, "intermediate_size", 1, 0, 1, 1 << 18, &cfg->intermediate, e));
    TRY(cfg_int(&r, "num_attention_heads", 1, 0, 1, 1024, &cfg->n_heads, e));
    TRY(cfg_int(&r, "num_key_value_heads", 0, cfg->n_heads, 1, 1024, &cfg->n_kv_heads, e));
    TRY(cfg_int(&r, "head_dim", 0, cfg->hidden / cfg->n_heads, 2, 4096, &cfg->head_dim, e));
    TRY(cfg_int(&r, "sampling_rate", 1, 0, 1000, 1000000, &cfg->sample_rate, e));
    TRY(cfg_int(&r, "audio_channels", 0, 1, 1, 2, &audio_channels, e));
    TRY(cfg_int(&r, "kernel_size", 0, 7, 1, 1024, &cfg->kernel_size, e));
    TRY(cfg_int(&r, "last_kernel_size", 0, 3, 1, 1024, &cfg->last_kernel_size, e));
    TRY(cfg_int(&r, "residual_kernel_size", 0, 3, 1, 1024, &cfg->residual_kernel_size, e));
    TRY(cfg_int(&r, "num_residual_layers", 0, 1, 0, 8, &cfg->n_residual_layers, e));
    TRY(cfg_int(&r, "dilation_growth_rate", 0, 2, 1, 16, &cfg->dilation_growth_rate, e));
    TRY(cfg_int(&r, "compress", 0, 2, 1, 1 << 14, &cfg->compress, e));
    TRY(cfg_int(&r, "num_quantizers", 1, 0, 1, 1024, &cfg->n_q, e));
    TRY(cfg_int(&r, "num_semantic_quantizers", 0, 1, 0, 1024, &cfg->n_sem_q, e));
    TRY(cfg_int(&r, "codebook_size", 1, 0, 1, 1 << 20, &cfg->codebook_size, e));
    TRY(cfg_int(&r, "codebook_dim", 1, 0, 1, 1 << 14, &cfg->codebook_dim, e));
    TRY(cfg_int(&r, "vector_quantization_hidden_dimension", 0, cfg->codebook_dim, 1, 1 << 14, &cfg->vq_hidden, e));
    TRY(cfg_num(&r, "norm_eps", 1e-5, 0.0, 1.0, &eps, e));
    TRY(cfg_rope(&r, &theta, e));
    TRY(cfg_bool_is(&r, "use_causal_conv", 1, 1, "the encoder is implemented causal only", e));
    TRY(cfg_bool_is(&r, "use_conv_shortcut", 0, 0, "residual blocks with a conv shortcut", e));
    TRY(cfg_bool_is(&r, "attention_bias", 0, 0, "attention projections with bias", e));
    TRY(cfg_str_is(&r, "pad_mode", "constant", e));
    TRY(cfg_str_is(&r, "hidden_act", "gelu", e));
    cfg->norm_eps = (float)eps;
    cfg->rope_theta = (float)theta;
    if (audio_channels != 1) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: encoder_config.audio_channels = %d; only mono (1) is supported", file,
                     audio_channels);
        goto done;
    }
    json_t *ratios = json_object_get(enc, "upsampling_ratios");
    if (!json_is_array(ratios) || json_array_size(ratios) < 1 || json_array_size(ratios) > 8) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config.upsampling_ratios must be an array of 1 to 8 integers", file);
        goto done;
    }
    cfg->n_ratios = (int)json_array_size(ratios);
    long hop = 1;
    for (int i = 0; i < cfg->n_ratios; i++) {
        json_t *v = json_array_get(ratios, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64) {
            st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config.upsampling_ratios[%d] must be an integer in [1, 64]", file, i);
            goto done;
        }
        cfg->ratios[i] = (int)json_integer_value(v);
        hop *= cfg->ratios[i];
    }
    /* SEANet channels double per stage: F * 2^n_ratios must stay an int. */
    if ((long)cfg->num_filters << cfg->n_ratios > (1L << 20)) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config.num_filters * 2^%d is implausibly large", file, cfg->n_ratios);
        goto done;
    }
    if (cfg->n_heads % cfg->n_kv_heads != 0 || cfg->head_dim % 2 != 0) {
        st = err_set(e, QTTS_ERR_FORMAT,
                     "%s: encoder_config: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d) and head_dim (%d) even",
                     file, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim);
        goto done;
    }
    /* The RVQ compares the projected latent (vq_hidden, or hidden without a
     * projection) with codebook vectors of codebook_dim. */
    const int proj_dim = cfg->vq_hidden != cfg->hidden ? cfg->vq_hidden : cfg->hidden;
    if (proj_dim != cfg->codebook_dim) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config: the RVQ input is %d-d but codebook_dim is %d", file, proj_dim,
                     cfg->codebook_dim);
        goto done;
    }
    /* MimiModel: encodec_frame_rate = ceil(sr / hop); the downsample conv has
     * kernel 2 * int(encodec_frame_rate / frame_rate) and stride 2. */
    json_t *fr = json_object_get(enc, "frame_rate");
    TRY(cfg_num(&r, fr ? "frame_rate" : "_frame_rate", 12.5, 1e-3, 1e6, &frame_rate, e));
    const double encodec_rate = ceil((double)cfg->sample_rate / (double)hop);
    if (encodec_rate == frame_rate) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "%s: encoder_config.frame_rate equals the SEANet rate (%g Hz): a Mimi without downsample is not supported",
                     file, frame_rate);
        goto done;
    }
    cfg->down_kernel = 2 * (int)(encodec_rate / frame_rate);
    cfg->down_stride = 2;
    if (cfg->down_kernel < 2) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config.frame_rate %g is above the SEANet rate %g Hz", file, frame_rate,
                     encodec_rate);
        goto done;
    }
    /* Top level: the wrapper's frame size and kept codebooks. */
    TRY(cfg_int(&top, "encode_downsample_rate", 0, (int)hop * cfg->down_stride, 1, 1 << 20, &cfg->samples_per_frame, e));
    TRY(cfg_int(&top, "encoder_valid_num_quantizers", 0, cfg->n_q, 1, 1024, &cfg->n_valid_q, e));
    TRY(cfg_int(&top, "input_sample_rate", 0, cfg->sample_rate, 1000, 1000000, &input_sr, e));
    if (cfg->samples_per_frame != hop * cfg->down_stride) {
        st = err_set(e, QTTS_ERR_FORMAT,
                     "%s: encode_downsample_rate = %d but the encoder geometry gives %ld samples per frame (prod(upsampling_ratios) * %d)",
                     file, cfg->samples_per_frame, hop * cfg->down_stride, cfg->down_stride);
        goto done;
    }
    if (cfg->n_valid_q > cfg->n_q) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_valid_num_quantizers = %d exceeds encoder_config.num_quantizers = %d",
                     file, cfg->n_valid_q, cfg->n_q);
        goto done;
    }
    if (cfg->n_sem_q > cfg->n_q) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: encoder_config.num_semantic_quantizers = %d exceeds num_quantizers = %d", file,
                     cfg->n_sem_q, cfg->n_q);
        goto done;
    }
    if (input_sr != cfg->sample_rate) {
        st = err_set(e, QTTS_ERR_FORMAT, "%s: input_sample_rate %d differs from encoder_config.sampling_rate %d", file,
                     input_sr, cfg->sample_rate);
        goto done;
    }
#undef TRY
done:
    json_decref(root);
    return st;
}

/* ------------------------------------------------------------ weights */

static qtts_status own(codec_encoder *c, void *p, qtts_error *e) {
    if (!p) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
    if (c->n_owned == c->cap_owned) {
        int cap = c->cap_owned ? 2 * c->cap_owned : 64;
        void **g = realloc(c->owned, sizeof(void *) * (size_t)cap);
        if (!g) {
            free(p);
            return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
        }
        c->owned = g;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = p;
    return QTTS_OK;
}

/* Float tensor of the given shape as f32: in place when stored F32, else a
 * widened owned copy. */
static qtts_status get_f32(codec_encoder *c, const char *name, int ndim, const int64_t *shape, const float **out,
                           qtts_error *e) {
    const st_tensor *t;
    qtts_status st = st_get_float(&c->st, name, ndim, shape, &t, e);
    if (st) return st;
    if (t->dtype == DT_F32) {
        *out = t->data;
        return QTTS_OK;
    }
    float *w = malloc(sizeof(float) * (size_t)t->n_elems);
    if ((st = own(c, w, e))) return st;
    dtype_to_f32(t->dtype, t->data, w, (size_t)t->n_elems);
    *out = w;
    return QTTS_OK;
}

static qtts_status get_vec(codec_encoder *c, const char *name, int n, const float **out, qtts_error *e) {
    const int64_t shape[1] = {n};
    return get_f32(c, name, 1, shape, out, e);
}

/* Linear weight [rows][cols] (or a k=1 conv [rows][cols][1]) in its stored dtype. */
static qtts_status get_mat(codec_encoder *c, const char *name, int rows, int cols, int conv_k1, qt_mat *m,
                           qtts_error *e) {
    const int64_t shape[3] = {rows, cols, 1};
    const st_tensor *t;
    qtts_status st = st_get_float(&c->st, name, conv_k1 ? 3 : 2, shape, &t, e);
    if (st) return st;
    m->data = t->data;
    m->dtype = t->dtype;
    m->rows = rows;
    m->cols = cols;
    return QTTS_OK;
}

static qtts_status get_conv(codec_encoder *c, enc_conv *cv, const char *prefix, int cin, int cout, int k, int stride,
                            int dilation, int has_bias, qtts_error *e) {
    char name[256];
    const int64_t shape[3] = {cout, cin, k};
    cv->cin = cin;
    cv->cout = cout;
    cv->k = k;
    cv->stride = stride;
    cv->dilation = dilation;
    cv->b = NULL;
    snprintf(name, sizeof name, "%s.weight", prefix);
    qtts_status st = get_f32(c, name, 3, shape, &cv->w, e);
    if (st || !has_bias) return st;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return get_vec(c, name, cout, &cv->b, e);
}

/* SEANet: the layer list of MimiEncoder, indices as in its ModuleList. */
static qtts_status load_seanet(codec_encoder *c, qtts_error *e) {
    const codec_encoder_config *g = &c->cfg;
    c->n_steps = 1 + g->n_ratios * (g->n_residual_layers + 2) + 2;
    c->steps = calloc((size_t)c->n_steps, sizeof(enc_step));
    if (!c->steps) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
    char p[256];
    int idx = 0;
    qtts_status st;
    enc_step *s = c->steps;
    s[idx].kind = STEP_CONV;
    snprintf(p, sizeof p, "encoder.encoder.layers.%d.conv", idx);
    if ((st = get_conv(c, &s[idx].a, p, 1, g->num_filters, g->kernel_size, 1, 1, 1, e))) return st;
    idx++;
    int dim = g->num_filters;
    for (int i = g->n_ratios - 1; i >= 0; i--) {
        const int ratio = g->ratios[i];
        const int hid = dim / g->compress;
        if (hid < 1)
            return err_set(e, QTTS_ERR_FORMAT, "encoder_config: compress %d leaves no channels in a %d-channel residual block",
                           g->compress, dim);
        int dil = 1;
        for (int j = 0; j < g->n_residual_layers; j++) {
            s[idx].kind = STEP_RESBLOCK;
            snprintf(p, sizeof p, "encoder.encoder.layers.%d.block.1.conv", idx);
            if ((st = get_conv(c, &s[idx].a, p, dim, hid, g->residual_kernel_size, 1, dil, 1, e))) return st;
            snprintf(p, sizeof p, "encoder.encoder.layers.%d.block.3.conv", idx);
            if ((st = get_conv(c, &s[idx].b, p, hid, dim, 1, 1, 1, 1, e))) return st;
            idx++;
            dil *= g->dilation_growth_rate;
        }
        s[idx++].kind = STEP_ELU;
        s[idx].kind = STEP_CONV;
        snprintf(p, sizeof p, "encoder.encoder.layers.%d.conv", idx);
        if ((st = get_conv(c, &s[idx].a, p, dim, 2 * dim, 2 * ratio, ratio, 1, 1, e))) return st;
        idx++;
        dim *= 2;
    }
    s[idx++].kind = STEP_ELU;
    s[idx].kind = STEP_CONV;
    snprintf(p, sizeof p, "encoder.encoder.layers.%d.conv", idx);
    if ((st = get_conv(c, &s[idx].a, p, dim, g->hidden, g->last_kernel_size, 1, 1, 1, e))) return st;
    return QTTS_OK;
}

static qtts_status load_transformer(codec_encoder *c, qtts_error *e) {
    const codec_encoder_config *g = &c->cfg;
    const int C = g->hidden, qd = g->n_heads * g->head_dim, kvd = g->n_kv_heads * g->head_dim;
    if (g->n_layers > 0) {
        c->layers = calloc((size_t)g->n_layers, sizeof(enc_layer));
        if (!c->layers) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
    }
    char n[256];
    qtts_status st;
    for (int l = 0; l < g->n_layers; l++) {
        enc_layer *L = &c->layers[l];
#define NAME(suffix) (snprintf(n, sizeof n, "encoder.encoder_transformer.layers.%d.%s", l, suffix), n)
        if ((st = get_vec(c, NAME("input_layernorm.weight"), C, &L->ln1_w, e))) return st;
        if ((st = get_vec(c, NAME("input_layernorm.bias"), C, &L->ln1_b, e))) return st;
        if ((st = get_mat(c, NAME("self_attn.q_proj.weight"), qd, C, 0, &L->wq, e))) return st;
        if ((st = get_mat(c, NAME("self_attn.k_proj.weight"), kvd, C, 0, &L->wk, e))) return st;
        if ((st = get_mat(c, NAME("self_attn.v_proj.weight"), kvd, C, 0, &L->wv, e))) return st;
        if ((st = get_mat(c, NAME("self_attn.o_proj.weight"), C, qd, 0, &L->wo, e))) return st;
        if ((st = get_vec(c, NAME("self_attn_layer_scale.scale"), C, &L->ls_attn, e))) return st;
        if ((st = get_vec(c, NAME("post_attention_layernorm.weight"), C, &L->ln2_w, e))) return st;
        if ((st = get_vec(c, NAME("post_attention_layernorm.bias"), C, &L->ln2_b, e))) return st;
        if ((st = get_mat(c, NAME("mlp.fc1.weight"), g->intermediate, C, 0, &L->fc1, e))) return st;
        if ((st = get_mat(c, NAME("mlp.fc2.weight"), C, g->intermediate, 0, &L->fc2, e))) return st;
        if ((st = get_vec(c, NAME("mlp_layer_scale.scale"), C, &L->ls_mlp, e))) return st;
#undef NAME
    }
    /* HF default RoPE: inv_freq[i] = 1 / theta^((2i)/D), in f32 as torch does. */
    const int half = g->head_dim / 2;
    c->inv_freq = malloc(sizeof(float) * (size_t)half);
    if (!c->inv_freq) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
    for (int i = 0; i < half; i++)
        c->inv_freq[i] = 1.0f / powf(c->cfg.rope_theta, (float)(2 * i) / (float)g->head_dim);
    return QTTS_OK;
}

/* One residual VQ: optional input projection and the first n_used codebooks,
 * materialised as embed_sum / max(cluster_usage, 1e-5) (MimiEuclideanCodebook). */
static qtts_status load_rvq(codec_encoder *c, enc_rvq *q, const char *which, int n_used, qtts_error *e) {
    const codec_encoder_config *g = &c->cfg;
    const int K = g->codebook_size, d = g->codebook_dim;
    char n[256];
    qtts_status st;
    q->has_proj = g->vq_hidden != g->hidden;
    q->n_used = n_used;
    if (n_used == 0) return QTTS_OK;
    if (q->has_proj) {
        snprintf(n, sizeof n, "encoder.quantizer.%s_residual_vector_quantizer.input_proj.weight", which);
        if ((st = get_mat(c, n, g->vq_hidden, g->hidden, 1, &q->in_proj, e))) return st;
    }
    q->codebook = calloc((size_t)n_used, sizeof(float *));
    if ((st = own(c, q->codebook, e))) return st;
    q->norm2 = calloc((size_t)n_used, sizeof(double *));
    if ((st = own(c, q->norm2, e))) return st;
    for (int i = 0; i < n_used; i++) {
        const float *sum, *usage;
        const int64_t shape[2] = {K, d};
        snprintf(n, sizeof n, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook.embed_sum", which, i);
        if ((st = get_f32(c, n, 2, shape, &sum, e))) return st;
        snprintf(n, sizeof n, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook.cluster_usage", which, i);
        if ((st = get_vec(c, n, K, &usage, e))) return st;
        float *E = malloc(sizeof(float) * (size_t)K * (size_t)d);
        if ((st = own(c, E, e))) return st;
        double *n2 = malloc(sizeof(double) * (size_t)K);
        if ((st = own(c, n2, e))) return st;
        for (int j = 0; j < K; j++) {
            const float u = usage[j] < 1e-5f ? 1e-5f : usage[j];
            double a = 0.0;
            for (int k = 0; k < d; k++) {
                E[(size_t)j * d + k] = sum[(size_t)j * d + k] / u;
                a += (double)E[(size_t)j * d + k] * E[(size_t)j * d + k];
            }
            n2[j] = a;
        }
        q->codebook[i] = E;
        q->norm2[i] = n2;
    }
    return QTTS_OK;
}

static int has_encoder_tensors(const st_set *s) {
    for (int i = 0; i < s->n_tensors; i++)
        if (strncmp(s->tensors[i].name, "encoder.", 8) == 0) return 1;
    return 0;
}

qtts_status codec_encoder_load(codec_encoder **out, const char *dir, qtts_error *e) {
    *out = NULL;
    codec_encoder *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, QTTS_ERR_NOMEM, "out of memory loading the codec encoder");
    qtts_status st = parse_config(&c->cfg, dir, e);
    if (st) goto fail;
    if ((st = st_open(&c->st, dir, e))) goto fail;
    if (!has_encoder_tensors(&c->st)) {
        st = err_set(e, QTTS_ERR_UNSUPPORTED,
                     "%s: this checkpoint has no codec encoder (encoder.* tensors); voice cloning needs a Base model",
                     c->st.n_files ? c->st.paths[0] : dir);
        goto fail;
    }
    ops_init(&c->ops, 1, 0);
    if ((st = load_seanet(c, e))) goto fail;
    if ((st = load_transformer(c, e))) goto fail;
    const int C = c->cfg.hidden;
    if ((st = get_conv(c, &c->down, "encoder.downsample.conv", C, C, c->cfg.down_kernel, c->cfg.down_stride, 1, 0, e)))
        goto fail;
    /* The wrapper keeps the first n_valid_q codes of [semantic..., acoustic...]. */
    const int n_sem = c->cfg.n_sem_q < c->cfg.n_valid_q ? c->cfg.n_sem_q : c->cfg.n_valid_q;
    if ((st = load_rvq(c, &c->sem, "semantic", n_sem, e))) goto fail;
    if ((st = load_rvq(c, &c->ac, "acoustic", c->cfg.n_valid_q - n_sem, e))) goto fail;
    *out = c;
    return QTTS_OK;
fail:
    codec_encoder_free(c);
    return st;
}

void codec_encoder_free(codec_encoder *c) {
    if (!c) return;
    ops_free(&c->ops);
    for (int i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->steps);
    free(c->layers);
    free(c->inv_freq);
    st_close(&c->st);
    free(c);
}

int codec_encoder_n_codebooks(const codec_encoder *c) { return c->cfg.n_valid_q; }
int codec_encoder_sample_rate(const codec_encoder *c) { return c->cfg.sample_rate; }
int codec_encoder_samples_per_frame(const codec_encoder *c) { return c->cfg.samples_per_frame; }

void codec_encoder_set_threads(codec_encoder *c, int n_threads) {
    ops_free(&c->ops);
    ops_init(&c->ops, n_threads < 1 ? 1 : n_threads, 0);
}
