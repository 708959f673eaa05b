/* Vulkan runtime, command buffers: a recording of dispatches, copies and
 * timestamps that is submitted as often as needed (no ONE_TIME_SUBMIT), its
 * descriptor sets (one per dispatch, written while recording, from pools
 * added as the recording grows) and its timestamp query pool.
 * Dataflow: vk_cmd_begin (reset queries, barrier after all earlier work) ->
 * vk_cmd_dispatch / vk_cmd_copy (each followed by a compute+transfer memory
 * barrier) -> vk_cmd_end (barrier to host reads) -> vk_cmd_submit ->
 * vk_cmd_wait (fence) -> vk_cmd_elapsed_ms.
 * Must match: the pipeline layout of vk_pipeline.c. */
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"

struct vk_cmd {
    vk_dev *d;
    VkCommandPool pool;
    VkCommandBuffer cb;
    VkFence fence;
    VkQueryPool qpool;             /* VK_MAX_QUERIES timestamps; VK_NULL_HANDLE without timestamps */
    VkDescriptorPool *dpools;      /* [n_dpools], VK_SETS_PER_POOL sets each */
    int n_dpools, cap_dpools;
    int cur_dpool;                 /* the pool sets come from now */
    uint32_t cur_used;             /* sets taken from it */
    int recording, recorded, pending;
    int ran;                       /* the recording has been submitted and waited for */
    VkPipeline bound;              /* pipeline bound last in this recording */
    uint8_t ts_written[VK_MAX_QUERIES];
    int n_dispatch, n_copy;        /* dispatches and copies recorded since vk_cmd_begin */
    qtts_error err;                /* the first recording error (sticky until vk_cmd_begin) */
};

static void cmd_fail(vk_cmd *c, VkResult r, const char *call) {
    if (c->err.status == QTTS_OK) vk_fail(&c->err, r, call);
}

qtts_status vk_cmd_new(vk_dev *d, vk_cmd **out, qtts_error *e) {
    *out = NULL;
    vk_cmd *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, QTTS_ERR_NOMEM, "out of memory creating a Vulkan command buffer");
    c->d = d;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = d->qfam};
    VkResult r = vkCreateCommandPool(d->dev, &pci, NULL, &c->pool);
    const char *call = "vkCreateCommandPool";
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = c->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        r = vkAllocateCommandBuffers(d->dev, &ai, &c->cb);
        call = "vkAllocateCommandBuffers";
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vkCreateFence(d->dev, &fci, NULL, &c->fence);
        call = "vkCreateFence";
    }
    if (r == VK_SUCCESS && d->ts_valid_bits) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = VK_MAX_QUERIES};
        r = vkCreateQueryPool(d->dev, &qci, NULL, &c->qpool);
        call = "vkCreateQueryPool";
    }
    if (r != VK_SUCCESS) {
        qtts_status st = vk_fail(e, r, call);
        vk_cmd_free(c);
        return st;
    }
    *out = c;
    return QTTS_OK;
}

void vk_cmd_free(vk_cmd *c) {
    if (!c) return;
    VkDevice dev = c->d->dev;
    if (c->pending) vkWaitForFences(dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
    for (int i = 0; i < c->n_dpools; i++) vkDestroyDescriptorPool(dev, c->dpools[i], NULL);
    free(c->dpools);
    if (c->qpool) vkDestroyQueryPool(dev, c->qpool, NULL);
    if (c->fence) vkDestroyFence(dev, c->fence, NULL);
    if (c->pool) vkDestroyCommandPool(dev, c->pool, NULL); /* frees cb */
    free(c);
}

static void barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                    VkAccessFlags dst) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* compute and transfer writes visible to the next compute and transfer work */
static void work_barrier(VkCommandBuffer cb) {
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    barrier(cb, st, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, st,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                VK_ACCESS_TRANSFER_WRITE_BIT);
}

qtts_status vk_cmd_begin(vk_cmd *c, qtts_error *e) {
    vk_dev *d = c->d;
    if (c->pending)
        return err_set(e, QTTS_ERR_INTERNAL, "vk_cmd_begin: the previous submission was not waited for");
    err_clear(&c->err);
    c->recording = c->recorded = c->ran = 0;
    c->bound = VK_NULL_HANDLE;
    c->n_dispatch = c->n_copy = 0;
    memset(c->ts_written, 0, sizeof c->ts_written);
    VkResult r = vkResetCommandBuffer(c->cb, 0);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkResetCommandBuffer");
    for (int i = 0; i < c->n_dpools; i++) {
        r = vkResetDescriptorPool(d->dev, c->dpools[i], 0);
        if (r != VK_SUCCESS) return vk_fail(e, r, "vkResetDescriptorPool");
    }
    c->cur_dpool = 0;
    c->cur_used = 0;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    r = vkBeginCommandBuffer(c->cb, &bi);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkBeginCommandBuffer");
    if (c->qpool) vkCmdResetQueryPool(c->cb, c->qpool, 0, VK_MAX_QUERIES);
    /* everything submitted earlier (other recordings, transfers, the previous
     * replay of this one) before this recording's work */
    barrier(c->cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                VK_ACCESS_TRANSFER_WRITE_BIT);
    c->recording = 1;
    return QTTS_OK;
}

/* A descriptor set for the next dispatch, from the current pool or a new one. */
static VkDescriptorSet alloc_set(vk_cmd *c) {
    vk_dev *d = c->d;
    for (int tries = 0; tries < 2; tries++) {
        if (c->cur_used >= VK_SETS_PER_POOL) {
            c->cur_dpool++;
            c->cur_used = 0;
        }
        if (c->cur_dpool >= c->n_dpools) {
            if (c->n_dpools == c->cap_dpools) {
                int cap = c->cap_dpools ? 2 * c->cap_dpools : 4;
                VkDescriptorPool *p = realloc(c->dpools, (size_t)cap * sizeof *p);
                if (!p) {
                    if (c->err.status == QTTS_OK)
                        err_set(&c->err, QTTS_ERR_NOMEM, "out of memory growing the descriptor pools");
                    return VK_NULL_HANDLE;
                }
                c->dpools = p;
                c->cap_dpools = cap;
            }
            VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .descriptorCount = VK_SETS_PER_POOL * VK_MAX_BINDINGS};
            VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                              .maxSets = VK_SETS_PER_POOL,
                                              .poolSizeCount = 1,
                                              .pPoolSizes = &ps};
            VkResult r = vkCreateDescriptorPool(d->dev, &pci, NULL, &c->dpools[c->n_dpools]);
            if (r != VK_SUCCESS) {
                cmd_fail(c, r, "vkCreateDescriptorPool");
                return VK_NULL_HANDLE;
            }
            c->n_dpools++;
        }
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = c->dpools[c->cur_dpool],
                                          .descriptorSetCount = 1,
                                          .pSetLayouts = &d->dsl};
        VkDescriptorSet set;
        VkResult r = vkAllocateDescriptorSets(d->dev, &ai, &set);
        if (r == VK_SUCCESS) {
            c->cur_used++;
            return set;
        }
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) {
            cmd_fail(c, r, "vkAllocateDescriptorSets");
            return VK_NULL_HANDLE;
        }
        c->cur_used = VK_SETS_PER_POOL; /* this pool is full: take the next */
    }
    cmd_fail(c, VK_ERROR_OUT_OF_POOL_MEMORY, "vkAllocateDescriptorSets");
    return VK_NULL_HANDLE;
}

static int recordable(vk_cmd *c, const char *what) {
    if (c->err.status != QTTS_OK) return 0;
    if (!c->recording) {
        err_set(&c->err, QTTS_ERR_INTERNAL, "%s outside vk_cmd_begin .. vk_cmd_end", what);
        return 0;
    }
    return 1;
}

void vk_cmd_dispatch(vk_cmd *c, vk_kernel *k, const vk_binding *b, int nb, const void *push, size_t push_bytes,
                     uint32_t gx, uint32_t gy, uint32_t gz) {
    vk_dev *d = c->d;
    if (!recordable(c, "vk_cmd_dispatch")) return;
    const char *name = k ? k->name : "(null)";
    if (!k || nb < 0 || nb > VK_MAX_BINDINGS || push_bytes > VK_PUSH_BYTES || (push_bytes && !push) ||
        (nb && !b)) {
        err_set(&c->err, QTTS_ERR_INTERNAL,
                "vk_cmd_dispatch(%s): bad arguments (%d bindings of at most %d, %zu push bytes of at most %d)", name,
                nb, VK_MAX_BINDINGS, push_bytes, VK_PUSH_BYTES);
        return;
    }
    if (gx > d->max_groups[0] || gy > d->max_groups[1] || gz > d->max_groups[2]) {
        err_set(&c->err, QTTS_ERR_LIMIT,
                "vk_cmd_dispatch(%s): %u x %u x %u workgroups exceed the device's %u x %u x %u", name, gx, gy, gz,
                d->max_groups[0], d->max_groups[1], d->max_groups[2]);
        return;
    }
    VkDescriptorBufferInfo bi[VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[VK_MAX_BINDINGS];
    for (int i = 0; i < VK_MAX_BINDINGS; i++) {
        const vk_buf *buf = i < nb && b[i].buf ? b[i].buf : &d->dummy;
        VkDeviceSize off = 0, range = buf->size;
        if (i < nb && b[i].buf) {
            off = b[i].offset;
            if (off % d->ssbo_align || off >= buf->size || b[i].range > buf->size - off) {
                err_set(&c->err, QTTS_ERR_INTERNAL,
                        "vk_cmd_dispatch(%s): binding %d: bytes [%zu, +%zu) of a buffer of %zu (offsets must be "
                        "multiples of %zu)",
                        name, i, b[i].offset, b[i].range, (size_t)buf->size, (size_t)d->ssbo_align);
                return;
            }
            range = b[i].range ? b[i].range : buf->size - off;
            if (!b[i].range && range > d->max_range) range = d->max_range & ~(VkDeviceSize)3;
            if (range > d->max_range) {
                err_set(&c->err, QTTS_ERR_LIMIT,
                        "vk_cmd_dispatch(%s): binding %d spans %zu bytes; the device binds at most %zu", name, i,
                        (size_t)range, (size_t)d->max_range);
                return;
            }
        }
        bi[i] = (VkDescriptorBufferInfo){.buffer = buf->buf, .offset = off, .range = range};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstBinding = (uint32_t)i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    VkDescriptorSet set = alloc_set(c);
    if (!set) return;
    for (int i = 0; i < VK_MAX_BINDINGS; i++) w[i].dstSet = set;
    vkUpdateDescriptorSets(d->dev, VK_MAX_BINDINGS, w, 0, NULL);

    if (c->bound != k->pipe) {
        vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
        c->bound = k->pipe;
    }
    vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &set, 0, NULL);
    if (push_bytes) {
        uint32_t pc[VK_PUSH_BYTES / 4] = {0};
        memcpy(pc, push, push_bytes);
        vkCmdPushConstants(c->cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)((push_bytes + 3) & ~(size_t)3),
                           pc);
    }
    vkCmdDispatch(c->cb, gx, gy, gz);
    work_barrier(c->cb);
    c->n_dispatch++;
}

void vk_cmd_copy(vk_cmd *c, const vk_buf *src, size_t src_off, const vk_buf *dst, size_t dst_off, size_t n) {
    if (!recordable(c, "vk_cmd_copy")) return;
    if (!src || !dst || !src->buf || !dst->buf || src_off > src->size || n > src->size - src_off ||
        dst_off > dst->size || n > dst->size - dst_off) {
        err_set(&c->err, QTTS_ERR_INTERNAL, "vk_cmd_copy: %zu bytes from %zu to %zu outside the buffers", n, src_off,
                dst_off);
        return;
    }
    if (n == 0) return;
    VkBufferCopy rg = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    vkCmdCopyBuffer(c->cb, src->buf, dst->buf, 1, &rg);
    work_barrier(c->cb);
    c->n_copy++;
}

void vk_cmd_counts(const vk_cmd *c, int *dispatches, int *copies) {
    *dispatches = c->n_dispatch;
    *copies = c->n_copy;
}

void vk_cmd_timestamp(vk_cmd *c, int q) {
    if (!recordable(c, "vk_cmd_timestamp") || !c->qpool) return;
    if (q < 0 || q >= VK_MAX_QUERIES || c->ts_written[q]) {
        err_set(&c->err, QTTS_ERR_INTERNAL, "vk_cmd_timestamp: query %d out of range 0..%d or written twice", q,
                VK_MAX_QUERIES - 1);
        return;
    }
    vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->qpool, (uint32_t)q);
    c->ts_written[q] = 1;
}

qtts_status vk_cmd_end(vk_cmd *c, qtts_error *e) {
    if (!c->recording) {
        if (c->err.status != QTTS_OK) return err_set(e, c->err.status, "%s", c->err.msg);
        return err_set(e, QTTS_ERR_INTERNAL, "vk_cmd_end without vk_cmd_begin");
    }
    /* results visible to the host (host-visible buffers read after the wait) */
    barrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    c->recording = 0;
    VkResult r = vkEndCommandBuffer(c->cb);
    if (r != VK_SUCCESS) cmd_fail(c, r, "vkEndCommandBuffer");
    if (c->err.status != QTTS_OK) return err_set(e, c->err.status, "%s", c->err.msg);
    c->recorded = 1;
    return QTTS_OK;
}

qtts_status vk_cmd_submit(vk_cmd *c, qtts_error *e) {
    if (!c->recorded) return err_set(e, QTTS_ERR_INTERNAL, "vk_cmd_submit: nothing recorded (vk_cmd_end failed?)");
    if (c->pending)
        return err_set(e, QTTS_ERR_INTERNAL, "vk_cmd_submit: the previous submission was not waited for");
    VkResult r = vk_queue_submit(c->d, c->cb, c->fence);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkQueueSubmit");
    c->pending = 1;
    return QTTS_OK;
}

qtts_status vk_cmd_wait(vk_cmd *c, qtts_error *e) {
    if (!c->pending) return QTTS_OK;
    VkResult r = vkWaitForFences(c->d->dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkWaitForFences");
    c->pending = 0;
    c->ran = 1;
    r = vkResetFences(c->d->dev, 1, &c->fence);
    if (r != VK_SUCCESS) return vk_fail(e, r, "vkResetFences");
    return QTTS_OK;
}

double vk_cmd_elapsed_ms(vk_cmd *c, int q0, int q1) {
    vk_dev *d = c->d;
    if (!c->qpool || c->pending || !c->ran || q0 < 0 || q1 < 0 || q0 >= VK_MAX_QUERIES ||
        q1 >= VK_MAX_QUERIES || !c->ts_written[q0] || !c->ts_written[q1])
        return 0.0;
    uint64_t t0 = 0, t1 = 0;
    VkQueryResultFlags f = VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT;
    if (vkGetQueryPoolResults(d->dev, c->qpool, (uint32_t)q0, 1, sizeof t0, &t0, sizeof t0, f) != VK_SUCCESS ||
        vkGetQueryPoolResults(d->dev, c->qpool, (uint32_t)q1, 1, sizeof t1, &t1, sizeof t1, f) != VK_SUCCESS)
        return 0.0;
    uint64_t mask = d->ts_valid_bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << d->ts_valid_bits) - 1);
    uint64_t ticks = (t1 - t0) & mask;
    return (double)ticks * d->ts_period_ns * 1e-6;
}
