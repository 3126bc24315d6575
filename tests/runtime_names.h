/* SPDX-License-Identifier: MIT */
/* The GPU runtimes' file names, as the loaders open them (src/vulkan/vk_loader.c,
 * src/opencl/cl_loader.c), for tests that ask whether a runtime was loaded. */
#ifndef POSENC_TESTS_RUNTIME_NAMES_H
#define POSENC_TESTS_RUNTIME_NAMES_H

#if defined(_WIN32)
#define TEST_VULKAN_RUNTIME "vulkan-1.dll"
#define TEST_OPENCL_RUNTIME "OpenCL.dll"
#elif defined(__APPLE__)
#define TEST_VULKAN_RUNTIME "libvulkan.1.dylib"
#define TEST_OPENCL_RUNTIME "libOpenCL.dylib"
#else
#define TEST_VULKAN_RUNTIME "libvulkan.so.1"
#define TEST_OPENCL_RUNTIME "libOpenCL.so.1"
#endif

#endif
