/* SPDX-License-Identifier: MIT */
/* The kernels embedded at build time: SPIR-V words for Vulkan, OpenCL C sources for OpenCL.
 *
 * Variants are listed in shaders/variants.cmake and named there ("sinusoidal_f16"); the same
 * name may exist in both languages. The build generates from that list the ids the backends
 * look variants up by (kernel_ids.h: POSENC__SPIRV_SINUSOIDAL_F16, POSENC__CL_SINUSOIDAL_F16)
 * and the tables, into the build directory (cmake/PosencKernels.cmake). A path configured off
 * (POSENC_VULKAN / POSENC_OPENCL = OFF, or AUTO without the tools) has an empty table: the
 * functions then return 0, false or NULL.
 * Everything here is immutable data, safe to read from any thread.
 */
#ifndef POSENC_CORE_KERNELS_H
#define POSENC_CORE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_ids.h"

/* One compiled GLSL variant (Vulkan 1.1, SPIR-V 1.3; entry point "main"). */
typedef struct posenc__spirv {
    const char *name;        /* "sinusoidal_f16" */
    const char *source;      /* "sinusoidal.comp", in shaders/ */
    const char *defines;     /* the variant's defines as compiled: "-DPOSENC_OUT_F16" */
    const uint32_t *words;   /* host byte order, ready for VkShaderModuleCreateInfo.pCode */
    size_t word_count;       /* codeSize is word_count * 4 bytes */
} posenc__spirv;

/* One OpenCL C variant: a self-contained source (includes inlined) and the build options that
 * select the variant. Build with clBuildProgram(source, options); never add
 * -cl-fast-relaxed-math or -cl-mad-enable: the kernels rely on correctly rounded float steps. */
typedef struct posenc__cl_kernel {
    const char *name;        /* "sinusoidal_f16" */
    const char *source_name; /* "sinusoidal.cl", in shaders/ */
    const char *entry;       /* kernel function: "posenc_" + the file's base name */
    const char *source;      /* OpenCL C 1.2 source text */
    const char *options;     /* "-DPOSENC_OUT_F16" */
} posenc__cl_kernel;

/* Whether this build embedded SPIR-V kernels (POSENC_HAVE_SPIRV_KERNELS in the library). */
bool posenc__spirv_enabled(void);
size_t posenc__spirv_count(void);
/* NULL past the end. */
const posenc__spirv *posenc__spirv_at(size_t index);
/* The variant `id`; NULL when the path is off. */
const posenc__spirv *posenc__spirv_get(posenc__spirv_id id);

/* Whether this build embedded OpenCL C kernels (POSENC_HAVE_CL_KERNELS in the library). */
bool posenc__cl_enabled(void);
size_t posenc__cl_kernel_count(void);
const posenc__cl_kernel *posenc__cl_kernel_at(size_t index);
const posenc__cl_kernel *posenc__cl_kernel_get(posenc__cl_id id);
/* The source of a file ("sinusoidal.cl"), or NULL. */
const char *posenc__cl_source_find(const char *source_name);

#endif
