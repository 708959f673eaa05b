/* logits_talker.comp for a batch through the stream table
 * (stream_table.glsl): workgroup row y is stream y, its logits row
 * logits[y * V .. + V) of binding 0, its seen flags, state and talker
 * repetition penalty from the table (pc.penalty unused). Dispatch
 * (ceil(V / 256), n, 1). Same body as logits_talker.comp. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_TAB 1
#include "logits_talker.glsl"
