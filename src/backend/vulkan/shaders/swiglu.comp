/* SwiGLU gate: o[j] = silu(g[j]) * u[j], silu(x) = x / (1 + exp(-x)), the
 * expression of ops_swiglu (src/backend/cpu/ops.c), which it matches to the
 * device's exp accuracy. Dataflow: g, u -> o (elementwise).
 *
 * Bindings (vk_kernels.h vk_pc_swiglu):
 *   0 g float at g_off, 1 u float at u_off, 2 o float at o_off (o may be
 *   the buffer of g or u, same offsets: each thread reads before it writes)
 * Workgroup: 256 threads, one element each (dispatch (ceil(count/256), 1, 1)):
 * a memory-bound elementwise op, as ggml-vulkan's swiglu. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BG { float g[]; };
layout(std430, set = 0, binding = 1) readonly buffer BU { float u[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BO { float o[]; };

layout(push_constant) uniform PC {
    uint count, g_off, u_off, o_off;
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x;
    if (j >= pc.count) return;
    const float x = g[pc.g_off + j];
    o[pc.o_off + j] = (x / (1.0 + exp(-x))) * u[pc.u_off + j];
}
