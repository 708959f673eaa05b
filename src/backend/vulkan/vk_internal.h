/* Private structures of the Vulkan runtime, shared by vk_device.c,
 * vk_pipeline.c and vk_cmd.c (the public contract is vk.h).
 * Dataflow: vk_dev owns the instance, device, queue, staging buffer, the
 * common pipeline layout and the kernel cache; vk_cmd owns its command pool,
 * descriptor pools and timestamp query pool.
 * Locking: queue_lock serialises vkQueueSubmit on the one queue (contexts on
 * different threads share it); xfer_lock the staging buffer and the transfer
 * command buffer; cache_lock the kernel list; stat_lock the byte counters. */
#ifndef QTTS_BACKEND_VULKAN_VK_INTERNAL_H
#define QTTS_BACKEND_VULKAN_VK_INTERNAL_H

#include <pthread.h>

#include "backend/vulkan/vk.h"

/* staging buffer for device-local uploads and downloads: transfers go in
 * chunks of at most this many bytes */
#define VK_STAGING_BYTES ((size_t)64 << 20)
/* size of the dummy buffer bound to unused binding slots */
#define VK_DUMMY_BYTES 256
/* descriptor sets per descriptor pool of a vk_cmd (pools are added as needed) */
#define VK_SETS_PER_POOL 256

struct vk_kernel {
    struct vk_kernel *next;
    char name[64];               /* shader file name without .comp */
    uint32_t spec[VK_MAX_SPEC];  /* specialisation constants, ids 0..n_spec-1 */
    int n_spec;
    VkPipeline pipe;
};

struct vk_dev {
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    qtts_device_info info;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkDeviceSize ssbo_align;     /* minStorageBufferOffsetAlignment */
    VkDeviceSize max_range;      /* maxStorageBufferRange */
    uint32_t max_groups[3];      /* maxComputeWorkGroupCount */
    uint32_t ts_valid_bits;      /* timestampValidBits of the queue family (0: none) */
    double ts_period_ns;         /* timestampPeriod; 0 when ts_valid_bits is 0 */
    int int_dot;                 /* VK_KHR_shader_integer_dot_product enabled (accelerated or not) */
    int bda;                     /* bufferDeviceAddress enabled: every buffer has a device address */

    pthread_mutex_t queue_lock;
    pthread_mutex_t xfer_lock;
    pthread_mutex_t cache_lock;
    pthread_mutex_t stat_lock;

    /* transfers (under xfer_lock) */
    vk_buf staging;              /* host-visible, VK_STAGING_BYTES, made on first use */
    VkCommandPool xfer_pool;
    VkCommandBuffer xfer_cb;
    VkFence xfer_fence;

    /* pipelines */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipelineCache pcache;
    vk_buf dummy;
    vk_kernel *kernels;          /* under cache_lock */

    int64_t bytes_allocated;     /* live vk_buf_alloc buffers (under stat_lock) */
};

/* Fill e from a failed Vulkan call: QTTS_ERR_NOMEM for the out-of-memory
 * results, QTTS_ERR_UNSUPPORTED for a missing driver, layer, extension or
 * feature, else QTTS_ERR_INTERNAL; the message names the call. */
qtts_status vk_fail(qtts_error *e, VkResult r, const char *call);
const char *vk_result_str(VkResult r);
/* Submit cb on the device's queue (under queue_lock), signalling fence. */
VkResult vk_queue_submit(vk_dev *d, VkCommandBuffer cb, VkFence fence);

/* vk_pipeline.c: the descriptor set layout, pipeline layout, pipeline cache
 * and dummy buffer (called by vk_dev_create), and their release with every
 * cached kernel (called by vk_dev_free). */
qtts_status vk_pipeline_init(vk_dev *d, qtts_error *e);
void vk_pipeline_free(vk_dev *d);

/* Memory type index with all of `want` among type_bits, preferring one that
 * also has `prefer`; -1 if none. */
int vk_mem_type(const vk_dev *d, uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer);
/* vk_buf_alloc without the byte accounting (internal buffers). */
qtts_status vk_buf_alloc_raw(vk_dev *d, vk_buf *b, size_t bytes, int host_visible, qtts_error *e);
void vk_buf_free_raw(vk_dev *d, vk_buf *b);

#endif
