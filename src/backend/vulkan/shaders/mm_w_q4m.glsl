/* Weight load of the q4m format, the CPU's QT_Q4M_B32 (see mm_head.glsl for
 * the interface). Binding 0: u8 p[rows][kpad/2] read as uint (rows are
 * kpad = 128-column aligned); block b of a row is bytes 16 b .. 16 b + 15,
 * byte k holding q of column 32 b + k in its low nibble and of column
 * 32 b + 16 + k in its high nibble; binding 1: f16 scales d and binding 2:
 * f16 mins m, [rows][kpad/32] as uint16; w = d * q + m. Chunk j of a row is
 * the word of bytes 4 j .. 4 j + 3: columns 32 b + 4 (j % 4) + 0..3 (low
 * nibbles) and the same + 16 (high nibbles), b = j / 4. mm_nfast: the
 * chunks of the 32-column blocks wholly inside cols (mm_load_fast is
 * mm_load). */
layout(binding = 0) readonly buffer w_q4m { uint W1[]; };
layout(binding = 1) readonly buffer w_scales { uint16_t D[]; };
layout(binding = 2) readonly buffer w_mins { uint16_t M[]; };

#define MM_CB_OFF 16u

uint mm_nchunks() { return 4u * ((pc.cols + 31u) / 32u); }
uint mm_ca(uint j) { return 32u * (j / 4u) + 4u * (j % 4u); }

uint mm_nfast() { return 4u * (pc.cols / 32u); }

void mm_load(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uint u = W1[r * (pc.kpad / 8u) + j];
    const uint s = r * (pc.kpad / 32u) + j / 4u;
    const float d = unpackHalf2x16(uint(D[s])).x, m = unpackHalf2x16(uint(M[s])).x;
    const uvec4 lo = (uvec4(u) >> uvec4(0u, 8u, 16u, 24u)) & 0xfu;
    const uvec4 hi = (uvec4(u) >> uvec4(4u, 12u, 20u, 28u)) & 0xfu;
    wa = d * vec4(lo) + m;
    wb = d * vec4(hi) + m;
}

#define mm_load_fast mm_load
