# SPDX-License-Identifier: MIT
# Cross-compiles for macOS on Linux with tools/zig-macos-cc (zig cc: macOS headers and libSystem
# stubs, no SDK): arm64 by default, or the slices in CMAKE_OSX_ARCHITECTURES ("arm64;x86_64": a
# universal build, joined with llvm-lipo). The result is built, not run: there is no emulator.
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_OSX_ARCHITECTURES arm64 CACHE STRING "macOS slices to build")
list(GET CMAKE_OSX_ARCHITECTURES 0 CMAKE_SYSTEM_PROCESSOR)
# No SDK (zig brings the headers). "macosx" names one without a path: CMake then looks for no
# per-slice sysroots, and tools/zig-macos-cc drops the -isysroot macosx it passes.
set(CMAKE_OSX_SYSROOT macosx CACHE STRING "the macOS SDK: none, zig brings the headers")

set(CMAKE_C_COMPILER "${CMAKE_CURRENT_LIST_DIR}/../../tools/zig-macos-cc")
find_program(CMAKE_AR NAMES llvm-ar llvm-ar-19 llvm-ar-18 llvm-ar-17 llvm-ar-16 llvm-ar-15
                             llvm-ar-14)
find_program(CMAKE_RANLIB NAMES llvm-ranlib llvm-ranlib-19 llvm-ranlib-18 llvm-ranlib-17
                                 llvm-ranlib-16 llvm-ranlib-15 llvm-ranlib-14)
find_program(CMAKE_INSTALL_NAME_TOOL NAMES llvm-install-name-tool llvm-install-name-tool-15
             llvm-install-name-tool-14)
# No macOS root on this machine: nothing of the build machine's /usr is taken for the target's (the
# Vulkan and OpenCL headers come from cmake/PosencHostGpuHeaders.cmake).
set(CMAKE_FIND_ROOT_PATH "${CMAKE_CURRENT_LIST_DIR}/no-macos-root")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
