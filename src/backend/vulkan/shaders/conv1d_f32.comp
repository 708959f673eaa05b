/* Causal 1-D convolution, stride 1, with dilation and groups (depthwise when
 * groups = cin = cout), as ops_conv1d (src/backend/cpu/conv.h) computes it:
 *   y[o][t] = bias[o] + sum over the group's input channels i in order, then
 *             taps k in order, of w[o][i][k] x[g cin_g + i][t + k dil]
 * (no implicit padding: the caller puts the causal history in the first
 * (K - 1) dil columns of x). Each output is one sum in that fixed order,
 * whatever n is, so chunked streaming gives the bits of one pass.
 * Flags: 1 clamp the result to [-1, 1] (the codec's final conv).
 * Dataflow: x, w, bias -> y (one thread per output).
 *
 * Bindings (vk_kernels.h vk_pc_conv1d):
 *   0 x    float, input channel c row at x_off + c * x_stride (t_in = n + (K-1) dil columns)
 *   1 w    float [cout][cin / groups][K] at w_off
 *   2 bias float [cout] at b_off
 *   3 y    float, output channel o row at y_off + o * y_stride, n columns
 * Workgroup: 64 threads along time for one output channel (dispatch
 * (ceil(n / 64), cout, 1)): the workgroup's weight reads are uniform
 * (broadcast) and its x reads consecutive (coalesced). */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BW { float w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BB { float bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint cin, cout, K, dil;
    uint groups, n, x_off, x_stride;
    uint y_off, y_stride, w_off, b_off;
    uint flags;
} pc;

void main() {
    const uint t = gl_GlobalInvocationID.x, o = gl_WorkGroupID.y;
    if (t >= pc.n || o >= pc.cout) return;
    const uint cin_g = pc.cin / pc.groups, g = o / (pc.cout / pc.groups);
    float acc = 0.0;
    for (uint i = 0u; i < cin_g; i++) {
        const uint xo = pc.x_off + (g * cin_g + i) * pc.x_stride + t;
        const uint wo = pc.w_off + (o * cin_g + i) * pc.K;
        for (uint k = 0u; k < pc.K; k++) acc += w[wo + k] * x[xo + k * pc.dil];
    }
    float r = bias[pc.b_off + o] + acc;
    if ((pc.flags & 1u) != 0u) r = clamp(r, -1.0, 1.0);
    y[pc.y_off + o * pc.y_stride + t] = r;
}
