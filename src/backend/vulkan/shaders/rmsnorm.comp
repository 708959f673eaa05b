/* RMSNorm of n rows of H floats: y = (x * (1 / sqrt(mean(x^2) + eps))) * g,
 * the scaling order of ops_rmsnorm (src/backend/cpu/ops.c), which it must
 * match to f32 rounding (the sum of squares is reduced in another order).
 * Dataflow: x row -> sum of squares (subgroup adds, then one partial per
 * subgroup in shared memory) -> scale -> y row.
 *
 * Bindings (vk_kernels.h vk_pc_rmsnorm):
 *   0 x  float, row i at x_off + i * x_rs (x_rs 0: H)
 *   1 g  float[H] at g_off
 *   2 y  float, row i at y_off + i * H (may be the buffer of x, in place:
 *        every thread reads its own elements before it writes them)
 * Workgroup: 256 threads, one workgroup per row (dispatch (n, 1, 1)); each
 * thread strides over the row, as ggml-vulkan's rms_norm does (one
 * workgroup per row, a workgroup-wide reduction); H is 1024..2048 for the
 * models, so each thread touches 4..8 elements. No subgroup size assumed. */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#define WG 256
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BG { float g[]; };
layout(std430, set = 0, binding = 2) buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint H, n, x_off, y_off, g_off;
    float eps;
    uint x_rs; /* floats between x rows; 0: H */
} pc;

shared float part[WG]; /* one partial sum per subgroup */

void main() {
    const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    if (row >= pc.n) return; /* uniform for the whole workgroup */
    const uint xo = pc.x_off + row * (pc.x_rs != 0u ? pc.x_rs : pc.H), yo = pc.y_off + row * pc.H;
    float s = 0.0;
    for (uint j = t; j < pc.H; j += WG) {
        const float v = x[xo + j];
        s += v * v;
    }
    s = subgroupAdd(s);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    float tot = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) tot += part[i];
    const float inv = 1.0 / sqrt(tot / float(pc.H) + pc.eps);
    for (uint j = t; j < pc.H; j += WG) y[yo + j] = (x[xo + j] * inv) * g[pc.g_off + j];
}
