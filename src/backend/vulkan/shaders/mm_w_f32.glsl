/* Weight load of the f32 format (see mm_head.glsl for the interface).
 * Binding 0: float W[rows][cols], row-major, no padding. Chunk j of a row is
 * columns 8 j .. 8 j + 7. When cols is a multiple of 4 every row starts
 * 16-byte aligned and a chunk is two vec4 loads; otherwise eight guarded
 * scalar loads. mm_nfast / mm_load_fast: the chunks wholly inside the row
 * when rows are 16-byte aligned, two unguarded vec4 loads. */
layout(binding = 0) readonly buffer w_f32 { float W[]; };
layout(binding = 0) readonly buffer w_f32x4 { vec4 W4[]; };

#define MM_CB_OFF 4u

uint mm_nchunks() { return (pc.cols + 7u) / 8u; }
uint mm_ca(uint j) { return 8u * j; }

uint mm_nfast() { return (pc.cols & 3u) == 0u ? pc.cols / 8u : 0u; }

void mm_load_fast(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uint q = (r * pc.cols) / 4u + 2u * j;
    wa = W4[q];
    wb = W4[q + 1u];
}

void mm_load(uint r, uint j, out vec4 wa, out vec4 wb) {
    const uint c = 8u * j;
    wa = vec4(0.0);
    wb = vec4(0.0);
    if ((pc.cols & 3u) == 0u) {
        const uint q = (r * pc.cols + c) / 4u;
        if (c < pc.cols) wa = W4[q];
        if (c + 4u < pc.cols) wb = W4[q + 1u];
    } else {
        const uint base = r * pc.cols;
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            if (c + e < pc.cols) wa[e] = W[base + c + e];
            if (c + 4u + e < pc.cols) wb[e] = W[base + c + 4u + e];
        }
    }
}
