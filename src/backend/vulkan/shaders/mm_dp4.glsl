/* The int8 dot-product matvec driver (main) shared by matvec_q8_dp4.comp and
 * matvec_q4m_dp4.comp, after their weight block file part (dp4_block_dot):
 *   Y[i][r] (+)= sum over blocks b, in order, of the CPU's X16 sequence
 *   (src/backend/cpu/quant.h, QT_Q8_B32_X16 / QT_Q4M_B32_X16):
 *     acc  = fma(float(dot_b), d_w[b] * dx[i][b], acc)
 *     accm = fma(m_w[b], fsum[i][b], accm)            (q4m only)
 *   then y = acc (+ accm) (+ bias[r]) (+ old Y), dot_b the exact integer
 *   dot of the weights' q with the activations' xq over block b.
 * The activations are those of quantize_q8.comp (the CPU's q8_prep).
 * Bit-exact with the CPU's scalar X16 kernel: the integer dots are exact
 * and every f32 step is the same correctly rounded operation in the same
 * order ("precise": no contraction or reassociation). The fma itself: with
 * the specialisation constant DP4_FUSED (id 0) = 0, the default, it is
 * emulated exactly (Dekker product per lane, then TwoSum and a round-to-odd
 * add per chain step, dp4_fma_tail), since Vulkan lets fma() round twice and
 * lavapipe does; DP4_FUSED = 1 uses fma(), for devices whose fma is known to
 * be fused (a probe dispatch can tell).
 * Workgroup: MV_WG = 64 threads over VK_MATVEC_ROWS = 8 consecutive weight
 * rows, one subgroup per row at a time (as mm_matvec.glsl, the shape of
 * llama.cpp's ggml-vulkan mul_mat_vec): each lane takes whole 32-column
 * blocks (lane l of round t: block t * S + l, S = the subgroup size capped
 * at MV_WG), so consecutive lanes read consecutive 32-byte (q8) or 16-byte
 * (q4m) weight blocks, and does the block's integer dot with 8 packed 4x8
 * dot products (OpSDot, SPV_KHR_integer_dot_product). The ordered block sum
 * cannot be a subgroupAdd (its rounding would differ from the CPU's): the
 * lanes put (dot, scale) in shared memory (the subgroup's own S slots) and
 * every lane of the subgroup runs the S-step fma chain of the round (the
 * same loads for all lanes: broadcasts; no divergence). One chain step is
 * two or four shared loads and one or two fma (about 12 f32 operations
 * each when emulated) per 8 dot products of the block.
 * The X rows are taken one at a time (any n), rereading the row's weights
 * from cache for n > 1.
 * Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1). */

#extension GL_EXT_spirv_intrinsics : require

/* OpSDot (4450) of two int32 each holding 4 packed int8 (PackedVectorFormat
 * 4x8Bit = 0): sum of the 4 products, exact. glslang 11 (shaderc 2023.2)
 * lacks GL_EXT_integer_dot_product (dotPacked4x8EXT), so the instruction is
 * declared here; it needs SPV_KHR_integer_dot_product (core in SPIR-V 1.6)
 * and the device's shaderIntegerDotProduct feature. */
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dp4_sdot(int a, int b, spirv_literal int fmt);

layout(push_constant) uniform pc_block {
    uint rows, cols, n, kpad;
    uint x_off, x_stride, y_off, y_stride;
    uint bias_off, flags;
} pc;

layout(binding = 3) readonly buffer xq_buf { uvec4 XQ[]; }; /* 16 int8 per uvec4 */
layout(binding = 4) buffer y_buf { float Y[]; };
layout(binding = 5) readonly buffer bias_buf { float B[]; };
layout(binding = 6) readonly buffer xs_buf { float XS[]; };

#define MV_WG 64u

layout(local_size_x = MV_WG, local_size_y = 1, local_size_z = 1) in;

/* 1: the device's fma() is fused (one rounding), so the chain uses it;
 * 0: fma is emulated exactly (dp4_fma_tail). Vulkan lets fma() round twice
 * (its precision is that of OpFMul then OpFAdd), and lavapipe does. */
layout(constant_id = 0) const uint DP4_FUSED = 0u;

/* per chain step: (dot, d_w dx) when DP4_FUSED, else the exact product
 * dot * d_w dx as ph + pl; q4m: the same for m_w * fsum */
shared float s_a[MV_WG], s_b[MV_WG];
#ifdef DP4_Q4M
shared float s_c[MV_WG], s_d[MV_WG];
#endif

/* a * b = ph + pl exactly (Dekker's product with Veltkamp's split; no
 * overflow or underflow for the values here) */
void dp4_two_prod(float a, float b, out float ph, out float pl) {
    precise float t = 4097.0 * a;
    precise float ah = t - (t - a);
    precise float al = a - ah;
    precise float u = 4097.0 * b;
    precise float bh = u - (u - b);
    precise float bl = b - bh;
    precise float p = a * b;
    precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    ph = p;
    pl = e;
}

/* fma(a, b, c) correctly rounded from a * b = ph + pl (exact): Boldo and
 * Melquiond's emulation (IEEE Trans. Computers 57(4), 2008): th + tl =
 * c + ph exactly (TwoSum), v = (tl + pl) rounded to odd, result th + v
 * rounded to nearest even. */
float dp4_fma_tail(float ph, float pl, float c) {
    precise float th = c + ph;
    precise float bb = th - c;
    precise float tl = (c - (th - bb)) + (ph - bb);
    precise float v = tl + pl;
    precise float vb = v - tl;
    precise float ve = (tl - (v - vb)) + (pl - vb);
    uint bits = floatBitsToUint(v);
    if (ve != 0.0 && (bits & 1u) == 0u) /* inexact with an even last bit: step to the odd neighbour */
        bits = ((ve > 0.0) == (v > 0.0)) ? bits + 1u : bits - 1u;
    precise float r = th + uintBitsToFloat(bits);
    return r;
}

int dp4_dot8(uvec4 wa, uvec4 wb, uvec4 xa, uvec4 xb) {
    return dp4_sdot(int(wa.x), int(xa.x), 0) + dp4_sdot(int(wa.y), int(xa.y), 0) +
           dp4_sdot(int(wa.z), int(xa.z), 0) + dp4_sdot(int(wa.w), int(xa.w), 0) +
           dp4_sdot(int(wb.x), int(xb.x), 0) + dp4_sdot(int(wb.y), int(xb.y), 0) +
           dp4_sdot(int(wb.z), int(xb.z), 0) + dp4_sdot(int(wb.w), int(xb.w), 0);
}

void main() {
    const uint lane = gl_SubgroupInvocationID;
    const uint S = min(gl_SubgroupSize, MV_WG);
    const uint o = gl_SubgroupID * S; /* this subgroup's shared slots */
    const uint row0 = gl_WorkGroupID.x * VK_MATVEC_ROWS;
    const uint rend = min(uint(VK_MATVEC_ROWS), pc.rows - row0);
    const uint nb = pc.kpad / 32u;
    for (uint rl = gl_SubgroupID; rl < rend; rl += gl_NumSubgroups) {
        const uint r = row0 + rl;
        for (uint i = 0u; i < pc.n; i++) {
            precise float acc = 0.0;
#ifdef DP4_Q4M
            precise float accm = 0.0;
#endif
            for (uint b0 = 0u; b0 < nb; b0 += S) {
                const uint b = min(b0 + lane, nb - 1u); /* lanes past the end: a copy, never read */
                const uint xb = i * (pc.kpad / 16u) + 2u * b;
                const int dot = dp4_block_dot(r, b, XQ[xb], XQ[xb + 1u]);
                const uint s = r * nb + b;
                precise float sc = unpackHalf2x16(uint(D[s])).x * XS[i * nb + b];
#ifdef DP4_Q4M
                const float mw = unpackHalf2x16(uint(M[s])).x, fs = XS[(pc.n + i) * nb + b];
#endif
                if (DP4_FUSED != 0u) {
                    s_a[o + lane] = float(dot);
                    s_b[o + lane] = sc;
#ifdef DP4_Q4M
                    s_c[o + lane] = mw;
                    s_d[o + lane] = fs;
#endif
                } else {
                    float ph, pl;
                    dp4_two_prod(float(dot), sc, ph, pl);
                    s_a[o + lane] = ph;
                    s_b[o + lane] = pl;
#ifdef DP4_Q4M
                    dp4_two_prod(mw, fs, ph, pl);
                    s_c[o + lane] = ph;
                    s_d[o + lane] = pl;
#endif
                }
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                const uint cnt = min(S, nb - b0);
                if (DP4_FUSED != 0u) {
                    for (uint k = 0u; k < cnt; k++) {
                        acc = fma(s_a[o + k], s_b[o + k], acc);
#ifdef DP4_Q4M
                        accm = fma(s_c[o + k], s_d[o + k], accm);
#endif
                    }
                } else {
                    for (uint k = 0u; k < cnt; k++) {
                        acc = dp4_fma_tail(s_a[o + k], s_b[o + k], acc);
#ifdef DP4_Q4M
                        accm = dp4_fma_tail(s_c[o + k], s_d[o + k], accm);
#endif
                    }
                }
                subgroupBarrier(); /* every lane has read before the next round writes */
            }
            if (subgroupElect()) {
#ifdef DP4_Q4M
                precise float v = acc + accm;
#else
                precise float v = acc;
#endif
                if ((pc.flags & VK_MM_BIAS) != 0u) v += B[pc.bias_off + r];
                const uint yo = pc.y_off + i * pc.y_stride + r;
                if ((pc.flags & VK_MM_ACC) != 0u) v += Y[yo];
                Y[yo] = v;
            }
        }
    }
}
