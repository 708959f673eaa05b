/* qk_rope.comp for a batch through the stream table (stream_table.glsl):
 * row j is stream j's one row, at the position in its state, stored into
 * its caches at layer cache_off (cache_off * layer_floats); rows and
 * pos_state must be 1. Dispatch (n, 1, 1). The arithmetic is qk_rope.comp's
 * (the same body, qk_rope.glsl), so a row's values are bit for bit those of
 * the stream alone. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_TAB 1
#include "qk_rope.glsl"
