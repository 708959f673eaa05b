/* Causal attention of n query rows over the KV cache, one query head per
 * workgroup: out = softmax(scale * q . k_t) . v_t over positions
 * t = 0..p_i, as ops_attn_head (src/backend/cpu/ops.c) computes it for each
 * row and head in src/model/transformer.c (kv head h / (nh / nkv)); it
 * matches to f32 rounding (another summation order, and the softmax is
 * normalised once at the end instead of per score).
 * Dataflow: q head -> shared; per chunk of WG positions: scores (one thread
 * per position) -> chunk max (subgroup max, then across subgroups in
 * shared) -> rescale the running sum and accumulator by exp(m_old - m_new)
 * -> p_t = exp(s_t - m) in shared -> each thread adds p_t v_t[d] for its
 * output dims d; at the end out = acc / sum.
 *
 * Bindings (vk_kernels.h vk_pc_attention):
 *   0 q   float [n][nh * hd] at q_off
 *   1 kc  float, position t at cache_off + t * nkv * hd
 *   2 vc  float, same layout
 *   3 out float [n][nh * hd] at o_off
 *   4 st  uint state: p_i = (pos_state ? st[VK_ST_POS] : pos0) + i
 * Streams: as in qk_rope.comp, the n rows are n / rows streams of `rows`
 * rows (rows 0: one stream), stream j's i-th row at position p_i over the
 * caches at cache_off + j * cache_stride.
 * Workgroup: 128 threads for one (head, row) (dispatch (nh, n, 1)); hd up
 * to 256 (each thread owns output dims d = tid and tid + 128). This is the
 * one-pass online-softmax ("flash decoding") design of ggml-vulkan's
 * flash_attn and FlashAttention: any number of positions with constant
 * shared memory, K and V each read once; the V reads are coalesced across
 * threads (consecutive d), each thread's K row is contiguous and read as
 * vec4 when the cache offsets allow (16-byte aligned rows). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "attention.glsl"
