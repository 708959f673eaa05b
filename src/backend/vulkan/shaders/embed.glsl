/* The body of embed_f32.comp, embed_bf16.comp (VK_BF16: a bf16 table) and
 * their _tab forms (VK_TAB: a batch's rows through the stream table). See
 * embed_f32.comp. */
#ifdef VK_BF16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#ifdef VK_TAB
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
#include "common.glsl"
#ifdef VK_TAB
#include "stream_table.glsl"
#endif

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

#ifdef VK_BF16
layout(std430, set = 0, binding = 0) readonly buffer BT { uint16_t table[]; };
#define TABLE(i) uintBitsToFloat(uint(table[i]) << 16)
#else
layout(std430, set = 0, binding = 0) readonly buffer BT { float table[]; };
#define TABLE(i) table[i]
#endif
#ifdef VK_TAB
/* workgroup row y: stream y of the table, the id from its state, its row of
   out at out_off + y * out_rs; pc.queue (f32 only): the table is the
   stream's text queue and id_max its nq (a branch, not a select: binding 0
   is not read then) */
#define IDS(i) VkU32(tab[sj].st).v[i]
#define OUT_OFF (pc.out_off + sj * pc.out_rs)
#ifdef VK_BF16
#define ID_MAX pc.id_max
#define LOAD(x, i) x = TABLE(i)
#else
#define ID_MAX (pc.queue != 0u ? tab[sj].nq : pc.id_max)
#define LOAD(x, i)                                     \
    if (pc.queue != 0u) x = VkF32(tab[sj].queue).v[i]; \
    else x = TABLE(i)
#endif
#else
layout(std430, set = 0, binding = 1) readonly buffer BI { uint ids[]; };
#define IDS(i) ids[i]
#define OUT_OFF pc.out_off
#define ID_MAX pc.id_max
#define LOAD(x, i) x = TABLE(i)
#endif
layout(std430, set = 0, binding = 2) buffer BO { float o[]; };

layout(push_constant) uniform PC {
    uint H, table_off, id_pos, id_add;
    uint id_max, out_off, accumulate, out_rs;
    uint queue;
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x, sj = gl_WorkGroupID.y;
    if (j >= pc.H) return;
    const uint idx = min(IDS(pc.id_pos) + pc.id_add, ID_MAX);
    const uint ti = pc.table_off + idx * pc.H + j;
    float x;
    LOAD(x, ti);
    if (pc.accumulate != 0u) o[OUT_OFF + j] += x;
    else o[OUT_OFF + j] = x;
}
