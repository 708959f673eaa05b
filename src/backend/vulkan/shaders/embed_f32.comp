/* Embedding row lookup (f32 table): out[out_off + j] (+)= table[table_off +
 * idx * H + j], idx = min(ids[id_pos] + id_add, id_max), as ops_get_row /
 * ops_add_row (src/backend/cpu/ops.c) widen one row (exact: a copy or one
 * f32 add). The id is read on the device, so a recorded frame can embed
 * the code that sample.comp just chose. Dataflow: ids -> row of table -> out.
 *
 * Bindings (vk_kernels.h vk_pc_embed):
 *   0 table float T[H] per row, row idx at table_off + idx * H
 *   1 ids   uint, the id at id_pos
 *   2 out   float [H] at out_off; accumulate != 0: added to, else written
 * Workgroup: 256 threads, one element each (dispatch (ceil(H / 256), 1, 1)):
 * a copy, coalesced across the workgroup. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BT { float table[]; };
layout(std430, set = 0, binding = 1) readonly buffer BI { uint ids[]; };
layout(std430, set = 0, binding = 2) buffer BO { float o[]; };

layout(push_constant) uniform PC {
    uint H, table_off, id_pos, id_add;
    uint id_max, out_off, accumulate;
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x;
    if (j >= pc.H) return;
    const uint idx = min(ids[pc.id_pos] + pc.id_add, pc.id_max);
    const uint ti = pc.table_off + idx * pc.H + j;
    const float x = table[ti];
    if (pc.accumulate != 0u) o[pc.out_off + j] += x;
    else o[pc.out_off + j] = x;
}
