/* A stream's frame codes into its code ring, at the end of the frame's
 * draws: ring[(st[VK_ST_SERIAL] % ring_frames) * G + g] = st[VK_ST_CODES + g]
 * for g < G, then st[VK_ST_SERIAL] += 1. The codec decoder on the same
 * device reads them there (codes_gather.comp), so codes need no upload.
 * Dataflow: st -> ring, st.
 *
 * Bindings (vk_kernels.h vk_pc_codes_push): 0 st uint state, 1 ring int
 * [ring_frames][G].
 * Workgroup: 64 threads, one per codebook (dispatch (1, 1, 1)); G <= 64. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BST { uint st[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BR { int ring[]; };

layout(push_constant) uniform PC {
    uint G, ring_frames;
} pc;

void main() {
    const uint g = gl_LocalInvocationID.x;
    const uint slot = st[VK_ST_SERIAL] % pc.ring_frames;
    if (g < pc.G) ring[slot * pc.G + g] = int(st[VK_ST_CODES + g]);
    barrier();
    if (g == 0u) st[VK_ST_SERIAL] = st[VK_ST_SERIAL] + 1u;
}
