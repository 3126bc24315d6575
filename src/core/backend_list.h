/* SPDX-License-Identifier: MIT */
/* What the library adds to posenc.h's one list of backends (POSENC_BACKEND_LIST, in the
 * registry's order): each backend's table and whether this build has it. */
#ifndef POSENC_CORE_BACKEND_LIST_H
#define POSENC_CORE_BACKEND_LIST_H

/* POSENC__BACKEND_TABLE_<KIND>: the backend's `const posenc__backend` (src/backend.h). Adding a
 * backend: its folder, its line in POSENC_BACKEND_LIST, its table name here and its
 * POSENC__IF_<KIND> below. Read by the registry; posenc_backend_name, the device selectors, the
 * CLI and the Python module read the public list alone. */
#define POSENC__BACKEND_TABLE_VULKAN posenc_vk_backend
#define POSENC__BACKEND_TABLE_OPENCL posenc_opencl_backend
#define POSENC__BACKEND_TABLE_CPU posenc_cpu_backend

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
