/* The talker's logits processors in place on logits[V], as the CPU talker
 * applies them (src/model/sampling.c logits_repetition_penalty, then the
 * min-new-tokens EOS ban and the suppression of control ids): repetition
 * penalty once per id with seen[id] != 0 (x < 0 ? x * penalty : x / penalty),
 * eos -> -inf while st[VK_ST_K] < min_k or st[VK_ST_BAN_EOS] != 0, ids in
 * [suppress_from, V) other than eos -> -inf. Elementwise, so exact.
 * Dataflow: logits, seen, st -> logits.
 *
 * Bindings (vk_kernels.h vk_pc_logits_talker):
 *   0 logits float [V], 1 seen uint [V] (nonzero: the id was chosen in an
 *   earlier frame), 2 st uint state
 * Workgroup: 256 threads, one id each (dispatch (ceil(V / 256), 1, 1)). */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BL { float logits[]; };
layout(std430, set = 0, binding = 1) readonly buffer BS { uint seen[]; };
layout(std430, set = 0, binding = 2) readonly buffer BST { uint st[]; };

layout(push_constant) uniform PC {
    uint V, eos, min_k, suppress_from;
    float penalty;
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x;
    if (j >= pc.V) return;
    const float ninf = uintBitsToFloat(0xff800000u);
    float x = logits[j];
    if (seen[j] != 0u && pc.penalty != 1.0) x = x < 0.0 ? x * pc.penalty : x / pc.penalty;
    if (j == pc.eos) {
        if (st[VK_ST_K] < pc.min_k || st[VK_ST_BAN_EOS] != 0u) x = ninf;
    } else if (j >= pc.suppress_from) {
        x = ninf;
    }
    logits[j] = x;
}
