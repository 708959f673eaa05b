/* The int8 conv1d driver of the SIMD conv kernels, compiled once per ISA:
 * time blocks of the input (Q8_BLOCK_BYTES) -> output channels in tiles of
 * up to Q8_CO -> output steps in tiles of up to Q8_TV vectors of VL ->
 * q8_tile (the leaf; the last vector masked). Each output is one tile's
 * work, so the blocks change no bit.
 * Included after the leaves by conv_avx2.c, conv_avx512.c and conv_neon.c, which define
 * first: CONV_ISA, VL, conv_mask, lane_mask(n) (as for conv_driver.h),
 * Q8_CO, Q8_TV, and Q8_TILES(CO): the leaf call for CO (constant) channels
 * of the tile at a, o, t with mask m, given its vector count TV (1..Q8_TV)
 * and its rem steps (Q8_TV * VL when whole). It defines
 * conv1d_q8_<isa>, the ops_kernels.conv1d_q8 entry (conv_q8.h). */
#ifndef CONV_ISA
#error "conv_q8_driver.h is included by an ISA's conv file after its leaf tiles"
#endif

/* bytes of packed input in one time block (about a quarter of a Zen 3 L2) */
#define Q8_BLOCK_BYTES (128u * 1024u)

#define Q8_CAT2(a, b) a##_##b
#define Q8_CAT(a, b) Q8_CAT2(a, b)

static void Q8_CAT(conv1d_q8, CONV_ISA)(const ops_conv_q8_args *a, int o0, int o1) {
    const int span = a->dilation * (a->k - 1), t_out = a->t_in - span;
    if (t_out <= 0) return;
    /* time blocks whose packed input (cin4 bytes a step, as many as cin4 / 4
     * floats) stays within Q8_BLOCK_BYTES while every tile of output
     * channels passes over it */
    const int tw = Q8_TV * VL, tb = ops_conv_time_block(a->cin4 / 4, span + 1, Q8_BLOCK_BYTES, tw, 4 * tw);
    for (int tb0 = 0; tb0 < t_out; tb0 += tb) {
        const int tb1 = t_out - tb0 < tb ? t_out : tb0 + tb;
        for (int o = o0; o < o1;) {
            const int CO = o1 - o < Q8_CO ? o1 - o : Q8_CO;
            for (int t = tb0; t < tb1; t += tw) {
                const int rem = tb1 - t < tw ? tb1 - t : tw;
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
}
