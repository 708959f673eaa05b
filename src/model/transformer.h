/* Qwen3 decoder stack shared by the talker and the code predictor:
 * pre-norm blocks of [RMSNorm -> q/k/v -> per-head q/k RMSNorm -> NeoX RoPE
 * -> causal GQA attention over a KV cache -> o_proj] and [RMSNorm -> SwiGLU
 * MLP], then a final RMSNorm. Must match Qwen3TTSTalkerModel /
 * Qwen3TTSTalkerCodePredictorModel of modeling_qwen3_tts.py.
 *
 * Rows: one forward call processes n rows; row i has its own KV cache and
 * position. A prefill is n rows of one cache at positions p0..p0+n-1 (each row
 * sees the cache up to its own position: causal); a batched decode step is
 * n rows of n different caches. Same code path, so batching never changes a
 * row's arithmetic. */
#ifndef QTTS_MODEL_TRANSFORMER_H
#define QTTS_MODEL_TRANSFORMER_H

#include "backend/cpu/ops.h"
#include "io/safetensors.h"
#include "model/config.h"

typedef struct tf_layer {
    const float *attn_norm;   /* [hidden] */
    const float *q_norm;      /* [head_dim] */
    const float *k_norm;      /* [head_dim] */
    const float *ffn_norm;    /* [hidden] */
    qt_mat wq;                /* [n_heads*head_dim, hidden] */
    qt_mat wk;                /* [n_kv*head_dim, hidden] */
    qt_mat wv;                /* [n_kv*head_dim, hidden] */
    qt_mat wo;                /* [hidden, n_heads*head_dim] */
    qt_mat wgate;             /* [inter, hidden] */
    qt_mat wup;               /* [inter, hidden] */
    qt_mat wdown;             /* [hidden, inter] */
} tf_layer;

typedef struct tf_weights {
    tf_config cfg;
    tf_layer *layers;         /* [n_layers] */
    const float *final_norm;  /* [hidden] */
    float *inv_freq;          /* [head_dim/2] RoPE frequencies (owned) */
    float **owned;            /* f32 copies of small vectors (norms), freed with the weights */
    int n_owned;
} tf_weights;

/* KV cache of one stream: k and v are [n_layers][cap][n_kv*head_dim]. */
typedef struct kv_cache {
    int n_layers, kv_dim, cap;
    int mapped; /* positions [0, mapped) prefaulted or copied in (kv_cache_prefault) */
    float *k, *v;
} kv_cache;

/* Scratch for up to max_rows rows and max_pos attended positions. */
typedef struct tf_scratch {
    int max_rows, max_pos;
    float *xn;     /* [rows][hidden] */
    float *q;      /* [rows][n_heads*head_dim] */
    float *kv;     /* [rows][2*n_kv*head_dim] */
    float *att;    /* [rows][n_heads*head_dim] */
    float *h1;     /* [rows][inter] */
    float *h2;     /* [rows][inter] */
    float *tmp;    /* [rows][hidden] */
    float *scores; /* [TF_ATTN_TASKS][max_pos] */
    float *rope;   /* [rows][head_dim] RoPE cos, sin per row (ops_rope_angles) */
} tf_scratch;

/* Attention runs as this many tasks at most (one scores row each). */
#define TF_ATTN_TASKS 8

typedef struct tf_row {
    kv_cache *cache;
    int pos;
} tf_row;

/* Load prefix + "layers.{i}.*" and prefix + "norm.weight". */
qtts_status tf_load(tf_weights *w, const st_set *st, const char *prefix, const tf_config *cfg, qtts_error *e);
void tf_free(tf_weights *w);

qtts_status kv_cache_init(kv_cache *c, const tf_config *cfg, int cap, qtts_error *e);
void kv_cache_free(kv_cache *c);
/* Grow capacity to at least cap positions, keeping the first `keep` positions
 * of every layer. Amortised: callers grow geometrically. */
qtts_status kv_cache_reserve(kv_cache *c, int cap, int keep, qtts_error *e);
/* Map the pages of positions [p0, p1) (clamped to the capacity; the part
 * below c->mapped skipped, then c->mapped = p1) of every layer's K and V
 * before they are written, one madvise(MADV_POPULATE_WRITE)
 * per range instead of a page fault per 4 KiB page (each position of a
 * 1024-wide layer is one page; a fault cost about 20 us on the 2-vCPU Zen 5
 * KVM guest, where a fresh context's first 0.6B int8 prefill paid 19-36 ms
 * over a warm one's with faults and 11-19 ms with this, in process). Whole
 * pages inside each range only; best effort (pages the kernel does not map
 * now fault in when written). Contents unchanged. */
void kv_cache_prefault(kv_cache *c, int p0, int p1);

qtts_status tf_scratch_init(tf_scratch *s, const tf_config *cfg, int max_rows, int max_pos, qtts_error *e);
void tf_scratch_free(tf_scratch *s);

/* Optional per-layer observer: called after each layer with the residual
 * stream x[n][hidden] (layer = 0..n_layers-1). */
typedef void (*tf_layer_fn)(int layer, const float *x, int n, void *user);

/* Run all layers on x[n][hidden] in place (residual stream, before the final
 * norm). rows[i] gives row i's cache and position; K/V are written to
 * cache[pos]. Caller guarantees pos < cache->cap and n <= scratch rows. */
void tf_forward(const ops_ctx *ops, const tf_weights *w, tf_scratch *s, const tf_row *rows, float *x, int n,
                tf_layer_fn on_layer, void *user);

/* y[n][hidden] = final RMSNorm of x. */
void tf_final_norm(const tf_weights *w, const float *x, float *y, int n);

/* Load a float vector of length n (any float dtype) as an owned f32 copy. */
qtts_status load_vec(const st_set *st, const char *name, int n, float **out, qtts_error *e);
/* Wrap a 2-D float tensor [rows, cols] as a qt_mat (in place, stored dtype). */
qtts_status load_mat(const st_set *st, const char *name, int rows, int cols, qt_mat *out, qtts_error *e);

#endif
