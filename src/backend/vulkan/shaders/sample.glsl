/* The body of sample.comp and sample_tab.comp (VK_TAB: a batch's rows
 * through the stream table). See sample.comp. */
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef VK_TAB
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif
#include "common.glsl"
#ifdef VK_TAB
#include "stream_table.glsl"
#endif

#define WG VK_SAMPLE_WG
#define NPT (VK_SAMPLE_MAX_V / VK_SAMPLE_WG)
#define NONE 0xffffffffu
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BL { float logits[]; };
#ifdef VK_TAB
/* workgroup j: stream j of the table, its logits row at logits_off + j * V,
   its state, teacher codes, seen flags, and the sampling parameters of the
   talker (group 0) or the predictor (groups >= 1) */
#define ST(i) VkU32(tab[sj].st).v[i]
#define TEACH(i) VkU32(tab[sj].teach).v[i]
#define SEEN(i) VkU32(tab[sj].seen).v[i]
#define ROW (sj * pc.V)
#define P_DO_SAMPLE (pc.group == 0u ? tab[sj].t_do_sample : tab[sj].p_do_sample)
#define P_TOP_K (pc.group == 0u ? tab[sj].t_top_k : tab[sj].p_top_k)
#define P_TEMPERATURE (pc.group == 0u ? tab[sj].t_temperature : tab[sj].p_temperature)
#define P_TOP_P (pc.group == 0u ? tab[sj].t_top_p : tab[sj].p_top_p)
#else
layout(std430, set = 0, binding = 1) buffer BST { uint st[]; };
layout(std430, set = 0, binding = 2) readonly buffer BT { uint teach[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BS { uint seen[]; };
#define ST(i) st[i]
#define TEACH(i) teach[i]
#define SEEN(i) seen[i]
#define ROW 0u
#define P_DO_SAMPLE pc.do_sample
#define P_TOP_K pc.top_k
#define P_TEMPERATURE pc.temperature
#define P_TOP_P pc.top_p
#endif

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
    const uint sj = gl_WorkGroupID.x;
    const uint do_sample = P_DO_SAMPLE, top_k = P_TOP_K;
    const float temperature = P_TEMPERATURE, top_p = P_TOP_P;
    const uint draws = ST(VK_ST_DRAWS), seed_lo = ST(VK_ST_SEED_LO), seed_hi = ST(VK_ST_SEED_HI);
    const uint k = ST(VK_ST_K), nteach = ST(VK_ST_NTEACH);

    float l[NPT];
    for (uint r = 0; r < NPT; r++) l[r] = base + r < V ? logits[pc.logits_off + ROW + base + r] : ninf;

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

    if (do_sample != 0u) {
        if (temperature != 1.0)
            for (uint r = 0; r < NPT; r++) l[r] = l[r] / temperature;

        /* top-k: the largest key with at least top_k values at or above it
         * is the k-th largest value */
        if (top_k > 0u && top_k < V) {
            uint lo = 0u, hi = NONE;
            while (lo < hi) {
                const uint mid = lo + ((hi - lo) >> 1) + 1u;
                uint c = 0u;
                for (uint r = 0; r < NPT; r++)
                    if (base + r < V && vk_float_key(l[r]) >= mid) c++;
                if (wg_sum_u(c) >= top_k) lo = mid;
                else hi = mid - 1u;
            }
            const float kth = key_value(lo);
            for (uint r = 0; r < NPT; r++)
                if (l[r] < kth) l[r] = ninf;
        }

        /* top-p (see the head comment) */
        if (top_p < 1.0) {
            float lm = ninf;
            for (uint r = 0; r < NPT; r++) lm = max(lm, l[r]);
            const float mx = wg_max(lm);
            float e[NPT];
            float ls = 0.0;
            for (uint r = 0; r < NPT; r++) {
                e[r] = l[r] != ninf ? exp(l[r] - mx) : 0.0;
                ls += e[r];
            }
            const float thr = (1.0 - top_p) * wg_sum(ls);
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
        ST(VK_ST_DRAWS) = draws + 1u;
        uint res = pick;
        if (k < nteach) {
            const uint tc = TEACH(k * pc.G + pc.group);
            ST(VK_ST_AGREE + pc.group) = pick == tc ? 1u : 0u;
            res = tc;
        }
        ST(VK_ST_CODES + pc.group) = res;
        if (pc.mark_seen != 0u && res < pc.V) SEEN(res) = 1u;
    }
}
