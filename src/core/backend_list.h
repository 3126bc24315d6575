/* SPDX-License-Identifier: MIT */
/* The one list of backends, in the registry's order: the order of posenc_device_get, AUTO
 * preferring earlier backends among devices of one type, and the native CPU path last. */
#ifndef POSENC_CORE_BACKEND_LIST_H
#define POSENC_CORE_BACKEND_LIST_H

/* X(KIND, name, table): KIND names POSENC_BACKEND_<KIND> of posenc.h, whose values are ABI and
 * never change; `name` is posenc_backend_name's, the selectors' and the CLI's; `table` is the
 * backend's `const posenc__backend` (src/backend.h), present when POSENC__IF_<KIND> keeps it.
 * Adding a backend: its folder, its value in posenc_backend, a line here and its
 * POSENC__IF_<KIND> below. Read by the registry, posenc_backend_name, the device selectors, the
 * CLI and the Python module. */
#define POSENC__BACKEND_LIST(X)                                                                   \
    X(VULKAN, "vulkan", posenc_vk_backend)                                                        \
    X(OPENCL, "opencl", posenc_opencl_backend)                                                    \
    X(CPU, "cpu", posenc_cpu_backend)

/* POSENC__IF_<KIND>(x): `x,` where the library is built with that backend, else nothing (the
 * POSENC_HAVE_*_BACKEND definitions are the library's own: other targets see no tables). */
#if defined(POSENC_HAVE_VULKAN_BACKEND)
#define POSENC__IF_VULKAN(x) x,
#else
#define POSENC__IF_VULKAN(x)
#endif
#if defined(POSENC_HAVE_OPENCL_BACKEND)
#define POSENC__IF_OPENCL(x) x,
#else
#define POSENC__IF_OPENCL(x)
#endif
#define POSENC__IF_CPU(x) x,

#endif
