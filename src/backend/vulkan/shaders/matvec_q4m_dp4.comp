/* matvec_q4m_dp4: Y[i][r] (+)= the CPU's int8 x int4 product of X row i
 * with weight row r (+ bias[bias_off + r]) for i < n, r < rows, W in the q4m
 * format (w = d q + m) and X already quantised by quantize_q8.comp, with
 * packed int8 dot products (VK_KHR_shader_integer_dot_product).
 * Dataflow: W blocks (nibbles as 4 x u8 per word, masked) . XQ blocks ->
 * exact integer dots -> ordered fma chains per output, d_w * dx and m_w *
 * fsum (mm_dp4.glsl) -> Y.
 * Matches the CPU's scalar QT_Q4M_B32_X16 kernel bit for bit (fma emulated
 * exactly unless DP4_FUSED; see mm_dp4.glsl). Tested by tests/unit/test_vk_dot.c.
 * Bindings (vk_kernels.h): 0 W u8 p[rows][kpad/2] read as uvec4 (block b of
 * row r: uvec4 r kpad/32 + b; word k holds columns 32b + 4k + 0..3 in its
 * low nibbles and 32b + 16 + 4k + 0..3 in its high nibbles); 1 f16 scales
 * d and 2 f16 mins m [rows][kpad/32] (uint16); 3 XQ (quantize_q8.comp: int8
 * [n][kpad], uvec4); 4 Y float (row i at y_off + i y_stride); 5 bias float
 * (at bias_off); 6 XS float (quantize_q8.comp: dx at i kpad/32 + b, fsum at
 * (n + i) kpad/32 + b).
 * Push constants: vk_pc_matmul (x_off, x_stride unused); flags VK_MM_BIAS,
 * VK_MM_ACC.
 * Workgroup: 64 threads over VK_MATVEC_ROWS weight rows, lanes over blocks,
 * why in mm_dp4.glsl. Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1). */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require

#include "common.glsl"

layout(binding = 0) readonly buffer w_q4m { uvec4 W4[]; };
layout(binding = 1) readonly buffer w_scales { uint16_t D[]; };
layout(binding = 2) readonly buffer w_mins { uint16_t M[]; };

#define DP4_Q4M

/* exact integer dot of block b of weight row r with the activation block
 * (xa: columns 0..15, xb: 16..31); nibbles 0..15 are valid int8 bytes */
#define dp4_block_dot(r, b, xa, xb)                                                                  \
    dp4_dot8(W4[(r) * (pc.kpad / 32u) + (b)] & 0x0f0f0f0fu, (W4[(r) * (pc.kpad / 32u) + (b)] >> 4u) & 0x0f0f0f0fu, \
             xa, xb)

#include "mm_dp4.glsl"
