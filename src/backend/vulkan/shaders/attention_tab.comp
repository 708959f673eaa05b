/* attention.comp for a batch through the stream table (stream_table.glsl):
 * row j is stream j's one query row, at the position in its state, over its
 * caches at layer cache_off (cache_off * layer_floats); rows and pos_state
 * must be 1. Dispatch (nh, n, 1). The arithmetic is attention.comp's (the
 * same body, attention.glsl), so a row's values are bit for bit those of
 * the stream alone. */
#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_TAB 1
#include "attention.glsl"
