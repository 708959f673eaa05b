/* selftest_add: y[i] += x[i] * MUL for i < n; the Vulkan runtime's own test
 * shader (tests/unit/test_vk_runtime.c), not used by the model.
 * Bindings: 0 x (float[n]), 1 y (float[n], read and written).
 * Push constants: uint n.
 * Specialisation: constant 0 the workgroup size (local_size_x), constant 1
 * the multiplier MUL (uint). Workgroup: LOCAL x 1 x 1 threads, one element
 * each; dispatch (ceil(n / LOCAL), 1, 1). */
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MUL = 1;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform PC {
    uint n;
} pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < pc.n) y[i] += x[i] * float(MUL);
}
