# SPDX-License-Identifier: MIT
# Warning flags for every posenc target: -Wall -Wextra everywhere, errors unless POSENC_WERROR=OFF;
# with MSVC (and clang-cl) /W4 less the warnings that -Wall -Wextra do not have.
function(posenc_set_warnings target)
  # clang-cl is Clang with MSVC's command line, where -Wall means -Weverything: it takes the
  # MSVC flags (its /W4 is -Wall -Wextra), plus the GNU -W options it also understands.
  if(MSVC)
    # Off, to match -Wall -Wextra -Wno-unused-parameter of GCC and Clang:
    #   C4100 unreferenced parameter (-Wno-unused-parameter);
    #   C4244, C4267, C4305, C4245 narrowing or sign-changing conversions (-Wconversion and
    #     -Wsign-conversion, which -Wall -Wextra leave out);
    #   C4127 constant condition, C4702 unreachable code, C4706 assignment in a condition (GCC
    #     has none of them; it asks for the extra parentheses that -Wparentheses checks);
    #   C4146 minus applied to an unsigned value (well defined, and used on purpose);
    #   C4152 a function pointer from a data pointer (dlsym and GetProcAddress results; only
    #     -Wpedantic warns);
    #   C4200 a flexible array member (C99) reported as a zero-sized array.
    target_compile_options(${target} PRIVATE /W4 /wd4100 /wd4244 /wd4267 /wd4305 /wd4245
                           /wd4127 /wd4702 /wd4706 /wd4146 /wd4152 /wd4200)
    # Sources and their comments are UTF-8, whatever the build machine's code page.
    target_compile_options(${target} PRIVATE /utf-8)
    # fopen, getenv, strncpy, strdup, ... are standard C or POSIX: not "unsafe" or
    # "deprecated" (C4996).
    target_compile_definitions(${target} PRIVATE _CRT_SECURE_NO_WARNINGS
                               _CRT_NONSTDC_NO_WARNINGS)
    if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
      target_compile_options(${target} PRIVATE -Wshadow -Wstrict-prototypes
                             -Wmissing-prototypes -Wno-unused-parameter -Wvla -Wpointer-arith
                             -Wgnu)
    endif()
    if(POSENC_WERROR)
      target_compile_options(${target} PRIVATE /WX)
    endif()
  elseif(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    # MSVC rejects variable-length arrays (-Wvla), arithmetic on void pointers (-Wpointer-arith)
    # and, which only Clang can tell apart from ISO C without -Wpedantic, the other GNU
    # extensions (-Wgnu: statement expressions, case ranges, zero-length arrays, `?:`, ...).
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
                           -Wmissing-prototypes -Wno-unused-parameter -Wvla -Wpointer-arith)
    if(CMAKE_C_COMPILER_ID MATCHES "Clang")
      target_compile_options(${target} PRIVATE -Wgnu)
    endif()
    if(POSENC_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
