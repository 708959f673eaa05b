/* The SPIR-V of every compute shader in src/backend/vulkan/shaders/, which
 * the build compiles with glslc and embeds in the library: vk_shader_table
 * is defined by the generated $(BUILD)/shaders/vk_shaders.c (sorted by
 * name), vk_shader_find by vk_pipeline.c.
 * Dataflow: shaders/<name>.comp -> glslc -> <name>.inc -> vk_shader_find. */
#ifndef QTTS_BACKEND_VULKAN_VK_SHADERS_H
#define QTTS_BACKEND_VULKAN_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct vk_shader_spirv {
    const char *name;      /* the file name without .comp, e.g. "matvec_bf16" */
    const uint32_t *words; /* SPIR-V [n_words] */
    size_t n_words;
} vk_shader_spirv;

/* The shader called name; NULL when the build has none of that name. */
const vk_shader_spirv *vk_shader_find(const char *name);
/* Every shader: *n gets the count; sorted by name. */
const vk_shader_spirv *vk_shader_table(size_t *n);

#endif
