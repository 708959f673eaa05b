/* sample.comp for a batch through the stream table (stream_table.glsl):
 * workgroup j is stream j, its logits row at logits_off + j * V of binding
 * 0, its state, teacher codes and seen flags, and its sampling parameters
 * (talker for group 0, predictor otherwise; pc.do_sample, top_k,
 * temperature and top_p unused). Dispatch (n, 1, 1). Same body as
 * sample.comp. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_TAB 1
#include "sample.glsl"
