/* Internal layout of the speech-tokenizer decoder: config and weights, shared
 * by codec_decoder.c (loading) and codec_stream.c (the streaming forward).
 * Shapes use the real 12 Hz checkpoint's numbers in comments: codebook_dim
 * CD = 512, vq_dim VQ = 256, latent LAT = 1024, hidden HID = 512, heads
 * NH = 16 / NKV = 16 x HD = 64, INTER = 1024, decoder_dim DD = 1536. */
#ifndef QTTS_MODEL_CODEC_DECODER_IMPL_H
#define QTTS_MODEL_CODEC_DECODER_IMPL_H

#include "backend/cpu/conv_bf16.h"
#include "backend/cpu/conv_i16.h"
#include "backend/cpu/conv_q8.h"
#include "backend/cpu/ops.h"
#include "io/safetensors.h"
#include "util/huge_arena.h"
#include "model/codec_decoder.h"
#include "model/weights_cache.h"

#define CODEC_MAX_UP 4     /* ConvNeXt upsampling stages (real: 2) */
#define CODEC_MAX_BLOCKS 6 /* vocoder blocks (real: 4) */
#define CODEC_N_RES 3      /* residual units per vocoder block, dilations 1, 3, 9 */
#define CODEC_CONV_K 7     /* kernel of every "K = 7" causal conv */
#define CODEC_TCONV_LAYOUT 1u /* of ops_conv_transpose1d_pack_conv's output (in the cache key) */

typedef struct codec_config {
    int n_q;                     /* num_quantizers: 16 (1 semantic + 15 acoustic) */
    int codebook_size;           /* 2048 rows per codebook */
    int codebook_dim;            /* CD: RVQ output dim, 512 */
    int vq_dim;                  /* VQ = CD / 2: codebook vector dim, 256 */
    int latent;                  /* LAT: latent_dim, 1024 */
    int hidden;                  /* HID: pre-transformer width, 512 */
    int n_layers;                /* 8 */
    int n_heads, n_kv_heads;     /* 16, 16 */
    int head_dim;                /* 64 */
    int inter;                   /* SwiGLU width, 1024 */
    int window;                  /* sliding_window: keys per query incl. itself, 72 */
    float rms_eps;               /* 1e-5 */
    float rope_theta;            /* 10000 */
    int n_up;                    /* len(upsampling_ratios): 2 */
    int up_ratio[CODEC_MAX_UP];  /* 2, 2 */
    int n_blocks;                /* len(upsample_rates): 4 */
    int rate[CODEC_MAX_BLOCKS];  /* 8, 5, 4, 3 */
    int decoder_dim;             /* DD: 1536; block b has DD>>b -> DD>>(b+1) channels */
    int samples_per_frame;       /* prod(up_ratio) * prod(rate) = 1920 */
    int sample_rate_hz;          /* output_sample_rate, 24000 */
} codec_config;

/* SnakeBeta with the load-time fold: y = x + inv_b[c] * sin(a[c] x)^2. */
typedef struct codec_snake {
    float *a;     /* [C] exp(alpha), owned */
    float *inv_b; /* [C] 1 / (exp(beta) + 1e-9), owned */
} codec_snake;

typedef struct codec_layer {
    const float *attn_norm;  /* [HID] RMSNorm */
    qt_mat wq;               /* [NH*HD, HID] */
    qt_mat wk, wv;           /* [NKV*HD, HID] */
    qt_mat wo;               /* [HID, NH*HD] */
    const float *attn_scale; /* [HID] layer scale */
    const float *mlp_norm;   /* [HID] RMSNorm */
    qt_mat w_gate, w_up;     /* [INTER, HID] */
    qt_mat w_down;           /* [HID, INTER] */
    const float *mlp_scale;  /* [HID] layer scale */
} codec_layer;

typedef struct codec_upsample {
    int ratio;             /* transposed conv kernel = stride = ratio */
    const float *tconv_w;  /* [LAT][LAT][ratio] (ConvTranspose1d layout) */
    const float *tconv_wc; /* the same and the bias as a conv1d (ops_conv_transpose1d_pack_conv) */
    const float *tconv_b;  /* [LAT] */
    const float *dw_w;     /* [LAT][1][7] depthwise causal conv */
    const float *dw_b;     /* [LAT] */
    const float *ln_w;     /* [LAT] LayerNorm, eps 1e-6 */
    const float *ln_b;     /* [LAT] */
    qt_mat pw1;            /* [4*LAT, LAT] */
    const float *pw1_b;    /* [4*LAT] */
    qt_mat pw2;            /* [LAT, 4*LAT] */
    const float *pw2_b;    /* [LAT] */
    const float *gamma;    /* [LAT] */
} codec_upsample;

/* A Linear matrix of the decoder and its f32 form, kept while it reads bf16. */
typedef struct codec_mat_keep {
    qt_mat *at;
    qt_mat f32;
} codec_mat_keep;

typedef struct codec_resunit {
    int dilation;          /* 1, 3, 9 */
    codec_snake act1;      /* [C] */
    const float *conv1_w;  /* [C][C][7] causal, dilated */
    const float *conv1_b;  /* [C] */
    codec_snake act2;      /* [C] */
    const float *conv2_w;  /* [C][C][1] */
    const float *conv2_b;  /* [C] */
    conv_q8_w conv1_q, conv2_q; /* int8 forms (codec_decoder_set_format); q NULL: none */
    conv_bf16_w conv1_h, conv2_h; /* bf16 forms (codec_decoder_set_format); w NULL: none */
    conv_i16_w conv2_i;           /* int16 form of conv2 (codec_decoder_set_format); q NULL: none */
} codec_resunit;

typedef struct codec_block {
    int cin, cout, rate;   /* (1536, 768, 8), (768, 384, 5), (384, 192, 4), (192, 96, 3) */
    codec_snake act;       /* [cin] */
    const float *tconv_w;  /* [cin][cout][2*rate] causal transposed conv, stride rate */
    const float *tconv_wc; /* the same and the bias as a conv1d (ops_conv_transpose1d_pack_conv);
                              NULL while tconv_q or tconv_h stands in (its memory given back) */
    const float *tconv_b;  /* [cout] */
    codec_resunit ru[CODEC_N_RES];
    conv_q8_w tconv_q;     /* int8 form of tconv_wc (stride * cout channels, 2 taps); q NULL: none */
    conv_bf16_w tconv_h;   /* bf16 form of tconv_wc; w NULL: none */
    conv_i16_w tconv_i;    /* int16 form of tconv_wc; q NULL: none */
} codec_block;

struct codec_decoder {
    codec_config cfg;
    ops_ctx ops;           /* kernels for the Linear layers */
    st_set st;             /* the open safetensors map (F32 weights point into it) */
    huge_arena arena;      /* the packed transposed convs made at load (huge pages) */
    wcache_map tcache;     /* the packed transposed convs from the prepared-weights cache (mapped) */
    wcache_writer *tw;     /* writing them there at this load, or NULL */
    int n_tconv;           /* transposed convs packed or mapped so far (their index in the cache) */
    uint64_t fingerprint;  /* of the decoder.* tensors (codec_decoder_state_key) */
    void **owned;          /* every buffer converted or folded at load, freed at free */
    int n_owned, cap_owned;

    /* quantizer */
    float *codebook;       /* [n_q][codebook_size][VQ] folded embedding_sum / max(usage, 1e-5), owned */
    qt_mat proj_first;     /* [CD, VQ] rvq_first.output_proj (1x1 conv, no bias) */
    qt_mat proj_rest;      /* [CD, VQ] rvq_rest.output_proj */

    const float *pre_conv_w; /* [LAT][CD][3] causal */
    const float *pre_conv_b; /* [LAT] */

    /* pre-transformer */
    qt_mat in_proj;        /* [HID, LAT] */
    const float *in_proj_b;  /* [HID] */
    codec_layer *layers;   /* [n_layers], owned */
    const float *final_norm; /* [HID] */
    qt_mat out_proj;       /* [LAT, HID] */
    const float *out_proj_b; /* [LAT] */
    float *inv_freq;       /* [HD/2] RoPE frequencies, owned */

    codec_upsample up[CODEC_MAX_UP];

    const float *dec0_w;   /* [DD][LAT][7] causal */
    const float *dec0_b;   /* [DD] */
    conv_q8_w dec0_q;      /* int8 form; q NULL: none */
    conv_bf16_w dec0_h;    /* bf16 form; w NULL: none */
    conv_i16_w dec0_i;     /* int16 form; q NULL: none */
    int q8;                /* 1 when any conv has an int8, int16 or bf16 form (streams size their scratch) */
    codec_mat_keep *mats_f32; /* while the Linear matrices read bf16 (CODEC_BF16_MATS): each one's f32
                               * form, owned; NULL: they read f32 */
    int n_mats_f32;
    uint16_t *mats_bf16;      /* then their bf16 weights, one owned buffer */
    codec_block blocks[CODEC_MAX_BLOCKS];
    codec_snake final_act; /* [DD >> n_blocks] */
    const float *final_w;  /* [1][DD >> n_blocks][7] causal */
    const float *final_b;  /* [1] */

    struct cdv_model *dev; /* the weights on the Vulkan device (codec_decoder_use_vulkan), owned; NULL: CPU */
};

/* Sizes shared by the CPU stream (codec_stream.c) and the device stream
 * (codec_vulkan.c): the total upsampling of the ConvNeXt stages, and the
 * largest channel-major stage buffer for n frames, in floats. */
int codec_up_total(const codec_config *c);
size_t codec_big_floats(const codec_decoder *d, int n);
/* The f32 form of the decoder's Linear matrix m (m itself unless it reads
 * bf16 now): for the Vulkan decoder, which always computes in f32. */
const qt_mat *codec_mat_f32(const codec_decoder *d, const qt_mat *m);

#endif
