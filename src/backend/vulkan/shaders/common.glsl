/* Shared GLSL for the compute shaders: constants mirrored from
 * src/backend/vulkan/vk_kernels.h and small helpers. Included by each shader
 * after its #version and #extension lines
 * (#extension GL_GOOGLE_include_directive : require, #include "common.glsl").
 * Sections are owned by the shaders that use them; every section only
 * defines constants and functions that need no extension beyond core GLSL
 * 4.50, so any shader may include this file. */
#ifndef QTTS_VK_COMMON_GLSL
#define QTTS_VK_COMMON_GLSL

/* ---- generation step: state words and sampling (rmsnorm, qk_rope,
 * attention, swiglu, embed_*, logits_talker, sample, advance) ---- */
/* uint32 words of the per-stream state buffer (vk_kernels.h VK_ST_*) */
const uint VK_ST_K = 0u;
const uint VK_ST_POS = 1u;
const uint VK_ST_NQ = 2u;
const uint VK_ST_NTEACH = 3u;
const uint VK_ST_BAN_EOS = 4u;
const uint VK_ST_SEED_LO = 5u;
const uint VK_ST_SEED_HI = 6u;
const uint VK_ST_DRAWS = 7u;
const uint VK_ST_SERIAL = 8u;
const uint VK_ST_CODES = 16u;
const uint VK_ST_AGREE = 32u;
const uint VK_ST_WORDS = 64u;

/* sample.comp: threads of its one workgroup and the largest vocabulary */
#define VK_SAMPLE_WG 256
#define VK_SAMPLE_MAX_V 4096

/* A 32-bit integer hash with full avalanche (Wellons' lowbias32 finaliser,
 * the murmur3 fmix32 shape with better constants). */
uint vk_hash32(uint x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The counter-based uniform draw of sample.comp: u in [0, 1) with 24 random
 * bits from (seed_lo, seed_hi, counter). tests/unit/test_vk_ops.c repeats it
 * in C. */
float vk_uniform(uint seed_lo, uint seed_hi, uint counter) {
    uint h = vk_hash32(seed_hi ^ 0x9e3779b9u);
    h = vk_hash32(h ^ seed_lo);
    h = vk_hash32(h ^ counter);
    h = vk_hash32(h + 0x632be5abu);
    return float(h >> 8) * (1.0 / 16777216.0);
}

/* Order-preserving key of a float: a < b (as floats) <=> key(a) < key(b)
 * (unsigned); -0 is folded into +0 so that equal floats share one key. */
uint vk_float_key(float x) {
    uint u = floatBitsToUint(x == 0.0 ? 0.0 : x);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}
/* ---- end of the generation step section ---- */

/* ---- matrix products (matvec_*, matmul_* and their mm_*.glsl) ---- */
/* vk_pc_matmul.flags */
const uint VK_MM_BIAS = 1u;
const uint VK_MM_ACC = 2u;
/* weight rows per matvec workgroup; the host takes matvec for n up to
 * VK_MATVEC_MAX_N x rows (the shader itself takes any n) */
#define VK_MATVEC_ROWS 8
#define VK_MATVEC_MAX_N 8
/* matmul tile: weight rows x x rows per workgroup */
#define VK_MATMUL_TM 32
#define VK_MATMUL_TN 32
/* ---- end of the matrix products section ---- */

#endif
