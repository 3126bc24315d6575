# SPDX-License-Identifier: MIT
# After tests/consumer/subproject is built: runs its program, checks that installing the project
# installs nothing of posenc (it has no install rules of its own either), and that its CTest
# tests are its own alone.
#   cmake -DBUILD=... -DPREFIX=... [-DEXPECT_TESTS=n] [-DEMULATOR=e|args] -P
cmake_minimum_required(VERSION 3.20)
foreach(var BUILD PREFIX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "subproject_run.cmake: -D${var}=... is required")
  endif()
endforeach()

file(GLOB_RECURSE programs "${BUILD}/consumer" "${BUILD}/consumer.exe")
list(FILTER programs EXCLUDE REGEX "/CMakeFiles/")
if(NOT programs)
  message(FATAL_ERROR "no consumer program was built in ${BUILD}")
endif()
list(GET programs 0 program)
string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(COMMAND ${emulator} "${program}" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${program} failed (${result})")
endif()

file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}"
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${PREFIX} failed")
endif()
file(GLOB_RECURSE installed "${PREFIX}/*")
if(installed)
  message(FATAL_ERROR "posenc installed files into a project that did not ask for it: "
                      "${installed}")
endif()

if(DEFINED EXPECT_TESTS)
  execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" -N
    WORKING_DIRECTORY "${BUILD}" OUTPUT_VARIABLE listing RESULT_VARIABLE result)
  if(NOT result EQUAL 0 OR NOT listing MATCHES "Total Tests: ${EXPECT_TESTS}\n")
    message(FATAL_ERROR "expected ${EXPECT_TESTS} tests, the project's own:\n${listing}")
  endif()
endif()
message(STATUS "${program} ran; nothing installed; the project's tests alone")
