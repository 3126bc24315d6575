# SPDX-License-Identifier: MIT
# Cross-compiles for 64-bit Arm Linux with GCC (Debian: gcc-aarch64-linux-gnu); the tests run
# under user-mode qemu (Debian: qemu-user) through CMAKE_CROSSCOMPILING_EMULATOR.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# -L: the target's dynamic loader and C library live in the cross sysroot, not in /.
find_program(POSENC_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(POSENC_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${POSENC_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
endif()
