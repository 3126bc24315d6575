# SPDX-License-Identifier: MIT
# Build-time kernels: GLSL compute shaders to SPIR-V and OpenCL C checked with clang, both
# embedded into the library as C data. The variants are listed in shaders/variants.cmake.
#
# POSENC_VULKAN (AUTO|ON|OFF) needs glslc or glslangValidator; spirv-val validates when found.
# POSENC_OPENCL (AUTO|ON|OFF) needs only CMake to embed the sources; clang with OpenCL C support
# compiles every variant at build time so that an error fails the build. AUTO without clang
# embeds the sources unchecked (the driver still compiles them at run time) and warns; ON
# requires clang.

set(POSENC_KERNELS_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../shaders")
get_filename_component(POSENC_KERNELS_SOURCE_DIR "${POSENC_KERNELS_SOURCE_DIR}" ABSOLUTE)

foreach(option POSENC_VULKAN POSENC_OPENCL)
  string(TOUPPER "${${option}}" value)
  if(value STREQUAL "TRUE" OR value STREQUAL "YES" OR value STREQUAL "1")
    set(value ON)
  elseif(value STREQUAL "FALSE" OR value STREQUAL "NO" OR value STREQUAL "0")
    set(value OFF)
  endif()
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${option} must be AUTO, ON or OFF (got '${${option}}')")
  endif()
  set(${option}_MODE "${value}")
endforeach()

# ---- Vulkan: a GLSL compiler, and spirv-val when present ------------------------------------
set(POSENC_SPIRV_KERNELS OFF)
if(NOT POSENC_VULKAN_MODE STREQUAL "OFF")
  find_program(POSENC_GLSLC_EXECUTABLE glslc DOC "GLSL to SPIR-V compiler (shaderc)")
  find_program(POSENC_GLSLANG_EXECUTABLE glslangValidator DOC "GLSL to SPIR-V compiler (glslang)")
  find_program(POSENC_SPIRV_VAL_EXECUTABLE spirv-val DOC "SPIR-V validator (SPIRV-Tools)")
  if(POSENC_GLSLC_EXECUTABLE OR POSENC_GLSLANG_EXECUTABLE)
    set(POSENC_SPIRV_KERNELS ON)
  elseif(POSENC_VULKAN_MODE STREQUAL "ON")
    message(FATAL_ERROR "POSENC_VULKAN=ON but neither glslc nor glslangValidator was found "
                        "(Debian/Ubuntu: apt-get install glslc glslang-tools)")
  else()
    message(STATUS "posenc: no GLSL compiler found, Vulkan kernels off")
  endif()
endif()

# ---- OpenCL: clang with OpenCL C 1.2 and its default header ----------------------------------
set(POSENC_CL_KERNELS OFF)
set(POSENC_CL_CHECK OFF)
if(NOT POSENC_OPENCL_MODE STREQUAL "OFF")
  set(POSENC_CL_KERNELS ON)
  if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
    set(clang_hint "${CMAKE_C_COMPILER}")
  endif()
  find_program(POSENC_CLANG_EXECUTABLE
    NAMES ${clang_hint} clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14 clang-13
    DOC "clang used to compile the OpenCL C kernels at build time")
  if(POSENC_CLANG_EXECUTABLE AND NOT DEFINED POSENC_CLANG_OPENCL_WORKS)
    # Probe once: some clang builds lack the OpenCL default header.
    set(probe "${PROJECT_BINARY_DIR}/CMakeFiles/posenc_cl_probe.cl")
    file(WRITE "${probe}" "kernel void probe(global float *x) { x[get_global_id(0)] = 1.0f; }\n")
    execute_process(
      COMMAND "${POSENC_CLANG_EXECUTABLE}" -x cl -cl-std=CL1.2 -Xclang -finclude-default-header
              -fsyntax-only -Werror "${probe}"
      RESULT_VARIABLE probe_result OUTPUT_QUIET ERROR_QUIET)
    if(probe_result EQUAL 0)
      set(POSENC_CLANG_OPENCL_WORKS ON CACHE INTERNAL "clang compiles OpenCL C 1.2")
    else()
      set(POSENC_CLANG_OPENCL_WORKS OFF CACHE INTERNAL "clang compiles OpenCL C 1.2")
    endif()
  endif()
  if(POSENC_CLANG_EXECUTABLE AND POSENC_CLANG_OPENCL_WORKS)
    set(POSENC_CL_CHECK ON)
  elseif(POSENC_OPENCL_MODE STREQUAL "ON")
    message(FATAL_ERROR "POSENC_OPENCL=ON but no clang able to compile OpenCL C 1.2 was found "
                        "(Debian/Ubuntu: apt-get install clang); it checks the kernels at build "
                        "time")
  else()
    message(WARNING "posenc: no clang with OpenCL C support found: the OpenCL kernels are "
                    "embedded without the build-time compile check")
  endif()
endif()

message(STATUS "posenc: SPIR-V kernels ${POSENC_SPIRV_KERNELS}, OpenCL C kernels "
               "${POSENC_CL_KERNELS} (build-time check ${POSENC_CL_CHECK})")

# Called from shaders/variants.cmake: one kernel variant, `name` giving the id the backends look
# it up by (unique per language), `source` a file in shaders/, then the preprocessor defines
# selecting the variant (NAME or NAME=VALUE).
macro(posenc_kernel_variant name source)
  if("${source}" MATCHES "\\.comp$")
    set(kind spirv)
  elseif("${source}" MATCHES "\\.cl$")
    set(kind cl)
  else()
    message(FATAL_ERROR "posenc_kernel_variant(${name}): ${source} is neither .comp nor .cl")
  endif()
  if(NOT EXISTS "${POSENC_KERNELS_SOURCE_DIR}/${source}")
    message(FATAL_ERROR "posenc_kernel_variant(${name}): shaders/${source} does not exist")
  endif()
  if("${name}" IN_LIST posenc_${kind}_variants)
    message(FATAL_ERROR "posenc_kernel_variant(${name}): a ${kind} variant of that name exists")
  endif()
  # Lower case, so that the ids (POSENC__SPIRV_<NAME>) are as distinct as the names.
  if(NOT "${name}" MATCHES "^[a-z_][a-z0-9_]*$")
    message(FATAL_ERROR "posenc_kernel_variant(${name}): names are lower-case C identifiers")
  endif()
  list(APPEND posenc_${kind}_variants "${name}")
  list(APPEND posenc_variant_sources "${source}")
  set(posenc_${kind}_source_${name} "${source}")
  set(posenc_${kind}_defines_${name} "${ARGN}")
endmacro()

# Escapes `text` for a C string literal.
function(posenc__c_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

function(posenc_add_kernels target)
  set(src "${POSENC_KERNELS_SOURCE_DIR}")
  set(gen "${CMAKE_CURRENT_BINARY_DIR}/kernels")
  set(here "${CMAKE_CURRENT_FUNCTION_LIST_DIR}")
  set(posenc_spirv_variants "")
  set(posenc_cl_variants "")
  set(posenc_variant_sources "")
  include("${src}/variants.cmake")

  # Every kernel file needs a variant, so that a new one is not silently left out. A .cl file
  # without a `kernel` function is a header (angle.cl); headers of GLSL are *.glsl.
  file(GLOB kernel_files CONFIGURE_DEPENDS RELATIVE "${src}" "${src}/*.comp" "${src}/*.cl")
  foreach(file IN LISTS kernel_files)
    if(file MATCHES "\\.cl$")
      file(STRINGS "${src}/${file}" entry_points REGEX "^[ \t]*(__)?kernel[ \t]")
      if(NOT entry_points)
        continue()
      endif()
    endif()
    if(NOT file IN_LIST posenc_variant_sources)
      message(FATAL_ERROR "shaders/${file} has no variant in shaders/variants.cmake")
    endif()
  endforeach()
  # Kernel warnings are errors as C warnings are (POSENC_WERROR): a newer compiler's new
  # warning must not break the build of a project that has posenc inside it.
  set(kernel_werror "")
  if(POSENC_WERROR)
    set(kernel_werror -Werror)
  endif()
  # A change in any header rebuilds every variant of that language: simple, and always right.
  # *.h headers (posenc_kernel_params.h) are read by both languages and by the C code.
  file(GLOB shared_headers CONFIGURE_DEPENDS "${src}/*.h")
  file(GLOB glsl_headers CONFIGURE_DEPENDS "${src}/*.glsl")
  file(GLOB cl_headers CONFIGURE_DEPENDS "${src}/*.cl")
  list(APPEND glsl_headers ${shared_headers})
  list(APPEND cl_headers ${shared_headers})

  # The ids of every variant, present whether or not a path is on, so that the backends compile
  # the same either way (a path that is off has an empty table: posenc__spirv_get gives NULL).
  set(POSENC_SPIRV_IDS "")
  foreach(name IN LISTS posenc_spirv_variants)
    string(TOUPPER "${name}" id)
    string(APPEND POSENC_SPIRV_IDS "    POSENC__SPIRV_${id},\n")
  endforeach()
  set(POSENC_CL_IDS "")
  foreach(name IN LISTS posenc_cl_variants)
    string(TOUPPER "${name}" id)
    string(APPEND POSENC_CL_IDS "    POSENC__CL_${id},\n")
  endforeach()
  configure_file("${here}/PosencKernelIds.h.in" "${gen}/kernel_ids.h" @ONLY)
  # kernel_ids.h and the shaders' posenc_kernel_params.h, for the library and its tests.
  add_library(posenc_kernel_headers INTERFACE)
  target_include_directories(posenc_kernel_headers INTERFACE "${gen}" "${src}")
  target_link_libraries(${target} PRIVATE posenc_kernel_headers)

  set(generated "")
  set(POSENC_SPIRV_ENABLED 0)
  set(POSENC_SPIRV_COUNT 0)
  set(POSENC_SPIRV_DECLS "")
  set(POSENC_SPIRV_ENTRIES "")
  set(POSENC_CL_ENABLED 0)
  set(POSENC_CL_COUNT 0)
  set(POSENC_CL_DECLS "")
  set(POSENC_CL_ENTRIES "")

  if(POSENC_SPIRV_KERNELS)
    file(MAKE_DIRECTORY "${gen}/spirv")
    foreach(name IN LISTS posenc_spirv_variants)
      set(file "${posenc_spirv_source_${name}}")
      set(defines "")
      foreach(d IN LISTS posenc_spirv_defines_${name})
        list(APPEND defines "-D${d}")
      endforeach()
      set(spv "${gen}/spirv/${name}.spv")
      if(POSENC_GLSLC_EXECUTABLE)
        set(compile "${POSENC_GLSLC_EXECUTABLE}" -fshader-stage=compute --target-env=vulkan1.1
                    -O ${kernel_werror} -I "${src}" ${defines} -o "${spv}" "${src}/${file}")
      else()
        set(compile "${POSENC_GLSLANG_EXECUTABLE}" -V --target-env vulkan1.1 -S comp
                    "-I${src}" ${defines} -o "${spv}" "${src}/${file}")
      endif()
      set(validate "")
      if(POSENC_SPIRV_VAL_EXECUTABLE)
        set(validate COMMAND "${POSENC_SPIRV_VAL_EXECUTABLE}" --target-env vulkan1.1 "${spv}")
      endif()
      add_custom_command(OUTPUT "${spv}"
        COMMAND ${compile}
        ${validate}
        DEPENDS "${src}/${file}" ${glsl_headers}
        COMMENT "posenc: compiling shaders/${file} to SPIR-V (${name})"
        VERBATIM)
      add_custom_command(OUTPUT "${spv}.c"
        COMMAND "${CMAKE_COMMAND}" "-DINPUT=${spv}" "-DOUTPUT=${spv}.c" "-DNAME=${name}"
                "-DSOURCE=${file}" "-DDEFINES=${defines}" -P "${here}/EmbedSpirv.cmake"
        DEPENDS "${spv}" "${here}/EmbedSpirv.cmake"
        COMMENT "posenc: embedding ${name}.spv"
        VERBATIM)
      list(APPEND generated "${spv}.c")
      string(APPEND POSENC_SPIRV_DECLS "extern const posenc__spirv posenc__spirv_${name};\n")
      string(APPEND POSENC_SPIRV_ENTRIES "    &posenc__spirv_${name},\n")
      math(EXPR POSENC_SPIRV_COUNT "${POSENC_SPIRV_COUNT} + 1")
    endforeach()
    set(POSENC_SPIRV_ENABLED 1)
    target_compile_definitions(${target} PRIVATE POSENC_HAVE_SPIRV_KERNELS)
  endif()

  if(POSENC_CL_KERNELS)
    file(MAKE_DIRECTORY "${gen}/opencl")
    set(cl_files "")
    set(checks "")
    foreach(name IN LISTS posenc_cl_variants)
      set(file "${posenc_cl_source_${name}}")
      list(APPEND cl_files "${file}")
      set(defines "")
      foreach(d IN LISTS posenc_cl_defines_${name})
        list(APPEND defines "-D${d}")
      endforeach()
      if(POSENC_CL_CHECK)
        set(stamp "${gen}/opencl/${name}.checked")
        add_custom_command(OUTPUT "${stamp}"
          COMMAND "${POSENC_CLANG_EXECUTABLE}" -x cl -cl-std=CL1.2
                  -Xclang -finclude-default-header -fsyntax-only -Wall -Wextra
                  ${kernel_werror}
                  -I "${src}" ${defines} "${src}/${file}"
          COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
          DEPENDS "${src}/${file}" ${cl_headers}
          COMMENT "posenc: compiling shaders/${file} as OpenCL C 1.2 (${name})"
          VERBATIM)
        list(APPEND checks "${stamp}")
      endif()
      get_filename_component(base "${file}" NAME_WE)
      string(MAKE_C_IDENTIFIER "${base}" id)
      string(REPLACE ";" " " options "${defines}")
      posenc__c_string(options "${options}")
      string(APPEND POSENC_CL_ENTRIES
        "    {\"${name}\", \"${file}\", \"posenc_${id}\", posenc__cl_source_${id}, ${options}},\n")
      math(EXPR POSENC_CL_COUNT "${POSENC_CL_COUNT} + 1")
    endforeach()
    list(REMOVE_DUPLICATES cl_files)
    foreach(file IN LISTS cl_files)
      get_filename_component(base "${file}" NAME_WE)
      string(MAKE_C_IDENTIFIER "${base}" id)
      set(out "${gen}/opencl/${file}.c")
      # Depends on the checks, so that a kernel that does not compile fails the build here.
      add_custom_command(OUTPUT "${out}"
        COMMAND "${CMAKE_COMMAND}" "-DINPUT=${src}/${file}" "-DOUTPUT=${out}"
                "-DSYMBOL=posenc__cl_source_${id}" -P "${here}/EmbedText.cmake"
        DEPENDS "${src}/${file}" ${cl_headers} ${checks} "${here}/EmbedText.cmake"
        COMMENT "posenc: embedding shaders/${file}"
        VERBATIM)
      list(APPEND generated "${out}")
      string(APPEND POSENC_CL_DECLS "extern const char posenc__cl_source_${id}[];\n")
    endforeach()
    set(POSENC_CL_ENABLED 1)
    target_compile_definitions(${target} PRIVATE POSENC_HAVE_CL_KERNELS)
  endif()

  # The lookup tables and functions; present (and empty) when a path is off.
  configure_file("${here}/PosencKernelTable.c.in" "${gen}/kernel_table.c" @ONLY)
  list(APPEND generated "${gen}/kernel_table.c")
  target_sources(${target} PRIVATE ${generated})
  # Every kernel on its own: `cmake --build <dir> --target posenc_kernels`.
  add_custom_target(posenc_kernels DEPENDS ${generated})
endfunction()
