# SPDX-License-Identifier: MIT
# Installation: the shared and static libraries (exported as posenc::posenc and
# posenc::posenc_static), the public headers, a CMake package and a pkg-config file, and the
# license and changelog beside the documentation.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POSENC_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/posenc"
    CACHE STRING "Where posencConfig.cmake is installed, relative to the prefix")
mark_as_advanced(POSENC_CMAKE_INSTALL_DIR)

install(TARGETS posenc posenc_static
  EXPORT posencTargets
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/posenc"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  FILES_MATCHING PATTERN "*.h")

install(EXPORT posencTargets
  NAMESPACE posenc::
  DESTINATION "${POSENC_CMAKE_INSTALL_DIR}")
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/posencConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/posencConfig.cmake"
  INSTALL_DESTINATION "${POSENC_CMAKE_INSTALL_DIR}")
# 0.x releases: only the same minor version is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/posencConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/posencConfig.cmake"
              "${PROJECT_BINARY_DIR}/posencConfigVersion.cmake"
  DESTINATION "${POSENC_CMAKE_INSTALL_DIR}")

# pkg-config: paths relative to the .pc file, so that `cmake --install --prefix` anywhere works.
set(pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(POSENC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(POSENC_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(POSENC_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH up "/prefix/${pc_dir}" "/prefix")
  string(REGEX REPLACE "/$" "" up "${up}")
  set(POSENC_PC_PREFIX "\${pcfiledir}/${up}")
  set(POSENC_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(POSENC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/posenc.pc.in" "${PROJECT_BINARY_DIR}/posenc.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/posenc.pc" DESTINATION "${pc_dir}")

# The license travels with every installed copy (MIT asks for it), with the changelog.
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
  DESTINATION "${CMAKE_INSTALL_DOCDIR}")
