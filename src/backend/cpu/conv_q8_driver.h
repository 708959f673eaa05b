/* The int8 conv1d driver of the x86 conv kernels, compiled once per ISA:
 * output channels in tiles of up to Q8_CO -> output steps in tiles of up to
 * Q8_TV vectors of VL -> q8_tile (the leaf; the last vector masked).
 * Included after the leaves by conv_avx2.c and conv_avx512.c, which define
 * first: CONV_ISA, VL, conv_mask, lane_mask(n) (as for conv_driver.h),
 * Q8_CO, Q8_TV, and Q8_TILES(CO): the leaf call for CO (constant) channels
 * of the tile at a, o, t with mask m, given its vector count TV (1..Q8_TV)
 * and its rem steps (Q8_TV * VL when whole). It defines
 * conv1d_q8_<isa>, the ops_kernels.conv1d_q8 entry (conv_q8.h). */
#ifndef CONV_ISA
#error "conv_q8_driver.h is included by an ISA's conv file after its leaf tiles"
#endif

#define Q8_CAT2(a, b) a##_##b
#define Q8_CAT(a, b) Q8_CAT2(a, b)

static void Q8_CAT(conv1d_q8, CONV_ISA)(const ops_conv_q8_args *a, int o0, int o1) {
    const int t_out = a->t_in - a->dilation * (a->k - 1);
    if (t_out <= 0) return;
    for (int o = o0; o < o1;) {
        const int CO = o1 - o < Q8_CO ? o1 - o : Q8_CO;
        for (int t = 0; t < t_out; t += Q8_TV * VL) {
            const int rem = t_out - t < Q8_TV * VL ? t_out - t : Q8_TV * VL;
            const int TV = (rem + VL - 1) / VL;
            const conv_mask m = lane_mask(rem - (TV - 1) * VL);
            switch (CO) {
            case 1: Q8_TILES(1) break;
            case 2: Q8_TILES(2) break;
            case 3: Q8_TILES(3) break;
#if Q8_CO > 4
            case 4: Q8_TILES(4) break;
            case 5: Q8_TILES(5) break;
#endif
            default: Q8_TILES(Q8_CO) break;
            }
        }
        o += CO;
    }
}
