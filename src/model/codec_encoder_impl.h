/* Private layout of the speech-tokenizer encoder (Mimi), shared by its loader
 * (codec_encoder.c) and its forward pass (codec_encoder_forward.c). Shapes use
 * the real geometry in comments: C = hidden 512, F = num_filters 64,
 * d = codebook_dim 256, K = codebook_size 2048. */
#ifndef QTTS_MODEL_CODEC_ENCODER_IMPL_H
#define QTTS_MODEL_CODEC_ENCODER_IMPL_H

#include "backend/cpu/ops.h"
#include "io/safetensors.h"
#include "model/codec_encoder.h"

/* encoder_config values that shape the graph (MimiConfig names). */
typedef struct codec_encoder_config {
    int sample_rate;          /* sampling_rate, 24000 */
    int samples_per_frame;    /* encode_downsample_rate (top level), 1920 */
    int n_valid_q;            /* encoder_valid_num_quantizers (top level), 16 */
    int hidden;               /* hidden_size, 512 */
    int num_filters;          /* 64 */
    int n_ratios;             /* len(upsampling_ratios), 4 */
    int ratios[8];            /* upsampling_ratios as stored, [8, 6, 5, 4]; applied reversed */
    int kernel_size;          /* first conv, 7 */
    int last_kernel_size;     /* last conv, 3 */
    int residual_kernel_size; /* 3 */
    int n_residual_layers;    /* 1 */
    int dilation_growth_rate; /* 2 */
    int compress;             /* resblock hidden = dim / compress, 2 */
    int n_layers;             /* transformer layers, 8 */
    int n_heads;              /* 8 */
    int n_kv_heads;           /* 8 */
    int head_dim;             /* 64 */
    int intermediate;         /* MLP width, 2048 */
    float norm_eps;           /* LayerNorm eps, 1e-5 */
    float rope_theta;         /* 10000 */
    int down_kernel;          /* downsample conv kernel, 2 * encodec_rate / frame_rate = 4 */
    int down_stride;          /* 2 */
    int n_q;                  /* num_quantizers, 32 */
    int n_sem_q;              /* num_semantic_quantizers, 1 */
    int codebook_size;        /* K, 2048 */
    int codebook_dim;         /* d, 256 */
    int vq_hidden;            /* vector_quantization_hidden_dimension, 256 */
} codec_encoder_config;

/* One Mimi conv: y = conv(pad(x)) with weights [cout][cin][k], f32. */
typedef struct enc_conv {
    const float *w; /* [cout][cin][k] */
    const float *b; /* [cout], NULL when the conv has no bias */
    int cin, cout, k, stride, dilation;
} enc_conv;

typedef enum enc_step_kind { STEP_CONV, STEP_RESBLOCK, STEP_ELU } enc_step_kind;

/* One entry of encoder.encoder.layers: a strided conv, an ELU, or a residual
 * block x + conv_b(ELU(conv_a(ELU(x)))). */
typedef struct enc_step {
    enc_step_kind kind;
    enc_conv a; /* STEP_CONV: the conv; STEP_RESBLOCK: block.1, [dim/compress][dim][3] */
    enc_conv b; /* STEP_RESBLOCK: block.3, [dim][dim/compress][1] */
} enc_step;

typedef struct enc_layer {
    const float *ln1_w, *ln1_b; /* input_layernorm [C] */
    qt_mat wq;                  /* [H*hd][C] */
    qt_mat wk, wv;              /* [KV*hd][C] */
    qt_mat wo;                  /* [C][H*hd] */
    const float *ls_attn;       /* self_attn_layer_scale.scale [C] */
    const float *ln2_w, *ln2_b; /* post_attention_layernorm [C] */
    qt_mat fc1;                 /* [I][C] */
    qt_mat fc2;                 /* [C][I] */
    const float *ls_mlp;        /* mlp_layer_scale.scale [C] */
} enc_layer;

/* One residual VQ (semantic or acoustic). */
typedef struct enc_rvq {
    int has_proj;     /* input_proj exists (vq_hidden != hidden) */
    qt_mat in_proj;   /* [d][C] (conv k=1, no bias) */
    int n_used;       /* codebooks used for the output codes */
    float **codebook; /* [n_used] -> owned [K][d] = embed_sum / max(cluster_usage, 1e-5) */
    double **norm2;   /* [n_used] -> owned [K] |codebook row|^2, summed in double */
} enc_rvq;

struct codec_encoder {
    codec_encoder_config cfg;
    st_set st;            /* the mmapped speech_tokenizer/model.safetensors */
    ops_ctx ops;
    int n_steps;
    enc_step *steps;      /* [n_steps] SEANet, in encoder.encoder.layers order */
    enc_layer *layers;    /* [n_layers] */
    float *inv_freq;      /* [head_dim/2] RoPE inverse frequencies, owned */
    enc_conv down;        /* downsample [C][C][4], stride 2, no bias, replicate padding */
    enc_rvq sem, ac;
    int n_owned, cap_owned;
    void **owned;         /* f32 copies of non-F32 tensors and materialised codebooks */
};

/* The nearest row of E [K][d] to each row of R [T][d] in squared L2
 * distance, the first on ties: idx[t]. The same indices as comparing every
 * row's sum of squared differences in double (codec_encoder_forward.c,
 * nearest), found through scores [T][K] = R E^T by ops_matmul on ops's
 * kernels: every row whose distance |E_j|^2 - 2 R_t.E_j (e2: |E_j|^2) can
 * be the least within the f32 product's error bound is compared exactly.
 * scores: scratch of T * K floats. */
void enc_vq_nearest(const ops_ctx *ops, const float *E, const double *e2, int K, int d, const float *R, int T,
                    float *scores, int32_t *idx);

#endif
