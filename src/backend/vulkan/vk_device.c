/* Vulkan runtime, device side: the instance, the physical device list and
 * its capabilities, the logical device with one compute queue, buffers and
 * their memory, and transfers through a staging buffer (see vk.h).
 * Dataflow: vkCreateInstance -> physical device caps (qtts_device_info) ->
 * vkCreateDevice (features qtts shaders use) -> vk_buf_alloc -> staged
 * copies on a one-off command buffer with a fence.
 * Must match: Vulkan 1.2 core (VkPhysicalDeviceVulkan11/12Features), with
 * VK_KHR_portability_enumeration / _subset for MoltenVK and
 * VK_KHR_shader_integer_dot_product where offered, and bufferDeviceAddress
 * (batched frames) where offered: then every buffer is made with
 * SHADER_DEVICE_ADDRESS usage and its memory with DEVICE_ADDRESS.
 * Memory: one VkDeviceMemory per buffer (no pooling), so
 * vk_dev_bytes_reserved == vk_dev_bytes_allocated; the internal staging
 * buffer (VK_STAGING_BYTES of host-visible memory, made on the first
 * device-local transfer) and the dummy buffer are not counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"

#define NO_DEVICE_MSG                                                                                          \
    "no Vulkan device found: install a Vulkan driver for your GPU (Debian: mesa-vulkan-drivers for AMD/Intel " \
    "and the CPU driver lavapipe, nvidia-vulkan-icd for NVIDIA)"

const char *vk_result_str(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult error";
    }
}

qtts_status vk_fail(qtts_error *e, VkResult r, const char *call) {
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return err_set(e, QTTS_ERR_NOMEM, "%s: out of host memory (%s)", call, vk_result_str(r));
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return err_set(e, QTTS_ERR_NOMEM,
                       "%s: out of GPU memory (%s): use smaller weights (q8/q4) or fewer streams, or a "
                       "device with more memory",
                       call, vk_result_str(r));
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
        return err_set(e, QTTS_ERR_UNSUPPORTED, "%s failed (%s): %s", call, vk_result_str(r), NO_DEVICE_MSG);
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return err_set(e, QTTS_ERR_UNSUPPORTED, "%s failed (%s): the Vulkan driver lacks what qtts needs", call,
                       vk_result_str(r));
    default:
        return err_set(e, QTTS_ERR_INTERNAL, "%s failed (%s, VkResult %d)", call, vk_result_str(r), (int)r);
    }
}

VkResult vk_queue_submit(vk_dev *d, VkCommandBuffer cb, VkFence fence) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    pthread_mutex_lock(&d->queue_lock);
    VkResult r = vkQueueSubmit(d->queue, 1, &si, fence);
    pthread_mutex_unlock(&d->queue_lock);
    return r;
}

/* ------------------------------------------------------------ instance */

static int has_ext(const VkExtensionProperties *x, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(x[i].extensionName, name)) return 1;
    return 0;
}

static qtts_status make_instance(VkInstance *out, qtts_error *e) {
    uint32_t loader = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&loader) != VK_SUCCESS || loader < VK_API_VERSION_1_2)
        return err_set(e, QTTS_ERR_UNSUPPORTED,
                       "the Vulkan loader is version %u.%u; qtts needs 1.2 or newer (Debian: libvulkan1)",
                       VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader));
    uint32_t n = 0;
    VkExtensionProperties *x = NULL;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) == VK_SUCCESS && n) {
        x = calloc(n, sizeof *x);
        if (!x) return err_set(e, QTTS_ERR_NOMEM, "out of memory listing Vulkan extensions");
        if (vkEnumerateInstanceExtensionProperties(NULL, &n, x) != VK_SUCCESS) n = 0;
    }
    const char *ext[1];
    uint32_t n_ext = 0;
    VkInstanceCreateFlags flags = 0;
#ifdef VK_KHR_portability_enumeration
    if (has_ext(x, n, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        ext[n_ext++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
#endif
    free(x);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "qtts",
                             .pEngineName = "qtts",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .flags = flags,
                               .pApplicationInfo = &app,
                               .enabledExtensionCount = n_ext,
                               .ppEnabledExtensionNames = n_ext ? ext : NULL};
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreateInstance");
    return QTTS_OK;
}

/* The physical devices of inst (malloc'ed into *out, count *n); none is
 * QTTS_ERR_UNSUPPORTED. */
static qtts_status list_phys(VkInstance inst, VkPhysicalDevice **out, uint32_t *n, qtts_error *e) {
    *out = NULL;
    *n = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst, n, NULL);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkEnumeratePhysicalDevices");
    if (*n == 0) return err_set(e, QTTS_ERR_UNSUPPORTED, NO_DEVICE_MSG);
    *out = calloc(*n, sizeof **out);
    if (!*out) return err_set(e, QTTS_ERR_NOMEM, "out of memory listing Vulkan devices");
    r = vkEnumeratePhysicalDevices(inst, n, *out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(*out);
        *out = NULL;
        return vk_fail(e, r, "vkEnumeratePhysicalDevices");
    }
    return QTTS_OK;
}

/* ------------------------------------------------------- capabilities */

/* What qtts needs to know of a physical device to list and open it. */
typedef struct dev_caps {
    qtts_device_info info;
    uint32_t qfam;          /* the compute queue family */
    uint32_t ts_bits;       /* its timestampValidBits */
    float ts_period;
    VkDeviceSize ssbo_align, max_range;
    uint32_t max_groups[3];
    int ext_int_dot;        /* VK_KHR_shader_integer_dot_product offered, with its feature */
    int ext_portability;    /* VK_KHR_portability_subset offered (must then be enabled) */
    int subgroup_ext_types; /* shaderSubgroupExtendedTypes */
    int bda;                /* bufferDeviceAddress (Vulkan 1.2 feature; required by Vulkan 1.3) */
} dev_caps;

static void add_why(dev_caps *c, const char *what) {
    qtts_device_info *o = &c->info;
    o->usable = 0;
    size_t l = strlen(o->why_not);
    snprintf(o->why_not + l, sizeof o->why_not - l, "%s%s", l ? "; " : "", what);
}

static qtts_status get_caps(VkPhysicalDevice p, dev_caps *c, qtts_error *e) {
    memset(c, 0, sizeof *c);
    qtts_device_info *o = &c->info;
    o->usable = 1;

    uint32_t n_ext = 0;
    VkExtensionProperties *x = NULL;
    if (vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, NULL) == VK_SUCCESS && n_ext) {
        x = calloc(n_ext, sizeof *x);
        if (!x) return err_set(e, QTTS_ERR_NOMEM, "out of memory listing Vulkan device extensions");
        if (vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, x) != VK_SUCCESS) n_ext = 0;
    }
    int ext_dot = has_ext(x, n_ext, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    c->ext_portability = has_ext(x, n_ext, "VK_KHR_portability_subset");
    free(x);

    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(p, &base);
    int v12 = base.apiVersion >= VK_API_VERSION_1_2;

    VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR dotp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              .pNext = ext_dot ? &dotp : NULL};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                                            .pNext = &sub};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = v12 ? (void *)&drv : (void *)&sub};
    vkGetPhysicalDeviceProperties2(p, &props);

    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dotf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = ext_dot ? &dotf : NULL};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = v12 ? &f11 : NULL};
    vkGetPhysicalDeviceFeatures2(p, &feats);

    snprintf(o->name, sizeof o->name, "%s", base.deviceName);
    if (v12)
        snprintf(o->driver, sizeof o->driver, "%.100s %.140s", drv.driverName, drv.driverInfo);
    else
        snprintf(o->driver, sizeof o->driver, "driver version 0x%x", base.driverVersion);
    const char *type = "other";
    switch (base.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: type = "discrete"; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: type = "integrated"; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: type = "virtual"; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: type = "cpu"; break;
    default: break;
    }
    snprintf(o->type, sizeof o->type, "%s", type);
    o->api_version = base.apiVersion;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(p, &mp);
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) o->memory_bytes += (int64_t)mp.memoryHeaps[i].size;

    o->subgroup_size = sub.subgroupSize;
    o->int8_dot = ext_dot && dotf.shaderIntegerDotProduct && dotp.integerDotProduct4x8BitPackedSignedAccelerated;
    c->ext_int_dot = ext_dot && dotf.shaderIntegerDotProduct;
    o->fp16 = v12 && f12.shaderFloat16;
    o->int8_storage = v12 && f12.storageBuffer8BitAccess;
    o->max_buffer_range = base.limits.maxStorageBufferRange;
    c->ssbo_align = base.limits.minStorageBufferOffsetAlignment;
    c->max_range = base.limits.maxStorageBufferRange;
    c->ts_period = base.limits.timestampPeriod;
    memcpy(c->max_groups, base.limits.maxComputeWorkGroupCount, sizeof c->max_groups);
    c->subgroup_ext_types = v12 && f12.shaderSubgroupExtendedTypes;
    c->bda = v12 && f12.bufferDeviceAddress;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, NULL);
    VkQueueFamilyProperties *q = calloc(nq ? nq : 1, sizeof *q);
    if (!q) return err_set(e, QTTS_ERR_NOMEM, "out of memory listing Vulkan queue families");
    vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, q);
    int fam = -1;
    /* the first compute family with timestamps, else the first compute family */
    for (uint32_t i = 0; i < nq && fam < 0; i++)
        if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && q[i].timestampValidBits) fam = (int)i;
    for (uint32_t i = 0; i < nq && fam < 0; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = (int)i;
    if (fam >= 0) {
        c->qfam = (uint32_t)fam;
        c->ts_bits = q[fam].timestampValidBits;
    }
    free(q);

    if (!v12) add_why(c, "Vulkan 1.2 is not supported by its driver");
    if (fam < 0) add_why(c, "no compute queue");
    if (v12 && !f11.storageBuffer16BitAccess) add_why(c, "no 16-bit storage buffers (storageBuffer16BitAccess)");
    if (v12 && !f12.storageBuffer8BitAccess) add_why(c, "no 8-bit storage buffers (storageBuffer8BitAccess)");
    if (v12 && !f12.shaderInt8) add_why(c, "no 8-bit integers in shaders (shaderInt8)");
    if (!feats.features.shaderInt16) add_why(c, "no 16-bit integers in shaders (shaderInt16)");
    if (!(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
        add_why(c, "no subgroup operations in compute shaders");
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sub.supportedOperations & need) != need) add_why(c, "no subgroup arithmetic");
    if (sub.subgroupSize == 0) add_why(c, "subgroup size unknown");
    return QTTS_OK;
}

qtts_status vk_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e) {
    *n = 0;
    VkInstance inst = VK_NULL_HANDLE;
    qtts_status st = make_instance(&inst, e);
    if (st) return st;
    VkPhysicalDevice *pd = NULL;
    uint32_t np = 0;
    st = list_phys(inst, &pd, &np, e);
    for (uint32_t i = 0; st == QTTS_OK && i < np; i++) {
        if ((int)i >= max) continue;
        dev_caps c;
        st = get_caps(pd[i], &c, e);
        if (st == QTTS_OK) out[i] = c.info;
    }
    if (st == QTTS_OK) *n = (int)np;
    free(pd);
    vkDestroyInstance(inst, NULL);
    return st;
}

/* ------------------------------------------------------------- device */

static qtts_status open_device(vk_dev *d, const dev_caps *c, qtts_error *e) {
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = c->qfam,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dotf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
        .shaderIntegerDotProduct = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = c->ext_int_dot ? &dotf : NULL,
                                            .storageBuffer8BitAccess = VK_TRUE,
                                            .shaderInt8 = VK_TRUE,
                                            .shaderFloat16 = c->info.fp16 ? VK_TRUE : VK_FALSE,
                                            .shaderSubgroupExtendedTypes =
                                                c->subgroup_ext_types ? VK_TRUE : VK_FALSE,
                                            .bufferDeviceAddress = c->bda ? VK_TRUE : VK_FALSE};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    feats.features.shaderInt16 = VK_TRUE;
    const char *ext[2];
    uint32_t n_ext = 0;
    if (c->ext_int_dot) ext[n_ext++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    if (c->ext_portability) ext[n_ext++] = "VK_KHR_portability_subset";
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &feats,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = n_ext,
                              .ppEnabledExtensionNames = n_ext ? ext : NULL};
    VkResult r = vkCreateDevice(d->phys, &dci, NULL, &d->dev);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreateDevice");
    vkGetDeviceQueue(d->dev, c->qfam, 0, &d->queue);

    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = c->qfam};
    r = vkCreateCommandPool(d->dev, &pci, NULL, &d->xfer_pool);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = d->xfer_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    r = vkAllocateCommandBuffers(d->dev, &ai, &d->xfer_cb);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = vkCreateFence(d->dev, &fci, NULL, &d->xfer_fence);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkCreateFence");
    return vk_pipeline_init(d, e);
}

qtts_status vk_dev_create(vk_dev **out, int index, qtts_error *e) {
    *out = NULL;
    vk_dev *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, QTTS_ERR_NOMEM, "out of memory creating the Vulkan device");
    pthread_mutex_init(&d->queue_lock, NULL);
    pthread_mutex_init(&d->xfer_lock, NULL);
    pthread_mutex_init(&d->cache_lock, NULL);
    pthread_mutex_init(&d->stat_lock, NULL);
    qtts_status st = make_instance(&d->inst, e);
    if (st) {
        vk_dev_free(d);
        return st;
    }
    VkPhysicalDevice *pd = NULL;
    uint32_t np = 0;
    st = list_phys(d->inst, &pd, &np, e);
    if (st == QTTS_OK && (index < 0 || (uint32_t)index >= np))
        st = err_set(e, QTTS_ERR_INVALID_ARG, "Vulkan device %d does not exist: %u device%s found (0..%u)", index,
                     np, np == 1 ? "" : "s", np - 1);
    dev_caps c;
    if (st == QTTS_OK) {
        d->phys = pd[index];
        st = get_caps(d->phys, &c, e);
    }
    free(pd);
    if (st == QTTS_OK && !c.info.usable)
        st = err_set(e, QTTS_ERR_UNSUPPORTED, "Vulkan device %d (%s) cannot run qtts: %s", index, c.info.name,
                     c.info.why_not);
    if (st == QTTS_OK) {
        d->info = c.info;
        d->int_dot = c.ext_int_dot;
        d->bda = c.bda;
        d->qfam = c.qfam;
        d->ssbo_align = c.ssbo_align ? c.ssbo_align : 1;
        d->max_range = c.max_range;
        memcpy(d->max_groups, c.max_groups, sizeof d->max_groups);
        d->ts_valid_bits = c.ts_bits;
        d->ts_period_ns = c.ts_bits ? c.ts_period : 0.0;
        vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem_props);
        st = open_device(d, &c, e);
    }
    if (st) {
        vk_dev_free(d);
        return st;
    }
    *out = d;
    return QTTS_OK;
}

void vk_dev_free(vk_dev *d) {
    if (!d) return;
    if (d->dev) {
        vkDeviceWaitIdle(d->dev);
        vk_pipeline_free(d);
        vk_buf_free_raw(d, &d->staging);
        if (d->xfer_fence) vkDestroyFence(d->dev, d->xfer_fence, NULL);
        if (d->xfer_pool) vkDestroyCommandPool(d->dev, d->xfer_pool, NULL);
        vkDestroyDevice(d->dev, NULL);
    }
    if (d->inst) vkDestroyInstance(d->inst, NULL);
    pthread_mutex_destroy(&d->queue_lock);
    pthread_mutex_destroy(&d->xfer_lock);
    pthread_mutex_destroy(&d->cache_lock);
    pthread_mutex_destroy(&d->stat_lock);
    free(d);
}

const qtts_device_info *vk_dev_info(const vk_dev *d) { return &d->info; }
int vk_dev_has_int_dot(const vk_dev *d) { return d->int_dot; }
int vk_dev_has_addresses(const vk_dev *d) { return d->bda; }

uint64_t vk_buf_address(const vk_dev *d, const vk_buf *b) {
    if (!d->bda || !b || !b->buf) return 0;
    VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b->buf};
    return (uint64_t)vkGetBufferDeviceAddress(d->dev, &ai);
}

int64_t vk_dev_bytes_allocated(const vk_dev *d) {
    vk_dev *m = (vk_dev *)d;
    pthread_mutex_lock(&m->stat_lock);
    int64_t v = d->bytes_allocated;
    pthread_mutex_unlock(&m->stat_lock);
    return v;
}

int64_t vk_dev_bytes_reserved(const vk_dev *d) { return vk_dev_bytes_allocated(d); }

double vk_dev_timestamp_ns(const vk_dev *d) { return d->ts_period_ns; }

/* ------------------------------------------------------------ buffers */

int vk_mem_type(const vk_dev *d, uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) {
    int best = -1;
    for (uint32_t i = 0; i < d->mem_props.memoryTypeCount; i++) {
        if (!(type_bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = d->mem_props.memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (best < 0) best = (int)i;
    }
    return best;
}

qtts_status vk_buf_alloc_raw(vk_dev *d, vk_buf *b, size_t bytes, int host_visible, qtts_error *e) {
    memset(b, 0, sizeof *b);
    if (bytes == 0) return err_set(e, QTTS_ERR_INVALID_ARG, "vk_buf_alloc: a buffer of 0 bytes");
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = bytes,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                       (d->bda ? VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : 0),
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(d->dev, &bci, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        b->buf = VK_NULL_HANDLE;
        return vk_fail(e, r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
    int mt = host_visible ? vk_mem_type(d, req.memoryTypeBits,
                                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                          : vk_mem_type(d, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (mt < 0) {
        vk_buf_free_raw(d, b);
        return err_set(e, QTTS_ERR_UNSUPPORTED, "Vulkan device %s has no %s memory type for storage buffers",
                       d->info.name, host_visible ? "host-visible coherent" : "usable");
    }
    VkMemoryAllocateFlagsInfo maf = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                     .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .pNext = d->bda ? &maf : NULL,
                                .allocationSize = req.size,
                                .memoryTypeIndex = (uint32_t)mt};
    r = vkAllocateMemory(d->dev, &mai, NULL, &b->mem);
    if (r != VK_SUCCESS) {
        b->mem = VK_NULL_HANDLE;
        vk_buf_free_raw(d, b);
        qtts_status st = vk_fail(e, r, "vkAllocateMemory");
        err_prefix(e, "allocating %zu bytes of %s memory: ", bytes, host_visible ? "host-visible" : "device");
        return st;
    }
    r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
    if (r != VK_SUCCESS) {
        vk_buf_free_raw(d, b);
        return vk_fail(e, r, "vkBindBufferMemory");
    }
    if (host_visible) {
        r = vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
        if (r != VK_SUCCESS) {
            b->map = NULL;
            vk_buf_free_raw(d, b);
            return vk_fail(e, r, "vkMapMemory");
        }
    }
    b->size = bytes;
    return QTTS_OK;
}

void vk_buf_free_raw(vk_dev *d, vk_buf *b) {
    if (!b) return;
    if (b->map) vkUnmapMemory(d->dev, b->mem);
    if (b->buf) vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) vkFreeMemory(d->dev, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

qtts_status vk_buf_alloc(vk_dev *d, vk_buf *b, size_t bytes, int host_visible, qtts_error *e) {
    qtts_status st = vk_buf_alloc_raw(d, b, bytes, host_visible, e);
    if (st) return st;
    pthread_mutex_lock(&d->stat_lock);
    d->bytes_allocated += (int64_t)bytes;
    pthread_mutex_unlock(&d->stat_lock);
    return QTTS_OK;
}

void vk_buf_free(vk_dev *d, vk_buf *b) {
    if (!b || !b->buf) {
        if (b) memset(b, 0, sizeof *b);
        return;
    }
    pthread_mutex_lock(&d->stat_lock);
    d->bytes_allocated -= (int64_t)b->size;
    pthread_mutex_unlock(&d->stat_lock);
    vk_buf_free_raw(d, b);
}

/* ---------------------------------------------------------- transfers */

/* Record into the transfer command buffer: a barrier after all earlier
 * work, then what `rec` records, then a barrier making transfer writes
 * visible to the host; submit and wait. Called under xfer_lock. */
typedef struct xfer_op {
    int kind; /* 0 copy, 1 fill */
    VkBuffer src, dst;
    VkDeviceSize src_off, dst_off, n;
    uint32_t word;
} xfer_op;

static qtts_status run_xfer(vk_dev *d, const xfer_op *op, qtts_error *e) {
    VkCommandBuffer cb = d->xfer_cb;
    VkResult r = vkResetCommandBuffer(cb, 0);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = vkBeginCommandBuffer(cb, &bi);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkBeginCommandBuffer");
    VkMemoryBarrier pre = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &pre, 0, NULL,
                         0, NULL);
    if (op->kind == 0) {
        VkBufferCopy rg = {.srcOffset = op->src_off, .dstOffset = op->dst_off, .size = op->n};
        vkCmdCopyBuffer(cb, op->src, op->dst, 1, &rg);
    } else {
        vkCmdFillBuffer(cb, op->dst, op->dst_off, op->n, op->word);
    }
    VkMemoryBarrier post = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &post, 0, NULL, 0,
                         NULL);
    r = vkEndCommandBuffer(cb);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkEndCommandBuffer");
    r = vk_queue_submit(d, cb, d->xfer_fence);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkQueueSubmit");
    r = vkWaitForFences(d->dev, 1, &d->xfer_fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkWaitForFences");
    r = vkResetFences(d->dev, 1, &d->xfer_fence);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkResetFences");
    return QTTS_OK;
}

static qtts_status check_range(const vk_buf *b, size_t off, size_t n, const char *what, qtts_error *e) {
    if (!b || !b->buf) return err_set(e, QTTS_ERR_INVALID_ARG, "%s: no buffer", what);
    if (off > b->size || n > b->size - off)
        return err_set(e, QTTS_ERR_INVALID_ARG, "%s: bytes [%zu, %zu) outside the buffer of %zu bytes", what, off,
                       off + n, (size_t)b->size);
    return QTTS_OK;
}

static qtts_status ensure_staging(vk_dev *d, qtts_error *e) {
    if (d->staging.buf) return QTTS_OK;
    qtts_status st = vk_buf_alloc_raw(d, &d->staging, VK_STAGING_BYTES, 1, e);
    if (st) return err_prefix(e, "the Vulkan staging buffer: ");
    return QTTS_OK;
}

qtts_status vk_buf_upload(vk_dev *d, vk_buf *b, size_t off, const void *src, size_t n, qtts_error *e) {
    qtts_status st = check_range(b, off, n, "vk_buf_upload", e);
    if (st || n == 0) return st;
    if (b->map) {
        memcpy((char *)b->map + off, src, n);
        return QTTS_OK;
    }
    pthread_mutex_lock(&d->xfer_lock);
    st = ensure_staging(d, e);
    for (size_t done = 0; st == QTTS_OK && done < n;) {
        size_t k = n - done < VK_STAGING_BYTES ? n - done : VK_STAGING_BYTES;
        memcpy(d->staging.map, (const char *)src + done, k);
        xfer_op op = {.kind = 0, .src = d->staging.buf, .dst = b->buf, .src_off = 0, .dst_off = off + done, .n = k};
        st = run_xfer(d, &op, e);
        done += k;
    }
    pthread_mutex_unlock(&d->xfer_lock);
    return st;
}

qtts_status vk_buf_download(vk_dev *d, const vk_buf *b, size_t off, void *dst, size_t n, qtts_error *e) {
    qtts_status st = check_range(b, off, n, "vk_buf_download", e);
    if (st || n == 0) return st;
    if (b->map) {
        memcpy(dst, (const char *)b->map + off, n);
        return QTTS_OK;
    }
    pthread_mutex_lock(&d->xfer_lock);
    st = ensure_staging(d, e);
    for (size_t done = 0; st == QTTS_OK && done < n;) {
        size_t k = n - done < VK_STAGING_BYTES ? n - done : VK_STAGING_BYTES;
        xfer_op op = {.kind = 0, .src = b->buf, .dst = d->staging.buf, .src_off = off + done, .dst_off = 0, .n = k};
        st = run_xfer(d, &op, e);
        if (st == QTTS_OK) memcpy((char *)dst + done, d->staging.map, k);
        done += k;
    }
    pthread_mutex_unlock(&d->xfer_lock);
    return st;
}

qtts_status vk_buf_fill(vk_dev *d, vk_buf *b, size_t off, size_t n, uint32_t word, qtts_error *e) {
    qtts_status st = check_range(b, off, n, "vk_buf_fill", e);
    if (st || n == 0) return st;
    if (off % 4 || n % 4)
        return err_set(e, QTTS_ERR_INVALID_ARG, "vk_buf_fill: offset %zu and size %zu must be multiples of 4", off,
                       n);
    if (b->map) {
        uint32_t *p = (uint32_t *)((char *)b->map + off);
        for (size_t i = 0; i < n / 4; i++) p[i] = word;
        return QTTS_OK;
    }
    pthread_mutex_lock(&d->xfer_lock);
    xfer_op op = {.kind = 1, .dst = b->buf, .dst_off = off, .n = n, .word = word};
    st = run_xfer(d, &op, e);
    pthread_mutex_unlock(&d->xfer_lock);
    return st;
}
