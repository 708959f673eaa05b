/* The NEON int8 conv1d tile (conv_q8.h's contract), included by conv_neon.c
 * once per way of summing, after it defines Q8_TILE (the leaf's name),
 * Q8_SUM(acc, x, w) (acc + the 4 per-step sums of x's and w's 16 signed
 * bytes, 4 a step, exact), Q8_CO, Q8_TV, VL, the partial loads and the row
 * helpers (load_row, int_tap_row, store_row).
 * CO output channels x TV vectors of 4 steps from t; nlast: the valid steps
 * of the last vector. Per tap, the integer sums over input channels (x's
 * bytes back to signed by ^ 0x80, so no correction for the + 128), then as
 * the x86 tiles: f += sums x the steps' scales x the tap's weight scale (two
 * roundings, no FMA); y = f + bias. */
#ifndef Q8_TILE
#error "conv_q8_neon_tile.h is included by conv_neon.c after Q8_TILE and Q8_SUM"
#endif

AI void Q8_TILE(int CO, int TV, const ops_conv_q8_args *a, int o, int t, int nlast) {
    const int k = a->k, d = a->dilation, G = a->cin4 / 4;
    const size_t xs = (size_t)a->xq_stride * 4, wos = (size_t)k * a->cin4;
    const uint8x16_t flip = vdupq_n_u8(0x80);
    float32x4_t f[Q8_CO][Q8_TV];
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) f[c][v] = vdupq_n_f32(0.0f);
    for (int tap = 0; tap < k; tap++) {
        int32x4_t acc[Q8_CO][Q8_TV];
        const int8_t *wt = a->w + (size_t)o * wos + (size_t)tap * a->cin4;
        const uint8_t *xt = a->xq + (size_t)(t + tap * d) * 4;
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++)
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[c][v] = vdupq_n_s32(0);
        for (int g = 0; g < G; g++) {
            const uint8_t *xp = xt + g * xs;
            int8x16_t xv[Q8_TV];
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++)
                xv[v] = vreinterpretq_s8_u8(veorq_u8(load_u8_n(xp + 16 * v, v == TV - 1 ? nlast : VL), flip));
#pragma GCC unroll 4
            for (int c = 0; c < CO; c++) {
                int32_t w4;
                memcpy(&w4, wt + c * wos + 4 * g, 4);
                const int8x16_t wv = vreinterpretq_s8_s32(vdupq_n_s32(w4));
#pragma GCC unroll 2
                for (int v = 0; v < TV; v++) acc[c][v] = Q8_SUM(acc[c][v], xv[v], wv);
            }
        }
        float32x4_t sv[Q8_TV];
        load_row(TV, a->sx + t + tap * d, sv, nlast);
#pragma GCC unroll 4
        for (int c = 0; c < CO; c++) int_tap_row(TV, f[c], acc[c], sv, a->sw[(size_t)(o + c) * k + tap]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < CO; c++)
        store_row(TV, a->y + (size_t)(o + c) * a->y_stride + t, f[c], a->bias ? a->bias[o + c] : 0.0f, nlast);
}
