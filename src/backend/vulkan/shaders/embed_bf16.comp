/* Embedding row lookup (bf16 table): out[out_off + j] (+)= table[table_off +
 * idx * H + j], idx = min(ids[id_pos] + id_add, id_max), as ops_get_row /
 * ops_add_row (src/backend/cpu/ops.c) widen one row (exact: a copy or one
 * f32 add). The id is read on the device, so a recorded frame can embed
 * the code that sample.comp just chose. Dataflow: ids -> row of table -> out.
 *
 * Bindings (vk_kernels.h vk_pc_embed):
 *   0 table uint16 bf16 bits T[H] (value = bits << 16 as f32) per row, row idx at table_off + idx * H
 *   1 ids   uint, the id at id_pos
 *   2 out   float [H] at out_off; accumulate != 0: added to, else written
 * Workgroup: 256 threads, one element each (dispatch (ceil(H / 256), 1, 1)):
 * a copy, coalesced across the workgroup. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_BF16 1
#include "embed.glsl"
