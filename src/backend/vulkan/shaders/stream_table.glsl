/* The stream table of a batched frame (lm_vulkan.c, batches): row j names
 * the j-th stream of the batch by the device addresses of its buffers and
 * carries its per-request parameters, so one recording per batch size
 * serves any set of streams: the host rewrites the table before each
 * submission, the recording never changes. Mirrors vk_kernels.h
 * vk_stream_entry (32 words). Included by the *_tab shaders (compiled with
 * VK_TAB defined) after their #extension lines, which must enable
 * GL_EXT_buffer_reference and GL_EXT_buffer_reference_uvec2; the table is
 * at binding VK_TAB_BINDING. */
#ifndef QTTS_VK_STREAM_TABLE_GLSL
#define QTTS_VK_STREAM_TABLE_GLSL

#define VK_TAB_BINDING 9

layout(buffer_reference, std430, buffer_reference_align = 4) buffer VkF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer VkU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer VkV4 { vec4 v[]; };

struct vk_stream {
    uvec2 kc, vc;      /* talker KV caches, layer l at l * layer_floats */
    uvec2 rope;        /* [cap][hd] RoPE rows */
    uvec2 st;          /* state words (common.glsl VK_ST_*) */
    uvec2 seen;        /* [V] repetition-penalty flags */
    uvec2 teach;       /* [n_teacher][G] teacher codes */
    uvec2 queue;       /* [nq + 1][H] text queue, then tts_pad */
    uvec2 ring;        /* int [ring_frames][G] code ring */
    uvec2 y;           /* [H] post-norm hidden of the newest position */
    uint layer_floats; /* cap * kvd */
    uint nq;
    uint t_do_sample, t_top_k;
    float t_temperature, t_top_p, t_penalty;
    uint p_do_sample, p_top_k;
    float p_temperature, p_top_p;
    uint pad0, pad1, pad2;
};

layout(std430, set = 0, binding = VK_TAB_BINDING) readonly buffer BTAB { vk_stream tab[]; };

#endif
