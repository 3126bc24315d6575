# SPDX-License-Identifier: MIT
# Cross builds (Windows with MinGW-w64, Linux aarch64) take the Vulkan and OpenCL headers from the
# build machine (Debian: libvulkan-dev, opencl-headers) when the target's sysroot has none. The
# headers describe APIs, not a platform (vk_platform.h and cl_platform.h adapt to the target), and
# the libraries are loaded at run time, so nothing else is needed. Only those directories are
# mirrored into the build tree: the build machine's whole /usr/include would put its C library in
# front of the target's.
function(posenc_host_gpu_headers out_dir)
  set(mirror "${PROJECT_BINARY_DIR}/host-gpu-headers")
  foreach(subdir ${ARGN})
    foreach(root /usr/include /usr/local/include)
      if(IS_DIRECTORY "${root}/${subdir}" AND NOT IS_DIRECTORY "${mirror}/${subdir}")
        file(COPY "${root}/${subdir}" DESTINATION "${mirror}" FILES_MATCHING PATTERN "*.h")
        # macOS names the OpenCL headers by their framework (<OpenCL/cl.h>, posenc_opencl.h).
        if(APPLE AND subdir STREQUAL "CL")
          file(COPY "${root}/CL/" DESTINATION "${mirror}/OpenCL" FILES_MATCHING PATTERN "*.h")
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out_dir} "${mirror}" PARENT_SCOPE)
endfunction()
