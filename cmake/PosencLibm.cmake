# SPDX-License-Identifier: MIT
# The C math library, linked where it is a library of its own: POSENC_LIBM is "m" with glibc,
# musl, the BSDs, macOS and MinGW-w64, and empty with MSVC, whose C runtime holds sin and cos.
include(CheckLibraryExists)
check_library_exists(m cos "" POSENC_HAVE_LIBM)
if(POSENC_HAVE_LIBM)
  set(POSENC_LIBM m)
else()
  set(POSENC_LIBM "")
endif()

# posenc_link_libm(target PRIVATE|PUBLIC|INTERFACE): links POSENC_LIBM, if any, to target.
function(posenc_link_libm target scope)
  if(POSENC_LIBM)
    target_link_libraries(${target} ${scope} ${POSENC_LIBM})
  endif()
endfunction()
