/* Transposed 1-D convolution (groups 1) over an output window, as
 * ops_conv_transpose1d_ctx (src/backend/cpu/conv.h) defines it:
 *   y[o][t - t0] = bias[o] + sum over input channels i in order, then the
 *                  contributing input steps j ascending (t = j stride + k,
 *                  0 <= k < K, 0 <= j < t_in), of x[i][j] w[i][o][k]
 * for t0 <= t < t0 + n. The codec's upsamplers (K = stride, t0 = 0) and its
 * causal vocoder convs (K = 2 stride, the previous chunk's last input as
 * column 0, t0 = stride) are both this. Each output is one sum in a fixed
 * order that depends only on t, not on the chunk.
 * Dataflow: x, w, bias -> y (one thread per output).
 *
 * Bindings (vk_kernels.h vk_pc_conv_transpose1d):
 *   0 x    float, input channel i row at x_off + i * x_stride, t_in columns
 *   1 w    float [cin][cout][K] (PyTorch ConvTranspose1d layout) at w_off
 *   2 bias float [cout] at b_off
 *   3 y    float, output channel o row at y_off + o * y_stride, n columns
 * Workgroup: 64 threads along time for one output channel (dispatch
 * (ceil(n / 64), cout, 1)), as conv1d_f32. */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BW { float w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BB { float bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint cin, cout, K, stride;
    uint t_in, t0, n, x_off;
    uint x_stride, y_off, y_stride, w_off;
    uint b_off;
} pc;

void main() {
    const uint tt = gl_GlobalInvocationID.x, o = gl_WorkGroupID.y;
    if (tt >= pc.n || o >= pc.cout) return;
    const uint t = pc.t0 + tt;
    /* input steps j with 0 <= t - j stride < K, ascending */
    const uint jb = min(t / pc.stride + 1u, pc.t_in);
    const uint ja = t + 1u > pc.K ? (t + 1u - pc.K + pc.stride - 1u) / pc.stride : 0u;
    float acc = 0.0;
    for (uint i = 0u; i < pc.cin; i++) {
        const uint xo = pc.x_off + i * pc.x_stride, wo = pc.w_off + (i * pc.cout + o) * pc.K;
        for (uint j = ja; j < jb; j++) acc += x[xo + j] * w[wo + t - j * pc.stride];
    }
    y[pc.y_off + o * pc.y_stride + tt] = bias[pc.b_off + o] + acc;
}
