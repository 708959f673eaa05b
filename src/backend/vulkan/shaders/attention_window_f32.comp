/* Sliding-window causal attention of n query rows over a ring KV window
 * (the codec pre-transformer's, keys written by rope_ring_f32): row i at
 * position p = ctl[0] + i sees positions t in (p - window, p] (t >= 0),
 * stored at ring slot t % ring; for query head h (kv head h / (nh / nkv)),
 * out = softmax(scale * q . k_t) . v_t, as the CPU's codec transformer
 * (src/model/codec_stream.c). The one-pass online softmax of attention.comp
 * over the window's positions in ascending order, in chunks of WG counted
 * from the window's first position: every sum depends only on the query's
 * position and its keys, never on how the stream was cut into chunks.
 * The ring must hold window - 1 + n slots (the chunk's keys are all
 * written before any query reads).
 *
 * Bindings (vk_kernels.h vk_pc_attention_window):
 *   0 q   float [n][nh * hd] at q_off
 *   1 kr  float, slot s at cache_off + s * nkv * hd
 *   2 vr  float, same layout
 *   3 out float [n][nh * hd] at o_off
 *   4 ctl uint (ctl[0]: the stream position of row 0)
 * Workgroup: 128 threads for one (head, row) (dispatch (nh, n, 1)); hd up to
 * 256, as attention.comp (the window is 72 positions in the real codec: one
 * chunk). */
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
layout(std430, set = 0, binding = 4) readonly buffer BCTL { uint ctl[]; };

layout(push_constant) uniform PC {
    uint n, nh, nkv, hd;
    uint window, ring, cache_off, q_off;
    uint o_off;
    float scale;
} pc;

shared vec4 qs4[MAX_HD / 4]; /* the query head */
shared float ps[WG];     /* this chunk's scores, then exp(score - max) */
shared float red[WG];    /* one max per subgroup */

void main() {
    const uint h = gl_WorkGroupID.x, row = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    if (h >= pc.nh || row >= pc.n) return; /* uniform */
    const uint hd = pc.hd, kvd = pc.nkv * hd;
    const uint kvh = h / (pc.nh / pc.nkv);
    const uint p = ctl[0] + row;
    const uint first = p + 1u > pc.window ? p + 1u - pc.window : 0u;
    const uint qo = pc.q_off + row * pc.nh * hd + h * hd;
    const uint kvo = pc.cache_off + kvh * hd;
    for (uint d = t; d < hd; d += WG) qs4[d / 4][d % 4] = q[qo + d];
    barrier();
    /* K rows as vec4 when every row start is 16-byte aligned */
    const bool vec = (kvo % 4u) == 0u && (hd % 4u) == 0u && (kvd % 4u) == 0u;

    float m = uintBitsToFloat(0xff800000u), l = 0.0;
    float acc[NOUT];
    for (uint r = 0; r < NOUT; r++) acc[r] = 0.0;
    const uint np = p + 1u - first;
    for (uint c0 = 0; c0 < np; c0 += WG) {
        const uint cn = min(uint(WG), np - c0);
        float sc = uintBitsToFloat(0xff800000u);
        if (t < cn) {
            const uint ko = kvo + ((first + c0 + t) % pc.ring) * kvd;
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
            const uint vo = kvo + ((first + c0 + i) % pc.ring) * kvd;
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
