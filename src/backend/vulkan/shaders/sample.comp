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
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#define WG VK_SAMPLE_WG
#define NPT (VK_SAMPLE_MAX_V / VK_SAMPLE_WG)
#define NONE 0xffffffffu
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BL { float logits[]; };
layout(std430, set = 0, binding = 1) buffer BST { uint st[]; };
layout(std430, set = 0, binding = 2) readonly buffer BT { uint teach[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BS { uint seen[]; };

layout(push_constant) uniform PC {
    uint V, logits_off, do_sample, top_k;
    float temperature, top_p;
    uint group, G, mark_seen;
} pc;

shared float redf[WG]; /* one value per subgroup */
shared uint redu[WG];

float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) redf[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) s += redf[i];
    barrier();
    return s;
}

float wg_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) redf[gl_SubgroupID] = v;
    barrier();
    float s = redf[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) s = max(s, redf[i]);
    barrier();
    return s;
}

uint wg_sum_u(uint v) {
    v = subgroupAdd(v);
    if (subgroupElect()) redu[gl_SubgroupID] = v;
    barrier();
    uint s = 0u;
    for (uint i = 0; i < gl_NumSubgroups; i++) s += redu[i];
    barrier();
    return s;
}

uint wg_min_u(uint v) {
    v = subgroupMin(v);
    if (subgroupElect()) redu[gl_SubgroupID] = v;
    barrier();
    uint s = redu[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) s = min(s, redu[i]);
    barrier();
    return s;
}

/* exclusive prefix sum over threads in invocation order; *total = the sum */
uint wg_scan_u(uint v, out uint total) {
    const uint ex = subgroupExclusiveAdd(v), sg = subgroupAdd(v);
    if (subgroupElect()) redu[gl_SubgroupID] = sg;
    barrier();
    uint pre = 0u, tot = 0u;
    for (uint i = 0; i < gl_NumSubgroups; i++) {
        if (i < gl_SubgroupID) pre += redu[i];
        tot += redu[i];
    }
    barrier();
    total = tot;
    return pre + ex;
}

float wg_scan_f(float v, out float total) {
    const float ex = subgroupExclusiveAdd(v), sg = subgroupAdd(v);
    if (subgroupElect()) redf[gl_SubgroupID] = sg;
    barrier();
    float pre = 0.0, tot = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) {
        if (i < gl_SubgroupID) pre += redf[i];
        tot += redf[i];
    }
    barrier();
    total = tot;
    return pre + ex;
}

float key_value(uint k) {
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k);
}

void main() {
    /* the thread's place in subgroup order, so the scans run in id order
     * whatever the mapping of subgroups to local ids */
    const uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID, base = t * NPT;
    const float ninf = uintBitsToFloat(0xff800000u);
    const uint V = min(pc.V, uint(VK_SAMPLE_MAX_V));
    const uint draws = st[VK_ST_DRAWS], seed_lo = st[VK_ST_SEED_LO], seed_hi = st[VK_ST_SEED_HI];
    const uint k = st[VK_ST_K], nteach = st[VK_ST_NTEACH];

    float l[NPT];
    for (uint r = 0; r < NPT; r++) l[r] = base + r < V ? logits[pc.logits_off + base + r] : ninf;

    /* argmax, ties to the lowest id: the thread's first maximum, then the
     * lowest id among the threads that hold the maximum */
    float bv = ninf;
    uint bi = NONE;
    for (uint r = 0; r < NPT; r++)
        if (base + r < V && (bi == NONE || l[r] > bv)) {
            bv = l[r];
            bi = base + r;
        }
    const float gm = wg_max(bv);
    uint pick = wg_min_u(bi != NONE && bv == gm ? bi : NONE);

    if (pc.do_sample != 0u) {
        if (pc.temperature != 1.0)
            for (uint r = 0; r < NPT; r++) l[r] = l[r] / pc.temperature;

        /* top-k: the largest key with at least top_k values at or above it
         * is the k-th largest value */
        if (pc.top_k > 0u && pc.top_k < V) {
            uint lo = 0u, hi = NONE;
            while (lo < hi) {
                const uint mid = lo + ((hi - lo) >> 1) + 1u;
                uint c = 0u;
                for (uint r = 0; r < NPT; r++)
                    if (base + r < V && vk_float_key(l[r]) >= mid) c++;
                if (wg_sum_u(c) >= pc.top_k) lo = mid;
                else hi = mid - 1u;
            }
            const float kth = key_value(lo);
            for (uint r = 0; r < NPT; r++)
                if (l[r] < kth) l[r] = ninf;
        }

        /* top-p (see the head comment) */
        if (pc.top_p < 1.0) {
            float lm = ninf;
            for (uint r = 0; r < NPT; r++) lm = max(lm, l[r]);
            const float mx = wg_max(lm);
            float e[NPT];
            float ls = 0.0;
            for (uint r = 0; r < NPT; r++) {
                e[r] = l[r] != ninf ? exp(l[r] - mx) : 0.0;
                ls += e[r];
            }
            const float thr = (1.0 - pc.top_p) * wg_sum(ls);
            const uint maxkey = vk_float_key(mx);
            uint lo = 0u, hi = maxkey;
            while (lo < hi) {
                const uint mid = lo + ((hi - lo) >> 1);
                float f = 0.0;
                for (uint r = 0; r < NPT; r++)
                    if (vk_float_key(l[r]) <= mid) f += e[r];
                if (wg_sum(f) > thr) hi = mid;
                else lo = mid + 1u;
            }
            const uint T = lo;
            float fl = 0.0;
            uint ct = 0u;
            for (uint r = 0; r < NPT; r++) {
                const uint kk = vk_float_key(l[r]);
                if (kk < T) fl += e[r];
                if (kk == T && l[r] != ninf) ct++;
            }
            const float fless = wg_sum(fl);
            uint cnt;
            uint rank = wg_scan_u(ct, cnt);
            const float eT = exp(key_value(T) - mx);
            for (uint r = 0; r < NPT; r++) {
                if (l[r] == ninf) continue;
                const uint kk = vk_float_key(l[r]);
                if (kk < T) l[r] = ninf;
                else if (kk == T) {
                    const bool keep = fless + float(rank + 1u) * eT > thr || (T == maxkey && rank + 1u == cnt);
                    rank++;
                    if (!keep) l[r] = ninf;
                }
            }
        }

        /* softmax over the kept ids and the draw */
        float lm = ninf;
        uint last = 0u; /* 1 + the largest kept id */
        for (uint r = 0; r < NPT; r++)
            if (l[r] != ninf) {
                lm = max(lm, l[r]);
                last = base + r + 1u;
            }
        const float mx = wg_max(lm);
        if (mx != ninf) {
            float e[NPT];
            float ls = 0.0;
            for (uint r = 0; r < NPT; r++) {
                e[r] = l[r] != ninf ? exp(l[r] - mx) : 0.0;
                ls += e[r];
            }
            float S;
            float cum = wg_scan_f(ls, S);
            const float target = vk_uniform(seed_lo, seed_hi, draws) * S;
            uint cand = NONE;
            for (uint r = 0; r < NPT; r++) {
                if (l[r] == ninf) continue;
                cum += e[r];
                if (cum > target && cand == NONE) cand = base + r;
            }
            const uint first = wg_min_u(cand);
            last = subgroupMax(last);
            if (subgroupElect()) redu[gl_SubgroupID] = last;
            barrier();
            uint lk = 0u;
            for (uint i = 0; i < gl_NumSubgroups; i++) lk = max(lk, redu[i]);
            pick = first != NONE ? first : lk - 1u;
        }
    }

    barrier();
    if (t == 0u) {
        st[VK_ST_DRAWS] = draws + 1u;
        uint res = pick;
        if (k < nteach) {
            const uint tc = teach[k * pc.G + pc.group];
            st[VK_ST_AGREE + pc.group] = pick == tc ? 1u : 0u;
            res = tc;
        }
        st[VK_ST_CODES + pc.group] = res;
        if (pc.mark_seen != 0u && res < pc.V) seen[res] = 1u;
    }
}
