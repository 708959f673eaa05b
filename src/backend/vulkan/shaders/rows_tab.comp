/* A batch's rows to and from its streams through the stream table
 * (stream_table.glsl): dir 0: rows[off + j * H + i] = y_j[i]; dir 1:
 * y_j[i] = rows[off + j * H + i], y_j the buffer at tab[j].y (the stream's
 * post-norm hidden). Exact copies.
 * Dataflow: streams' y <-> batch rows.
 *
 * Bindings (vk_kernels.h vk_pc_rows_tab): 0 rows float [n][H]; the table
 * at VK_TAB_BINDING.
 * Workgroup: 256 threads, one element each (dispatch (ceil(H / 256), n, 1)). */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#include "common.glsl"
#include "stream_table.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BR { float rows[]; };

layout(push_constant) uniform PC {
    uint H, off, dir;
} pc;

void main() {
    const uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
    if (i >= pc.H) return;
    VkF32 y = VkF32(tab[j].y);
    if (pc.dir == 0u) rows[pc.off + j * pc.H + i] = y.v[i];
    else y.v[i] = rows[pc.off + j * pc.H + i];
}
