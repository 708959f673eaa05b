/* Weight load of the bf16 format (see mm_head.glsl for the interface).
 * Binding 0: uint16 W[rows][cols] (bf16 bits: value = bits << 16 as f32),
 * row-major, no padding. Chunk j of a row is columns 8 j .. 8 j + 7. When
 * cols is a multiple of 8 every row starts 16-byte aligned and a chunk is one
 * uvec4 load; otherwise eight guarded 16-bit loads. mm_nfast /
 * mm_load_fast: the chunks wholly inside the row when rows are 16-byte
 * aligned, one unguarded uvec4 load. */
layout(binding = 0) readonly buffer w_bf16 { uint16_t W[]; };
layout(binding = 0) readonly buffer w_bf16x8 { uvec4 W8[]; };

#define MM_CB_OFF 4u

uint mm_nchunks() { return (pc.cols + 7u) / 8u; }
uint mm_ca(uint j) { return 8u * j; }

vec2 bf16x2(uint u) { return vec2(uintBitsToFloat(u << 16), uintBitsToFloat(u & 0xffff0000u)); }

uint mm_nfast() { return (pc.cols & 7u) == 0u ? pc.cols / 8u : 0u; }

void mm_load_fast(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uvec4 u = W8[(r * pc.cols) / 8u + j];
    wa = vec4(bf16x2(u.x), bf16x2(u.y));
    wb = vec4(bf16x2(u.z), bf16x2(u.w));
}

void mm_load(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uint c = 8u * j;
    wa = vec4(0.0);
    wb = vec4(0.0);
    if ((pc.cols & 7u) == 0u) {
        if (c < pc.cols) {
            const uvec4 u = W8[(r * pc.cols + c) / 8u];
            wa = vec4(bf16x2(u.x), bf16x2(u.y));
            wb = vec4(bf16x2(u.z), bf16x2(u.w));
        }
    } else {
        const uint base = r * pc.cols;
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            if (c + e < pc.cols) wa[e] = uintBitsToFloat(uint(W[base + c + e]) << 16);
            if (c + 4u + e < pc.cols) wb[e] = uintBitsToFloat(uint(W[base + c + 4u + e]) << 16);
        }
    }
}
