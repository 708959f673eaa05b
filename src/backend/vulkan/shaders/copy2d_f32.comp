/* Strided 2-D copy: dst[d_off + r d_rs + c d_cs] = src[s_off + r s_rs + c s_cs]
 * for r < rows, c < cols. Moves a convolution's history tail in and out of
 * its work buffer and turns channel-major [C][T] into time-major [T][C] and
 * back (the codec's tail_load, tail_save, to_time_major, to_channel_major).
 * Dataflow: src -> dst (src and dst must not overlap).
 *
 * Bindings (vk_kernels.h vk_pc_copy2d): 0 src float, 1 dst float.
 * Workgroup: 64 threads along c for one r (dispatch (ceil(cols / 64), rows, 1)). */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BS { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BD { float dst[]; };

layout(push_constant) uniform PC {
    uint rows, cols, s_off, s_rs;
    uint s_cs, d_off, d_rs, d_cs;
} pc;

void main() {
    const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
    if (c >= pc.cols || r >= pc.rows) return;
    dst[pc.d_off + r * pc.d_rs + c * pc.d_cs] = src[pc.s_off + r * pc.s_rs + c * pc.s_cs];
}
