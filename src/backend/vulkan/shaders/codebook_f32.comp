/* The split-RVQ lookup of the codec decoder (dequantize in
 * src/model/codec_stream.c): for frame t with codes c[t][0..Q),
 *   first[t][v] = cb[0][c0][v],
 *   rest[t][v]  = cb[1][c1][v] + cb[2][c2][v] + ... + cb[Q-1][c_{Q-1}][v]
 * summed in that order (the CPU's order, so the bits are the CPU's).
 * Codes are validated by the host before upload.
 * Dataflow: codes, folded codebooks -> first, rest (then the two output
 * projections run as matmul_f32).
 *
 * Bindings (vk_kernels.h vk_pc_codebook):
 *   0 cb    float [Q][size][V]
 *   1 codes int   [n][Q] at codes_off
 *   2 out   float: first [n][V] at first_off, rest [n][V] at rest_off
 * Workgroup: 64 threads along v for one frame (dispatch (ceil(V / 64), n, 1)). */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BC { float cb[]; };
layout(std430, set = 0, binding = 1) readonly buffer BI { int codes[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BO { float o[]; };

layout(push_constant) uniform PC {
    uint V, Q, size, n;
    uint codes_off, first_off, rest_off;
} pc;

void main() {
    const uint v = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (v >= pc.V || t >= pc.n) return;
    const uint co = pc.codes_off + t * pc.Q, tab = pc.size * pc.V;
    o[pc.first_off + t * pc.V + v] = cb[uint(codes[co]) * pc.V + v];
    float r = cb[tab + uint(codes[co + 1u]) * pc.V + v];
    for (uint q = 2u; q < pc.Q; q++) r += cb[q * tab + uint(codes[co + q]) * pc.V + v];
    o[pc.rest_off + t * pc.V + v] = r;
}
