/* Vulkan runtime, pipelines: the one descriptor set layout and pipeline
 * layout every shader shares (VK_MAX_BINDINGS storage buffers, a
 * VK_PUSH_BYTES push-constant block), the dummy buffer bound to unused
 * slots, and the cache of compute pipelines by (shader, specialisation).
 * Dataflow: vk_shader_find (embedded SPIR-V) -> VkShaderModule ->
 * vkCreateComputePipelines with constants 0..n_spec-1 -> vk_kernel, kept
 * until vk_dev_free.
 * Must match: the conventions in vk.h that every shader follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"
#include "backend/vulkan/vk_shaders.h"

static int cmp_name(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const vk_shader_spirv *)elem)->name);
}

const vk_shader_spirv *vk_shader_find(const char *name) {
    size_t n;
    const vk_shader_spirv *t = vk_shader_table(&n);
    return bsearch(name, t, n, sizeof *t, cmp_name);
}

qtts_status vk_pipeline_init(vk_dev *d, qtts_error *e) {
    VkDescriptorSetLayoutBinding b[VK_MAX_BINDINGS];
    for (int i = 0; i < VK_MAX_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = VK_MAX_BINDINGS,
                                           .pBindings = b};
    VkResult r = vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &d->dsl);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &d->dsl,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pc};
    r = vkCreatePipelineLayout(d->dev, &lci, NULL, &d->layout);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreatePipelineLayout");
    VkPipelineCacheCreateInfo cci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    r = vkCreatePipelineCache(d->dev, &cci, NULL, &d->pcache);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreatePipelineCache");
    qtts_status st = vk_buf_alloc_raw(d, &d->dummy, VK_DUMMY_BYTES, 0, e);
    if (st) return err_prefix(e, "the Vulkan dummy buffer: ");
    return vk_buf_fill(d, &d->dummy, 0, VK_DUMMY_BYTES, 0, e);
}

void vk_pipeline_free(vk_dev *d) {
    for (vk_kernel *k = d->kernels, *next; k; k = next) {
        next = k->next;
        if (k->pipe) vkDestroyPipeline(d->dev, k->pipe, NULL);
        free(k);
    }
    d->kernels = NULL;
    vk_buf_free_raw(d, &d->dummy);
    if (d->pcache) vkDestroyPipelineCache(d->dev, d->pcache, NULL);
    if (d->layout) vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    if (d->dsl) vkDestroyDescriptorSetLayout(d->dev, d->dsl, NULL);
    d->pcache = VK_NULL_HANDLE;
    d->layout = VK_NULL_HANDLE;
    d->dsl = VK_NULL_HANDLE;
}

static qtts_status build(vk_dev *d, vk_kernel *k, const vk_shader_spirv *s, qtts_error *e) {
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = s->n_words * sizeof(uint32_t),
                                    .pCode = s->words};
    VkShaderModule mod;
    VkResult r = vkCreateShaderModule(d->dev, &mci, NULL, &mod);
    if (r != VK_SUCCESS) {
        vk_fail(e, r, "vkCreateShaderModule");
        return err_prefix(e, "shader %s: ", k->name);
    }
    VkSpecializationMapEntry map[VK_MAX_SPEC];
    for (int i = 0; i < k->n_spec; i++)
        map[i] = (VkSpecializationMapEntry){
            .constantID = (uint32_t)i, .offset = (uint32_t)(i * sizeof(uint32_t)), .size = sizeof(uint32_t)};
    VkSpecializationInfo si = {.mapEntryCount = (uint32_t)k->n_spec,
                               .pMapEntries = map,
                               .dataSize = (size_t)k->n_spec * sizeof(uint32_t),
                               .pData = k->spec};
    VkComputePipelineCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                       .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                 .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                                 .module = mod,
                                                 .pName = "main",
                                                 .pSpecializationInfo = k->n_spec ? &si : NULL},
                                       .layout = d->layout};
    r = vkCreateComputePipelines(d->dev, d->pcache, 1, &pci, NULL, &k->pipe);
    vkDestroyShaderModule(d->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        k->pipe = VK_NULL_HANDLE;
        vk_fail(e, r, "vkCreateComputePipelines");
        return err_prefix(e, "shader %s: ", k->name);
    }
    return QTTS_OK;
}

qtts_status vk_kernel_get(vk_dev *d, const char *shader, const uint32_t *spec, int n_spec, vk_kernel **out,
                          qtts_error *e) {
    *out = NULL;
    if (!shader || strlen(shader) >= sizeof((vk_kernel *)0)->name)
        return err_set(e, QTTS_ERR_INVALID_ARG, "vk_kernel_get: no shader name or a name that is too long");
    if (n_spec < 0 || n_spec > VK_MAX_SPEC || (n_spec && !spec))
        return err_set(e, QTTS_ERR_INVALID_ARG, "vk_kernel_get(%s): %d specialisation constants (at most %d)",
                       shader, n_spec, VK_MAX_SPEC);
    qtts_status st = QTTS_OK;
    pthread_mutex_lock(&d->cache_lock);
    for (vk_kernel *k = d->kernels; k; k = k->next)
        if (k->n_spec == n_spec && !strcmp(k->name, shader) &&
            (n_spec == 0 || !memcmp(k->spec, spec, (size_t)n_spec * sizeof *spec))) {
            *out = k;
            break;
        }
    const vk_shader_spirv *s = *out ? NULL : vk_shader_find(shader);
    vk_kernel *k = NULL;
    if (!*out && !s)
        st = err_set(e, QTTS_ERR_INVALID_ARG,
                     "no Vulkan shader named \"%s\" in this build (looked for src/backend/vulkan/shaders/%s.comp)",
                     shader, shader);
    else if (!*out && !(k = calloc(1, sizeof *k)))
        st = err_set(e, QTTS_ERR_NOMEM, "out of memory creating Vulkan kernel %s", shader);
    if (k) {
        snprintf(k->name, sizeof k->name, "%s", shader);
        k->n_spec = n_spec;
        if (n_spec) memcpy(k->spec, spec, (size_t)n_spec * sizeof *spec);
        st = build(d, k, s, e);
        if (st) {
            free(k);
        } else {
            k->next = d->kernels;
            d->kernels = k;
            *out = k;
        }
    }
    pthread_mutex_unlock(&d->cache_lock);
    return st;
}
