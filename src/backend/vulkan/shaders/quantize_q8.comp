/* quantize_q8: the int8 activation blocks of the CPU's q8_prep
 * (src/backend/cpu/quant.c, "Activation blocks" in quant.h) for the dp4
 * matvecs: per row i < n of X and block b of 32 columns (kpad / 32 blocks,
 * columns past cols zero): dx = max|x| / 127, xq = round-to-nearest-even(x
 * fl(127 / max|x|)) clamped to [-127, 127] (all 0 when max|x| = 0; dx NaN
 * and xq 0 when the block holds inf or NaN), fsum = dx * sum xq.
 * Dataflow: X (float) -> one thread per block -> XQ (packed int8), XS.
 * Matches q8_prep bit for bit: the two divisions are done exactly in
 * integers (div_rn; a shader's float division need not be correctly
 * rounded), the product and the round are exact operations. Blocks whose
 * max |x| is subnormal may differ where the device flushes subnormals.
 * Tested by tests/unit/test_vk_dot.c.
 * Bindings: 0 X float (row i at x_off + i x_stride, cols values); 1 XQ uint
 * [n][kpad / 4] (4 int8 per word, column c of row i in byte c % 4 of word
 * i kpad/4 + c/4); 2 XS float [2][n][kpad / 32]: dx of row i block b at
 * i kpad/32 + b, fsum at (n + i) kpad/32 + b.
 * Push constants: vk_pc_quantize_q8 (vk_kernels.h) {cols, kpad, n, x_off,
 * x_stride}.
 * Workgroup: 64 threads, one per 32-column block (the activations are a few
 * KiB, so the 32 reads per thread and its serial max matter little next to
 * the matvec that follows). Dispatch (ceil(kpad / 32 / 64), n, 1). */
#version 450
#extension GL_GOOGLE_include_directive : require

#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform pc_block {
    uint cols, kpad, n, x_off, x_stride;
} pc;

layout(binding = 0) readonly buffer x_buf { float X[]; };
layout(binding = 1) writeonly buffer xq_buf { uint XQ[]; };
layout(binding = 2) writeonly buffer xs_buf { float XS[]; };

/* mantissa (24 bits, bit 23 set) and unbiased-plus-127 exponent of a
 * positive finite nonzero float, subnormals normalised */
void fsplit(float a, out uint m, out int e) {
    const uint u = floatBitsToUint(a);
    e = int((u >> 23) & 0xffu);
    m = u & 0x7fffffu;
    if (e == 0) {
        const int s = 23 - findMSB(m);
        m <<= uint(s);
        e = 1 - s;
    } else {
        m |= 0x800000u;
    }
}

/* a / b rounded to nearest even, for positive finite nonzero a and b, by
 * long division of the mantissas (the IEEE result, subnormal and overflow
 * included) */
float div_rn(float a, float b) {
    uint ma, mb;
    int ea, eb;
    fsplit(a, ma, ea);
    fsplit(b, mb, eb);
    int e = ea - eb + 127;
    if (ma < mb) {
        ma <<= 1u;
        e -= 1;
    }
    /* ma / mb in [1, 2): 25 quotient bits, 24 of mantissa and a round bit */
    uint q = 0u, r = ma;
    for (int k = 0; k < 25; k++) {
        const uint ge = r >= mb ? 1u : 0u;
        q = (q << 1u) | ge;
        r = (r - ge * mb) << 1u;
    }
    bool sticky = r != 0u;
    if (e < 1) { /* subnormal: drop 1 - e more bits into round and sticky */
        const int sh = 1 - e;
        if (sh >= 26) return 0.0;
        sticky = sticky || (q & ((1u << uint(sh)) - 1u)) != 0u;
        q >>= uint(sh);
        e = 0;
    }
    uint mant = q >> 1u;
    if ((q & 1u) != 0u && (sticky || (mant & 1u) != 0u)) mant += 1u;
    /* mant is 24 bits with the implicit bit (normal) or less (subnormal);
     * a carry out of the mantissa bumps the exponent field by itself */
    const uint bits = e == 0 ? mant : (uint(e - 1) << 23u) + mant;
    return bits >= 0x7f800000u ? uintBitsToFloat(0x7f800000u) : uintBitsToFloat(bits);
}

void main() {
    const uint nb = pc.kpad / 32u, b = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (b >= nb) return;
    const uint xo = pc.x_off + i * pc.x_stride, c0 = 32u * b;
    float amax = 0.0;
    bool finite = true;
    for (uint j = 0u; j < 32u; j++) {
        const uint c = c0 + j;
        const float a = abs(c < pc.cols ? X[xo + min(c, pc.cols - 1u)] : 0.0);
        finite = finite && a <= 3.4028234663852886e38;
        amax = a > amax ? a : amax;
    }
    precise float dx = 0.0, inv = 0.0;
    if (!finite) {
        dx = uintBitsToFloat(0x7fc00000u);
    } else if (amax != 0.0) {
        dx = div_rn(amax, 127.0);
        inv = div_rn(127.0, amax);
    }
    int isum = 0;
    for (uint k = 0u; k < 8u; k++) {
        uint word = 0u;
        for (uint t = 0u; t < 4u; t++) {
            const uint c = c0 + 4u * k + t;
            const float x = c < pc.cols ? X[xo + min(c, pc.cols - 1u)] : 0.0;
            precise float v = x * inv;
            const int q = finite ? int(clamp(roundEven(v), -127.0, 127.0)) : 0;
            isum += q;
            word |= (uint(q) & 0xffu) << (8u * t);
        }
        XQ[i * (pc.kpad / 4u) + 8u * b + k] = word;
    }
    precise float fsum = dx * float(isum);
    XS[i * nb + b] = dx;
    XS[(pc.n + i) * nb + b] = fsum;
}
