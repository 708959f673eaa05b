/* The end of a frame on the device: st[VK_ST_K] += 1, st[VK_ST_POS] += 1,
 * so a recorded frame replays for the next one without host writes.
 * Dataflow: st -> st.
 *
 * Bindings (vk_kernels.h vk_pc_advance): 0 st uint state.
 * Workgroup: 1 thread (dispatch (1, 1, 1)): two words. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BST { uint st[]; };

layout(push_constant) uniform PC {
    uint unused;
} pc;

void main() {
    st[VK_ST_K] += 1u;
    st[VK_ST_POS] += 1u;
}
