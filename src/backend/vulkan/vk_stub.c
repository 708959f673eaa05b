/* The Vulkan runtime of a build without Vulkan (no libvulkan-dev or glslc
 * when it was built, or make VULKAN=0): listing devices and creating one
 * fail with QTTS_ERR_UNSUPPORTED and a message saying how to get the
 * backend. Dataflow: none.
 * Must match: the declarations of vk_list_devices, vk_dev_create and
 * vk_dev_free in vk.h (not included here: it needs <vulkan/vulkan.h>);
 * callers reach the rest of vk.h only under #ifdef QTTS_HAVE_VULKAN. */
#include "qtts.h"
#include "util/error.h"

typedef struct vk_dev vk_dev;

qtts_status vk_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e);
qtts_status vk_dev_create(vk_dev **out, int index, qtts_error *e);
void vk_dev_free(vk_dev *d);

#define NO_VULKAN_MSG                                                                                        \
    "this build has no Vulkan backend: install libvulkan-dev and glslc (apt-get install libvulkan-dev glslc) " \
    "and rebuild"

qtts_status vk_list_devices(qtts_device_info *out, int max, int *n, qtts_error *e) {
    (void)out;
    (void)max;
    *n = 0;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN_MSG);
}

qtts_status vk_dev_create(vk_dev **out, int index, qtts_error *e) {
    (void)index;
    *out = 0;
    return err_set(e, QTTS_ERR_UNSUPPORTED, NO_VULKAN_MSG);
}

void vk_dev_free(vk_dev *d) { (void)d; }
