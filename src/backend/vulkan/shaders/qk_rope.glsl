/* The body of qk_rope.comp and qk_rope_tab.comp (VK_TAB: a batch's rows
 * through the stream table, stream_table.glsl). See qk_rope.comp. */
#ifdef VK_TAB
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
#include "common.glsl"
#ifdef VK_TAB
#include "stream_table.glsl"
#endif

#define WG 256
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BQ { float q[]; };
layout(std430, set = 0, binding = 1) buffer BK { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer BV { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer BW { float w[]; };
#ifdef VK_TAB
/* row j is stream j of the table: its state, RoPE rows and caches (layer
   cache_off, at cache_off * layer_floats) */
#define ROPE(i) VkF32(tab[sj].rope).v[i]
#define KC(i) VkF32(tab[sj].kc).v[i]
#define VC(i) VkF32(tab[sj].vc).v[i]
#define ST(i) VkU32(tab[sj].st).v[i]
#define CBASE (pc.cache_off * tab[sj].layer_floats)
#else
layout(std430, set = 0, binding = 4) readonly buffer BR { float rope[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BKC { float kc[]; };
layout(std430, set = 0, binding = 6) writeonly buffer BVC { float vc[]; };
layout(std430, set = 0, binding = 7) readonly buffer BST { uint st[]; };
#define ROPE(i) rope[i]
#define KC(i) kc[i]
#define VC(i) vc[i]
#define ST(i) st[i]
#define CBASE (pc.cache_off + sj * pc.cache_stride)
#endif

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
    const uint p = (pc.pos_state != 0u ? ST(VK_ST_POS) : pc.pos0) + (row - sj * rows);
    const uint cbase = CBASE;
    const uint per = WG / hd; /* heads per step */
    const uint slot = t / hd, j = t - slot * hd;
    uint span = 1; /* the tree's first stride: the largest power of two < hd */
    while (span * 2 < hd) span *= 2;
    const float c = j < half_hd ? ROPE(p * hd + j) : ROPE(p * hd + j - half_hd);
    const float s = j < half_hd ? ROPE(p * hd + half_hd + j) : ROPE(p * hd + j);
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
                KC(cbase + p * kvd + (h - pc.nh) * hd + j) = y;
            }
        }
        barrier(); /* sq and xs are reused by the next step */
    }
    for (uint i = t; i < kvd; i += WG) VC(cbase + p * kvd + i) = v[pc.v_off + row * kvd + i];
}
