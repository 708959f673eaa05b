/* Speech-tokenizer encoder (Mimi): the forward pass.
 * Dataflow: pcm [1][n] -> SEANet (causal convs, ELU, residual blocks)
 * [C][n/960] -> transpose -> pre-LN transformer with rotate-half RoPE and a
 * plain causal mask [n/960][C] -> transpose -> stride-2 conv with replicate
 * padding [C][T] -> semantic / acoustic input projections [T][d] -> nearest
 * codebook by L2 distance, residual across the acoustic codebooks -> codes
 * [T][n_valid_q].
 * Must match HF transformers MimiModel._encode_frame (eager/sdpa attention,
 * fp32) and the Qwen3TTSTokenizerV2Model.encode slice; see spec codec.md §5.
 * The mask is plain causal: config sliding_window (250) is applied only by
 * HF's flash-attention path, which the official pipeline does not use.
 * Cost, real geometry, 9.9 s of audio: 27.3 G multiply-adds (SEANet convs
 * 20.0 G, transformer 6.2 G, RVQ scores 1.0 G); 1.3-1.6 s of CPU on 2
 * threads of the Zen 4 guest with AVX-512 at load average 7-8 (docs/BENCH.md
 * "Cold start"), the convs (ops_conv1d) most of it. The whole clip is held at once,
 * bounded by CODEC_ENCODER_MAX_SECONDS. */
#include "model/codec_encoder_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv.h"

/* dst [cols][rows] = src [rows][cols]^T */
static void transpose(float *dst, const float *src, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) dst[(size_t)k * rows + r] = src[(size_t)r * cols + k];
}

/* Mimi causal conv (MimiConv1d, use_causal_conv): x [cin][t_in] is padded
 * with k_eff - stride frames on the left and stride * ceil(t_in / stride) -
 * t_in on the right (zeros, or the edge frames when replicate), optionally
 * passed through ELU first; the conv on ops's threads. Returns y
 * [cout][ceil(t_in / stride)] malloc'ed, or NULL when out of memory. */
static float *conv_mimi(const ops_ctx *ops, const enc_conv *cv, const float *x, int t_in, int elu_first, int replicate,
                        int *t_out) {
    const int s = cv->stride, keff = (cv->k - 1) * cv->dilation + 1;
    const int pad_l = keff - s;
    const int n_out = (t_in + s - 1) / s;
    const int extra = n_out * s - t_in;
    const int tp = pad_l + t_in + extra;
    float *y = malloc(sizeof(float) * (size_t)cv->cout * (size_t)n_out);
    if (!y) return NULL;
    const float *xin = x;
    float *xp = NULL;
    if (pad_l != 0 || extra != 0 || elu_first) {
        xp = malloc(sizeof(float) * (size_t)cv->cin * (size_t)tp);
        if (!xp) {
            free(y);
            return NULL;
        }
        for (int i = 0; i < cv->cin; i++) {
            float *dst = xp + (size_t)i * tp;
            memcpy(dst + pad_l, x + (size_t)i * t_in, sizeof(float) * (size_t)t_in);
            memset(dst, 0, sizeof(float) * (size_t)pad_l);
            memset(dst + pad_l + t_in, 0, sizeof(float) * (size_t)extra);
        }
        /* ELU(0) = 0: the zero pads pass through it unchanged */
        if (elu_first) ops_elu_ctx(ops, xp, (size_t)cv->cin * (size_t)tp);
        for (int i = 0; replicate && i < cv->cin; i++) {
            float *dst = xp + (size_t)i * tp;
            for (int t = 0; t < pad_l; t++) dst[t] = dst[pad_l];
            for (int t = 0; t < extra; t++) dst[pad_l + t_in + t] = dst[pad_l + t_in - 1];
        }
        xin = xp;
    }
    ops_conv1d_ctx(ops, xin, cv->cin, tp, tp, cv->w, cv->b, cv->cout, cv->k, s, cv->dilation, 1, y, n_out);
    free(xp);
    *t_out = n_out;
    return y;
}

/* SEANet stack: takes ownership of x [channels][t] and returns the output
 * [hidden][t'] (or NULL when out of memory; x is freed either way). */
static float *seanet(const codec_encoder *c, float *x, int *t) {
    int ch = 1; /* channels of x */
    for (int i = 0; i < c->n_steps && x; i++) {
        const enc_step *s = &c->steps[i];
        int t_new;
        if (s->kind == STEP_ELU) {
            ops_elu_ctx(&c->ops, x, (size_t)ch * (size_t)*t);
        } else if (s->kind == STEP_CONV) {
            float *y = conv_mimi(&c->ops, &s->a, x, *t, 0, 0, &t_new);
            free(x);
            x = y;
            *t = t_new;
            ch = s->a.cout;
        } else { /* x + conv_b(ELU(conv_a(ELU(x)))) */
            float *h = conv_mimi(&c->ops, &s->a, x, *t, 1, 0, &t_new);
            float *h2 = NULL;
            if (h) {
                ops_elu_ctx(&c->ops, h, (size_t)s->a.cout * (size_t)t_new);
                h2 = conv_mimi(&c->ops, &s->b, h, t_new, 0, 0, &t_new);
                free(h);
            }
            if (!h2) {
                free(x);
                return NULL;
            }
            const size_t n = (size_t)s->b.cout * (size_t)*t;
            for (size_t k = 0; k < n; k++) x[k] = x[k] + h2[k];
            free(h2);
        }
    }
    return x;
}

/* y = (x - mean) / sqrt(var + eps) * w + b over n, biased variance. The
 * moments are taken in double so the result is the correctly rounded one,
 * whatever order the reference used. */
static void layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) {
        const double d = x[i] - mean;
        var += d * d;
    }
    var /= n;
    const double rstd = 1.0 / sqrt(var + (double)eps);
    for (int i = 0; i < n; i++) y[i] = (float)((x[i] - mean) * rstd) * w[i] + b[i];
}

static void gelu_erf_inplace(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

typedef struct tf_scratch {
    float *ln;  /* [T][C] */
    float *q;   /* [T][H*hd] */
    float *k;   /* [T][KV*hd] */
    float *v;   /* [T][KV*hd] */
    float *att; /* [T][H*hd] */
    float *out; /* [T][C] */
    float *mlp; /* [T][I] */
    float *p;   /* [n_threads][T] attention probabilities of one query per task */
} tf_scratch;

typedef struct attn_job {
    const codec_encoder *c;
    tf_scratch *s;
    int T;
} attn_job;

/* Queries t = task, task + n_tasks, ... (interleaved: query t costs t + 1
 * keys), every head, each with its own scores row of s->p. */
static void attn_task(void *arg, int task, int n_tasks) {
    const attn_job *j = arg;
    const codec_encoder_config *g = &j->c->cfg;
    const int hd = g->head_dim, qd = g->n_heads * hd, kvd = g->n_kv_heads * hd;
    const int group = g->n_heads / g->n_kv_heads;
    const float scale = (float)(1.0 / sqrt((double)hd));
    float *p = j->s->p + (size_t)task * (size_t)j->T;
    for (int t = task; t < j->T; t += n_tasks)
        for (int h = 0; h < g->n_heads; h++) {
            const int kvh = h / group;
            ops_attn_head(&j->c->ops, j->s->q + (size_t)t * qd + h * hd, j->s->k + kvh * hd, j->s->v + kvh * hd,
                          (size_t)kvd, t + 1, hd, scale, p, j->s->att + (size_t)t * qd + h * hd);
        }
}

/* Causal self-attention of one layer over the whole clip: att = softmax(q k^T
 * * scale + causal) v per head (ops_attn_head, the kernel table's), on
 * RoPE'd q and k (positions 0..T-1); queries split over the threads. */
static void attention(const codec_encoder *c, tf_scratch *s, int T) {
    const codec_encoder_config *g = &c->cfg;
    const int hd = g->head_dim, qd = g->n_heads * hd, kvd = g->n_kv_heads * hd;
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < g->n_heads; h++) ops_rope_neox(s->q + (size_t)t * qd + h * hd, hd, t, c->inv_freq);
        for (int h = 0; h < g->n_kv_heads; h++) ops_rope_neox(s->k + (size_t)t * kvd + h * hd, hd, t, c->inv_freq);
    }
    attn_job j = {c, s, T};
    const int tasks = T < 2 * c->ops.n_threads ? 1 : c->ops.n_threads;
    if (tasks <= 1) attn_task(&j, 0, 1);
    else ops_parallel(&c->ops, attn_task, &j, tasks);
}

/* Pre-LN transformer on x [T][C] in place. No final norm (Mimi). Returns 0,
 * or -1 when out of memory. */
static int transformer(const codec_encoder *c, float *x, int T) {
    const codec_encoder_config *g = &c->cfg;
    const int C = g->hidden, qd = g->n_heads * g->head_dim, kvd = g->n_kv_heads * g->head_dim, I = g->intermediate;
    const size_t nT = (size_t)T;
    tf_scratch s;
    s.ln = malloc(sizeof(float) * nT * (size_t)C);
    s.q = malloc(sizeof(float) * nT * (size_t)qd);
    s.k = malloc(sizeof(float) * nT * (size_t)kvd);
    s.v = malloc(sizeof(float) * nT * (size_t)kvd);
    s.att = malloc(sizeof(float) * nT * (size_t)qd);
    s.out = malloc(sizeof(float) * nT * (size_t)C);
    s.mlp = malloc(sizeof(float) * nT * (size_t)I);
    s.p = malloc(sizeof(float) * nT * (size_t)(c->ops.n_threads > 1 ? c->ops.n_threads : 1));
    int rc = -1;
    if (!s.ln || !s.q || !s.k || !s.v || !s.att || !s.out || !s.mlp || !s.p) goto done;
    for (int l = 0; l < g->n_layers; l++) {
        const enc_layer *L = &c->layers[l];
        for (int t = 0; t < T; t++)
            layernorm(s.ln + (size_t)t * C, x + (size_t)t * C, L->ln1_w, L->ln1_b, C, g->norm_eps);
        ops_matmul(&c->ops, &L->wq, s.ln, T, NULL, s.q);
        ops_matmul(&c->ops, &L->wk, s.ln, T, NULL, s.k);
        ops_matmul(&c->ops, &L->wv, s.ln, T, NULL, s.v);
        attention(c, &s, T);
        ops_matmul(&c->ops, &L->wo, s.att, T, NULL, s.out);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += L->ls_attn[i] * s.out[(size_t)t * C + i];
        for (int t = 0; t < T; t++)
            layernorm(s.ln + (size_t)t * C, x + (size_t)t * C, L->ln2_w, L->ln2_b, C, g->norm_eps);
        ops_matmul(&c->ops, &L->fc1, s.ln, T, NULL, s.mlp);
        gelu_erf_inplace(s.mlp, nT * (size_t)I);
        ops_matmul(&c->ops, &L->fc2, s.mlp, T, NULL, s.out);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += L->ls_mlp[i] * s.out[(size_t)t * C + i];
    }
    rc = 0;
done:
    free(s.ln);
    free(s.q);
    free(s.k);
    free(s.v);
    free(s.att);
    free(s.out);
    free(s.mlp);
    free(s.p);
    return rc;
}

/* Squared L2 distance of x and e over d, summed as differences in double,
 * i.e. essentially exact for the f32 inputs: torch.cdist's |x|^2 + |e|^2 -
 * 2 x.e form in f32 is less accurate, but its error (~1e-7 relative) stays far
 * below the smallest relative gap seen in the goldens (1.7e-4). Four partial
 * sums; each term is exact in double, so the order moves the sum by ~1e-16
 * relative, far below any gap. */
static double sqdist(const float *e, const float *x, int d) {
    double s4[4] = {0.0, 0.0, 0.0, 0.0};
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

/* Index of the codebook row nearest to x by sqdist over all K rows; the
 * first on ties (torch argmin). */
static int nearest(const float *E, int K, int d, const float *x) {
    int best = 0;
    double best_d = INFINITY;
    for (int j = 0; j < K; j++) {
        const double s = sqdist(E + (size_t)j * d, x, d);
        if (s < best_d) {
            best_d = s;
            best = j;
        }
    }
    return best;
}

typedef struct vq_job {
    const float *E, *R, *S;
    const double *e2, *en; /* |E_j|^2, |E_j| */
    int K, d, T;
    int32_t *idx;
} vq_job;

/* Frames [t0, t1) of enc_vq_nearest. a_j = |E_j|^2 - 2 S_tj is |R_t - E_j|^2
 * - |R_t|^2 up to the f32 product's error, at most gamma_d |R_t| |E_j| for any
 * summation order (gamma_d = d u / (1 - d u) < 2 d u, u = 2^-24), so twice
 * that for 2 S_tj; b_j takes twice this again, plus 1e-12 (|E_j|^2 + |R_t|^2)
 * for the double roundings of sqdist, e2 and a_j (~d 2^-53 of it). A row with
 * a_j - b_j above min_k (a_k + b_k) cannot be sqdist's least; the others
 * (usually one) are compared by sqdist in index order, so the result is
 * nearest's. A non-finite score falls back to nearest. */
static void vq_rows(const vq_job *j, int t0, int t1) {
    const int K = j->K, d = j->d;
    const double rel = 8.0 * d * 0x1p-24;
    for (int t = t0; t < t1; t++) {
        const float *r = j->R + (size_t)t * d, *s = j->S + (size_t)t * K;
        double x2 = 0.0;
        for (int k = 0; k < d; k++) x2 += (double)r[k] * r[k];
        const double xn = sqrt(x2);
        double hi = INFINITY;
        for (int i = 0; i < K; i++) {
            const double a = j->e2[i] - 2.0 * (double)s[i], b = rel * xn * j->en[i] + 1e-12 * (j->e2[i] + x2);
            if (a + b < hi) hi = a + b;
        }
        int best = -1;
        if (isfinite(hi)) {
            double best_d = INFINITY;
            for (int i = 0; i < K; i++) {
                const double a = j->e2[i] - 2.0 * (double)s[i], b = rel * xn * j->en[i] + 1e-12 * (j->e2[i] + x2);
                if (!(a - b <= hi)) continue;
                const double m = sqdist(j->E + (size_t)i * d, r, d);
                if (m < best_d) {
                    best_d = m;
                    best = i;
                }
            }
        }
        j->idx[t] = best >= 0 ? best : nearest(j->E, K, d, r);
    }
}

static void vq_task(void *arg, int t, int n_tasks) {
    const vq_job *j = arg;
    vq_rows(j, (int)((int64_t)j->T * t / n_tasks), (int)((int64_t)j->T * (t + 1) / n_tasks));
}

void enc_vq_nearest(const ops_ctx *ops, const float *E, const double *e2, int K, int d, const float *R, int T,
                    float *scores, int32_t *idx) {
    double *en = malloc(sizeof(double) * (size_t)K);
    if (!en) { /* the exhaustive search needs no memory */
        for (int t = 0; t < T; t++) idx[t] = nearest(E, K, d, R + (size_t)t * d);
        return;
    }
    for (int i = 0; i < K; i++) en[i] = sqrt(e2[i]);
    const qt_mat W = {.data = E, .dtype = DT_F32, .rows = K, .cols = d};
    ops_matmul(ops, &W, R, T, NULL, scores);
    vq_job j = {E, R, scores, e2, en, K, d, T, idx};
    const int tasks = T < 2 * ops->n_threads ? 1 : 2 * ops->n_threads;
    if (tasks <= 1) vq_rows(&j, 0, T);
    else ops_parallel(ops, vq_task, &j, tasks);
    free(en);
}

/* Residual VQ of one branch over u [T][d] (modified in place: it ends as the
 * residual); codes written at column col0 of codes [T][n_out]. Returns 0, or
 * -1 when out of memory. */
static int rvq_encode(const codec_encoder *c, const enc_rvq *q, float *u, int T, int32_t *codes, int n_out,
                      int col0) {
    const int K = c->cfg.codebook_size, d = c->cfg.codebook_dim;
    float *S = malloc(sizeof(float) * (size_t)T * (size_t)K);
    int32_t *ix = malloc(sizeof(int32_t) * (size_t)T);
    if (!S || !ix) {
        free(S);
        free(ix);
        return -1;
    }
    for (int i = 0; i < q->n_used; i++) {
        const float *E = q->codebook[i];
        enc_vq_nearest(&c->ops, E, q->norm2[i], K, d, u, T, S, ix);
        for (int t = 0; t < T; t++) {
            codes[(size_t)t * n_out + col0 + i] = ix[t];
            if (i + 1 < q->n_used) {
                float *r = u + (size_t)t * d;
                const float *e = E + (size_t)ix[t] * d;
                for (int k = 0; k < d; k++) r[k] = r[k] - e[k];
            }
        }
    }
    free(S);
    free(ix);
    return 0;
}

/* Input projection of one branch: u [T][d] from z [T][C]; trace as [d][T]. */
static int rvq_project(const codec_encoder *c, const enc_rvq *q, const float *z, int T, float *u,
                       const char *stage, codec_encoder_trace_fn trace, void *user) {
    const int d = c->cfg.codebook_dim;
    if (q->has_proj) ops_matmul(&c->ops, &q->in_proj, z, T, NULL, u);
    else memcpy(u, z, sizeof(float) * (size_t)T * (size_t)d);
    if (trace) {
        float *tr = malloc(sizeof(float) * (size_t)T * (size_t)d);
        if (!tr) return -1;
        transpose(tr, u, T, d);
        trace(user, stage, tr, d, T);
        free(tr);
    }
    return 0;
}

qtts_status codec_encoder_encode_traced(const codec_encoder *c, const float *pcm, size_t n, int32_t **codes,
                                        int *n_frames, codec_encoder_trace_fn trace, void *user, qtts_error *e) {
    *codes = NULL;
    *n_frames = 0;
    const codec_encoder_config *g = &c->cfg;
    if (!pcm || n == 0) return err_set(e, QTTS_ERR_INPUT, "reference audio is empty (0 samples); give at least one sample of 24 kHz mono audio");
    const size_t max_n = (size_t)CODEC_ENCODER_MAX_SECONDS * (size_t)g->sample_rate;
    if (n > max_n)
        return err_set(e, QTTS_ERR_LIMIT, "reference audio is %.1f s long; the codec encoder accepts at most %d s: trim it",
                       (double)n / g->sample_rate, CODEC_ENCODER_MAX_SECONDS);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return err_set(e, QTTS_ERR_INPUT, "reference audio sample %zu (at %.3f s) is %s; the audio must be finite", i,
                           (double)i / g->sample_rate, isnan(pcm[i]) ? "NaN" : "infinite");

    const int C = g->hidden, d = g->codebook_dim, nq = g->n_valid_q;
    const int T_out = (int)((n + (size_t)g->samples_per_frame - 1) / (size_t)g->samples_per_frame);
    qtts_status st = QTTS_OK;
    float *x = NULL, *xt = NULL, *z = NULL, *zt = NULL, *u = NULL;
    int32_t *out = NULL;
    int t = (int)n, T = 0;

    x = malloc(sizeof(float) * n);
    if (!x) goto nomem;
    memcpy(x, pcm, sizeof(float) * n);
    x = seanet(c, x, &t);
    if (!x) goto nomem;
    if (trace) trace(user, "enc_seanet_out", x, C, t);

    xt = malloc(sizeof(float) * (size_t)t * (size_t)C);
    if (!xt) goto nomem;
    transpose(xt, x, C, t);
    if (transformer(c, xt, t) != 0) goto nomem;
    if (trace) trace(user, "enc_transformer_out", xt, t, C);
    transpose(x, xt, t, C);

    z = conv_mimi(&c->ops, &c->down, x, t, 0, 1, &T);
    if (!z) goto nomem;
    if (trace) trace(user, "enc_downsample_out", z, C, T);
    if (T != T_out) {
        st = err_set(e, QTTS_ERR_INTERNAL, "codec encoder produced %d frames for %zu samples, expected %d", T, n, T_out);
        goto done;
    }

    zt = malloc(sizeof(float) * (size_t)T * (size_t)C);
    u = malloc(sizeof(float) * (size_t)T * (size_t)d);
    out = malloc(sizeof(int32_t) * (size_t)T * (size_t)nq);
    if (!zt || !u || !out) goto nomem;
    transpose(zt, z, C, T);
    if (c->sem.n_used > 0) {
        if (rvq_project(c, &c->sem, zt, T, u, "enc_semantic_proj_out", trace, user)) goto nomem;
        if (rvq_encode(c, &c->sem, u, T, out, nq, 0)) goto nomem;
    }
    if (c->ac.n_used > 0) {
        if (rvq_project(c, &c->ac, zt, T, u, "enc_acoustic_proj_out", trace, user)) goto nomem;
        if (rvq_encode(c, &c->ac, u, T, out, nq, c->sem.n_used)) goto nomem;
    }
    *codes = out;
    *n_frames = T;
    out = NULL;
    goto done;
nomem:
    st = err_set(e, QTTS_ERR_NOMEM, "out of memory encoding %zu samples of reference audio", n);
done:
    free(x);
    free(xt);
    free(z);
    free(zt);
    free(u);
    free(out);
    return st;
}

qtts_status codec_encoder_encode(const codec_encoder *c, const float *pcm, size_t n, int32_t **codes, int *n_frames,
                                 qtts_error *e) {
    return codec_encoder_encode_traced(c, pcm, n, codes, n_frames, NULL, NULL, e);
}
