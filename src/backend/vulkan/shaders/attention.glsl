/* The body of attention.comp and attention_tab.comp (VK_TAB: a batch's rows
 * through the stream table, stream_table.glsl). See attention.comp. */
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef VK_TAB
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
#include "common.glsl"
#ifdef VK_TAB
#include "stream_table.glsl"
#endif

#define WG 128
#define MAX_HD 256
#define NOUT (MAX_HD / WG)
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BQ { float q[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BO { float o[]; };
#ifdef VK_TAB
/* row j is stream j of the table: its state and caches (layer cache_off, at
   cache_off * layer_floats) */
#define KC(i) VkF32(tab[sj].kc).v[i]
#define KC4(i) VkV4(tab[sj].kc).v[i]
#define VC(i) VkF32(tab[sj].vc).v[i]
#define ST(i) VkU32(tab[sj].st).v[i]
#define CBASE (pc.cache_off * tab[sj].layer_floats)
#else
layout(std430, set = 0, binding = 1) readonly buffer BKC { float kc[]; };
layout(std430, set = 0, binding = 1) readonly buffer BKC4 { vec4 kc4[]; }; /* the same buffer */
layout(std430, set = 0, binding = 2) readonly buffer BVC { float vc[]; };
layout(std430, set = 0, binding = 4) readonly buffer BST { uint st[]; };
#define KC(i) kc[i]
#define KC4(i) kc4[i]
#define VC(i) vc[i]
#define ST(i) st[i]
#define CBASE (pc.cache_off + sj * pc.cache_stride)
#endif

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
    const uint p = (pc.pos_state != 0u ? ST(VK_ST_POS) : pc.pos0) + (row - sj * rows);
    const uint qo = pc.q_off + row * pc.nh * hd + h * hd;
    const uint kvo = CBASE + kvh * hd;
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
                for (uint d = 0; d < hd / 4; d++) qk += dot(qs4[d], KC4(ko / 4 + d));
            } else {
                for (uint d = 0; d < hd; d++) qk += qs4[d / 4][d % 4] * KC(ko + d);
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
                if (d < hd) acc[r] += pi * VC(vo + d);
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
