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
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#define WG 128
#define MAX_HD 256
#define NOUT (MAX_HD / WG)
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BQ { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer BKC { float kc[]; };
layout(std430, set = 0, binding = 1) readonly buffer BKC4 { vec4 kc4[]; }; /* the same buffer */
layout(std430, set = 0, binding = 2) readonly buffer BVC { float vc[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BO { float o[]; };
layout(std430, set = 0, binding = 4) readonly buffer BST { uint st[]; };

layout(push_constant) uniform PC {
    uint n, nh, nkv, hd;
    uint pos0, pos_state, cache_off, q_off;
    uint o_off;
    float scale;
    uint rows, cache_stride;
} pc;

shared vec4 qs4[MAX_HD / 4]; /* the query head */
shared float ps[WG];     /* this chunk's scores, then exp(score - max) */
shared float red[WG];    /* one max per subgroup */

void main() {
    const uint h = gl_WorkGroupID.x, row = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    if (h >= pc.nh || row >= pc.n) return; /* uniform */
    const uint hd = pc.hd, kvd = pc.nkv * hd;
    const uint kvh = h / (pc.nh / pc.nkv);
    const uint rows = pc.rows != 0u ? pc.rows : pc.n, sj = row / rows;
    const uint p = (pc.pos_state != 0u ? st[VK_ST_POS] : pc.pos0) + (row - sj * rows);
    const uint qo = pc.q_off + row * pc.nh * hd + h * hd;
    const uint kvo = pc.cache_off + sj * pc.cache_stride + kvh * hd;
    for (uint d = t; d < hd; d += WG) qs4[d / 4][d % 4] = q[qo + d];
    barrier();
    /* K rows as vec4 when every row start is 16-byte aligned */
    const bool vec = (kvo % 4u) == 0u && (hd % 4u) == 0u && (kvd % 4u) == 0u;

    float m = uintBitsToFloat(0xff800000u), l = 0.0;
    float acc[NOUT];
    for (uint r = 0; r < NOUT; r++) acc[r] = 0.0;
    const uint np = p + 1;
    for (uint c0 = 0; c0 < np; c0 += WG) {
        const uint cn = min(uint(WG), np - c0);
        float sc = uintBitsToFloat(0xff800000u);
        if (t < cn) {
            const uint ko = kvo + (c0 + t) * kvd;
            float qk = 0.0;
            if (vec) {
                for (uint d = 0; d < hd / 4; d++) qk += dot(qs4[d], kc4[ko / 4 + d]);
            } else {
                for (uint d = 0; d < hd; d++) qk += qs4[d / 4][d % 4] * kc[ko + d];
            }
            sc = qk * pc.scale;
        }
        const float sm = subgroupMax(sc);
        if (subgroupElect()) red[gl_SubgroupID] = sm;
        barrier();
        float cm = red[0];
        for (uint i = 1; i < gl_NumSubgroups; i++) cm = max(cm, red[i]);
        const float mn = max(m, cm); /* finite: every chunk has a position */
        const float f = exp(m - mn); /* 0 on the first chunk (m = -inf) */
        ps[t] = t < cn ? exp(sc - mn) : 0.0;
        barrier();
        l *= f;
        for (uint r = 0; r < NOUT; r++) acc[r] *= f;
        for (uint i = 0; i < cn; i++) {
            const float pi = ps[i];
            l += pi;
            const uint vo = kvo + (c0 + i) * kvd;
            for (uint r = 0; r < NOUT; r++) {
                const uint d = t + r * WG;
                if (d < hd) acc[r] += pi * vc[vo + d];
            }
        }
        m = mn;
        barrier(); /* ps and red are rewritten by the next chunk */
    }
    const float inv = 1.0 / l;
    const uint oo = pc.o_off + row * pc.nh * hd + h * hd;
    for (uint r = 0; r < NOUT; r++) {
        const uint d = t + r * WG;
        if (d < hd) o[oo + d] = acc[r] * inv;
    }
}
