/* The matmul driver (main) shared by matmul_{f32,bf16,q8,q4m}.comp, after
 * mm_head.glsl and a weight format file:
 *   Y[i][r] (+)= sum_c X[i][c] W[r][c] (+ bias[r]), i < n, r < rows.
 * Classic shared-memory tiling (the CUDA SGEMM / ggml-vulkan mul_mm shape):
 * a workgroup of MM_WG = 64 threads computes a tile of VK_MATMUL_TM weight
 * rows x VK_MATMUL_TN rows of X, 4 x 4 outputs per thread in registers
 * (rows tr + 8 a, x rows tc + 8 b: strided so that neighbouring threads read
 * neighbouring shared words). K advances in steps of MM_BK = 32 columns (one
 * quantisation block): the 64 threads stage the weight tile, dequantised to
 * f32 (4 consecutive threads read one row's 32 columns: a 32-byte sector for
 * q8, 16 B for q4m), and the X tile (consecutive threads read consecutive
 * columns) into shared memory, each padded by one word per row so that the
 * transposing stores hit distinct banks; then 32 rank-1 updates of the 4 x 4
 * tile (8 shared loads per 16 FMAs; that loop's unrolling is left to the
 * driver: forcing it doubled lavapipe's compile time). Shared memory: 2 x 32 x 33 floats =
 * 8.25 KiB. Ragged rows, n and cols are zero-filled in the tiles.
 * Dispatch (ceil(rows / VK_MATMUL_TM), ceil(n / VK_MATMUL_TN), 1). */

#if VK_MATMUL_TM != 32 || VK_MATMUL_TN != 32
#error "mm_matmul.glsl: the thread mapping assumes 32 x 32 tiles"
#endif
#define MM_WG 64u
#define MM_BK 32u

layout(local_size_x = MM_WG, local_size_y = 1, local_size_z = 1) in;

shared float ws[MM_BK][VK_MATMUL_TM + 1]; /* [k][weight row] */
shared float xs[MM_BK][VK_MATMUL_TN + 1]; /* [k][x row] */

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint row0 = gl_WorkGroupID.x * VK_MATMUL_TM, i0 = gl_WorkGroupID.y * VK_MATMUL_TN;
    const uint tr = tid % 8u, tc = tid / 8u;
    float acc[4][4];
    [[unroll]] for (uint a = 0u; a < 4u; a++)
        [[unroll]] for (uint b = 0u; b < 4u; b++) acc[a][b] = 0.0;

    const uint nsteps = (pc.cols + MM_BK - 1u) / MM_BK;
    for (uint s = 0u; s < nsteps; s++) {
        const uint k0 = s * MM_BK;
        /* weight tile: TM rows x 4 chunks of 8 columns */
        [[unroll]] for (uint h = 0u; h < VK_MATMUL_TM * 4u / MM_WG; h++) {
            const uint q = tid + h * MM_WG, m = q / 4u, j = 4u * s + q % 4u;
            vec4 wa = vec4(0.0), wb = vec4(0.0);
            if (row0 + m < pc.rows) mm_load(row0 + m, j, wa, wb);
            const uint ka = mm_ca(j) - k0, kb = ka + MM_CB_OFF;
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                ws[ka + e][m] = wa[e];
                ws[kb + e][m] = wb[e];
            }
        }
        /* X tile: TN rows x 32 columns */
        [[unroll]] for (uint h = 0u; h < VK_MATMUL_TN * MM_BK / MM_WG; h++) {
            const uint q = tid + h * MM_WG, k = q % MM_BK, ii = q / MM_BK, c = k0 + k, i = i0 + ii;
            xs[k][ii] = i < pc.n && c < pc.cols ? X[pc.x_off + i * pc.x_stride + c] : 0.0;
        }
        barrier();
        for (uint k = 0u; k < MM_BK; k++) {
            float w[4], x[4];
            [[unroll]] for (uint a = 0u; a < 4u; a++) w[a] = ws[k][tr + 8u * a];
            [[unroll]] for (uint b = 0u; b < 4u; b++) x[b] = xs[k][tc + 8u * b];
            [[unroll]] for (uint a = 0u; a < 4u; a++)
                [[unroll]] for (uint b = 0u; b < 4u; b++) acc[a][b] = fma(w[a], x[b], acc[a][b]);
        }
        barrier();
    }

    [[unroll]] for (uint a = 0u; a < 4u; a++) {
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            const uint r = row0 + tr + 8u * a, i = i0 + tc + 8u * b;
            if (r < pc.rows && i < pc.n) mm_store(i, r, acc[a][b]);
        }
    }
}
