/* Per-head q/k RMSNorm and NeoX RoPE of n rows, then the row's k and v
 * stored at its position in the KV caches: the ROWS_QK stage of
 * rows_range in src/model/transformer.c (ops_rmsnorm over hd with
 * q_norm / k_norm, then ops_rope_neox_cs with the ops_rope_angles row of
 * the position), which it must match to f32 rounding.
 * Dataflow: q, k head -> shared -> sum of squares (segmented tree in shared
 * memory) -> (x * inv) * w -> rotate pairs (j, j + hd/2) -> q, k in place,
 * k -> kc; v -> vc.
 *
 * Bindings (vk_kernels.h vk_pc_qk_rope):
 *   0 q    float [n][nh * hd] at q_off, normed and rotated in place
 *   1 k    float [n][nkv * hd] at k_off, normed and rotated in place too
 *   2 v    float [n][nkv * hd] at v_off, read
 *   3 w    float: q norm weights [hd] at qn_off, k norm weights [hd] at kn_off
 *   4 rope float [positions][hd]: row p = cos [hd/2], sin [hd/2]
 *   5 kc   float, position p at cache_off + p * nkv * hd
 *   6 vc   float, same layout
 *   7 st   uint state; st[VK_ST_POS] is the first row's position when
 *          pos_state != 0, else pos0; row i is at that + i
 * Streams: the n rows are n / rows streams of `rows` consecutive rows
 * (rows 0: one stream of n); stream j's row i is at position (as above) + i
 * and its caches start cache_stride floats after stream j - 1's, so one
 * dispatch serves every stream of a batch whose caches share kc and vc.
 * Workgroup: 256 threads, one workgroup per row (dispatch (n, 1, 1)). The
 * nh + nkv heads are handled 256 / hd at a time (2 for hd = 128, 32 for
 * hd = 8), one thread per element, so the whole row is a few steps with
 * every thread busy; the norm's sum is a tree over each head's segment of
 * shared memory, which works for any even hd <= 256 and any subgroup size. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "qk_rope.glsl"
