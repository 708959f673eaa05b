/* SnakeBeta with the load-time fold (src/model/codec_decoder_impl.h
 * codec_snake): y[c][t] = x[c][t] + inv_b[c] sin(a[c] x[c][t])^2, the
 * expression of ops_snake (src/backend/cpu/ops.h), which it matches to the
 * device's sin accuracy. Dataflow: x -> y (elementwise).
 *
 * Bindings (vk_kernels.h vk_pc_snake):
 *   0 x  float, channel c row at x_off + c * x_stride
 *   1 p  float: a [C] at a_off, inv_b [C] at ib_off
 *   2 y  float, channel c row at y_off + c * y_stride (may be x, same place)
 * Workgroup: 64 threads along time for one channel (dispatch
 * (ceil(n / 64), C, 1)): memory-bound, the channel's two factors uniform. */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BP { float p[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint C, n, x_off, x_stride;
    uint y_off, y_stride, a_off, ib_off;
} pc;

void main() {
    const uint t = gl_GlobalInvocationID.x, c = gl_WorkGroupID.y;
    if (t >= pc.n || c >= pc.C) return;
    const float v = x[pc.x_off + c * pc.x_stride + t];
    const float s = sin(p[pc.a_off + c] * v);
    y[pc.y_off + c * pc.y_stride + t] = v + p[pc.ib_off + c] * (s * s);
}
