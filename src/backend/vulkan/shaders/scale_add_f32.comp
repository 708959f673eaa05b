/* Strided scaled add: y[r][c] = a[r][c] + g[c] b[r][c] for r < rows,
 * c < cols (g[c] = 1 without VK_SA_SCALE), each operand at its own offset
 * and row and column strides. The codec's residual adds: the transformer's
 * layer scales (h += scale * o), the ConvNeXt gamma (out[c][t] = res[c][t]
 * + gamma[c] mlp[t][c], a transposing read), the residual units (y += A)
 * and the two quantizer projections.
 * Dataflow: a, b, g -> y (elementwise; y may be a at the same places).
 *
 * Bindings (vk_kernels.h vk_pc_scale_add):
 *   0 a float, element (r, c) at a_off + r a_rs + c a_cs
 *   1 b float, element (r, c) at b_off + r b_rs + c b_cs
 *   2 g float [cols] at g_off
 *   3 y float, element (r, c) at y_off + r y_rs + c y_cs
 * Workgroup: 64 threads along c for one r (dispatch (ceil(cols / 64), rows, 1)). */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BB { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer BG { float g[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BY { float y[]; };

layout(push_constant) uniform PC {
    uint rows, cols, a_off, a_rs;
    uint a_cs, b_off, b_rs, b_cs;
    uint y_off, y_rs, y_cs, g_off;
    uint flags;
} pc;

void main() {
    const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
    if (c >= pc.cols || r >= pc.rows) return;
    const float bv = b[pc.b_off + r * pc.b_rs + c * pc.b_cs];
    const float s = (pc.flags & 1u) != 0u ? g[pc.g_off + c] * bv : bv;
    y[pc.y_off + r * pc.y_rs + c * pc.y_cs] = a[pc.a_off + r * pc.a_rs + c * pc.a_cs] + s;
}
