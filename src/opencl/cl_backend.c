/* SPDX-License-Identifier: MIT */
/* The OpenCL backend's entry table (src/backend.h). The runtime is loaded at run time; without
 * it, or without a usable device, the backend is absent and AUTO moves on. */
#include "backend.h"
#include "opencl/cl_internal.h"

static const posenc__backend_diagnostics cl_diagnostics = {
    .roofline = posenc_cl_roofline,
};

const posenc__backend posenc_opencl_backend = {
    .kind = POSENC_BACKEND_OPENCL,
    .enumerate = posenc_cl_enumerate,
    .release_devices = posenc__gpu_devices_free,
    .context_init = posenc_cl_context_init,
    .context_fini = posenc_cl_context_fini,
    .buffer_init = posenc_cl_buffer_init,
    .buffer_fini = posenc_cl_buffer_fini,
    .buffer_upload = posenc_cl_buffer_upload,
    .buffer_download = posenc_cl_buffer_download,
    .buffer_map = posenc_cl_buffer_map,
    .buffer_unmap = posenc_cl_buffer_unmap,
    .run = posenc_cl_op_run,
    .prepare = posenc_cl_op_prepare,
    .submit = posenc_cl_op_submit,
    .event_wait = posenc_cl_submit_event_wait,
    .event_release = posenc_cl_submit_event_release,
    .finish = posenc_cl_finish,
    .context_init_external = posenc_cl_context_init_external,
    .diagnostics = &cl_diagnostics,
};
