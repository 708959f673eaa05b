/* NeoX RoPE of a chunk's queries and keys, and the keys and values stored in
 * a ring KV window (the codec pre-transformer's sliding-window cache):
 * for row i at position p = ctl[0] + i, with c = rope[i][j] and
 * s = rope[i][hd/2 + j] (the chunk's rows of ops_rope_angles, written by the
 * host), each head x of q (in place) and of k gets
 *   x[j], x[j + hd/2] = x[j] c - x[j + hd/2] s, x[j + hd/2] c + x[j] s
 * (ops_rope_neox_cs, same expression and rounding), and k, v of the row go
 * to ring slot p % ring: kr[cache_off + (p % ring) kvd + ...], same for vr.
 * Dataflow: q, k, v, rope -> q (rotated), kr, vr.
 *
 * Bindings (vk_kernels.h vk_pc_rope_ring):
 *   0 q float [n][nh hd] at q_off, 1 k float [n][kvd] at k_off,
 *   2 v float [n][kvd] at v_off, 3 rope float [n][hd],
 *   4 kr, 5 vr float rings [ring][kvd] at cache_off, 6 ctl uint (ctl[0]: the
 *   stream position of row 0)
 * Workgroup: 64 threads for one row (dispatch (n, 1, 1)), striding over the
 * (head, j) pairs: a few thousand flops per row. */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BQ { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer BK { float k[]; };
layout(std430, set = 0, binding = 2) readonly buffer BV { float v[]; };
layout(std430, set = 0, binding = 3) readonly buffer BR { float rope[]; };
layout(std430, set = 0, binding = 4) writeonly buffer BKR { float kr[]; };
layout(std430, set = 0, binding = 5) writeonly buffer BVR { float vr[]; };
layout(std430, set = 0, binding = 6) readonly buffer BCTL { uint ctl[]; };

layout(push_constant) uniform PC {
    uint n, nh, nkv, hd;
    uint ring, cache_off, q_off, k_off;
    uint v_off;
} pc;

void main() {
    const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    if (row >= pc.n) return;
    const uint h2 = pc.hd / 2u, kvd = pc.nkv * pc.hd;
    const uint slot = pc.cache_off + ((ctl[0] + row) % pc.ring) * kvd;
    const uint ro = row * pc.hd;
    for (uint e = t; e < pc.nh * h2; e += 64u) {
        const uint h = e / h2, j = e % h2, o = pc.q_off + row * pc.nh * pc.hd + h * pc.hd + j;
        const float c = rope[ro + j], s = rope[ro + h2 + j];
        const float a = q[o], b = q[o + h2];
        q[o] = a * c - b * s;
        q[o + h2] = b * c + a * s;
    }
    for (uint e = t; e < pc.nkv * h2; e += 64u) {
        const uint h = e / h2, j = e % h2, o = pc.k_off + row * kvd + h * pc.hd + j;
        const float c = rope[ro + j], s = rope[ro + h2 + j];
        const float a = k[o], b = k[o + h2];
        kr[slot + h * pc.hd + j] = a * c - b * s;
        kr[slot + h * pc.hd + j + h2] = b * c + a * s;
    }
    for (uint e = t; e < kvd; e += 64u) vr[slot + e] = v[pc.v_off + row * kvd + e];
}
