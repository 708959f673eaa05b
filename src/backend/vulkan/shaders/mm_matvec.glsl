/* The matvec driver (main) shared by matvec_{f32,bf16,q8,q4m}.comp, after
 * mm_head.glsl and a weight format file:
 *   Y[i][r] (+)= sum_c X[i][c] W[r][c] (+ bias[r]), i < n, r < rows.
 * Workgroup: MV_WG = 128 threads computing VK_MATVEC_ROWS consecutive
 * weight rows (the shape of llama.cpp's ggml-vulkan mul_mat_vec): every
 * thread strides over the 8-column chunks of the rows, loads the chunk of
 * each of the rows (one or two wide loads: 16 B for f32/bf16, 8 B for q8,
 * 4 B for q4m, consecutive threads at consecutive addresses) and the same
 * columns of up to VK_MATVEC_MAX_N rows of X (shared by the rows; as vec4
 * when X rows are 16-byte aligned: x_off, x_stride, cols multiples of 4),
 * and keeps VK_MATVEC_ROWS x VK_MATVEC_MAX_N partial sums in registers;
 * subgroupAdd then sums each across a subgroup and shared memory across the
 * subgroups (gl_NumSubgroups: any subgroup size of 4 or more). 128 threads
 * are 4 warps on NVIDIA, 2 (wave64) or 4 (wave32) waves on AMD, and one
 * chunk pass covers 1024 columns; several rows per workgroup let one X load
 * serve them all. The chunk that reaches past cols has its weights there
 * zeroed and its X reads clamped into the row. n > VK_MATVEC_MAX_N runs in
 * passes of VK_MATVEC_MAX_N rows of X.
 * Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1). */

#define MV_WG 128u
#define MV_MAX_SG (MV_WG / 4u)
#define MV_OUT (VK_MATVEC_ROWS * VK_MATVEC_MAX_N)

layout(local_size_x = MV_WG, local_size_y = 1, local_size_z = 1) in;

shared float red[MV_MAX_SG][MV_OUT]; /* per subgroup: [row][x row] sums */

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint row0 = gl_WorkGroupID.x * VK_MATVEC_ROWS;
    const uint nch = mm_nchunks();
    /* X rows 16-byte aligned and cols a multiple of 4: X read as vec4 (each
     * group of 4 columns lies wholly inside or wholly past a row) */
    const bool xvec = ((pc.x_off | pc.x_stride | pc.cols) & 3u) == 0u;
    const uint ca_last = pc.cols >= MM_CB_OFF + 4u ? pc.cols - MM_CB_OFF - 4u : 0u;
    for (uint i0 = 0u; i0 < pc.n; i0 += VK_MATVEC_MAX_N) {
        const uint nn = min(uint(VK_MATVEC_MAX_N), pc.n - i0);
        float acc[VK_MATVEC_ROWS][VK_MATVEC_MAX_N];
        [[unroll]] for (uint rr = 0u; rr < VK_MATVEC_ROWS; rr++)
            [[unroll]] for (uint i = 0u; i < VK_MATVEC_MAX_N; i++) acc[rr][i] = 0.0;

        for (uint j = tid; j < nch; j += MV_WG) {
            vec4 wa[VK_MATVEC_ROWS], wb[VK_MATVEC_ROWS];
            [[unroll]] for (uint rr = 0u; rr < VK_MATVEC_ROWS; rr++) {
                wa[rr] = vec4(0.0);
                wb[rr] = vec4(0.0);
                if (row0 + rr < pc.rows) mm_load(row0 + rr, j, wa[rr], wb[rr]);
            }
            const uint ca = mm_ca(j), cb = ca + MM_CB_OFF;
            uvec4 ia = ca + uvec4(0u, 1u, 2u, 3u), ib = cb + uvec4(0u, 1u, 2u, 3u);
            if (ca > ca_last || pc.cols < MM_CB_OFF + 4u) {
                /* the chunk reaches past cols: zero its weights there and
                 * keep the X reads inside the row */
                const vec4 ma = vec4(lessThan(ia, uvec4(pc.cols))), mb = vec4(lessThan(ib, uvec4(pc.cols)));
                [[unroll]] for (uint rr = 0u; rr < VK_MATVEC_ROWS; rr++) {
                    wa[rr] *= ma;
                    wb[rr] *= mb;
                }
                ia = min(ia, uvec4(pc.cols - 1u));
                ib = min(ib, uvec4(pc.cols - 1u));
            }
            [[unroll]] for (uint i = 0u; i < VK_MATVEC_MAX_N; i++) {
                if (i < nn) {
                    const uint xo = pc.x_off + (i0 + i) * pc.x_stride;
                    vec4 xa, xb;
                    if (xvec) {
                        xa = X4[(xo + min(ca, pc.cols - 4u)) / 4u];
                        xb = X4[(xo + min(cb, pc.cols - 4u)) / 4u];
                    } else {
                        xa = vec4(X[xo + ia.x], X[xo + ia.y], X[xo + ia.z], X[xo + ia.w]);
                        xb = vec4(X[xo + ib.x], X[xo + ib.y], X[xo + ib.z], X[xo + ib.w]);
                    }
                    [[unroll]] for (uint rr = 0u; rr < VK_MATVEC_ROWS; rr++)
                        acc[rr][i] += dot(wa[rr], xa) + dot(wb[rr], xb);
                }
            }
        }

        [[unroll]] for (uint rr = 0u; rr < VK_MATVEC_ROWS; rr++) {
            [[unroll]] for (uint i = 0u; i < VK_MATVEC_MAX_N; i++) {
                if (i < nn) {
                    const float s = subgroupAdd(acc[rr][i]);
                    if (subgroupElect() && gl_SubgroupID < MV_MAX_SG) red[gl_SubgroupID][rr * VK_MATVEC_MAX_N + i] = s;
                }
            }
        }
        barrier();
        if (tid < MV_OUT) {
            const uint rr = tid / VK_MATVEC_MAX_N, i = tid % VK_MATVEC_MAX_N, r = row0 + rr;
            if (i < nn && r < pc.rows) {
                const uint nsg = min(gl_NumSubgroups, MV_MAX_SG);
                float v = 0.0;
                for (uint s = 0u; s < nsg; s++) v += red[s][tid];
                mm_store(i0 + i, r, v);
            }
        }
        barrier();
    }
}
