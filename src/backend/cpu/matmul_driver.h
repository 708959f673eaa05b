/* The row drivers of the x86 matmul kernels, compiled once per ISA: a row
 * range of W -> L2-sized row blocks -> register tiles of R in {1, 4} weight
 * rows x N rows of X (the leaf tile) -> Y[i][r] = out + bias.
 * Included at the end of the leaf kernels by matmul_avx2.c and
 * matmul_avx512.c, which define first:
 *   MM_ISA      the kernels' name suffix (avx2, avx512)
 *   MM_F_ROWS   rows of X per float tile (2 or 4)
 *   MM_OUT_N    the second size of every tile's out[4][MM_OUT_N] (>= MM_F_ROWS)
 *   AI, DT32 (with DT16 and DTBF: the float formats), FQ8, FQ4, FQ4M (the int
 *   formats)
 *   tile_f(dt, R, N, w, wst, x, xst, cols, out)   float weights
 *   tile_q(fmt, R, N, W, r, prep, i0, out)         int8/int4 weights, N <= 2
 * It defines mm_f32_<isa>, mm_f16_<isa>, mm_bf16_<isa>, mm_q8_<isa>,
 * mm_q4_<isa>, mm_q4m_<isa>: the ops_kernels.mm entries (ops.h) for the ISA
 * file's table filler; mm_float, mm_q, row_block, store_tile and the tile
 * switches MM_TILES_2, MM_TILES_4 serve its other drivers too.
 *
 * Each tile is a call with constant R and N, so the compiler builds one
 * fully unrolled copy per shape; per output the tiles keep the leaf's
 * sequence of operations, so the tiling never changes a bit. */
#ifndef MM_ISA
#error "matmul_driver.h is included by an ISA's matmul file after its leaf tiles"
#endif

#define MM_CAT2(a, b) a##_##b
#define MM_CAT(a, b) MM_CAT2(a, b)
#define MM_KERNEL(op) MM_CAT(op, MM_ISA)

/* Rows per L2-resident block when X has more rows than one tile takes. */
static int row_block(size_t row_bytes) {
    size_t rb = (256u * 1024u) / (row_bytes ? row_bytes : 1);
    if (rb < 4) rb = 4;
    if (rb > 4096) rb = 4096;
    return (int)(rb & ~(size_t)3);
}

AI void store_tile(float *Y, int rows, int r, int i0, int R, int N, const float *bias, float out[4][MM_OUT_N]) {
    for (int rr = 0; rr < R; rr++) {
        const float b = bias ? bias[r + rr] : 0.0f;
        for (int i = 0; i < N; i++) Y[(size_t)(i0 + i) * rows + r + rr] = out[rr][i] + b;
    }
}

/* The tile shapes as constants: CALL(R, N) for R = b1 - r >= 4 ? 4 : 1 and
 * the N left of at most 2 (an if chain) or 4 (a switch) rows of X. */
#define MM_TILES_2(CALL)                                                                                               \
    if (R == 4 && N == 2) CALL(4, 2);                                                                                  \
    else if (R == 4) CALL(4, 1);                                                                                       \
    else if (N == 2) CALL(1, 2);                                                                                       \
    else CALL(1, 1);
#define MM_TILES_4(CALL)                                                                                               \
    switch (R * 8 + N) {                                                                                               \
    case 1 * 8 + 1: CALL(1, 1); break;                                                                                 \
    case 1 * 8 + 2: CALL(1, 2); break;                                                                                 \
    case 1 * 8 + 3: CALL(1, 3); break;                                                                                 \
    case 1 * 8 + 4: CALL(1, 4); break;                                                                                 \
    case 4 * 8 + 1: CALL(4, 1); break;                                                                                 \
    case 4 * 8 + 2: CALL(4, 2); break;                                                                                 \
    case 4 * 8 + 3: CALL(4, 3); break;                                                                                 \
    default: CALL(4, 4); break;                                                                                        \
    }
#if MM_F_ROWS == 4
#define MM_TILES_F MM_TILES_4
#else
#define MM_TILES_F MM_TILES_2
#endif

/* Rows [r0, r1) of Y = X W^T + bias, float weights (dt = DT32, DT16, DTBF):
 * with n rows of X at most one tile's, the tiles sweep the whole range once;
 * with more, a block of weight rows that fits in L2 meets every tile of X
 * rows before the next block. */
AI void mm_float(int dt, const qt_mat *W, const float *X, int n, const float *bias, float *Y, int r0, int r1) {
    const int cols = W->cols, rows = W->rows;
    const size_t wst = (size_t)cols * (dt == DT32 ? 4 : 2);
    const uint8_t *base = W->data;
    const int rb = n <= MM_F_ROWS ? r1 - r0 : row_block(wst);
    for (int b0 = r0; b0 < r1; b0 += rb) {
        const int b1 = b0 + rb < r1 ? b0 + rb : r1;
        for (int i0 = 0; i0 < n; i0 += MM_F_ROWS) {
            const int N = n - i0 < MM_F_ROWS ? n - i0 : MM_F_ROWS;
            const float *x = X + (size_t)i0 * cols;
            for (int r = b0; r < b1;) {
                const int R = b1 - r >= 4 ? 4 : 1;
                const uint8_t *w = base + (size_t)r * wst;
                float out[4][MM_OUT_N];
#define MM_CALL_F(RR, NN) tile_f(dt, RR, NN, w, wst, x, (size_t)cols, cols, out)
                MM_TILES_F(MM_CALL_F)
#undef MM_CALL_F
                store_tile(Y, rows, r, i0, R, N, bias, out);
                r += R;
            }
        }
    }
}

/* The same for int8/int4 weights (fmt = FQ8, FQ4, FQ4M), 2 rows of X a tile. */
AI void mm_q(int fmt, const qt_mat *W, const void *prep, int n, const float *bias, float *Y, int r0, int r1) {
    const int rows = W->rows;
    const int rb = n <= 2 ? r1 - r0 : row_block(qmat_row_bytes(W));
    for (int b0 = r0; b0 < r1; b0 += rb) {
        const int b1 = b0 + rb < r1 ? b0 + rb : r1;
        for (int i0 = 0; i0 < n; i0 += 2) {
            const int N = n - i0 < 2 ? n - i0 : 2;
            for (int r = b0; r < b1;) {
                const int R = b1 - r >= 4 ? 4 : 1;
                float out[4][MM_OUT_N];
#define MM_CALL_Q(RR, NN) tile_q(fmt, RR, NN, W, r, prep, i0, out)
                MM_TILES_2(MM_CALL_Q)
#undef MM_CALL_Q
                store_tile(Y, rows, r, i0, R, N, bias, out);
                r += R;
            }
        }
    }
}

/* The table entries (ops_kernels.mm): X for the float formats, the
 * preparation of X for the int ones. */
static void MM_KERNEL(mm_f32)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                              int r0, int r1) {
    (void)prep;
    mm_float(DT32, W, X, n, bias, Y, r0, r1);
}
static void MM_KERNEL(mm_f16)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                              int r0, int r1) {
    (void)prep;
    mm_float(DT16, W, X, n, bias, Y, r0, r1);
}
static void MM_KERNEL(mm_bf16)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                               int r0, int r1) {
    (void)prep;
    mm_float(DTBF, W, X, n, bias, Y, r0, r1);
}
static void MM_KERNEL(mm_q8)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                             int r0, int r1) {
    (void)X;
    mm_q(FQ8, W, prep, n, bias, Y, r0, r1);
}
static void MM_KERNEL(mm_q4)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                             int r0, int r1) {
    (void)X;
    mm_q(FQ4, W, prep, n, bias, Y, r0, r1);
}
static void MM_KERNEL(mm_q4m)(const qt_mat *W, const float *X, const void *prep, int n, const float *bias, float *Y,
                              int r0, int r1) {
    (void)X;
    mm_q(FQ4M, W, prep, n, bias, Y, r0, r1);
}
