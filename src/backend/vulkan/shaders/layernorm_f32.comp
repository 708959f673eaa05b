/* LayerNorm over the C channels of each time step (the ConvNeXt blocks',
 * eps 1e-6): y[i] = (x[i] - mean) / sqrt(var + eps) w[i] + b[i], biased
 * variance of the deviations (two passes, as the CPU's layernorm in
 * src/model/codec_stream.c, which sums in double: here f32 tree sums, so
 * the results agree to a few ulp of the normalised values).
 * Dataflow: row -> mean (reduce) -> var (reduce) -> y.
 *
 * Bindings (vk_kernels.h vk_pc_layernorm):
 *   0 x float [n][C] at x_off, 1 p float (w at w_off, b at b_off),
 *   2 y float [n][C] at y_off (may be x, same offsets)
 * Workgroup: 256 threads for one row (dispatch (n, 1, 1)): C is 1024 in the
 * real codec, four elements per thread and a shared-memory tree. */
#version 450

#define WG 256
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BX { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BP { float p[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint C, n, x_off, y_off;
    uint w_off, b_off;
    float eps;
} pc;

shared float red[WG];

float reduce_sum(float v) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        barrier();
    }
    const float r = red[0];
    barrier();
    return r;
}

void main() {
    const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    if (row >= pc.n) return; /* uniform */
    const uint xo = pc.x_off + row * pc.C, yo = pc.y_off + row * pc.C;
    float s = 0.0;
    for (uint i = t; i < pc.C; i += WG) s += x[xo + i];
    const float mean = reduce_sum(s) / float(pc.C);
    float v = 0.0;
    for (uint i = t; i < pc.C; i += WG) {
        const float d = x[xo + i] - mean;
        v += d * d;
    }
    const float rstd = 1.0 / sqrt(reduce_sum(v) / float(pc.C) + pc.eps);
    for (uint i = t; i < pc.C; i += WG) y[yo + i] = ((x[xo + i] - mean) * rstd) * p[pc.w_off + i] + p[pc.b_off + i];
}
