/* The matvec driver (main) shared by matvec_{f32,bf16,q8,q4m}.comp, after
 * mm_head.glsl and a weight format file:
 *   Y[i][r] (+)= sum_c X[i][c] W[r][c] (+ bias[r]), i < n, r < rows.
 * Workgroup: MV_WG = 64 threads computing VK_MATVEC_ROWS = 8 consecutive
 * weight rows, one subgroup per row at a time (the shape of llama.cpp's
 * ggml-vulkan mul_mat_vec: a workgroup of one or a few subgroups, several
 * rows each): subgroup s takes rows s, s + gl_NumSubgroups, ... of the 8, its
 * lanes stride over the 8-column chunks of the row (one or two wide loads per
 * chunk: 16 B for f32/bf16, 8 B for q8, 4 B for q4m, consecutive lanes at
 * consecutive addresses) with the same columns of X, and one subgroupAdd
 * gives the sum, so there is no shared memory and no barrier. 64 threads are
 * 2 warps on NVIDIA and Apple (4 rows each), one wave64 or 2 wave32 on AMD,
 * 2 to 8 subgroups on Intel, 8 subgroups of 8 (one row each) on lavapipe.
 * The X rows are taken one at a time in a loop (any n), rereading the row's
 * weights from cache for n > 1; n = 1 (decode) is the case that matters.
 * Why no unrolled per-row or per-X-row accumulator arrays and no if/else
 * between load paths: lavapipe (llvmpipe) runs both sides of every branch
 * under a lane mask, only loops are real branches, so guarded unrolled code
 * costs as if every guard held (measured: 8 X rows x 4 weight rows
 * unrolled made a dispatch 30-80 times slower). Hence two loops per row: the
 * chunks wholly inside the row with unguarded wide loads (mm_load_fast, X as
 * vec4; when X rows are 16-byte aligned: x_off, x_stride, cols multiples of
 * 4), then the rest with guarded loads (mm_load), weights past cols zeroed
 * and X reads clamped into the row; a loop that has no chunks costs nothing.
 * Dispatch (ceil(rows / VK_MATVEC_ROWS), 1, 1). */

#define MV_WG 64u

layout(local_size_x = MV_WG, local_size_y = 1, local_size_z = 1) in;

void main() {
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint row0 = gl_WorkGroupID.x * VK_MATVEC_ROWS;
    const uint rend = min(uint(VK_MATVEC_ROWS), pc.rows - row0);
    const uint nch = mm_nchunks();
    /* X rows 16-byte aligned and cols a multiple of 4: X read as vec4 */
    const bool xvec = ((pc.x_off | pc.x_stride | pc.cols) & 3u) == 0u;
    const uint nfast = xvec ? mm_nfast() : 0u;
    for (uint rl = gl_SubgroupID; rl < rend; rl += gl_NumSubgroups) {
        const uint r = row0 + rl;
        for (uint i = 0u; i < pc.n; i++) {
            const uint xo = pc.x_off + i * pc.x_stride;
            float acc = 0.0;
            for (uint j = lane; j < nfast; j += sgs) {
                vec4 wa, wb;
                mm_load_fast(r, j, wa, wb);
                const uint ca = mm_ca(j);
                acc += dot(wa, X4[(xo + ca) / 4u]) + dot(wb, X4[(xo + ca + MM_CB_OFF) / 4u]);
            }
            for (uint j = nfast + lane; j < nch; j += sgs) {
                vec4 wa, wb;
                mm_load(r, j, wa, wb);
                const uint ca = mm_ca(j), cb = ca + MM_CB_OFF;
                const uvec4 ia = ca + uvec4(0u, 1u, 2u, 3u), ib = cb + uvec4(0u, 1u, 2u, 3u);
                wa *= vec4(lessThan(ia, uvec4(pc.cols)));
                wb *= vec4(lessThan(ib, uvec4(pc.cols)));
                const uvec4 ja = xo + min(ia, uvec4(pc.cols - 1u)), jb = xo + min(ib, uvec4(pc.cols - 1u));
                acc += dot(wa, vec4(X[ja.x], X[ja.y], X[ja.z], X[ja.w])) +
                       dot(wb, vec4(X[jb.x], X[jb.y], X[jb.z], X[jb.w]));
            }
            const float s = subgroupAdd(acc);
            if (subgroupElect()) mm_store(i, r, s);
        }
    }
}
