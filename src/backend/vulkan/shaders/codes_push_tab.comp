/* codes_push.comp for a batch through the stream table
 * (stream_table.glsl): workgroup j pushes stream j's frame codes into its
 * code ring, ring[(st[VK_ST_SERIAL] % ring_frames) * G + g] =
 * st[VK_ST_CODES + g], then st[VK_ST_SERIAL] += 1.
 * Dataflow: st -> ring, st.
 *
 * Bindings (vk_kernels.h vk_pc_codes_push): the table at VK_TAB_BINDING.
 * Workgroup: 64 threads, one per codebook (dispatch (n, 1, 1)); G <= 64. */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#include "common.glsl"
#include "stream_table.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform PC {
    uint G, ring_frames;
} pc;

void main() {
    const uint j = gl_WorkGroupID.x, g = gl_LocalInvocationID.x;
    VkU32 st = VkU32(tab[j].st);
    VkU32 ring = VkU32(tab[j].ring);
    const uint serial = st.v[VK_ST_SERIAL];
    const uint slot = serial % pc.ring_frames;
    if (g < pc.G) ring.v[slot * pc.G + g] = st.v[VK_ST_CODES + g];
    barrier(); /* every thread has read the serial before thread 0 moves it */
    if (g == 0u) st.v[VK_ST_SERIAL] = serial + 1u;
}
