/* The part every matvec_* and matmul_* shader shares: the push constants
 * (vk_pc_matmul of src/backend/vulkan/vk_kernels.h, field by field) and the
 * float bindings. A weight format file (mm_w_*.glsl) follows it and defines
 * the weight load, then a driver (mm_matvec.glsl or mm_matmul.glsl) holds
 * main().
 *
 * The weight load interface (what mm_w_*.glsl defines):
 *   MM_CB_OFF          columns from a chunk's first group of 4 to its second
 *   uint mm_nchunks()  chunks that cover the columns [0, cols) of a row
 *   uint mm_ca(j)      first column of chunk j's first group of 4
 *   void mm_load(r, j, out vec4 wa, out vec4 wb)
 *                      the weights of row r at columns mm_ca(j) + 0..3 (wa)
 *                      and mm_ca(j) + MM_CB_OFF + 0..3 (wb) as f32; columns
 *                      >= cols give finite values (0 where the data ends)
 *   uint mm_nfast()    chunks 0 .. mm_nfast() - 1 lie wholly inside the
 *                      columns and mm_load_fast may read them (0: none)
 *   void mm_load_fast(r, j, out vec4 wa, out vec4 wb)
 *                      mm_load for j < mm_nfast(), without the guards
 * A chunk is 8 weights that one thread reads with one or two wide loads;
 * chunks 4 s .. 4 s + 3 cover exactly the columns [32 s, 32 s + 32). */

layout(push_constant) uniform pc_block {
    uint rows, cols, n, kpad;
    uint x_off, x_stride, y_off, y_stride;
    uint bias_off, flags;
} pc;

layout(binding = 3) readonly buffer x_buf { float X[]; };
layout(binding = 3) readonly buffer x_buf4 { vec4 X4[]; }; /* X when 16-byte aligned */
layout(binding = 4) buffer y_buf { float Y[]; };
layout(binding = 5) readonly buffer bias_buf { float B[]; };

/* The finished value of output (i, r): bias and accumulation applied. */
void mm_store(uint i, uint r, float v) {
    if ((pc.flags & VK_MM_BIAS) != 0u) v += B[pc.bias_off + r];
    const uint o = pc.y_off + i * pc.y_stride + r;
    if ((pc.flags & VK_MM_ACC) != 0u) v += Y[o];
    Y[o] = v;
}
