/* Exact (erf) GELU in place: x = 0.5 x (1 + erf(x / sqrt 2)), as
 * gelu_erf in src/model/codec_stream.c (erff). GLSL has no erf: it is
 * written through erfc(z) = t exp(-z^2 - 1.26551223 + t P(t)),
 * t = 1 / (1 + z / 2) (Numerical Recipes' erfcc, fractional error < 1.2e-7
 * for z >= 0), as x (1 - erfc(z) / 2) for x >= 0 and x erfc(-z) / 2 below,
 * so the result has a small relative error on both tails.
 * Dataflow: x -> x (elementwise).
 *
 * Bindings (vk_kernels.h vk_pc_gelu): 0 x float at x_off (read and written).
 * Workgroup: 256 threads, one element each (dispatch (ceil(count / 256), 1, 1)). */
#version 450

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BX { float x[]; };

layout(push_constant) uniform PC {
    uint count, x_off;
} pc;

float erfc_pos(float z) { /* z >= 0 */
    const float t = 1.0 / (1.0 + 0.5 * z);
    const float p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
                    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(-z * z + p);
}

void main() {
    const uint j = gl_GlobalInvocationID.x;
    if (j >= pc.count) return;
    const float v = x[pc.x_off + j];
    const float z = abs(v) * 0.70710678118654752;
    const float ec = erfc_pos(z);
    x[pc.x_off + j] = v >= 0.0 ? v * (1.0 - 0.5 * ec) : 0.5 * v * ec;
}
