/* matvec_q4m: Y[i][r] (+)= sum_c X[i][c] W[r][c] (+ bias[bias_off + r]) for
 * i < n (a few rows: decode steps), r < rows, W in the q4m format.
 * Dataflow: W chunks (mm_w_q4m.glsl) x X rows -> per-thread partial sums ->
 * subgroupAdd per weight row -> Y (mm_matvec.glsl).
 * Matches a double-precision product of the same (dequantised) weights and
 * f32 X within f32 rounding; X is not quantised (unlike the CPU's int8
 * kernels). Tested by tests/unit/test_vk_matmul.c.
 * Bindings (vk_kernels.h): 0 W u8 nibbles p[rows][kpad/2]; 1 f16 scales d
 * and 2 f16 mins m, [rows][kpad/32] (uint16); 3 X float (row i at
 * x_off + i x_stride); 4 Y float (row i at y_off + i y_stride); 5 bias
 * float (at bias_off). Layout details in mm_w_q4m.glsl.
 * Push constants: vk_pc_matmul (mm_head.glsl); flags VK_MM_BIAS, VK_MM_ACC.
 * Workgroup: 64 threads over VK_MATVEC_ROWS weight rows, why in
 * mm_matvec.glsl. Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1). */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "common.glsl"
#include "mm_head.glsl"
#include "mm_w_q4m.glsl"
#include "mm_matvec.glsl"
