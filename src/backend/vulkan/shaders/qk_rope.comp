/* Per-head q/k RMSNorm and NeoX RoPE of n rows, then the row's k and v
 * stored at its position in the KV caches: the ROWS_QK stage of
 * rows_range in src/model/transformer.c (ops_rmsnorm over hd with
 * q_norm / k_norm, then ops_rope_neox_cs with the ops_rope_angles row of
 * the position), which it must match to f32 rounding.
 * Dataflow: q, k head -> shared -> sum of squares (segmented tree in shared
 * memory) -> (x * inv) * w -> rotate pairs (j, j + hd/2) -> q, k in place,
 * k -> kc; v -> vc.
 *
 * Bindings (vk_kernels.h vk_pc_qk_rope):
 *   0 q    float [n][nh * hd] at q_off, normed and rotated in place
 *   1 k    float [n][nkv * hd] at k_off, normed and rotated in place too
 *   2 v    float [n][nkv * hd] at v_off, read
 *   3 w    float: q norm weights [hd] at qn_off, k norm weights [hd] at kn_off
 *   4 rope float [positions][hd]: row p = cos [hd/2], sin [hd/2]
 *   5 kc   float, position p at cache_off + p * nkv * hd
 *   6 vc   float, same layout
 *   7 st   uint state; st[VK_ST_POS] is the first row's position when
 *          pos_state != 0, else pos0; row i is at that + i
 * Streams: the n rows are n / rows streams of `rows` consecutive rows
 * (rows 0: one stream of n); stream j's row i is at position (as above) + i
 * and its caches start cache_stride floats after stream j - 1's, so one
 * dispatch serves every stream of a batch whose caches share kc and vc.
 * Workgroup: 256 threads, one workgroup per row (dispatch (n, 1, 1)). The
 * nh + nkv heads are handled 256 / hd at a time (2 for hd = 128, 32 for
 * hd = 8), one thread per element, so the whole row is a few steps with
 * every thread busy; the norm's sum is a tree over each head's segment of
 * shared memory, which works for any even hd <= 256 and any subgroup size. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BQ { float q[]; };
layout(std430, set = 0, binding = 1) buffer BK { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer BV { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer BW { float w[]; };
layout(std430, set = 0, binding = 4) readonly buffer BR { float rope[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BKC { float kc[]; };
layout(std430, set = 0, binding = 6) writeonly buffer BVC { float vc[]; };
layout(std430, set = 0, binding = 7) readonly buffer BST { uint st[]; };

layout(push_constant) uniform PC {
    uint n, nh, nkv, hd;
    uint pos0, pos_state, cache_off, qn_off;
    uint kn_off, q_off, k_off, v_off;
    float eps;
    uint rows, cache_stride;
} pc;

shared float sq[WG]; /* squares, reduced per head segment */
shared float xs[WG]; /* normed heads */

void main() {
    const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    if (row >= pc.n) return; /* uniform */
    const uint hd = pc.hd, half_hd = hd / 2, kvd = pc.nkv * hd;
    const uint rows = pc.rows != 0u ? pc.rows : pc.n, sj = row / rows;
    const uint p = (pc.pos_state != 0u ? st[VK_ST_POS] : pc.pos0) + (row - sj * rows);
    const uint cbase = pc.cache_off + sj * pc.cache_stride;
    const uint per = WG / hd; /* heads per step */
    const uint slot = t / hd, j = t - slot * hd;
    uint span = 1; /* the tree's first stride: the largest power of two < hd */
    while (span * 2 < hd) span *= 2;
    const float c = j < half_hd ? rope[p * hd + j] : rope[p * hd + j - half_hd];
    const float s = j < half_hd ? rope[p * hd + half_hd + j] : rope[p * hd + j];
    const uint nheads = pc.nh + pc.nkv;
    for (uint h0 = 0; h0 < nheads; h0 += per) {
        const uint h = h0 + slot;
        const bool on = slot < per && h < nheads;
        const bool is_q = h < pc.nh;
        const uint idx = on ? (is_q ? pc.q_off + row * pc.nh * hd + h * hd + j
                                    : pc.k_off + row * kvd + (h - pc.nh) * hd + j) : 0u;
        float x = 0.0;
        if (on) x = is_q ? q[idx] : k[idx];
        sq[t] = x * x;
        barrier();
        for (uint st2 = span; st2 > 0u; st2 /= 2) {
            if (slot < per && j < st2 && j + st2 < hd) sq[t] += sq[t + st2];
            barrier();
        }
        const float inv = 1.0 / sqrt(sq[slot * hd] / float(hd) + pc.eps);
        if (on) xs[t] = (x * inv) * w[(is_q ? pc.qn_off : pc.kn_off) + j];
        barrier();
        if (on) {
            const uint b = slot * hd;
            const float a0 = xs[b + (j < half_hd ? j : j - half_hd)];
            const float b0 = xs[b + (j < half_hd ? j + half_hd : j)];
            const float y = j < half_hd ? a0 * c - b0 * s : b0 * c + a0 * s;
            if (is_q) q[idx] = y;
            else {
                k[idx] = y;
                kc[cbase + p * kvd + (h - pc.nh) * hd + j] = y;
            }
        }
        barrier(); /* sq and xs are reused by the next step */
    }
    for (uint i = t; i < kvd; i += WG) vc[cbase + p * kvd + i] = v[pc.v_off + row * kvd + i];
}
