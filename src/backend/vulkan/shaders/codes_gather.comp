/* The codec decoder's chunk codes from a generating stream's code ring
 * (codes_push.comp) when ctl[2] != 0: codes[t][q] = ring[((ctl[1] + t) %
 * ring_frames) * Q + q], each clamped to [0, size) so that no code can
 * index past a codebook (the frames the host delivers are in range; the
 * host checks its copy). With ctl[2] == 0 the host wrote codes itself and
 * nothing happens.
 * Dataflow: ring, ctl -> codes (then codebook_f32).
 *
 * Bindings (vk_kernels.h vk_pc_codes_gather): 0 ring int [ring_frames][Q],
 * 1 ctl uint [4], 2 codes int [n][Q].
 * Workgroup: 64 threads over the n * Q codes (dispatch (ceil(n Q / 64), 1, 1)). */
#version 450

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BR { int ring[]; };
layout(std430, set = 0, binding = 1) readonly buffer BC { uint ctl[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BO { int codes[]; };

layout(push_constant) uniform PC {
    uint n, Q, ring_frames, size;
} pc;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (ctl[2] == 0u || i >= pc.n * pc.Q) return;
    const uint t = i / pc.Q, q = i % pc.Q;
    const int c = ring[((ctl[1] + t) % pc.ring_frames) * pc.Q + q];
    codes[i] = clamp(c, 0, int(pc.size) - 1);
}
