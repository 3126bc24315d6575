/* SPDX-License-Identifier: MIT */
/* The Vulkan backend's entry in the registry. */
#include "backend.h"
#include "vulkan/vk_internal.h"

static const posenc__backend_diagnostics vk_diagnostics = {
    .roofline = posenc_vk_roofline,
};

const posenc__backend posenc_vk_backend = {
    .kind = POSENC_BACKEND_VULKAN,
    .enumerate = posenc_vk_enumerate,
    .release_devices = posenc_vk_release_devices,
    .context_init = posenc_vk_context_init,
    .context_fini = posenc_vk_context_fini,
    .buffer_init = posenc_vk_buffer_init,
    .buffer_fini = posenc_vk_buffer_fini,
    .buffer_upload = posenc_vk_buffer_upload,
    .buffer_download = posenc_vk_buffer_download,
    .buffer_host_address = posenc_vk_buffer_host_address,
    .buffer_map = posenc_vk_buffer_map,
    .run = posenc_vk_op_run,
    .prepare = posenc_vk_op_prepare,
    .submit = posenc_vk_op_submit,
    .event_wait = posenc_vk_event_wait,
    .event_release = posenc_vk_event_release,
    .finish = posenc_vk_finish,
    .context_init_external = posenc_vk_context_init_external,
    .diagnostics = &vk_diagnostics,
};
