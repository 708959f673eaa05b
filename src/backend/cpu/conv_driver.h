/* The transposed-conv driver of the SIMD conv kernels, compiled once per ISA:
 * output channels in tiles of up to 4 -> per output phase p, the edge
 * outputs by conv_tr_edges_fma (conv.c) and the interior q in steps of
 * TVMAX vectors of VL -> tr_tile (the leaf) into tmp -> y[o][q stride + p].
 * Included after the leaf kernels by conv_avx2.c, conv_avx512.c and
 * conv_neon.c, which define first:
 *   CONV_ISA        the kernels' name suffix (avx2, avx512, neon)
 *   VL, TVMAX       floats per vector, vectors of time per tile
 *   conv_mask, lane_mask(n)  the type and value of the mask of a vector's
 *                   first n lanes (1 <= n <= VL; NEON: n itself)
 *   CONV_TR_TILES(CO)  tr_tile(CO, TV, a, o, p, M, q, m, tmp) for the
 *                   tile's vector count TV (1..TVMAX), CO constant
 * It defines conv_transpose1d_<isa>, the ops_kernels.conv_transpose1d entry
 * (conv.h has the contract). */
#ifndef CONV_ISA
#error "conv_driver.h is included by an ISA's conv file after its leaf tiles"
#endif

static void CONV_CAT(conv_transpose1d, CONV_ISA)(const ops_conv_args *a, int o0, int o1) {
    const int s = a->stride, cout_g = a->cout / a->groups;
    const size_t ys = (size_t)a->y_stride;
    for (int o = o0; o < o1;) {
        const int g = o / cout_g, gend = (g + 1) * cout_g < o1 ? (g + 1) * cout_g : o1;
        const int CO = gend - o < 4 ? gend - o : 4;
        for (int p = 0; p < s; p++) {
            const ops_tr_phase ph = ops_tr_phase_of(a, p);
            const int M = ph.M, ia = ph.ia, ib = ph.ib;
            conv_tr_edges_fma(a, o, CO, p, &ph);
            for (int q = ia; q < ib; q += TVMAX * VL) {
                const int rem = ib - q < TVMAX * VL ? ib - q : TVMAX * VL;
                const int TV = (rem + VL - 1) / VL;
                const conv_mask m = lane_mask(rem - (TV - 1) * VL);
                _Alignas(4 * VL) float tmp[4][TVMAX * VL];
                switch (CO) {
                case 1: CONV_TR_TILES(1) break;
                case 2: CONV_TR_TILES(2) break;
                case 3: CONV_TR_TILES(3) break;
                default: CONV_TR_TILES(4) break;
                }
                for (int c = 0; c < CO; c++) {
                    float *yo = a->y + (size_t)(o + c) * ys - a->t0 + p;
                    if (s == 1) memcpy(yo + q, tmp[c], sizeof(float) * rem);
                    else
                        for (int u = 0; u < rem; u++) yo[(size_t)(q + u) * s] = tmp[c][u];
                }
            }
        }
        o += CO;
    }
}
