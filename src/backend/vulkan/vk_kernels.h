/* The contract between the host code and the compute shaders in
 * src/backend/vulkan/shaders/: for each shader, its bindings, its push
 * constants (the C struct below, mirrored field by field in the shader's
 * push_constant block, std430 scalar layout: uint32 and float only) and its
 * dispatch size. Shared constants live here and in shaders/common.glsl.
 *
 * Conventions:
 *  - activations, norms, biases, KV caches: f32;
 *  - offsets and strides are in elements of the bound buffer, so one buffer
 *    can hold several tensors;
 *  - weight matrices are PyTorch Linear [rows = out][cols = in], row-major,
 *    in one of four formats (shader suffix):
 *      f32   float  W[rows][cols]
 *      bf16  uint16 W[rows][cols] (bf16 bits; value = bits << 16 as f32)
 *      q8    int8   q[rows][kpad] + f16 scales d[rows][kpad/32]: w = d * q
 *      q4m   uint8  p[rows][kpad/2] + f16 scales d and mins m [rows][kpad/32]:
 *            block b of row r is the 16 bytes p[r][16b .. 16b+15]; byte j
 *            holds q of column 32b+j in its low nibble and of column
 *            32b+16+j in its high nibble; w = d * q + m
 *    (q8 and q4m are exactly the CPU's QT_Q8_B32 and QT_Q4M_B32, see
 *    src/backend/cpu/quant.h; kpad = cols rounded up to 128, padding zero)
 *  - the per-stream state buffer is uint32 st[VK_ST_WORDS] (layout below). */
#ifndef QTTS_BACKEND_VULKAN_VK_KERNELS_H
#define QTTS_BACKEND_VULKAN_VK_KERNELS_H

#include <stdint.h>

/* ---- per-stream state: uint32 words of the state buffer ---- */
enum {
    VK_ST_K = 0,        /* frame index of the frame being made (talker step k) */
    VK_ST_POS = 1,      /* talker position the step writes (prompt length + k) */
    VK_ST_NQ = 2,       /* rows of the trailing text queue (the row after them is tts_pad) */
    VK_ST_NTEACH = 3,   /* teacher frames (0: none) */
    VK_ST_BAN_EOS = 4,  /* 1: EOS is banned at every step (forced frames) */
    VK_ST_SEED_LO = 5,  /* the request's seed, low and high 32 bits */
    VK_ST_SEED_HI = 6,
    VK_ST_DRAWS = 7,    /* random draws made so far (the counter of the counter-based RNG) */
    VK_ST_SERIAL = 8,   /* frames this stream has pushed to its code ring, mod 2^32 (codes_push) */
    VK_ST_CODES = 16,   /* [16] this frame's codes, codebook 0..15 */
    VK_ST_AGREE = 32,   /* [16] 1 where the pick equalled the teacher's code */
    VK_ST_WORDS = 64
};

/* Flags of vk_pc_matmul.flags */
#define VK_MM_BIAS 1u  /* add bias[r] */
#define VK_MM_ACC 2u   /* Y += result (residual add) instead of Y = result */

/* matvec_{f32,bf16,q8,q4m}.comp and matmul_{f32,bf16,q8,q4m}.comp:
 *   Y[i][r] (+)= sum_c X[i][c] * W[r][c] (+ bias[r]) for i < n, r < rows.
 * Bindings: 0 W data, 1 scales (q8, q4m; f16 bits as uint16), 2 mins (q4m),
 *           3 X (float), 4 Y (float), 5 bias (float).
 * X row i starts at x_off + i * x_stride, Y row i at y_off + i * y_stride.
 * matvec: for small n (decode steps, n <= VK_MATVEC_MAX_N is the fast case;
 *   larger n loops); dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1).
 * matmul: tiled, for prefill (n large); dispatch
 *   (ceil(rows / VK_MATMUL_TM), ceil(n / VK_MATMUL_TN), 1). */
typedef struct vk_pc_matmul {
    uint32_t rows, cols, n, kpad;
    uint32_t x_off, x_stride, y_off, y_stride;
    uint32_t bias_off, flags;
} vk_pc_matmul;
#define VK_MATVEC_ROWS 8
#define VK_MATVEC_MAX_N 8
#define VK_MATMUL_TM 32
#define VK_MATMUL_TN 32

/* rmsnorm.comp: y[i] = x[i] * (1 / sqrt(mean(x[i]^2) + eps)) * g, rows of H
 * (x row i at x_off + i * x_rs, x_rs 0: H; y rows packed).
 * Bindings: 0 x, 1 g, 2 y (may be the same buffer as x).
 * Dispatch (n, 1, 1): one workgroup per row. */
typedef struct vk_pc_rmsnorm {
    uint32_t H, n, x_off, y_off, g_off;
    float eps;
    uint32_t x_rs;
} vk_pc_rmsnorm;

/* qk_rope.comp: per row i (position p_i, see below): each of the nh query
 * heads of q (in place) and nkv key heads of k gets a per-head RMSNorm over
 * hd with weights qn / kn (offsets qn_off / kn_off in binding 3), then NeoX
 * RoPE with the row of the rope table for p_i: x[j], x[j + hd/2] =
 * x[j] c - x[j + hd/2] s, x[j + hd/2] c + x[j] s with c = rope[p][j],
 * s = rope[p][hd/2 + j] (the table is what ops_rope_angles writes); then
 * k and v of the row are stored at position p_i of the caches:
 * kc[cache_off + p_i * kvd + ...] (kvd = nkv * hd), same for vc.
 * Position: p_i = (pos_state ? st[VK_ST_POS] : pos0) + i.
 * Streams: the n rows may be n / rows streams of `rows` consecutive rows
 * each (rows 0: one stream of n rows); stream j's row i is at position p_i
 * of caches starting cache_stride floats after stream j - 1's (one
 * dispatch for a batch whose streams' caches share one buffer pair).
 * Bindings: 0 q [n][nh*hd], 1 k [n][kvd], 2 v [n][kvd], 3 small f32 vectors
 *           (norm weights), 4 rope table [positions][hd], 5 kc, 6 vc, 7 st.
 * q, k, v rows start at q_off + i*nh*hd, k_off + i*kvd, v_off + i*kvd.
 * Dispatch (n, 1, 1). */
typedef struct vk_pc_qk_rope {
    uint32_t n, nh, nkv, hd;
    uint32_t pos0, pos_state, cache_off, qn_off;
    uint32_t kn_off, q_off, k_off, v_off;
    float eps;
    uint32_t rows, cache_stride;
} vk_pc_qk_rope;

/* attention.comp: causal attention of row i over cache positions
 * 0..p_i (p_i as in qk_rope): for query head h (kv head h / (nh / nkv)),
 * out[i][h] = softmax(scale * q.k_t) . v_t, in one pass over the positions
 * (online softmax in chunks through shared memory, any length).
 * Bindings: 0 q [n][nh*hd], 1 kc, 2 vc, 3 out [n][nh*hd], 4 st.
 * q row i at q_off + i*nh*hd, out row i at o_off + i*nh*hd; cache position t
 * of this layer at cache_off + t*kvd. Streams (rows, cache_stride) as in
 * qk_rope: stream j's rows read the caches at cache_off + j * cache_stride.
 * Dispatch (nh, n, 1). */
typedef struct vk_pc_attention {
    uint32_t n, nh, nkv, hd;
    uint32_t pos0, pos_state, cache_off, q_off;
    uint32_t o_off;
    float scale;
    uint32_t rows, cache_stride;
} vk_pc_attention;

/* swiglu.comp: o[j] = silu(g[j]) * u[j], silu(x) = x / (1 + exp(-x)),
 * for j < count. Bindings: 0 g, 1 u, 2 o.
 * Dispatch (ceil(count / 256), 1, 1). */
typedef struct vk_pc_swiglu {
    uint32_t count, g_off, u_off, o_off;
} vk_pc_swiglu;

/* embed_{f32,bf16}.comp: out[out_off + j] (+)= table[table_off + idx * H + j]
 * for j < H, with idx = min(ids[id_pos] + id_add, id_max) (ids: uint32).
 * Bindings: 0 table, 1 ids (uint), 2 out.
 * Dispatch (ceil(H / 256), 1, 1).
 * embed_{f32,bf16}_tab.comp (a batch, vk_stream_entry): row y's ids are
 * stream y's state, its out row at out_off + y * out_rs; queue (f32 only):
 * the table is stream y's text queue and id_max its nq. Bindings: 0 table,
 * 2 out, the stream table. Dispatch (ceil(H / 256), n, 1). */
typedef struct vk_pc_embed {
    uint32_t H, table_off, id_pos, id_add;
    uint32_t id_max, out_off, accumulate, out_rs;
    uint32_t queue;
} vk_pc_embed;

/* logits_talker.comp: the talker's logits processors, in place on
 * logits[V]: repetition penalty on every id with seen[id] != 0 (once per id:
 * x < 0 ? x * penalty : x / penalty); the end id banned (-inf) while
 * st[VK_ST_K] < min_k or st[VK_ST_BAN_EOS] != 0; ids in [suppress_from, V)
 * other than eos set to -inf.
 * Bindings: 0 logits, 1 seen (uint [V]), 2 st.
 * Dispatch (ceil(V / 256), 1, 1). */
typedef struct vk_pc_logits_talker {
    uint32_t V, eos, min_k, suppress_from;
    float penalty;
} vk_pc_logits_talker;

/* sample.comp: one token from logits[V] (the row at logits_off), as
 * src/model/sampling.c chooses it: greedy = argmax, ties to the lowest id;
 * else temperature (logits / temperature), top-k (keep values >= the k-th
 * largest; 0 or >= V: off), top-p (drop the ascending-sorted prefix whose
 * cumulative probability is <= 1 - top_p, keep at least the largest), then
 * softmax and one draw u in [0, 1) over the kept ids in id order. The draw
 * is counter-based: u from a hash of (st seed, st[VK_ST_DRAWS]), then
 * st[VK_ST_DRAWS]++ (every call, greedy too, so a stream's draws do not
 * depend on which calls sample). Arithmetic in f32 (the CPU uses f64 for
 * the softmax), so draws match the CPU's only where no probability sits on
 * a rounding edge; the same device and seed repeat exactly.
 * Then: teacher forcing when st[VK_ST_K] < st[VK_ST_NTEACH]: the teacher
 * code teach[k * G + group] replaces the pick, and st[VK_ST_AGREE + group]
 * = (pick == teacher). The result goes to st[VK_ST_CODES + group]; when
 * mark_seen, seen[result] = 1 (the talker's repetition-penalty history).
 * Bindings: 0 logits, 1 st, 2 teach (uint [frames][G]), 3 seen (uint [V]).
 * Dispatch (1, 1, 1): one workgroup of VK_SAMPLE_WG threads. */
typedef struct vk_pc_sample {
    uint32_t V, logits_off, do_sample, top_k;
    float temperature, top_p;
    uint32_t group, G, mark_seen;
} vk_pc_sample;
#define VK_SAMPLE_WG 256
#define VK_SAMPLE_MAX_V 4096 /* the largest V sample.comp takes (16 ids per thread) */

/* advance.comp: st[VK_ST_K] += 1, st[VK_ST_POS] += 1 (the end of a frame).
 * Bindings: 0 st. Dispatch (1, 1, 1). */
typedef struct vk_pc_advance {
    uint32_t unused;
} vk_pc_advance;

/* codes_push.comp: st[VK_ST_CODES .. + G) into ring slot st[VK_ST_SERIAL] %
 * ring_frames, then st[VK_ST_SERIAL] += 1. Bindings: 0 st, 1 ring int
 * [ring_frames][G]. Dispatch (1, 1, 1); G <= 64. */
typedef struct vk_pc_codes_push {
    uint32_t G, ring_frames;
} vk_pc_codes_push;

/* The stream table of a batched frame (shaders/stream_table.glsl): entry j
 * names stream j by the device addresses of its buffers (vk_buf_address, as
 * low and high words) and carries its per-request parameters, so a batch's
 * recording depends only on its size. Bound at VK_TAB_BINDING by the *_tab
 * shaders, whose entries are per stream where their plain forms take one
 * stream's buffers and push constants:
 *  qk_rope_tab, attention_tab: row j = stream j (rows = pos_state = 1),
 *    caches at layer cache_off (cache_off * layer_floats);
 *  logits_talker_tab: (ceil(V / 256), n), logits row j at j * V, t_penalty;
 *  sample_tab: workgroup j, logits row at logits_off + j * V, the talker's
 *    (group 0) or predictor's parameters from the entry;
 *  embed_*_tab: see vk_pc_embed;
 *  codes_push_tab: workgroup j (binds only the table);
 *  advance_tab: workgroup j of VK_ST_WORDS threads; binding 0 gets every
 *    stream's state after the advance, [n][VK_ST_WORDS];
 *  rows_tab: batch rows <-> each stream's y (vk_pc_rows_tab). */
#define VK_TAB_BINDING 9
typedef struct vk_stream_entry {
    uint32_t kc[2], vc[2], rope[2], st[2], seen[2], teach[2], queue[2], ring[2], y[2];
    uint32_t layer_floats, nq;
    uint32_t t_do_sample, t_top_k;
    float t_temperature, t_top_p, t_penalty;
    uint32_t p_do_sample, p_top_k;
    float p_temperature, p_top_p;
    uint32_t pad[3];
} vk_stream_entry;
_Static_assert(sizeof(vk_stream_entry) == 128, "vk_stream_entry mirrors stream_table.glsl (32 words)");

/* rows_tab.comp: dir 0: rows[off + j * H + i] = y_j[i]; dir 1 the reverse.
 * Bindings: 0 rows, the stream table. Dispatch (ceil(H / 256), n, 1). */
typedef struct vk_pc_rows_tab {
    uint32_t H, off, dir;
} vk_pc_rows_tab;

/* codes_gather.comp: when ctl[2] != 0, codes[t][q] = ring[((ctl[1] + t) %
 * ring_frames)][q] clamped to [0, size). Bindings: 0 ring int, 1 ctl uint,
 * 2 codes int [n][Q]. Dispatch (ceil(n Q / 64), 1, 1). */
typedef struct vk_pc_codes_gather {
    uint32_t n, Q, ring_frames, size;
} vk_pc_codes_gather;

/* quantize_q8.comp: the CPU's int8 activation blocks (q8_prep, quant.h
 * "Activation blocks") of X [n][cols] for the dp4 matvecs: per row i and
 * block b of 32 columns (nb = kpad / 32, kpad = cols rounded up to 128,
 * columns past cols zero): dx = max|x| / 127, xq = round-to-nearest-even of
 * x * (127 / max|x|) in [-127, 127] (0 when max|x| = 0), fsum = dx * sum xq.
 * Bindings: 0 X float (row i at x_off + i * x_stride); 1 XQ uint
 * [n][kpad / 4] (4 int8 per word, column c of row i in byte c % 4 of word
 * i * kpad / 4 + c / 4); 2 XS float [2][n][nb]: dx at i * nb + b, fsum at
 * (n + i) * nb + b.
 * Dispatch (ceil(nb / 64), n, 1): one thread per block. */
typedef struct vk_pc_quantize_q8 {
    uint32_t cols, kpad, n, x_off, x_stride;
} vk_pc_quantize_q8;

/* matvec_q8_dp4.comp, matvec_q4m_dp4.comp: matvec_q8 / matvec_q4m with X
 * quantised by quantize_q8.comp and packed int8 dot products (devices with
 * VK_KHR_shader_integer_dot_product and its shaderIntegerDotProduct
 * feature); per output, over blocks b in order, the CPU's X16 sequence
 * acc = fma(dot_b, d_w * dx_b, acc) (q4m also accm = fma(m_w, fsum_b, accm),
 * then acc + accm), then + bias, then + old Y (VK_MM_ACC): the bits of the
 * CPU's QT_Q8_B32_X16 / QT_Q4M_B32_X16 kernels. Specialisation constant 0
 * (DP4_FUSED): 0 (default) emulates the fma exactly (Vulkan's fma() may
 * round twice, lavapipe's does); 1 uses fma(), only where it is fused.
 * Bindings: 0 W data, 1 scales, 2 mins (q4m) as for matvec_q8 / matvec_q4m;
 *           3 XQ, 6 XS (of quantize_q8 with the same n and kpad); 4 Y,
 *           5 bias (float).
 * Push constants: vk_pc_matmul (x_off, x_stride unused).
 * Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1), any n. */

/* ---- the codec decoder (src/model/codec_vulkan.c) ----
 * Channel-major activations [C][T] (row stride per tensor), offsets and
 * strides in floats; each op's exact definition is at the head of its
 * shader. */

/* conv1d_f32.comp: causal conv, stride 1, dilation, groups; flags
 * VK_CONV_CLAMP. Bindings: 0 x, 1 w, 2 bias, 3 y.
 * Dispatch (ceil(n / 64), cout, 1). */
typedef struct vk_pc_conv1d {
    uint32_t cin, cout, K, dil;
    uint32_t groups, n, x_off, x_stride;
    uint32_t y_off, y_stride, w_off, b_off;
    uint32_t flags;
} vk_pc_conv1d;
#define VK_CONV_CLAMP 1u

/* conv_transpose1d_f32.comp: output window [t0, t0 + n) of a transposed
 * conv over t_in inputs. Bindings: 0 x, 1 w [cin][cout][K], 2 bias, 3 y.
 * Dispatch (ceil(n / 64), cout, 1). */
typedef struct vk_pc_conv_transpose1d {
    uint32_t cin, cout, K, stride;
    uint32_t t_in, t0, n, x_off;
    uint32_t x_stride, y_off, y_stride, w_off;
    uint32_t b_off;
} vk_pc_conv_transpose1d;

/* snake_f32.comp: y = x + inv_b sin(a x)^2 per channel.
 * Bindings: 0 x, 1 params (a, inv_b), 2 y. Dispatch (ceil(n / 64), C, 1). */
typedef struct vk_pc_snake {
    uint32_t C, n, x_off, x_stride;
    uint32_t y_off, y_stride, a_off, ib_off;
} vk_pc_snake;

/* copy2d_f32.comp: strided copy. Bindings: 0 src, 1 dst.
 * Dispatch (ceil(cols / 64), rows, 1). */
typedef struct vk_pc_copy2d {
    uint32_t rows, cols, s_off, s_rs;
    uint32_t s_cs, d_off, d_rs, d_cs;
} vk_pc_copy2d;

/* scale_add_f32.comp: y = a + (flags & VK_SA_SCALE ? g[c] : 1) b, strided.
 * Bindings: 0 a, 1 b, 2 g, 3 y. Dispatch (ceil(cols / 64), rows, 1). */
typedef struct vk_pc_scale_add {
    uint32_t rows, cols, a_off, a_rs;
    uint32_t a_cs, b_off, b_rs, b_cs;
    uint32_t y_off, y_rs, y_cs, g_off;
    uint32_t flags;
} vk_pc_scale_add;
#define VK_SA_SCALE 1u

/* layernorm_f32.comp: rows of C. Bindings: 0 x, 1 params (w, b), 2 y.
 * Dispatch (n, 1, 1). */
typedef struct vk_pc_layernorm {
    uint32_t C, n, x_off, y_off;
    uint32_t w_off, b_off;
    float eps;
} vk_pc_layernorm;

/* gelu_f32.comp: exact GELU in place. Bindings: 0 x.
 * Dispatch (ceil(count / 256), 1, 1). */
typedef struct vk_pc_gelu {
    uint32_t count, x_off;
} vk_pc_gelu;

/* codebook_f32.comp: split-RVQ lookup. Bindings: 0 codebooks [Q][size][V],
 * 1 codes int [n][Q], 2 out (first, rest). Dispatch (ceil(V / 64), n, 1). */
typedef struct vk_pc_codebook {
    uint32_t V, Q, size, n;
    uint32_t codes_off, first_off, rest_off;
} vk_pc_codebook;

/* rope_ring_f32.comp: RoPE of q (in place) and k, k and v into ring slots.
 * Bindings: 0 q, 1 k, 2 v, 3 rope [n][hd], 4 kr, 5 vr, 6 ctl (uint, ctl[0] =
 * position of row 0). Dispatch (n, 1, 1). */
typedef struct vk_pc_rope_ring {
    uint32_t n, nh, nkv, hd;
    uint32_t ring, cache_off, q_off, k_off;
    uint32_t v_off;
} vk_pc_rope_ring;

/* attention_window_f32.comp: sliding-window attention over the ring.
 * Bindings: 0 q, 1 kr, 2 vr, 3 out, 4 ctl. Dispatch (nh, n, 1). */
typedef struct vk_pc_attention_window {
    uint32_t n, nh, nkv, hd;
    uint32_t window, ring, cache_off, q_off;
    uint32_t o_off;
    float scale;
} vk_pc_attention_window;

#endif
