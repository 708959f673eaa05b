/* matmul_bf16: Y[i][r] (+)= sum_c X[i][c] W[r][c] (+ bias[bias_off + r]) for
 * i < n (many rows: prefill), r < rows, W in the bf16 format.
 * Dataflow: W tile (mm_w_bf16.glsl, dequantised to f32) and X tile ->
 * shared memory -> 4 x 4 register tile per thread -> Y (mm_matmul.glsl).
 * Matches a double-precision product of the same (dequantised) weights and
 * f32 X within f32 rounding; X is not quantised (unlike the CPU's int8
 * kernels). Tested by tests/unit/test_vk_matmul.c.
 * Bindings (vk_kernels.h): 0 W uint16 [rows][cols] (bf16 bits); 3 X float
 * (row i at x_off + i x_stride); 4 Y float (row i at y_off + i y_stride);
 * 5 bias float (at bias_off). Layout details in mm_w_bf16.glsl.
 * Push constants: vk_pc_matmul (mm_head.glsl); flags VK_MM_BIAS, VK_MM_ACC.
 * Workgroup: 64 threads over a VK_MATMUL_TM x VK_MATMUL_TN tile, why in
 * mm_matmul.glsl. Dispatch (ceil(rows / VK_MATMUL_TM),
 * ceil(n / VK_MATMUL_TN), 1). */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

#include "common.glsl"
#include "mm_head.glsl"
#include "mm_w_bf16.glsl"
#include "mm_matmul.glsl"
