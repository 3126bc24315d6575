# SPDX-License-Identifier: MIT
# tools/device-check.sh without building or running anything: its options, its dry run, and its
# summary (tools/device-bundle/summary.sh, shared with the device bundle's run) of the logs in
# logs/ and of copies altered to fail; and the bundle's run --summary-only on the same logs in
# the bundle's form. logs/ is a run on lavapipe and PoCL (tools/device-check.sh --allow-software
# --quick), its paths made /home/user/posenc, and ctest.log cut to the lines the summary reads
# (each test's result, its device lines and its worst errors).
#   cmake -DBASH=bash -DSOURCE_DIR=... -DWORK_DIR=... -P check.cmake
cmake_minimum_required(VERSION 3.20)
foreach(var BASH SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check.cmake: -D${var}=... is required")
  endif()
endforeach()
set(script "${SOURCE_DIR}/tools/device-check.sh")
set(fixture "${SOURCE_DIR}/tests/device_check/logs")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set_property(GLOBAL PROPERTY check_errors "")

function(report text)
  set_property(GLOBAL APPEND_STRING PROPERTY check_errors "\n  ${text}")
endfunction()

# Runs the script (or SCRIPT) with ARGS: its exit code must be `rc`, and its output (stdout and
# stderr together) must hold each of CONTAINS, literally.
function(expect name rc)
  cmake_parse_arguments(E "" "SCRIPT" "ARGS;CONTAINS" ${ARGN})
  if(NOT E_SCRIPT)
    set(E_SCRIPT "${script}")
  endif()
  execute_process(COMMAND "${BASH}" "${E_SCRIPT}" ${E_ARGS}
                  RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(all "${out}${err}")
  if(NOT got STREQUAL "${rc}")
    report("${name}: exit code ${got}, expected ${rc}; output:\n${all}")
    return()
  endif()
  foreach(text IN LISTS E_CONTAINS)
    string(FIND "${all}" "${text}" at)
    if(at EQUAL -1)
      report("${name}: no '${text}' in the output:\n${all}")
    endif()
  endforeach()
endfunction()

# A build directory for case `name` holding a copy of the logs; its path in `out`.
function(copy_logs name out)
  set(dir "${WORK_DIR}/${name}")
  file(MAKE_DIRECTORY "${dir}")
  file(COPY "${fixture}/" DESTINATION "${dir}/device-check/logs")
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# Replaces `from` (a regular expression) by `to` in a log; the log must hold it.
function(alter file from to)
  file(READ "${file}" text)
  string(REGEX REPLACE "${from}" "${to}" changed "${text}")
  if(changed STREQUAL text)
    message(FATAL_ERROR "check.cmake: '${from}' not found in ${file}")
  endif()
  file(WRITE "${file}" "${changed}")
endfunction()

# Member ARGN of the summary JSON of build directory `dir` (or with `mode` LENGTH, its length)
# must be `value`: numbers compared as numbers (string(JSON) reads 2.76 as 2.7599999999999998).
# A `dir` that holds summary.json itself is the bundle's form.
function(expect_json_ name dir mode value)
  if(EXISTS "${dir}/summary.json")
    file(READ "${dir}/summary.json" json)
  else()
    file(READ "${dir}/device-check/summary.json" json)
  endif()
  string(JSON got ERROR_VARIABLE error ${mode} "${json}" ${ARGN})
  string(REPLACE ";" " " where "${ARGN}")
  if(error)
    report("${name}: summary JSON ${where}: ${error}")
  elseif(value MATCHES "^[0-9.e+-]+$" AND got MATCHES "^[0-9.e+-]+$")
    if(NOT got EQUAL value)
      report("${name}: summary JSON ${where} is ${got}, expected ${value}")
    endif()
  elseif(NOT got STREQUAL "${value}")
    report("${name}: summary JSON ${where} is '${got}', expected '${value}'")
  endif()
endfunction()
function(expect_json name dir value)
  expect_json_("${name}" "${dir}" GET "${value}" ${ARGN})
endfunction()
function(expect_json_length name dir value)
  expect_json_("${name}" "${dir}" LENGTH "${value}" ${ARGN})
endfunction()

# ---- options -----------------------------------------------------------------------------------
expect(help 0 ARGS --help
  CONTAINS "usage: tools/device-check.sh" --build-dir --allow-software --quick --no-validation
           --jobs --cmake-arg --install-deps --summary-only --dry-run
           "glslc or glslangValidator" libvulkan-dev opencl-headers "No root is"
           "tools/device-bundle/summary.sh")
expect(unknown_option 2 ARGS --bogus CONTAINS "device-check: unknown option '--bogus'")
expect(bad_jobs 2 ARGS --jobs 0 CONTAINS "--jobs: expected a positive integer, got '0'")
expect(missing_value 2 ARGS --build-dir CONTAINS "--build-dir: missing value")
expect(summary_without_logs 1 ARGS --summary-only --build-dir "${WORK_DIR}/empty"
  CONTAINS "no logs of an earlier run")

# A dry run prints each step and creates nothing.
expect(dry_run 0 ARGS --dry-run --build-dir "${WORK_DIR}/dry" --jobs 3 --cmake-arg -DX=1
  CONTAINS "-DCMAKE_BUILD_TYPE=Release" "-DX=1" "cmake --build ${WORK_DIR}/dry -j 3"
           "posenc devices --json" "ctest --test-dir ${WORK_DIR}/dry" "posenc demo --device SEL"
           "posenc bench --device SEL --json" "tools/device-bundle/summary.sh")
if(EXISTS "${WORK_DIR}/dry")
  report("dry_run: created ${WORK_DIR}/dry")
endif()

# ---- the summary of a run that passed ------------------------------------------------------------
# The figures expected are those of the logs, read by eye (and with a JSON reader for the
# bench's minima and maxima over its RoPE rows).
copy_logs(pass dir)
expect(pass 0 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "steps: build (/home/user/posenc/build/device-check) 1 s; devices 1 s; device tests"
           "runtimes:\n  posenc: SPIR-V kernels ON, OpenCL C kernels ON"
           "tests: 53 passed, 0 failed, 0 skipped, Vulkan validation on"
           "vulkan:0  llvmpipe (LLVM 15.0.6, 256 bits)  [software device (type software), checked]"
           "driver:   llvmpipe Mesa 22.3.6 (LLVM 15.0.6), Vulkan 1.3.230"
           "28 test programs passed on it, 0 failed; worst f32 error 2.76 x 2^-24 (promise 8)"
           "(promise 8), f16/bf16 0.521 of tolerance"
           "rope max error 1.96e-07 = 0.412 x promise, sinusoidal 1.21e-07 = 0.254 x; pass"
           "prefill 0.65 to 0.90, decode 0.68 to 0.84; prefill f32 neox 4.3 GB/s, copy 5.6 GB/s"
           "NeoX rope/copy: prefill f32: 0.7950, f16: 0.7421, bf16: 0.8339; decode f32: 0.7715"
           "first RoPE call 14.9694 ms, fresh process 51.7765 ms"
           "opencl:0  pthread-skylake-avx512-AMD EPYC  [software device (type CPU), checked]"
           "21 test programs passed on it, 0 failed; worst f32 error 2.77 x 2^-24"
           "rope max error 1.85e-07 = 0.389 x promise, sinusoidal 1.12e-07 = 0.234 x; pass"
           "prefill 0.29 to 0.92, decode 0.82 to 1.29; prefill f32 neox 44.8 GB/s, copy 48.2 GB/s"
           "result: PASS")
expect_json(pass "${dir}" ON ok)
expect_json(pass "${dir}" "tools/device-check.sh" tool)
expect_json(pass "${dir}" 53 tests passed)
expect_json(pass "${dir}" 17 steps 2 seconds)
expect_json_length(pass "${dir}" 2 devices) # the native CPU path is not listed
expect_json(pass "${dir}" vulkan:0 devices 0 selector)
expect_json(pass "${dir}" "llvmpipe (LLVM 15.0.6, 256 bits)" devices 0 name)
expect_json(pass "${dir}" vulkan devices 0 backend)
expect_json(pass "${dir}" 28 devices 0 tests_passed)
expect_json(pass "${dir}" 0 devices 0 tests_failed)
expect_json(pass "${dir}" 2.76 devices 0 tests_worst_f32_error_times_2pow24)
expect_json(pass "${dir}" 1.96e-07 devices 0 worst_error)
expect_json(pass "${dir}" 0.6544 devices 0 bench rope_prefill_ratio_min)
expect_json(pass "${dir}" 0.9 devices 0 bench rope_prefill_ratio_max)
expect_json(pass "${dir}" 0.6969 devices 0 ratio_to_copy decode f16)
expect_json(pass "${dir}" 51.7765 devices 0 fresh_process_ms)
expect_json_length(pass "${dir}" 16 devices 0 bench rows) # the memory rows are not ratios
expect_json(pass "${dir}" 21 devices 1 tests_passed)
expect_json(pass "${dir}" 1.85e-07 devices 1 demo rope_max_error)
expect_json(pass "${dir}" 1.287 devices 1 bench rope_decode_ratio_max)
expect_json(pass "${dir}" 0.2885 devices 1 ratio_to_copy prefill bf16)
file(GLOB leftovers "${dir}/device-check/*.tmp")
if(leftovers)
  report("pass: temporary files left behind: ${leftovers}")
endif()

# The same logs in the bundle's form (tools/device-bundle/run --summary-only): one run per
# backend. A program that crashed before naming a device counts against every device of its
# run, and no other.
set(dir "${WORK_DIR}/bundle")
file(COPY "${fixture}/" DESTINATION "${dir}/logs")
file(REMOVE "${dir}/logs/ctest.log")
file(WRITE "${dir}/logs/tests.tsv"
  "test_rope\tvulkan\tpassed\t1\ntest_rope\topencl\tpassed\t1\n"
  "test_crash\tvulkan\tFAILED (exit 139)\t0\n")
file(WRITE "${dir}/logs/test-vulkan-test_rope.log"
  "test_rope: RoPE\n  vulkan:0   llvmpipe (LLVM 15.0.6, 256 bits)         ok\n")
file(WRITE "${dir}/logs/test-opencl-test_rope.log"
  "test_rope: RoPE\n  opencl:0   pthread-skylake-avx512-AMD EPYC          ok\n")
file(WRITE "${dir}/logs/test-vulkan-test_crash.log" "")
expect(bundle 1 SCRIPT "${SOURCE_DIR}/tools/device-bundle/run" ARGS --summary-only --out "${dir}"
  CONTAINS "tests: 2 passed, 1 failed, 0 skipped"
           "1 test programs passed on it, 1 failed"
           "result: FAIL: 1 test(s) failed: test_crash; vulkan:0: 1 test run(s) failed on this device")
expect_json(bundle "${dir}" 1 devices 0 tests_failed)
expect_json(bundle "${dir}" 1 devices 0 tests_passed)
expect_json(bundle "${dir}" 0 devices 1 tests_failed)
expect_json(bundle "${dir}" ON devices 1 ok)
expect_json(bundle "${dir}" test_crash tests failed_names 0)
expect(bundle_without_logs 1 SCRIPT "${SOURCE_DIR}/tools/device-bundle/run"
  ARGS --summary-only --out "${WORK_DIR}/bundle_empty" CONTAINS "no logs of an earlier run")

# Two Vulkan devices of one name (two cards of a model): the tests name each by its selector,
# so a second card that no test ran on is found.
copy_logs(second_card dir)
set(logs "${dir}/device-check/logs")
file(READ "${logs}/devices.json" devices)
string(REGEX MATCH "\n    {\"index\": 0, \"selector\": \"vulkan:0\"[^}]*}," first "${devices}")
string(REPLACE "\"vulkan:0\"" "\"vulkan:1\"" second "${first}")
string(REPLACE "${first}" "${first}${second}" devices "${devices}")
file(WRITE "${logs}/devices.json" "${devices}")
foreach(file demo-vulkan-0.log demo-vulkan-0.rc bench-vulkan-0.json bench-vulkan-0.rc)
  string(REPLACE "vulkan-0" "vulkan-1" copy "${file}")
  file(READ "${logs}/${file}" content) # file(COPY_FILE) needs CMake 3.21
  file(WRITE "${logs}/${copy}" "${content}")
endforeach()
expect(second_card 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "vulkan:1  llvmpipe (LLVM 15.0.6, 256 bits)"
           "0 test programs passed on it, 0 failed"
           "result: FAIL: vulkan:1: no test ran on this device")
expect_json_length(second_card "${dir}" 3 devices)
expect_json(second_card "${dir}" 28 devices 0 tests_passed)
expect_json(second_card "${dir}" 0 devices 1 tests_passed)
expect_json(second_card "${dir}" OFF devices 1 ok)

# A backend the build left out is named with what it lacked, from the build's cache.
copy_logs(left_out dir)
alter("${dir}/device-check/logs/devices.json"
      "{\"backend\": \"vulkan\", \"available\": true, \"reason\": \"\"}"
      "{\"backend\": \"vulkan\", \"available\": false, \"reason\": \"not compiled in\"}")
file(WRITE "${dir}/CMakeCache.txt" "POSENC_GLSLC_EXECUTABLE:FILEPATH=/usr/bin/glslc
POSENC_GLSLANG_EXECUTABLE:FILEPATH=POSENC_GLSLANG_EXECUTABLE-NOTFOUND
POSENC_VULKAN_INCLUDE_DIR:PATH=POSENC_VULKAN_INCLUDE_DIR-NOTFOUND
POSENC_OPENCL_INCLUDE_DIR:PATH=/usr/include
")
expect(left_out 0 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "vulkan: unavailable: not compiled in (vulkan/vulkan.h not found, in Debian/Ubuntu's"
           "opencl: available")

# ---- runs that must fail ---------------------------------------------------------------------
# Software devices alone, without --allow-software: no GPU was found.
copy_logs(no_gpu dir)
alter("${dir}/device-check/logs/meta.txt" "allow_software=1" "allow_software=0")
expect(no_gpu 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "not checked without --allow-software"
           "result: FAIL: no GPU device found (software devices count only with --allow-software)")
expect_json(no_gpu "${dir}" OFF ok)
expect_json(no_gpu "${dir}" OFF devices 0 checked)

# test_rope failed on the Vulkan device.
copy_logs(test_failed dir)
alter("${dir}/device-check/logs/ctest.log" "\n1:   vulkan:0   ([^\n]*[^ ]) +ok\n"
      "\n1:   vulkan:0   \\1 FAILED\n")
alter("${dir}/device-check/logs/ctest.log" "(test_rope [ .]*)Passed" "\\1***Failed")
expect(test_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "tests: 52 passed, 1 failed, 0 skipped" "27 test programs passed on it, 1 failed"
           "result: FAIL: 1 test(s) failed: test_rope"
           "vulkan:0: 1 test run(s) failed on this device")
expect_json(test_failed "${dir}" test_rope tests failed_names 0)
expect_json(test_failed "${dir}" 1 devices 0 tests_failed)
expect_json(test_failed "${dir}" 0 devices 1 tests_failed)

# The demo found an error above the promise.
copy_logs(demo_failed dir)
alter("${dir}/device-check/logs/demo-vulkan-0.log" "max error 1.9e-07 = 0.398 x"
      "max error 5.1e-07 = 1.070 x")
alter("${dir}/device-check/logs/demo-vulkan-0.log" "result: PASS[^\n]*" "result: FAIL")
file(WRITE "${dir}/device-check/logs/demo-vulkan-0.rc" "1\n")
expect(demo_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "rope max error 5.1e-07 = 1.070 x promise"
           "vulkan:0: accuracy demo failed (exit 1, see demo-vulkan-0.log)")
expect_json(demo_failed "${dir}" 1.07 devices 0 demo rope_x_promise)

# A bench row failed; and no demo ran on the OpenCL device.
copy_logs(bench_failed dir)
alter("${dir}/device-check/logs/bench-opencl-0.json" "\"ok\": true}\n$" "\"ok\": false}\n")
file(WRITE "${dir}/device-check/logs/bench-opencl-0.rc" "1\n")
file(REMOVE "${dir}/device-check/logs/demo-opencl-0.log")
expect(bench_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "result: FAIL: opencl:0: no accuracy demo log; opencl:0: bench failed (exit 1")

# No device list: posenc devices did not run.
copy_logs(no_devices dir)
file(REMOVE "${dir}/device-check/logs/devices.json")
expect(no_devices 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "no device list (posenc devices --json did not run)")

get_property(errors GLOBAL PROPERTY check_errors)
if(errors)
  message(FATAL_ERROR "tools/device-check.sh:${errors}")
endif()
message(STATUS "tools/device-check.sh and the bundle's run: options, dry run and summaries as expected")
