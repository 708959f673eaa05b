/* The BF16 conv1d driver of the x86 conv kernels, compiled once per ISA:
 * output channels in tiles of up to BF_CO -> output steps in tiles of up to
 * BF_TV vectors of VL -> bf_tile (the leaf; the last vector masked).
 * Included after the leaves by conv_avx2.c and conv_avx512.c, which define
 * first: CONV_ISA, VL, conv_mask, lane_mask(n) (as for conv_driver.h),
 * BF_CO, BF_TV, and BF_TILES(CO): bf_tile(CO, TV, a, o, t, m) for the
 * tile's vector count TV (1..BF_TV), CO constant. It defines
 * conv1d_bf16_<isa>, the ops_kernels.conv1d_bf16 entry (conv_bf16.h). */
#ifndef CONV_ISA
#error "conv_bf16_driver.h is included by an ISA's conv file after its leaf tiles"
#endif


static void CONV_CAT(conv1d_bf16, CONV_ISA)(const ops_conv_bf16_args *a, int o0, int o1) {
    const int t_out = a->t_in - a->dilation * (a->k - 1);
    if (t_out <= 0) return;
    for (int o = o0; o < o1;) {
        const int CO = o1 - o < BF_CO ? o1 - o : BF_CO;
        for (int t = 0; t < t_out; t += BF_TV * VL) {
            const int rem = t_out - t < BF_TV * VL ? t_out - t : BF_TV * VL;
            const int TV = (rem + VL - 1) / VL;
            const conv_mask m = lane_mask(rem - (TV - 1) * VL);
            switch (CO) {
            case 1: BF_TILES(1) break;
            case 2: BF_TILES(2) break;
            case 3: BF_TILES(3) break;
#if BF_CO > 4
            case 4: BF_TILES(4) break;
            case 5: BF_TILES(5) break;
#endif
            default: BF_TILES(BF_CO) break;
            }
        }
        o += CO;
    }
}
