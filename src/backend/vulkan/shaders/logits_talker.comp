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
#include "logits_talker.glsl"
