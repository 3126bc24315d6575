# SPDX-License-Identifier: MIT
# Runs one command and checks its exit code and output: the command-line tool's tests.
#   cmake -DEXPECT_RC=N [-DSTDOUT_REGEX=R] [-DSTDOUT_CONTAINS=a|b|c] [-DSTDERR_REGEX=R]
#         [-DANY_STDERR=ON] [-DFRESH_DIR=D [-DCOPY_IN=a|b] [-DUNCHANGED=ON]
#         [-DEXPECT_FILES=a|b]] [-DWRAPPER=w|args] [-DEMULATOR=e|args]
#         -P run_check.cmake -- COMMAND ARGS...
# COMMAND is a program of this build: in a cross build it runs under EMULATOR (the build's
# CMAKE_CROSSCOMPILING_EMULATOR, its list separated by '|': qemu-aarch64, wine). WRAPPER is a
# host program that runs it (file_size_limit.sh): WRAPPER, then EMULATOR, then COMMAND.
# STDOUT_CONTAINS lists literal texts, separated by '|', that stdout must all contain.
# A failing command (EXPECT_RC != 0) must print exactly one line on stderr, matching
# STDERR_REGEX; ANY_STDERR=ON relaxes the one-line rule where a device runtime may add its own
# lines. CMake's '.' matches newlines too, so "a.*b" spans lines.
# FRESH_DIR is emptied (created) before the command, and the files COPY_IN names are copied
# into it; UNCHANGED=ON then requires it to hold the same files with the same bytes afterwards
# (nothing replaced, removed or left behind), EXPECT_FILES that it holds exactly those files.
set(command "")
set(collect OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(collect)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(collect ON)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "run_check.cmake: no command after --")
endif()
foreach(prefix EMULATOR WRAPPER)
  if(DEFINED ${prefix} AND NOT "${${prefix}}" STREQUAL "")
    string(REPLACE "|" ";" words "${${prefix}}")
    list(PREPEND command ${words})
  endif()
endforeach()
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()

# "name sha256" of every file under FRESH_DIR, sorted.
function(snapshot out)
  file(GLOB_RECURSE entries LIST_DIRECTORIES false RELATIVE "${FRESH_DIR}" "${FRESH_DIR}/*")
  list(SORT entries)
  set(lines "")
  foreach(entry IN LISTS entries)
    file(SHA256 "${FRESH_DIR}/${entry}" hash)
    string(APPEND lines "  ${entry} ${hash}\n")
  endforeach()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

if(DEFINED FRESH_DIR AND NOT "${FRESH_DIR}" STREQUAL "")
  get_filename_component(FRESH_DIR "${FRESH_DIR}" ABSOLUTE) # file(GLOB RELATIVE) needs it
  file(REMOVE_RECURSE "${FRESH_DIR}")
  file(MAKE_DIRECTORY "${FRESH_DIR}")
  if(DEFINED COPY_IN AND NOT "${COPY_IN}" STREQUAL "")
    string(REPLACE "|" ";" copies "${COPY_IN}")
    file(COPY ${copies} DESTINATION "${FRESH_DIR}")
  endif()
  snapshot(before)
endif()

execute_process(COMMAND ${command}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)

string(REPLACE ";" " " shown "${command}")
set(problems "")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  string(APPEND problems "exit code ${rc}, expected ${EXPECT_RC}\n")
endif()
if(DEFINED STDOUT_REGEX AND NOT "${STDOUT_REGEX}" STREQUAL "" AND NOT out MATCHES "${STDOUT_REGEX}")
  string(APPEND problems "stdout does not match '${STDOUT_REGEX}'\n")
endif()
if(DEFINED STDOUT_CONTAINS AND NOT "${STDOUT_CONTAINS}" STREQUAL "")
  string(REPLACE "|" ";" texts "${STDOUT_CONTAINS}")
  foreach(text IN LISTS texts)
    string(FIND "${out}" "${text}" at)
    if(at EQUAL -1)
      string(APPEND problems "stdout does not contain '${text}'\n")
    endif()
  endforeach()
endif()
if(DEFINED STDERR_REGEX AND NOT "${STDERR_REGEX}" STREQUAL "" AND NOT err MATCHES "${STDERR_REGEX}")
  string(APPEND problems "stderr does not match '${STDERR_REGEX}'\n")
endif()
if(NOT EXPECT_RC EQUAL 0 AND NOT ANY_STDERR)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT lines EQUAL 1 OR NOT err MATCHES "\n$")
    string(APPEND problems "stderr is not exactly one line\n")
  endif()
endif()

if(UNCHANGED)
  snapshot(after)
  if(NOT after STREQUAL before)
    string(APPEND problems "${FRESH_DIR} changed; before:\n${before}after:\n${after}")
  endif()
endif()
if(DEFINED EXPECT_FILES AND NOT "${EXPECT_FILES}" STREQUAL "")
  string(REPLACE "|" ";" expected "${EXPECT_FILES}")
  list(SORT expected)
  file(GLOB_RECURSE present LIST_DIRECTORIES false RELATIVE "${FRESH_DIR}" "${FRESH_DIR}/*")
  list(SORT present)
  if(NOT present STREQUAL expected)
    string(APPEND problems "${FRESH_DIR} holds '${present}', expected '${expected}'\n")
  endif()
endif()

if(problems)
  message(FATAL_ERROR "${shown}\n${problems}--- stdout:\n${out}--- stderr:\n${err}")
endif()
message(STATUS "${shown}: ok\n${out}${err}")
