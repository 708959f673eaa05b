/* embed_bf16.comp for a batch through the stream table (stream_table.glsl):
 * workgroup row y is stream y, its id st[id_pos] from its state, written
 * to out row out_off + y * out_rs. Dispatch (ceil(H / 256), n, 1).
 * Same body as embed_bf16.comp. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_TAB 1
#define VK_BF16 1
#include "embed.glsl"
