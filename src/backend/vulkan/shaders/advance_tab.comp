/* advance.comp for a batch through the stream table (stream_table.glsl),
 * plus the state read-back: workgroup j is stream j; thread w takes state
 * word w, adds 1 to VK_ST_K and VK_ST_POS (as advance.comp), writes it back
 * to the stream's state and to out[j * VK_ST_WORDS + w] (the batch's
 * host-visible copy of every member's state).
 * Dataflow: st -> st, out.
 *
 * Bindings (vk_kernels.h vk_pc_advance): 0 out uint [n][VK_ST_WORDS];
 * the table at VK_TAB_BINDING.
 * Workgroup: VK_ST_WORDS (64) threads (dispatch (n, 1, 1)). */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#include "common.glsl"
#include "stream_table.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) writeonly buffer BO { uint o[]; };

layout(push_constant) uniform PC {
    uint unused;
} pc;

void main() {
    const uint j = gl_WorkGroupID.x, w = gl_LocalInvocationID.x;
    VkU32 st = VkU32(tab[j].st);
    uint x = st.v[w];
    if (w == VK_ST_K || w == VK_ST_POS) {
        x += 1u;
        st.v[w] = x;
    }
    o[j * VK_ST_WORDS + w] = x;
}
