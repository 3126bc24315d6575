# SPDX-License-Identifier: MIT
# tools/device-check.sh without building or running anything: its options, its dry run, and its
# summary of the logs in logs/ (a run on lavapipe and PoCL) and of copies altered to fail.
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

# Runs the script with ARGS: its exit code must be `rc`, and its output (stdout and stderr
# together) must hold each of CONTAINS, literally.
function(expect name rc)
  cmake_parse_arguments(E "" "" "ARGS;CONTAINS" ${ARGN})
  execute_process(COMMAND "${BASH}" "${script}" ${E_ARGS}
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
  file(COPY "${fixture}/" DESTINATION "${dir}/device-check")
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
function(expect_json_ name dir mode value)
  file(READ "${dir}/device-check-summary.json" json)
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
           "glslc or glslangValidator" libvulkan-dev opencl-headers "No root is")
expect(unknown_option 2 ARGS --bogus CONTAINS "device-check: unknown option '--bogus'")
expect(bad_jobs 2 ARGS --jobs 0 CONTAINS "--jobs: expected a positive integer, got '0'")
expect(missing_value 2 ARGS --build-dir CONTAINS "--build-dir: missing value")
expect(summary_without_logs 1 ARGS --summary-only --build-dir "${WORK_DIR}/empty"
  CONTAINS "no logs of an earlier run")

# A dry run prints each step and creates nothing.
expect(dry_run 0 ARGS --dry-run --build-dir "${WORK_DIR}/dry" --jobs 3 --cmake-arg -DX=1
  CONTAINS "-DCMAKE_BUILD_TYPE=Release" "-DX=1" "cmake --build ${WORK_DIR}/dry -j 3"
           "posenc devices --json" "ctest --test-dir ${WORK_DIR}/dry" "posenc demo --device SEL"
           "posenc bench --device SEL --json" "device-check-summary.cmake")
if(EXISTS "${WORK_DIR}/dry")
  report("dry_run: created ${WORK_DIR}/dry")
endif()

# ---- the summary of a run that passed ------------------------------------------------------------
# The figures expected are those of the logs, read by eye (and with jq for the bench's minima
# and maxima over its RoPE rows).
copy_logs(pass dir)
expect(pass 0 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "tests: 26 passed, 0 failed, 0 skipped, Vulkan validation on"
           "vulkan:0  llvmpipe (LLVM 15.0.6, 256 bits)"
           "bits)  [software device (type software), checked]"
           "16 test programs passed on it, 0 failed; worst f32 error 2.76 x 2^-24 (promise 8)"
           "(promise 8), f16/bf16 0.530 of tolerance"
           "rope max error 1.96e-07 = 0.412 x promise, sinusoidal 1.21e-07 = 0.254 x; pass"
           "prefill 0.21 to 0.54, decode 0.11 to 0.17; prefill f32 neox 1.2 GB/s, copy 2.2 GB/s"
           "opencl:0  pthread-skylake-avx512-Intel(R) Xeon(R) Processor"
           "Processor  [software device (type CPU), checked]"
           "12 test programs passed on it, 0 failed; worst f32 error 2.77 x 2^-24"
           "rope max error 1.85e-07 = 0.389 x promise, sinusoidal 1.12e-07 = 0.234 x; pass"
           "prefill 0.02 to 0.20, decode 0.07 to 0.49; prefill f32 neox 1.7 GB/s, copy 8.7 GB/s"
           "result: PASS")
expect_json(pass "${dir}" ON ok)
expect_json(pass "${dir}" 26 tests passed)
expect_json_length(pass "${dir}" 2 devices) # the native CPU path is not listed
expect_json(pass "${dir}" 16 devices 0 tests passed)
expect_json(pass "${dir}" 2.76 devices 0 tests worst_f32_error_times_2pow24)
expect_json(pass "${dir}" 0.2095 devices 0 bench rope_prefill_ratio_min)
expect_json(pass "${dir}" 0.5382 devices 0 bench rope_prefill_ratio_max)
expect_json_length(pass "${dir}" 15 devices 0 bench rows)
expect_json(pass "${dir}" 1.85e-07 devices 1 demo rope_max_error)
expect_json(pass "${dir}" 0.4938 devices 1 bench rope_decode_ratio_max)
if(EXISTS "${dir}/device-check-summary.json.tmp")
  report("pass: the temporary summary was left behind")
endif()

# Two Vulkan devices of one name (two cards of a model): the tests' lines name both alike, so
# their counts are given for the two together, and said to be.
copy_logs(same_name dir)
set(logs "${dir}/device-check")
file(READ "${logs}/devices.json" devices)
string(REGEX MATCH "\n    {\"index\": 0, \"selector\": \"vulkan:0\"[^}]*}," first "${devices}")
string(REPLACE "\"vulkan:0\"" "\"vulkan:1\"" second "${first}")
string(REPLACE "${first}" "${first}${second}" devices "${devices}")
file(WRITE "${logs}/devices.json" "${devices}")
foreach(file demo-vulkan-0.txt demo-vulkan-0.rc bench-vulkan-0.json bench-vulkan-0.rc)
  string(REPLACE "vulkan-0" "vulkan-1" copy "${file}")
  file(READ "${logs}/${file}" content) # file(COPY_FILE) needs CMake 3.21
  file(WRITE "${logs}/${copy}" "${content}")
endforeach()
expect(same_name 0 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "vulkan:1  llvmpipe (LLVM 15.0.6, 256 bits)"
           "16 test programs passed on it, 0 failed (on the 2 devices of this name together)")
expect_json_length(same_name "${dir}" 3 devices)

# A backend the build left out is named with what it lacked, from the build's cache.
copy_logs(left_out dir)
alter("${dir}/device-check/devices.json"
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
alter("${dir}/device-check/meta.txt" "allow_software=1" "allow_software=0")
expect(no_gpu 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "not checked without --allow-software"
           "result: FAIL: no GPU device found (software devices count only with --allow-software)")
expect_json(no_gpu "${dir}" OFF ok)
expect_json(no_gpu "${dir}" OFF devices 0 checked)

# test_rope failed on the Vulkan device.
copy_logs(test_failed dir)
alter("${dir}/device-check/ctest.log" "\n1:   vulkan   ([^\n]*[^ ]) +ok\n"
      "\n1:   vulkan   \\1 FAILED\n")
alter("${dir}/device-check/ctest.log" "(test_rope [ .]*)Passed" "\\1***Failed")
expect(test_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "tests: 25 passed, 1 failed, 0 skipped" "15 test programs passed on it, 1 failed"
           "result: FAIL: 1 test(s) failed: test_rope"
           "vulkan:0: 1 test run(s) failed on this device")
expect_json(test_failed "${dir}" test_rope tests failed_names 0)

# The demo found an error above the promise.
copy_logs(demo_failed dir)
alter("${dir}/device-check/demo-vulkan-0.txt" "max error 1.9e-07 = 0.398 x"
      "max error 5.1e-07 = 1.070 x")
alter("${dir}/device-check/demo-vulkan-0.txt" "result: PASS[^\n]*" "result: FAIL")
file(WRITE "${dir}/device-check/demo-vulkan-0.rc" "1\n")
expect(demo_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "rope max error 5.1e-07 = 1.070 x promise"
           "vulkan:0: accuracy demo failed (exit 1, see demo-vulkan-0.txt)")
expect_json(demo_failed "${dir}" 1.07 devices 0 demo rope_x_promise)

# A bench row failed; and no demo ran on the OpenCL device.
copy_logs(bench_failed dir)
alter("${dir}/device-check/bench-opencl-0.json" "\"ok\": true}\n$" "\"ok\": false}\n")
file(WRITE "${dir}/device-check/bench-opencl-0.rc" "1\n")
file(REMOVE "${dir}/device-check/demo-opencl-0.txt")
expect(bench_failed 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "result: FAIL: opencl:0: no accuracy demo log; opencl:0: bench failed (exit 1")

# No device list: posenc devices did not run.
copy_logs(no_devices dir)
file(REMOVE "${dir}/device-check/devices.json")
expect(no_devices 1 ARGS --summary-only --build-dir "${dir}"
  CONTAINS "no device list (posenc devices --json did not run)")

get_property(errors GLOBAL PROPERTY check_errors)
if(errors)
  message(FATAL_ERROR "tools/device-check.sh:${errors}")
endif()
message(STATUS "tools/device-check.sh: options, dry run and summaries as expected")
