/* The body of logits_talker.comp and logits_talker_tab.comp (VK_TAB: a
 * batch's rows through the stream table). See logits_talker.comp. */
#ifdef VK_TAB
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
#include "common.glsl"
#ifdef VK_TAB
#include "stream_table.glsl"
#endif

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BL { float logits[]; };
#ifdef VK_TAB
/* workgroup row y: stream y of the table, its logits row at y * V, its
   seen flags, state and penalty */
#define SEEN(i) VkU32(tab[sj].seen).v[i]
#define ST(i) VkU32(tab[sj].st).v[i]
#define PENALTY tab[sj].t_penalty
#define ROW (sj * pc.V)
#else
layout(std430, set = 0, binding = 1) readonly buffer BS { uint seen[]; };
layout(std430, set = 0, binding = 2) readonly buffer BST { uint st[]; };
#define SEEN(i) seen[i]
#define ST(i) st[i]
#define PENALTY pc.penalty
#define ROW 0u
#endif

layout(push_constant) uniform PC {
    uint V, eos, min_k, suppress_from;
    float penalty;
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x, sj = gl_WorkGroupID.y;
    if (j >= pc.V) return;
    const float ninf = uintBitsToFloat(0xff800000u);
    const float penalty = PENALTY;
    float x = logits[ROW + j];
    if (SEEN(j) != 0u && penalty != 1.0) x = x < 0.0 ? x * penalty : x / penalty;
    if (j == pc.eos) {
        if (ST(VK_ST_K) < pc.min_k || ST(VK_ST_BAN_EOS) != 0u) x = ninf;
    } else if (j >= pc.suppress_from) {
        x = ninf;
    }
    logits[ROW + j] = x;
}
