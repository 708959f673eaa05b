/* Weight load of the q8 format, the CPU's QT_Q8_B32 (see mm_head.glsl for
 * the interface). Binding 0: int8 q[rows][kpad] read as uvec2 (8 columns,
 * rows are kpad = 128-column aligned, padding q = 0); binding 1: f16 scales
 * d[rows][kpad/32] as uint16; w = d * q. Chunk j of a row is columns
 * 8 j .. 8 j + 7 (block j / 4): one 8-byte load and one scale. mm_nfast:
 * the chunks wholly inside cols (mm_load_fast is mm_load). */
layout(binding = 0) readonly buffer w_q8 { uvec2 W2[]; };
layout(binding = 1) readonly buffer w_scales { uint16_t D[]; };

#define MM_CB_OFF 4u

uint mm_nchunks() { return (pc.cols + 7u) / 8u; }
uint mm_ca(uint j) { return 8u * j; }

vec4 i8x4(uint u) {
    const int s = int(u);
    return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8),
                bitfieldExtract(s, 24, 8));
}

uint mm_nfast() { return pc.cols / 8u; }

void mm_load(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uvec2 u = W2[r * (pc.kpad / 8u) + j];
    const float d = unpackHalf2x16(uint(D[r * (pc.kpad / 32u) + j / 4u])).x;
    wa = d * i8x4(u.x);
    wb = d * i8x4(u.y);
}

#define mm_load_fast mm_load
