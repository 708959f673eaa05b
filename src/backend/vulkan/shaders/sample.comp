/* One token from a row of logits, chosen as sample_token
 * (src/model/sampling.c) chooses it, then teacher forcing and the state
 * writes of the generation step.
 *  greedy (do_sample = 0): argmax, ties to the lowest id (exact);
 *  sampling: logits / temperature (when != 1); top-k: keep values >= the
 *  k-th largest (exact: a binary search over order-preserving 32-bit keys
 *  of the floats for the largest key with at least k values at or above
 *  it); top-p: the CPU drops the prefix of the ascending order (ties in id
 *  order) whose cumulative probability is <= 1 - top_p and keeps the
 *  largest. Here: S = sum exp(l - max); a binary search over keys finds the
 *  smallest key T with F(T) = sum_{key <= T} exp(l - max) > (1 - top_p) S;
 *  values below T are dropped, above T kept, and the values equal to T
 *  (exact ties) are taken in id order, the j-th (from 1) dropped while
 *  F(<T) + j exp(T - max) <= (1 - top_p) S, as the CPU's ordered cumulative
 *  sum does; the last of the largest value is always kept. Then softmax
 *  over the kept ids and the draw: u in [0, 1) from vk_uniform(seed,
 *  st[VK_ST_DRAWS]) (common.glsl), target = u * sum, the pick is the first
 *  id in id order whose inclusive prefix sum of exp(l - max) exceeds target
 *  (the largest kept id if rounding leaves none). All in f32 (the CPU uses
 *  f64 for the top-p sums and the softmax), so the kept set and the draw
 *  match the CPU's except where a value sits on a rounding edge.
 *  st[VK_ST_DRAWS] += 1 on every call (greedy too). Teacher forcing when
 *  st[VK_ST_K] < st[VK_ST_NTEACH]: teach[k * G + group] replaces the pick
 *  and st[VK_ST_AGREE + group] = (pick == teacher). The result goes to
 *  st[VK_ST_CODES + group]; mark_seen: seen[result] = 1.
 * Dataflow: logits row -> registers (16 ids per thread) -> argmax | warpers
 * -> kept probabilities -> prefix sums -> pick -> st, seen.
 *
 * Bindings (vk_kernels.h vk_pc_sample):
 *   0 logits float, the row at logits_off, V <= VK_SAMPLE_MAX_V (4096)
 *   1 st     uint state (read, then written by thread 0)
 *   2 teach  uint [frames][G] teacher codes (read only when teaching)
 *   3 seen   uint [V] (written when mark_seen)
 * Workgroup: VK_SAMPLE_WG = 256 threads, one workgroup (dispatch (1, 1, 1));
 * thread t holds ids [16 t, 16 t + 16) in registers, so every search step
 * is 16 local compares and one workgroup reduction (subgroup reduction,
 * then one value per subgroup in shared memory: no subgroup size assumed),
 * and the id-order prefix sum is a per-thread sum, a workgroup exclusive
 * scan (subgroup scan + subgroup totals in shared memory) and a local
 * running sum (threads are numbered in subgroup order, subgroups full:
 * 256 is a multiple of every subgroup size). The searches take at most 33 steps each; a radix select
 * (ggml's top-k) would take fewer barriers but needs float atomics for the
 * top-p masses, which Vulkan 1.2 does not guarantee. */
#version 450
#extension GL_GOOGLE_include_directive : require
#include "sample.glsl"
