/* make-model: synthetic checkpoints with the geometry, tensor names and dtypes
 * of the released Qwen3-TTS 12 Hz checkpoints (../shared/spec/lm.md sections
 * 2-3, ../shared/spec/codec.md sections 1, 3, 5, 6), random weights.
 * Dataflow: (size, type, seed) -> geometry -> tensor list (walked twice:
 * declare, then fill) -> model.safetensors (BF16) and
 * speech_tokenizer/model.safetensors (F32), config files, tokenizer copy.
 * Every tensor's values come from its own PRNG stream seeded by (seed, name),
 * so a folder is a pure function of its options. Weights are drawn so that
 * activations stay O(1): linear layers std gain/sqrt(fan_in), residual
 * output projections scaled down by the depth, norms near 1, codebook usage
 * positive. The configs carry a "qtts_synthetic" object so that no tool takes
 * the folder for a real model. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

const char *const mm_size_names[] = {"0.6b", "1.7b", "tiny", NULL};

/* ---------------------------------------------------------------- geometry */

typedef struct geom {
    const char *size_name; /* config tts_model_size */
    /* talker */
    int H, I, L, heads, kv, hd, text_hidden, text_vocab, V;
    /* code predictor */
    int cH, cI, cL, cheads, ckv, chd, cV;
    int groups;
    /* speaker encoder (Base) */
    int spk_ch[5], spk_k[5], spk_d[5], spk_att, spk_scale, spk_se, spk_mel;
    /* codec decoder */
    int d_cbdim, d_latent, d_dim, d_hidden, d_inter, d_heads, d_kv, d_hd, d_layers, d_window, d_cbsize, d_nq;
    /* codec encoder (Mimi) */
    int e_hidden, e_nf, e_layers, e_inter, e_heads, e_kv, e_hd, e_cbdim, e_nq, e_cbsize;
} geom;

static void geom_for(const char *size, geom *g) {
    memset(g, 0, sizeof *g);
    const int ch[5] = {512, 512, 512, 512, 1536}, k[5] = {5, 3, 3, 3, 1}, d[5] = {1, 2, 3, 4, 1};
    memcpy(g->spk_ch, ch, sizeof ch);
    memcpy(g->spk_k, k, sizeof k);
    memcpy(g->spk_d, d, sizeof d);
    g->spk_att = 128, g->spk_scale = 8, g->spk_se = 128, g->spk_mel = 128;
    g->groups = 16, g->V = 3072, g->text_vocab = 151936, g->text_hidden = 2048;
    g->L = 28, g->heads = 16, g->kv = 8, g->hd = 128;
    g->cH = 1024, g->cI = 3072, g->cL = 5, g->cheads = 16, g->ckv = 8, g->chd = 128, g->cV = 2048;
    g->d_cbdim = 512, g->d_latent = 1024, g->d_dim = 1536, g->d_hidden = 512, g->d_inter = 1024;
    g->d_heads = 16, g->d_kv = 16, g->d_hd = 64, g->d_layers = 8, g->d_window = 72, g->d_cbsize = 2048, g->d_nq = 16;
    g->e_hidden = 512, g->e_nf = 64, g->e_layers = 8, g->e_inter = 2048, g->e_heads = 8, g->e_kv = 8, g->e_hd = 64;
    g->e_cbdim = 256, g->e_nq = 32, g->e_cbsize = 2048;
    if (strcmp(size, "1.7b") == 0) {
        g->size_name = "1b7";
        g->H = 2048, g->I = 6144;
    } else if (strcmp(size, "tiny") == 0) {
        /* the golden test checkpoints' geometry with the real text vocabulary */
        g->size_name = "1b7";
        g->H = 64, g->I = 128, g->L = 2, g->heads = 4, g->kv = 2, g->hd = 16, g->text_hidden = 16;
        g->cH = 32, g->cI = 64, g->cL = 2, g->cheads = 4, g->ckv = 2, g->chd = 8;
        const int tch[5] = {32, 32, 32, 32, 96};
        memcpy(g->spk_ch, tch, sizeof tch);
        g->spk_att = 16, g->spk_scale = 4, g->spk_se = 16;
        g->d_cbdim = 16, g->d_latent = 32, g->d_dim = 32, g->d_hidden = 32, g->d_inter = 64;
        g->d_heads = 4, g->d_kv = 2, g->d_hd = 8, g->d_layers = 2, g->d_window = 4;
        g->e_hidden = 32, g->e_nf = 4, g->e_layers = 2, g->e_inter = 64, g->e_heads = 4, g->e_kv = 4, g->e_hd = 8;
        g->e_cbdim = 16, g->e_nq = 18;
    } else {
        g->size_name = "0b6";
        g->H = 1024, g->I = 3072;
    }
}

/* ---------------------------------------------------------------- PRNG */

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the tensor name */
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    uint64_t x = seed ^ h;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng *r) { /* xoshiro256+ */
    uint64_t *s = r->s;
    const uint64_t res = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return res;
}

/* Approximately standard normal: Irwin-Hall sum of four 16-bit uniforms
 * (bounded at +-3.46; exact mean 0 and variance 1 up to 2^-16). */
static inline float rng_normal(rng *r) {
    const uint64_t x = rng_next(r);
    const int64_t s = (int64_t)(x & 0xffff) + (int64_t)((x >> 16) & 0xffff) + (int64_t)((x >> 32) & 0xffff) +
                      (int64_t)(x >> 48);
    return (float)((double)(s - 131070) * (1.7320508075688772 / 65536.0));
}

static inline float rng_uniform(rng *r) { return (float)((rng_next(r) >> 40) * (1.0 / 16777216.0)); }

/* ---------------------------------------------------------------- tensor walk */

enum { I_NORMAL, I_UNIFORM };
typedef struct init {
    int kind;
    float a, b; /* normal: std a, mean b; uniform: [a, b) */
} init;

typedef struct walker {
    stw_writer *w;
    int fill;       /* 0 = declare, 1 = write data */
    st_dtype dt;
    uint64_t seed;
    float *buf;
    size_t nbuf;
    int failed;
    uint64_t n_params, bytes;
    int quiet;
    uint64_t progress_next;
} walker;

#define WBUF (1u << 20)

static void emit(walker *k, const char *name, init in, int nd, int64_t d0, int64_t d1, int64_t d2) {
    if (k->failed) return;
    const int64_t shape[3] = {d0, d1, d2};
    if (!k->w) { /* counting only */
        k->n_params += (uint64_t)d0 * (uint64_t)(nd > 1 ? d1 : 1) * (uint64_t)(nd > 2 ? d2 : 1);
        k->bytes++; /* tensors */
        return;
    }
    if (!k->fill) {
        if (stw_declare(k->w, name, k->dt, nd, shape) < 0) k->failed = 1;
        return;
    }
    uint64_t n = (uint64_t)d0 * (uint64_t)(nd > 1 ? d1 : 1) * (uint64_t)(nd > 2 ? d2 : 1);
    rng r;
    rng_seed(&r, k->seed, name);
    k->n_params += n;
    k->bytes += n * (k->dt == ST_F32 ? 4 : 2);
    while (n > 0) {
        size_t m = n < WBUF ? (size_t)n : WBUF;
        if (in.kind == I_NORMAL)
            for (size_t i = 0; i < m; i++) k->buf[i] = in.b + in.a * rng_normal(&r);
        else
            for (size_t i = 0; i < m; i++) k->buf[i] = in.a + (in.b - in.a) * rng_uniform(&r);
        if (stw_write_f32(k->w, k->buf, m)) {
            k->failed = 1;
            return;
        }
        n -= m;
    }
    if (!k->quiet && k->bytes >= k->progress_next) {
        fprintf(stderr, "\r  %.0f MB", k->bytes / 1e6);
        k->progress_next = k->bytes + 200000000ull;
    }
}

static init NRM(double std) { return (init){I_NORMAL, (float)std, 0.0f}; }
static init NEAR(double mean, double std) { return (init){I_NORMAL, (float)std, (float)mean}; }
static init UNI(double a, double b) { return (init){I_UNIFORM, (float)a, (float)b}; }
/* a linear layer y = W x with W [out, in]: unit gain keeps the RMS of y near that of x */
static init LIN(double gain, int64_t fan_in) { return NRM(gain / sqrt((double)fan_in)); }
static const init BIAS = {I_NORMAL, 0.02f, 0.0f};
static const init NORMW = {I_NORMAL, 0.05f, 1.0f};

#define E1(nm, in, a) emit(k, nm, in, 1, a, 0, 0)
#define E2(nm, in, a, b) emit(k, nm, in, 2, a, b, 0)
#define E3(nm, in, a, b, c) emit(k, nm, in, 3, a, b, c)

/* One Qwen3 decoder layer (talker or code predictor). */
static void qwen3_layer(walker *k, const char *p, int H, int I, int heads, int kv, int hd, int n_layers) {
    char n[256];
    const double res = 1.0 / sqrt(2.0 * n_layers); /* residual branches: total added variance ~1 */
#define N(s) (snprintf(n, sizeof n, "%s%s", p, s), n)
    E1(N("input_layernorm.weight"), NORMW, H);
    E2(N("self_attn.q_proj.weight"), LIN(1, H), (int64_t)heads * hd, H);
    E2(N("self_attn.k_proj.weight"), LIN(1, H), (int64_t)kv * hd, H);
    E2(N("self_attn.v_proj.weight"), LIN(1, H), (int64_t)kv * hd, H);
    E2(N("self_attn.o_proj.weight"), LIN(res, (int64_t)heads * hd), H, (int64_t)heads * hd);
    E1(N("self_attn.q_norm.weight"), NORMW, hd);
    E1(N("self_attn.k_norm.weight"), NORMW, hd);
    E1(N("post_attention_layernorm.weight"), NORMW, H);
    E2(N("mlp.gate_proj.weight"), LIN(1, H), I, H);
    E2(N("mlp.up_proj.weight"), LIN(1, H), I, H);
    E2(N("mlp.down_proj.weight"), LIN(2.0 * res, I), H, I);
#undef N
}

static void walk_main(walker *k, const geom *g, int base) {
    char n[256];
    E2("talker.model.text_embedding.weight", NRM(1.0), g->text_vocab, g->text_hidden);
    E2("talker.text_projection.linear_fc1.weight", LIN(1, g->text_hidden), g->text_hidden, g->text_hidden);
    E1("talker.text_projection.linear_fc1.bias", BIAS, g->text_hidden);
    E2("talker.text_projection.linear_fc2.weight", LIN(1, g->text_hidden), g->H, g->text_hidden);
    E1("talker.text_projection.linear_fc2.bias", BIAS, g->H);
    E2("talker.model.codec_embedding.weight", NRM(0.5), g->V, g->H);
    for (int l = 0; l < g->L; l++) {
        char p[64];
        snprintf(p, sizeof p, "talker.model.layers.%d.", l);
        qwen3_layer(k, p, g->H, g->I, g->heads, g->kv, g->hd, g->L);
    }
    E1("talker.model.norm.weight", NORMW, g->H);
    E2("talker.codec_head.weight", LIN(2.5, g->H), g->V, g->H);
    /* code predictor */
    if (g->H != g->cH) {
        E2("talker.code_predictor.small_to_mtp_projection.weight", LIN(1, g->H), g->cH, g->H);
        E1("talker.code_predictor.small_to_mtp_projection.bias", BIAS, g->cH);
    }
    for (int i = 0; i < g->groups - 1; i++) {
        snprintf(n, sizeof n, "talker.code_predictor.model.codec_embedding.%d.weight", i);
        E2(n, NRM(0.25), g->cV, g->H);
    }
    for (int l = 0; l < g->cL; l++) {
        char p[64];
        snprintf(p, sizeof p, "talker.code_predictor.model.layers.%d.", l);
        qwen3_layer(k, p, g->cH, g->cI, g->cheads, g->ckv, g->chd, g->cL);
    }
    E1("talker.code_predictor.model.norm.weight", NORMW, g->cH);
    for (int i = 0; i < g->groups - 1; i++) {
        snprintf(n, sizeof n, "talker.code_predictor.lm_head.%d.weight", i);
        E2(n, LIN(2.5, g->cH), g->cV, g->cH);
    }
    if (!base) return;
    /* ECAPA-TDNN speaker encoder (codec.md 6.2), all convs with bias */
    const int *C = g->spk_ch;
#define SE(fmt, ...) (snprintf(n, sizeof n, "speaker_encoder." fmt, __VA_ARGS__), n)
    E3(SE("blocks.0.conv.weight%s", ""), LIN(1.4, (int64_t)g->spk_mel * g->spk_k[0]), C[0], g->spk_mel, g->spk_k[0]);
    E1(SE("blocks.0.conv.bias%s", ""), BIAS, C[0]);
    for (int b = 1; b <= 3; b++) {
        const int sub = C[b] / g->spk_scale;
        E3(SE("blocks.%d.tdnn1.conv.weight", b), LIN(1.4, C[b - 1]), C[b], C[b - 1], 1);
        E1(SE("blocks.%d.tdnn1.conv.bias", b), BIAS, C[b]);
        for (int s = 0; s < g->spk_scale - 1; s++) {
            E3(SE("blocks.%d.res2net_block.blocks.%d.conv.weight", b, s), LIN(1.4, (int64_t)sub * g->spk_k[b]), sub,
               sub, g->spk_k[b]);
            E1(SE("blocks.%d.res2net_block.blocks.%d.conv.bias", b, s), BIAS, sub);
        }
        E3(SE("blocks.%d.tdnn2.conv.weight", b), LIN(1.4, C[b]), C[b], C[b], 1);
        E1(SE("blocks.%d.tdnn2.conv.bias", b), BIAS, C[b]);
        E3(SE("blocks.%d.se_block.conv1.weight", b), LIN(1.4, C[b]), g->spk_se, C[b], 1);
        E1(SE("blocks.%d.se_block.conv1.bias", b), BIAS, g->spk_se);
        E3(SE("blocks.%d.se_block.conv2.weight", b), LIN(1, g->spk_se), C[b], g->spk_se, 1);
        E1(SE("blocks.%d.se_block.conv2.bias", b), BIAS, C[b]);
    }
    const int cat = C[1] + C[2] + C[3];
    E3(SE("mfa.conv.weight%s", ""), LIN(1.4, cat), C[4], cat, g->spk_k[4]);
    E1(SE("mfa.conv.bias%s", ""), BIAS, C[4]);
    E3(SE("asp.tdnn.conv.weight%s", ""), LIN(1.4, 3 * C[4]), g->spk_att, 3 * C[4], 1);
    E1(SE("asp.tdnn.conv.bias%s", ""), BIAS, g->spk_att);
    E3(SE("asp.conv.weight%s", ""), LIN(1, g->spk_att), C[4], g->spk_att, 1);
    E1(SE("asp.conv.bias%s", ""), BIAS, C[4]);
    E3(SE("fc.weight%s", ""), LIN(0.5, 2 * C[4]), g->H, 2 * C[4], 1);
    E1(SE("fc.bias%s", ""), BIAS, g->H);
#undef SE
}

/* Codec decoder (codec.md 3.1) and, for Base models, the Mimi encoder (5.2). */
static void walk_codec(walker *k, const geom *g, int base) {
    char n[256];
    const int half = g->d_cbdim / 2;
#define P(fmt, ...) (snprintf(n, sizeof n, "decoder." fmt, __VA_ARGS__), n)
    for (int q = 0; q < g->d_nq; q++) {
        const char *which = q == 0 ? "rvq_first" : "rvq_rest";
        const int li = q == 0 ? 0 : q - 1;
        /* usage u in [0.5, 2); stored sum = u * codeword, codeword std 0.5 */
        E2(P("quantizer.%s.vq.layers.%d._codebook.embedding_sum", which, li), NRM(0.6), g->d_cbsize, half);
        E1(P("quantizer.%s.vq.layers.%d._codebook.cluster_usage", which, li), UNI(0.5, 2.0), g->d_cbsize);
    }
    for (int i = 0; i < 2; i++) {
        const char *which = i == 0 ? "rvq_first" : "rvq_rest";
        E3(P("quantizer.%s.input_proj.weight", which), LIN(1, g->d_cbdim), half, g->d_cbdim, 1);
        E3(P("quantizer.%s.output_proj.weight", which), LIN(i == 0 ? 1.0 : 0.3, half), g->d_cbdim, half, 1);
    }
    E3(P("pre_conv.conv.weight%s", ""), LIN(1, (int64_t)g->d_cbdim * 3), g->d_latent, g->d_cbdim, 3);
    E1(P("pre_conv.conv.bias%s", ""), BIAS, g->d_latent);
    E2(P("pre_transformer.input_proj.weight%s", ""), LIN(1, g->d_latent), g->d_hidden, g->d_latent);
    E1(P("pre_transformer.input_proj.bias%s", ""), BIAS, g->d_hidden);
    const int dq = g->d_heads * g->d_hd, dkv = g->d_kv * g->d_hd;
    for (int l = 0; l < g->d_layers; l++) {
        E1(P("pre_transformer.layers.%d.input_layernorm.weight", l), NORMW, g->d_hidden);
        E2(P("pre_transformer.layers.%d.self_attn.q_proj.weight", l), LIN(1, g->d_hidden), dq, g->d_hidden);
        E2(P("pre_transformer.layers.%d.self_attn.k_proj.weight", l), LIN(1, g->d_hidden), dkv, g->d_hidden);
        E2(P("pre_transformer.layers.%d.self_attn.v_proj.weight", l), LIN(1, g->d_hidden), dkv, g->d_hidden);
        E2(P("pre_transformer.layers.%d.self_attn.o_proj.weight", l), LIN(1, dq), g->d_hidden, dq);
        E1(P("pre_transformer.layers.%d.self_attn_layer_scale.scale", l), NEAR(0.1, 0.01), g->d_hidden);
        E1(P("pre_transformer.layers.%d.post_attention_layernorm.weight", l), NORMW, g->d_hidden);
        E2(P("pre_transformer.layers.%d.mlp.gate_proj.weight", l), LIN(1, g->d_hidden), g->d_inter, g->d_hidden);
        E2(P("pre_transformer.layers.%d.mlp.up_proj.weight", l), LIN(1, g->d_hidden), g->d_inter, g->d_hidden);
        E2(P("pre_transformer.layers.%d.mlp.down_proj.weight", l), LIN(2, g->d_inter), g->d_hidden, g->d_inter);
        E1(P("pre_transformer.layers.%d.mlp_layer_scale.scale", l), NEAR(0.1, 0.01), g->d_hidden);
    }
    E1(P("pre_transformer.norm.weight%s", ""), NORMW, g->d_hidden);
    E2(P("pre_transformer.output_proj.weight%s", ""), LIN(1, g->d_hidden), g->d_latent, g->d_hidden);
    E1(P("pre_transformer.output_proj.bias%s", ""), BIAS, g->d_latent);
    const int lat = g->d_latent;
    for (int u = 0; u < 2; u++) {
        E3(P("upsample.%d.0.conv.weight", u), LIN(1, lat), lat, lat, 2);
        E1(P("upsample.%d.0.conv.bias", u), BIAS, lat);
        E3(P("upsample.%d.1.dwconv.conv.weight", u), LIN(1, 7), lat, 1, 7);
        E1(P("upsample.%d.1.dwconv.conv.bias", u), BIAS, lat);
        E1(P("upsample.%d.1.norm.weight", u), NORMW, lat);
        E1(P("upsample.%d.1.norm.bias", u), BIAS, lat);
        E2(P("upsample.%d.1.pwconv1.weight", u), LIN(1.4, lat), 4 * lat, lat);
        E1(P("upsample.%d.1.pwconv1.bias", u), BIAS, 4 * lat);
        E2(P("upsample.%d.1.pwconv2.weight", u), LIN(1, 4 * lat), lat, 4 * lat);
        E1(P("upsample.%d.1.pwconv2.bias", u), BIAS, lat);
        E1(P("upsample.%d.1.gamma", u), NEAR(0.1, 0.01), lat);
    }
    E3(P("decoder.0.conv.weight%s", ""), LIN(1, (int64_t)lat * 7), g->d_dim, lat, 7);
    E1(P("decoder.0.conv.bias%s", ""), BIAS, g->d_dim);
    static const int rates[4] = {8, 5, 4, 3};
    int cin = g->d_dim;
    for (int b = 0; b < 4; b++) {
        const int cout = cin / 2, r = rates[b];
        /* SnakeBeta log-scale parameters: alpha ~ 0 (frequency 1), beta ~ 0 (amplitude 1) */
        E1(P("decoder.%d.block.0.alpha", b + 1), NEAR(0, 0.1), cin);
        E1(P("decoder.%d.block.0.beta", b + 1), NEAR(0, 0.1), cin);
        /* transposed conv [Cin, Cout, 2r]: each output sample sums 2 input steps x Cin */
        E3(P("decoder.%d.block.1.conv.weight", b + 1), LIN(0.8, 2 * cin), cin, cout, 2 * r);
        E1(P("decoder.%d.block.1.conv.bias", b + 1), BIAS, cout);
        for (int u = 2; u <= 4; u++) {
            E1(P("decoder.%d.block.%d.act1.alpha", b + 1, u), NEAR(0, 0.1), cout);
            E1(P("decoder.%d.block.%d.act1.beta", b + 1, u), NEAR(0, 0.1), cout);
            E3(P("decoder.%d.block.%d.conv1.conv.weight", b + 1, u), LIN(1, (int64_t)cout * 7), cout, cout, 7);
            E1(P("decoder.%d.block.%d.conv1.conv.bias", b + 1, u), BIAS, cout);
            E1(P("decoder.%d.block.%d.act2.alpha", b + 1, u), NEAR(0, 0.1), cout);
            E1(P("decoder.%d.block.%d.act2.beta", b + 1, u), NEAR(0, 0.1), cout);
            E3(P("decoder.%d.block.%d.conv2.conv.weight", b + 1, u), LIN(0.3, cout), cout, cout, 1);
            E1(P("decoder.%d.block.%d.conv2.conv.bias", b + 1, u), BIAS, cout);
        }
        cin = cout;
    }
    E1(P("decoder.5.alpha%s", ""), NEAR(0, 0.1), cin);
    E1(P("decoder.5.beta%s", ""), NEAR(0, 0.1), cin);
    E3(P("decoder.6.conv.weight%s", ""), LIN(0.15, (int64_t)cin * 7), 1, cin, 7);
    E1(P("decoder.6.conv.bias%s", ""), NRM(0.001), 1);
#undef P
    if (!base) return;
#define Q(fmt, ...) (snprintf(n, sizeof n, "encoder." fmt, __VA_ARGS__), n)
    const int nf = g->e_nf;
    static const int ratios[4] = {4, 5, 6, 8};
    E3(Q("encoder.layers.0.conv.weight%s", ""), LIN(1, 7), nf, 1, 7);
    E1(Q("encoder.layers.0.conv.bias%s", ""), BIAS, nf);
    int c = nf;
    for (int s = 0; s < 4; s++) {
        const int li = 1 + 3 * s;
        E3(Q("encoder.layers.%d.block.1.conv.weight", li), LIN(1, (int64_t)c * 3), c / 2, c, 3);
        E1(Q("encoder.layers.%d.block.1.conv.bias", li), BIAS, c / 2);
        E3(Q("encoder.layers.%d.block.3.conv.weight", li), LIN(0.5, c / 2), c, c / 2, 1);
        E1(Q("encoder.layers.%d.block.3.conv.bias", li), BIAS, c);
        E3(Q("encoder.layers.%d.conv.weight", li + 2), LIN(1.2, (int64_t)c * 2 * ratios[s]), 2 * c, c, 2 * ratios[s]);
        E1(Q("encoder.layers.%d.conv.bias", li + 2), BIAS, 2 * c);
        c *= 2;
    }
    E3(Q("encoder.layers.14.conv.weight%s", ""), LIN(1.2, (int64_t)c * 3), g->e_hidden, c, 3);
    E1(Q("encoder.layers.14.conv.bias%s", ""), BIAS, g->e_hidden);
    const int eh = g->e_hidden, eq = g->e_heads * g->e_hd, ekv = g->e_kv * g->e_hd;
    for (int l = 0; l < g->e_layers; l++) {
        E1(Q("encoder_transformer.layers.%d.input_layernorm.weight", l), NORMW, eh);
        E1(Q("encoder_transformer.layers.%d.input_layernorm.bias", l), BIAS, eh);
        E2(Q("encoder_transformer.layers.%d.self_attn.q_proj.weight", l), LIN(1, eh), eq, eh);
        E2(Q("encoder_transformer.layers.%d.self_attn.k_proj.weight", l), LIN(1, eh), ekv, eh);
        E2(Q("encoder_transformer.layers.%d.self_attn.v_proj.weight", l), LIN(1, eh), ekv, eh);
        E2(Q("encoder_transformer.layers.%d.self_attn.o_proj.weight", l), LIN(1, eq), eh, eq);
        E1(Q("encoder_transformer.layers.%d.self_attn_layer_scale.scale", l), NEAR(0.1, 0.01), eh);
        E1(Q("encoder_transformer.layers.%d.post_attention_layernorm.weight", l), NORMW, eh);
        E1(Q("encoder_transformer.layers.%d.post_attention_layernorm.bias", l), BIAS, eh);
        E2(Q("encoder_transformer.layers.%d.mlp.fc1.weight", l), LIN(1, eh), g->e_inter, eh);
        E2(Q("encoder_transformer.layers.%d.mlp.fc2.weight", l), LIN(1.4, g->e_inter), eh, g->e_inter);
        E1(Q("encoder_transformer.layers.%d.mlp_layer_scale.scale", l), NEAR(0.1, 0.01), eh);
    }
    E3(Q("downsample.conv.weight%s", ""), LIN(1, (int64_t)eh * 4), eh, eh, 4);
    for (int i = 0; i < 2; i++) {
        const char *which = i == 0 ? "semantic_residual_vector_quantizer" : "acoustic_residual_vector_quantizer";
        E3(Q("quantizer.%s.input_proj.weight", which), LIN(1, eh), g->e_cbdim, eh, 1);
        E3(Q("quantizer.%s.output_proj.weight", which), LIN(1, g->e_cbdim), eh, g->e_cbdim, 1);
        const int nl = i == 0 ? 1 : g->e_nq - 1;
        for (int l = 0; l < nl; l++) {
            E2(Q("quantizer.%s.layers.%d.codebook.embed_sum", which, l), NRM(0.6), g->e_cbsize, g->e_cbdim);
            E1(Q("quantizer.%s.layers.%d.codebook.cluster_usage", which, l), UNI(0.5, 2.0), g->e_cbsize);
            E1(Q("quantizer.%s.layers.%d.codebook.initialized", which, l), UNI(1.0, 1.0), 1);
        }
    }
#undef Q
}

static int write_st(const char *path, const geom *g, int base, int codec, const mm_options *o, char *err,
                    size_t es, uint64_t *n_params) {
    walker k;
    memset(&k, 0, sizeof k);
    k.w = stw_open(path, err, es);
    if (!k.w) return -1;
    k.dt = codec ? ST_F32 : ST_BF16;
    k.seed = o->seed;
    k.quiet = o->quiet;
    k.buf = malloc(sizeof(float) * WBUF);
    if (!k.buf) {
        stw_close(k.w, err, es);
        snprintf(err, es, "out of memory");
        return -1;
    }
    stw_metadata(k.w, "format", "pt");
    stw_metadata(k.w, "qtts_synthetic", "random weights written by qtts-bench make-model; not a real model");
    for (k.fill = 0; k.fill < 2 && !k.failed; k.fill++) {
        if (codec) walk_codec(&k, g, base);
        else walk_main(&k, g, base);
    }
    free(k.buf);
    if (!o->quiet) fprintf(stderr, "\r  %s: %.1f M params, %.0f MB\n", path, k.n_params / 1e6, k.bytes / 1e6);
    int rc = stw_close(k.w, err, es);
    if (k.failed && !rc) rc = -1, snprintf(err, es, "writing %s failed", path);
    if (n_params) *n_params = k.n_params;
    return rc;
}

int64_t mm_count_params(const char *size, const char *type, int codec, int64_t *n_tensors) {
    geom g;
    geom_for(size, &g);
    walker k;
    memset(&k, 0, sizeof k);
    const int base = strcmp(type, "base") == 0;
    if (codec) walk_codec(&k, &g, base);
    else walk_main(&k, &g, base);
    if (n_tensors) *n_tensors = (int64_t)k.bytes;
    return (int64_t)k.n_params;
}

/* ---------------------------------------------------------------- configs */

static json_t *int_array(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *synthetic_obj(const mm_options *o) {
    return json_pack("{s:s, s:s, s:s, s:I, s:s}", "generator", "qtts-bench make-model", "size", o->size, "type",
                     o->type, "seed", (json_int_t)o->seed, "warning",
                     "random weights: not a real model; its audio is noise and its quality figures mean nothing");
}

static json_t *main_config(const geom *g, const mm_options *o) {
    json_t *root = json_object();
    json_object_set_new(root, "architectures", json_pack("[s]", "Qwen3TTSForConditionalGeneration"));
    json_object_set_new(root, "model_type", json_string("qwen3_tts"));
    json_object_set_new(root, "tokenizer_type", json_string("qwen3_tts_tokenizer_12hz"));
    json_object_set_new(root, "tts_model_size", json_string(g->size_name));
    json_object_set_new(root, "tts_model_type", json_string(o->type));
    json_object_set_new(root, "qtts_synthetic", synthetic_obj(o));
    json_t *t = json_object();
    json_object_set_new(t, "hidden_size", json_integer(g->H));
    json_object_set_new(t, "intermediate_size", json_integer(g->I));
    json_object_set_new(t, "num_hidden_layers", json_integer(g->L));
    json_object_set_new(t, "num_attention_heads", json_integer(g->heads));
    json_object_set_new(t, "num_key_value_heads", json_integer(g->kv));
    json_object_set_new(t, "head_dim", json_integer(g->hd));
    json_object_set_new(t, "text_hidden_size", json_integer(g->text_hidden));
    json_object_set_new(t, "text_vocab_size", json_integer(g->text_vocab));
    json_object_set_new(t, "codec_bos_id", json_integer(2149));
    json_object_set_new(t, "codec_eos_token_id", json_integer(2150));
    json_object_set_new(t, "codec_pad_id", json_integer(2148));
    json_object_set_new(t, "codec_think_id", json_integer(2154));
    json_object_set_new(t, "codec_nothink_id", json_integer(2155));
    json_object_set_new(t, "codec_think_bos_id", json_integer(2156));
    json_object_set_new(t, "codec_think_eos_id", json_integer(2157));
    json_object_set_new(t, "vocab_size", json_integer(g->V));
    json_object_set_new(t, "num_code_groups", json_integer(g->groups));
    json_object_set_new(t, "hidden_act", json_string("silu"));
    json_object_set_new(t, "max_position_embeddings", json_integer(32768));
    json_object_set_new(t, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(t, "rope_theta", json_integer(1000000));
    json_object_set_new(t, "attention_bias", json_false());
    json_object_set_new(t, "attention_dropout", json_integer(0));
    const int mrope[3] = {24, 20, 20};
    json_object_set_new(t, "rope_scaling",
                        json_pack("{s:b, s:o, s:s, s:s}", "interleaved", 1, "mrope_section", int_array(mrope, 3),
                                  "rope_type", "default", "type", "default"));
    json_object_set_new(t, "codec_language_id",
                        json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "chinese", 2055, "english", 2050,
                                  "german", 2053, "italian", 2070, "portuguese", 2071, "spanish", 2054, "japanese",
                                  2058, "korean", 2064, "french", 2061, "russian", 2069));
    json_t *langs = json_object_get(t, "codec_language_id");
    if (strcmp(o->type, "custom_voice") == 0) {
        json_object_set_new(langs, "beijing_dialect", json_integer(2074));
        json_object_set_new(langs, "sichuan_dialect", json_integer(2062));
        json_object_set_new(t, "spk_id",
                            json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "serena", 3066, "vivian", 3065,
                                      "uncle_fu", 3010, "ryan", 3061, "aiden", 2861, "ono_anna", 2873, "sohee", 2864,
                                      "eric", 2875, "dylan", 2878));
        json_object_set_new(t, "spk_is_dialect",
                            json_pack("{s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:s,s:s}", "serena", 0, "vivian", 0, "uncle_fu", 0,
                                      "ryan", 0, "aiden", 0, "ono_anna", 0, "sohee", 0, "eric", "sichuan_dialect",
                                      "dylan", "beijing_dialect"));
    } else {
        json_object_set_new(t, "spk_id", json_object());
        json_object_set_new(t, "spk_is_dialect", json_object());
    }
    json_object_set_new(t, "use_sliding_window", json_false());
    json_object_set_new(t, "sliding_window", json_null());
    json_object_set_new(t, "position_id_per_seconds", json_integer(13));
    json_object_set_new(t, "pad_token_id", json_integer(2148));
    json_object_set_new(t, "tie_word_embeddings", json_false());
    json_object_set_new(t, "use_cache", json_true());
    json_t *cp = json_object();
    json_object_set_new(cp, "hidden_size", json_integer(g->cH));
    json_object_set_new(cp, "intermediate_size", json_integer(g->cI));
    json_object_set_new(cp, "num_hidden_layers", json_integer(g->cL));
    json_object_set_new(cp, "num_attention_heads", json_integer(g->cheads));
    json_object_set_new(cp, "num_key_value_heads", json_integer(g->ckv));
    json_object_set_new(cp, "head_dim", json_integer(g->chd));
    json_object_set_new(cp, "vocab_size", json_integer(g->cV));
    json_object_set_new(cp, "num_code_groups", json_integer(g->groups));
    json_object_set_new(cp, "hidden_act", json_string("silu"));
    json_object_set_new(cp, "max_position_embeddings", json_integer(65536));
    json_object_set_new(cp, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(cp, "rope_theta", json_integer(1000000));
    json_object_set_new(cp, "rope_scaling", json_null());
    json_object_set_new(cp, "attention_bias", json_false());
    json_object_set_new(cp, "tie_word_embeddings", json_false());
    json_object_set_new(cp, "use_cache", json_true());
    json_object_set_new(t, "code_predictor_config", cp);
    json_object_set_new(root, "talker_config", t);
    if (strcmp(o->type, "base") == 0)
        json_object_set_new(root, "speaker_encoder_config",
                            json_pack("{s:i, s:i}", "enc_dim", g->H, "sample_rate", 24000));
    if (strcmp(o->size, "tiny") == 0) { /* class defaults are the real sizes: state the tiny ones */
        json_t *se = json_object_get(root, "speaker_encoder_config");
        if (se) {
            json_object_set_new(se, "enc_channels", int_array(g->spk_ch, 5));
            json_object_set_new(se, "enc_kernel_sizes", int_array(g->spk_k, 5));
            json_object_set_new(se, "enc_dilations", int_array(g->spk_d, 5));
            json_object_set_new(se, "enc_attention_channels", json_integer(g->spk_att));
            json_object_set_new(se, "enc_res2net_scale", json_integer(g->spk_scale));
            json_object_set_new(se, "enc_se_channels", json_integer(g->spk_se));
            json_object_set_new(se, "mel_dim", json_integer(g->spk_mel));
        }
    }
    json_object_set_new(root, "transformers_version", json_string("4.57.3"));
    json_object_set_new(root, "im_start_token_id", json_integer(151644));
    json_object_set_new(root, "im_end_token_id", json_integer(151645));
    json_object_set_new(root, "tts_pad_token_id", json_integer(151671));
    json_object_set_new(root, "tts_bos_token_id", json_integer(151672));
    json_object_set_new(root, "tts_eos_token_id", json_integer(151673));
    json_object_set_new(root, "assistant_token_id", json_integer(77091));
    return root;
}

static json_t *codec_config(const geom *g, const mm_options *o, int base) {
    json_t *root = json_object();
    json_object_set_new(root, "model_type", json_string("qwen3_tts_tokenizer_12hz"));
    json_object_set_new(root, "architectures", json_pack("[s]", "Qwen3TTSTokenizerV2Model"));
    json_object_set_new(root, "qtts_synthetic", synthetic_obj(o));
    json_object_set_new(root, "input_sample_rate", json_integer(24000));
    json_object_set_new(root, "output_sample_rate", json_integer(24000));
    json_object_set_new(root, "decode_upsample_rate", json_integer(1920));
    json_object_set_new(root, "encode_downsample_rate", json_integer(1920));
    json_object_set_new(root, "encoder_valid_num_quantizers", json_integer(16));
    const int ups[4] = {8, 5, 4, 3}, ur[2] = {2, 2}, eur[4] = {8, 6, 5, 4};
    json_t *d = json_object();
    json_object_set_new(d, "codebook_dim", json_integer(g->d_cbdim));
    json_object_set_new(d, "codebook_size", json_integer(g->d_cbsize));
    json_object_set_new(d, "latent_dim", json_integer(g->d_latent));
    json_object_set_new(d, "decoder_dim", json_integer(g->d_dim));
    json_object_set_new(d, "hidden_size", json_integer(g->d_hidden));
    json_object_set_new(d, "intermediate_size", json_integer(g->d_inter));
    json_object_set_new(d, "head_dim", json_integer(g->d_hd));
    json_object_set_new(d, "num_attention_heads", json_integer(g->d_heads));
    json_object_set_new(d, "num_key_value_heads", json_integer(g->d_kv));
    json_object_set_new(d, "num_hidden_layers", json_integer(g->d_layers));
    json_object_set_new(d, "sliding_window", json_integer(g->d_window));
    json_object_set_new(d, "num_quantizers", json_integer(g->d_nq));
    json_object_set_new(d, "num_semantic_quantizers", json_integer(1));
    json_object_set_new(d, "semantic_codebook_size", json_integer(4096));
    json_object_set_new(d, "vector_quantization_hidden_dimension", json_integer(g->d_cbdim));
    json_object_set_new(d, "rope_theta", json_integer(10000));
    json_object_set_new(d, "rms_norm_eps", json_real(1e-5));
    json_object_set_new(d, "layer_scale_initial_scale", json_real(0.01));
    json_object_set_new(d, "max_position_embeddings", json_integer(8000));
    json_object_set_new(d, "hidden_act", json_string("silu"));
    json_object_set_new(d, "attention_bias", json_false());
    json_object_set_new(d, "attention_dropout", json_real(0.0));
    json_object_set_new(d, "upsample_rates", int_array(ups, 4));
    json_object_set_new(d, "upsampling_ratios", int_array(ur, 2));
    json_object_set_new(root, "decoder_config", d);
    json_t *e = json_object();
    json_object_set_new(e, "hidden_size", json_integer(g->e_hidden));
    json_object_set_new(e, "num_filters", json_integer(g->e_nf));
    json_object_set_new(e, "num_hidden_layers", json_integer(g->e_layers));
    json_object_set_new(e, "intermediate_size", json_integer(g->e_inter));
    json_object_set_new(e, "num_attention_heads", json_integer(g->e_heads));
    json_object_set_new(e, "num_key_value_heads", json_integer(g->e_kv));
    json_object_set_new(e, "head_dim", json_integer(g->e_hd));
    json_object_set_new(e, "codebook_dim", json_integer(g->e_cbdim));
    json_object_set_new(e, "vector_quantization_hidden_dimension", json_integer(g->e_cbdim));
    json_object_set_new(e, "num_quantizers", json_integer(g->e_nq));
    json_object_set_new(e, "codebook_size", json_integer(g->e_cbsize));
    json_object_set_new(e, "sampling_rate", json_integer(24000));
    json_object_set_new(e, "frame_rate", json_real(12.5));
    json_object_set_new(e, "audio_channels", json_integer(1));
    json_object_set_new(e, "num_residual_layers", json_integer(1));
    json_object_set_new(e, "upsampling_ratios", int_array(eur, 4));
    json_object_set_new(e, "kernel_size", json_integer(7));
    json_object_set_new(e, "last_kernel_size", json_integer(3));
    json_object_set_new(e, "residual_kernel_size", json_integer(3));
    json_object_set_new(e, "dilation_growth_rate", json_integer(2));
    json_object_set_new(e, "use_causal_conv", json_true());
    json_object_set_new(e, "pad_mode", json_string("constant"));
    json_object_set_new(e, "compress", json_integer(2));
    json_object_set_new(e, "trim_right_ratio", json_real(1.0));
    json_object_set_new(e, "use_conv_shortcut", json_false());
    json_object_set_new(e, "num_semantic_quantizers", json_integer(1));
    json_object_set_new(e, "upsample_groups", json_integer(512));
    json_object_set_new(e, "hidden_act", json_string("gelu"));
    json_object_set_new(e, "max_position_embeddings", json_integer(8000));
    json_object_set_new(e, "norm_eps", json_real(1e-5));
    json_object_set_new(e, "rope_theta", json_real(10000.0));
    json_object_set_new(e, "sliding_window", json_integer(250));
    json_object_set_new(e, "layer_scale_initial_scale", json_real(0.01));
    json_object_set_new(e, "attention_bias", json_false());
    json_object_set_new(e, "normalize", json_false());
    json_object_set_new(e, "model_type", json_string("mimi"));
    json_object_set_new(root, "encoder_config", e);
    json_object_set_new(root, "transformers_version", json_string("4.57.3"));
    (void)base;
    return root;
}

static int dump_json(json_t *j, const char *path, char *err, size_t es) {
    int rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (rc) snprintf(err, es, "cannot write %s", path);
    return rc ? -1 : 0;
}

static int copy_file(const char *src, const char *dst, char *err, size_t es) {
    FILE *in = fopen(src, "rb");
    if (!in) return snprintf(err, es, "cannot read %s", src), -1;
    FILE *out = fopen(dst, "wb");
    if (!out) {
        fclose(in);
        return snprintf(err, es, "cannot create %s", dst), -1;
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    fclose(in);
    if (fclose(out) || rc) return snprintf(err, es, "cannot write %s", dst), -1;
    return 0;
}

static int is_tokenizer_dir(const char *d) {
    char p[4096];
    snprintf(p, sizeof p, "%s/vocab.json", d);
    if (access(p, R_OK)) return 0;
    snprintf(p, sizeof p, "%s/merges.txt", d);
    if (access(p, R_OK)) return 0;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", d);
    return access(p, R_OK) == 0;
}

/* The real Qwen BPE files ship with the golden set: look for them near the
 * working directory and near the binary (build/qtts-bench -> repo root). */
static const char *find_tokenizer(char *buf, size_t n) {
    const char *rel = "tests/golden/data/e2e_string";
    const char *env = getenv("QTTS_TEST_DIR");
    if (env) {
        snprintf(buf, n, "%s/golden/data/e2e_string", env);
        if (is_tokenizer_dir(buf)) return buf;
    }
    if (is_tokenizer_dir(rel)) return snprintf(buf, n, "%s", rel), buf;
    char exe[2048];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = 0;
        for (int up = 0; up < 4; up++) {
            char *s = strrchr(exe, '/');
            if (!s) break;
            *s = 0;
            snprintf(buf, n, "%.2000s/%s", exe, rel);
            if (is_tokenizer_dir(buf)) return buf;
        }
    }
    return NULL;
}

int mm_make_model(const char *dir, const mm_options *o, char *err, size_t es) {
    int ok_size = 0;
    for (int i = 0; mm_size_names[i]; i++) ok_size |= strcmp(o->size, mm_size_names[i]) == 0;
    if (!ok_size) return snprintf(err, es, "unknown --size %s (0.6b or 1.7b)", o->size), -1;
    const int base = strcmp(o->type, "base") == 0;
    if (!base && strcmp(o->type, "custom_voice") && strcmp(o->type, "voice_design"))
        return snprintf(err, es, "unknown --type %s (custom_voice, base or voice_design)", o->type), -1;
    if (strcmp(o->type, "voice_design") == 0 && strcmp(o->size, "0.6b") == 0)
        fprintf(stderr, "note: no 0.6B VoiceDesign checkpoint was released; writing one anyway\n");
    char tokbuf[4096];
    const char *tok = o->tokenizer_dir ? o->tokenizer_dir : find_tokenizer(tokbuf, sizeof tokbuf);
    if (!tok || !is_tokenizer_dir(tok))
        return snprintf(err, es,
                        "no tokenizer files (vocab.json, merges.txt, tokenizer_config.json) found%s%s: run from the "
                        "repository root or pass --tokenizer DIR (tests/golden/data/e2e_string has them)",
                        o->tokenizer_dir ? " in " : "", o->tokenizer_dir ? o->tokenizer_dir : ""),
               -1;
    geom g;
    geom_for(o->size, &g);
    char p[4096], q[4096];
    if (mkdir(dir, 0755) && errno != EEXIST) return snprintf(err, es, "cannot create %s", dir), -1;
    snprintf(p, sizeof p, "%s/speech_tokenizer", dir);
    if (mkdir(p, 0755) && errno != EEXIST) return snprintf(err, es, "cannot create %s", p), -1;
    const double t0 = tool_now_ms();
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (dump_json(main_config(&g, o), p, err, es)) return -1;
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    json_t *gen = json_pack("{s:b,s:i,s:f,s:f,s:f,s:b,s:i,s:f,s:f,s:i}", "do_sample", 1, "top_k", 50, "top_p", 1.0,
                            "temperature", 0.9, "repetition_penalty", 1.05, "subtalker_dosample", 1,
                            "subtalker_top_k", 50, "subtalker_top_p", 1.0, "subtalker_temperature", 0.9,
                            "max_new_tokens", 8192);
    if (dump_json(gen, p, err, es)) return -1;
    snprintf(p, sizeof p, "%s/speech_tokenizer/config.json", dir);
    if (dump_json(codec_config(&g, o, base), p, err, es)) return -1;
    static const char *const tokfiles[3] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%.3000s/%s", tok, tokfiles[i]);
        snprintf(q, sizeof q, "%.3000s/%s", dir, tokfiles[i]);
        if (copy_file(p, q, err, es)) return -1;
    }
    snprintf(p, sizeof p, "%s/README.md", dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f,
                "# Synthetic checkpoint (not a real model)\n\n"
                "Written by `qtts-bench make-model --size %s --type %s --seed %llu`: the geometry, tensor names\n"
                "and dtypes of the released Qwen3-TTS 12 Hz checkpoints with random weights, for benchmarks.\n"
                "Its audio is noise. Regenerate it instead of copying it; never publish it as a model.\n",
                o->size, o->type, (unsigned long long)o->seed);
        fclose(f);
    }
    uint64_t n_main = 0, n_codec = 0;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (write_st(p, &g, base, 0, o, err, es, &n_main)) return -1;
    snprintf(p, sizeof p, "%s/speech_tokenizer/model.safetensors", dir);
    if (write_st(p, &g, base, 1, o, err, es, &n_codec)) return -1;
    if (!o->quiet)
        fprintf(stderr, "wrote %s (%s %s, seed %llu): %.1f M + %.1f M params in %.1f s\n", dir, o->size, o->type,
                (unsigned long long)o->seed, n_main / 1e6, n_codec / 1e6, (tool_now_ms() - t0) / 1000.0);
    return 0;
}

/* ---------------------------------------------------------------- command */

int cmd_make_model(int argc, char **argv) {
    mm_options o = {"0.6b", "custom_voice", 1, NULL, 0};
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--size") == 0 && v) o.size = v, i++;
        else if (strcmp(a, "--tiny") == 0) o.size = "tiny";
        else if (strcmp(a, "--type") == 0 && v) o.type = v, i++;
        else if (strcmp(a, "--seed") == 0 && v) o.seed = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--tokenizer") == 0 && v) o.tokenizer_dir = v, i++;
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) o.quiet = 1;
        else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "make-model: unknown or incomplete option '%s'\n", a);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: qtts-bench make-model --size 0.6b|1.7b --type custom_voice|base|voice_design "
                        "[--seed N] [--tokenizer DIR] DIR\n");
        return 2;
    }
    char err[512] = "";
    if (mm_make_model(dir, &o, err, sizeof err)) {
        fprintf(stderr, "make-model: %s\n", err);
        return 1;
    }
    return 0;
}
