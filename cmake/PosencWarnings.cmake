# SPDX-License-Identifier: MIT
# Warning flags for every posenc target: -Wall -Wextra everywhere, errors unless POSENC_WERROR=OFF.
function(posenc_set_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
                           -Wmissing-prototypes -Wno-unused-parameter)
    if(POSENC_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4)
    if(POSENC_WERROR)
      target_compile_options(${target} PRIVATE /WX)
    endif()
  endif()
endfunction()
