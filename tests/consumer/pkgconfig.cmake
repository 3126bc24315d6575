# SPDX-License-Identifier: MIT
# Builds tests/consumer/project/main.c against the installed posenc with the flags pkg-config
# gives, as a user would with `cc main.c $(pkg-config --cflags --libs posenc)`, and runs it.
#   cmake -DPKG_CONFIG=... -DCC=... -DCFLAGS=... -DPREFIX=... -DSOURCE=... -DBINARY=...
#         [-DEMULATOR=e|args] -P
# EMULATOR: what runs a cross build's program (its list separated by '|': qemu-aarch64 -L ...).
cmake_minimum_required(VERSION 3.20)
foreach(var PKG_CONFIG CC PREFIX SOURCE BINARY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "pkgconfig.cmake: -D${var}=... is required")
  endif()
endforeach()

file(GLOB_RECURSE pc_files "${PREFIX}/*/posenc.pc")
if(NOT pc_files)
  message(FATAL_ERROR "no posenc.pc under ${PREFIX}")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")

execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs posenc
  OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs posenc failed")
endif()
message(STATUS "pkg-config --cflags --libs posenc: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(extra UNIX_COMMAND "${CFLAGS}")

file(MAKE_DIRECTORY "${BINARY}")
execute_process(COMMAND "${CC}" ${extra} "${SOURCE}" -o "${BINARY}/consumer" ${flags} -lm
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "compiling ${SOURCE} with the pkg-config flags failed")
endif()

# pkg-config gives no run path: point the loader at the installed library.
get_filename_component(libdir "${pc_dir}" DIRECTORY)
set(ENV{LD_LIBRARY_PATH} "${libdir}:$ENV{LD_LIBRARY_PATH}")
string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(COMMAND ${emulator} "${BINARY}/consumer" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the consumer program failed (${result})")
endif()
