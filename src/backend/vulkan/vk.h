/* Vulkan compute runtime: the instance, one device and its compute queue,
 * device memory and buffers, compute pipelines built from the SPIR-V that the
 * build embeds (vk_shaders.h), and command buffers that record dispatches
 * once and replay them.
 * Dataflow: vk_dev_create -> vk_buf_alloc/upload (weights once, state per
 * context) -> vk_kernel_get (a pipeline per shader and specialisation) ->
 * vk_cmd_begin, vk_cmd_dispatch ..., vk_cmd_end -> vk_cmd_submit (replayed
 * as often as needed) -> vk_cmd_wait -> host-visible buffers read.
 * Files: vk_device.c (instance, device, queue, memory, buffers, transfers),
 * vk_pipeline.c (shader modules, the common pipeline layout, descriptor sets),
 * vk_cmd.c (command buffers, barriers, timestamps, submission).
 *
 * Conventions every shader follows (so one pipeline layout serves all):
 *  - descriptor set 0 holds VK_MAX_BINDINGS storage buffers, bindings
 *    0..VK_MAX_BINDINGS-1; a dispatch binds the ones it names and a small
 *    dummy buffer in the others;
 *  - one push-constant block of at most VK_PUSH_BYTES bytes;
 *  - specialisation constants by constant_id 0.. (values uint32).
 * Every Vulkan call's result is checked and becomes a qtts status with a
 * message naming the call. Nothing here prints or exits. */
#ifndef QTTS_BACKEND_VULKAN_VK_H
#define QTTS_BACKEND_VULKAN_VK_H

#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "qtts.h"
#include "util/error.h"

#define VK_MAX_BINDINGS 10
#define VK_PUSH_BYTES 128
#define VK_MAX_SPEC 8

typedef struct vk_dev vk_dev;

/* A buffer. Device-local buffers are written and read through staging
 * (vk_buf_upload / vk_buf_download); host-visible ones are mapped (map) and
 * coherent, for small state the host reads every frame. */
typedef struct vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size; /* bytes */
    void *map;         /* host-visible: the mapping; else NULL */
} vk_buf;

/* List the devices (vulkan loader present, instance creatable); see
 * qtts_backend_devices for the meaning of each field. */
qtts_status vk_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e);

/* Create the runtime on device `index` of vk_list_devices. A device that
 * lacks a needed feature (16-bit and 8-bit storage buffers, compute queue,
 * subgroup arithmetic) is refused with a message that names it. */
qtts_status vk_dev_create(vk_dev **out, int index, qtts_error *e);
void vk_dev_free(vk_dev *d); /* accepts NULL; waits for the queue first */
const qtts_device_info *vk_dev_info(const vk_dev *d);
/* 1 when the device runs packed int8 dot products (VK_KHR_shader_integer_dot_product
 * enabled; qtts_device_info.int8_dot says whether they are accelerated). */
int vk_dev_has_int_dot(const vk_dev *d);
/* 1 when the device has bufferDeviceAddress (a Vulkan 1.2 feature that
 * Vulkan 1.3 requires): then every buffer has a device address that
 * shaders reach through GL_EXT_buffer_reference (vk_buf_address). */
int vk_dev_has_addresses(const vk_dev *d);
/* Bytes of device memory held by live buffers, and allocated from the driver
 * (allocations may be pooled: reserved >= allocated). */
int64_t vk_dev_bytes_allocated(const vk_dev *d);
int64_t vk_dev_bytes_reserved(const vk_dev *d);
/* Nanoseconds per timestamp tick (VkPhysicalDeviceLimits.timestampPeriod);
 * 0 when the compute queue has no timestamps. */
double vk_dev_timestamp_ns(const vk_dev *d);

/* Allocate a buffer of `bytes` (> 0). host_visible: mapped, coherent memory
 * (small buffers the host reads or writes every frame); else device-local.
 * Contents are undefined until written. */
qtts_status vk_buf_alloc(vk_dev *d, vk_buf *b, size_t bytes, int host_visible, qtts_error *e);
void vk_buf_free(vk_dev *d, vk_buf *b); /* accepts a zeroed buffer; zeroes it */
/* The device address of b's first byte (vk_dev_has_addresses), else 0. */
uint64_t vk_buf_address(const vk_dev *d, const vk_buf *b);
/* Copy host memory into b at byte offset off (through a staging buffer for
 * device-local ones); waits until done. */
qtts_status vk_buf_upload(vk_dev *d, vk_buf *b, size_t off, const void *src, size_t n, qtts_error *e);
/* Copy n bytes at off of b to dst; waits until done. */
qtts_status vk_buf_download(vk_dev *d, const vk_buf *b, size_t off, void *dst, size_t n, qtts_error *e);
/* Fill n bytes at off (multiple of 4) with the 32-bit word `word`; waits. */
qtts_status vk_buf_fill(vk_dev *d, vk_buf *b, size_t off, size_t n, uint32_t word, qtts_error *e);

/* A compute pipeline: one shader (by its file name without .comp, e.g.
 * "matvec_bf16") with one set of specialisation constants. Owned and cached
 * by the device: the same (name, constants) gives the same kernel. */
typedef struct vk_kernel vk_kernel;
qtts_status vk_kernel_get(vk_dev *d, const char *shader, const uint32_t *spec, int n_spec, vk_kernel **out,
                          qtts_error *e);

/* One binding of a dispatch: bytes [offset, offset + range) of buf (range 0:
 * to the end). offset must be a multiple of the device's
 * minStorageBufferOffsetAlignment (vk_dev_info: at most 256 on every known
 * device; callers keep sub-buffers 256-byte aligned or pass element offsets
 * in push constants instead). */
typedef struct vk_binding {
    const vk_buf *buf; /* NULL: the dummy buffer */
    size_t offset;
    size_t range;
} vk_binding;

/* A command buffer with the descriptor sets its dispatches use. Record once
 * (begin, dispatches, end), then submit and wait as often as needed: the
 * same work replays with whatever the buffers hold then. A recording error
 * is sticky and reported by vk_cmd_end. */
typedef struct vk_cmd vk_cmd;
qtts_status vk_cmd_new(vk_dev *d, vk_cmd **out, qtts_error *e);
void vk_cmd_free(vk_cmd *c); /* accepts NULL; waits for a pending submission */
/* Start recording (drops what was recorded before and its descriptor sets). */
qtts_status vk_cmd_begin(vk_cmd *c, qtts_error *e);
/* Record a dispatch of k over groups (gx, gy, gz) with bindings b[0..nb)
 * at bindings 0..nb-1 (the rest: the dummy buffer) and push constants
 * push[0..push_bytes) (<= VK_PUSH_BYTES). Followed by a compute-to-compute
 * memory barrier, so the next dispatch sees this one's writes. */
void vk_cmd_dispatch(vk_cmd *c, vk_kernel *k, const vk_binding *b, int nb, const void *push, size_t push_bytes,
                     uint32_t gx, uint32_t gy, uint32_t gz);
/* Copy bytes between buffers inside the recording (with barriers). */
void vk_cmd_copy(vk_cmd *c, const vk_buf *src, size_t src_off, const vk_buf *dst, size_t dst_off, size_t n);
/* The dispatches and copies recorded since vk_cmd_begin: each one a link
 * of the recording's dependent chain (every one ends in a barrier). */
void vk_cmd_counts(const vk_cmd *c, int *dispatches, int *copies);
/* Write timestamp query q (0 <= q < VK_MAX_QUERIES) after all earlier work.
 * Ignored when the queue has no timestamps. */
#define VK_MAX_QUERIES 128
void vk_cmd_timestamp(vk_cmd *c, int q);
qtts_status vk_cmd_end(vk_cmd *c, qtts_error *e);
/* Submit the recording (the previous submission must have been waited for). */
qtts_status vk_cmd_submit(vk_cmd *c, qtts_error *e);
/* Wait for the last submission; then host-visible buffers hold its results. */
qtts_status vk_cmd_wait(vk_cmd *c, qtts_error *e);
/* After vk_cmd_wait: milliseconds between timestamps q0 and q1 of the last
 * submission (0 when unavailable). */
double vk_cmd_elapsed_ms(vk_cmd *c, int q0, int q1);

#endif
