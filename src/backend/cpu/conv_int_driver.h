/* The driver of the integer conv1d kernels (int8: conv_q8.h, int16:
 * conv_i16.h), compiled once per ISA and format: time blocks of the packed
 * input (QD_BLOCK_BYTES) -> output channels in tiles of up to QD_CO ->
 * output steps in tiles of up to QD_TV vectors of VL -> the leaf (the last
 * vector masked). Each output is one tile's work, so the blocks change no
 * bit.
 * Included after the leaves by conv_avx2.c, conv_avx512.c and conv_neon.c, which define
 * first: CONV_ISA, VL, conv_mask, lane_mask(n) (as for conv_driver.h), and
 * per format QD_NAME (the function to define: the ops_kernels entry),
 * QD_ARGS (its argument struct), QD_STEP_FLOATS(a) (the packed bytes of one
 * input step / 4), QD_CO, QD_TV, and QD_TILES(CO): the leaf call for CO
 * (constant) channels of the tile at a, o, t with mask m, given its vector
 * count TV (1..QD_TV) and its rem steps (QD_TV * VL when whole). The QD_
 * macros are undefined at the end, so the next format can define its own. */
#ifndef CONV_ISA
#error "conv_int_driver.h is included by an ISA's conv file after its leaf tiles"
#endif

#ifndef QD_BLOCK_BYTES
/* bytes of packed input in one time block (about a quarter of a Zen 3 L2) */
#define QD_BLOCK_BYTES (128u * 1024u)
#endif

static void QD_NAME(const QD_ARGS *a, int o0, int o1) {
    const int span = a->dilation * (a->k - 1), t_out = a->t_in - span;
    if (t_out <= 0) return;
    /* time blocks whose packed input stays within QD_BLOCK_BYTES while every
     * tile of output channels passes over it */
    const int tw = QD_TV * VL, tb = ops_conv_time_block(QD_STEP_FLOATS(a), span + 1, QD_BLOCK_BYTES, tw, 4 * tw);
    for (int tb0 = 0; tb0 < t_out; tb0 += tb) {
        const int tb1 = t_out - tb0 < tb ? t_out : tb0 + tb;
        for (int o = o0; o < o1;) {
            const int CO = o1 - o < QD_CO ? o1 - o : QD_CO;
            for (int t = tb0; t < tb1; t += tw) {
                const int rem = tb1 - t < tw ? tb1 - t : tw;
                const int TV = (rem + VL - 1) / VL;
                const conv_mask m = lane_mask(rem - (TV - 1) * VL);
                switch (CO) {
                case 1: QD_TILES(1) break;
                case 2: QD_TILES(2) break;
                case 3: QD_TILES(3) break;
#if QD_CO > 4
                case 4: QD_TILES(4) break;
                case 5: QD_TILES(5) break;
#endif
                default: QD_TILES(QD_CO) break;
                }
            }
            o += CO;
        }
    }
}

#undef QD_NAME
#undef QD_ARGS
#undef QD_STEP_FLOATS
#undef QD_CO
#undef QD_TV
#undef QD_TILES
