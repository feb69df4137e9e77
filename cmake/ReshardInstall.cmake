# ReshardInstall.cmake - what `cmake --install` puts in the prefix besides the runtime's own targets
# (runtime/CMakeLists.txt): reshardc, the CMake package (find_package(reshard) -> reshard::reshard and
# reshard::reshard_static), reshard.pc for pkg-config, and the Python package. Included by the top level.
include(CMakePackageConfigHelpers)

# The library's version lives in two places (project() and reshard.h): they must agree.
file(STRINGS ${PROJECT_SOURCE_DIR}/runtime/include/reshard.h _rs_ver REGEX "^#define RESHARD_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*RESHARD_MAJOR ([0-9]+).*RESHARD_MINOR ([0-9]+).*RESHARD_PATCH ([0-9]+).*" "\\1.\\2.\\3"
       _rs_hver "${_rs_ver}")
if(NOT _rs_hver STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "reshard: reshard.h says version ${_rs_hver}, CMakeLists.txt says ${PROJECT_VERSION}")
endif()

set(RESHARD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/reshard CACHE STRING
    "Where the CMake package files go (relative to the prefix)")
set(RESHARD_INSTALL_PYTHONDIR ${CMAKE_INSTALL_LIBDIR}/python3/dist-packages CACHE STRING
    "Where the Python package reshard/ goes (relative to the prefix; Debian's python3 reads /usr/lib/python3/dist-packages)")

# Installed programs and the shared library find CUDA and NCCL where they were linked from.
set_target_properties(reshardc reshard-replay reshard PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS reshardc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# CMake package.
install(EXPORT reshardTargets NAMESPACE reshard:: FILE reshardTargets.cmake DESTINATION ${RESHARD_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/reshardConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/reshardConfig.cmake
                              INSTALL_DESTINATION ${RESHARD_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/reshardConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/reshardConfig.cmake ${PROJECT_BINARY_DIR}/package/reshardConfigVersion.cmake
        DESTINATION ${RESHARD_INSTALL_CMAKEDIR})
if(RESHARD_HAVE_NCCL)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake DESTINATION ${RESHARD_INSTALL_CMAKEDIR})
endif()

# pkg-config: the prefix is the one given at install time (cmake --install --prefix P), so the file is completed
# by the install step; everything else is known now. Libs.private lists what libreshard.a needs.
set(RS_PC_PRIVATE "${CMAKE_THREAD_LIBS_INIT}")
if(NOT RS_PC_PRIVATE)
  set(RS_PC_PRIVATE "-lpthread")
endif()
if(RESHARD_HAVE_CUDA)
  string(APPEND RS_PC_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -ldl -lrt -lstdc++")
endif()
if(RESHARD_HAVE_NCCL)
  get_filename_component(_rs_nccl_dir ${NCCL_LIBRARY} DIRECTORY)
  string(APPEND RS_PC_PRIVATE " -L${_rs_nccl_dir} -lnccl")
endif()
set(RS_PC_PREFIX "@RS_PC_PREFIX@") # left for the install step
configure_file(${PROJECT_SOURCE_DIR}/cmake/reshard.pc.in ${PROJECT_BINARY_DIR}/package/reshard.pc.in @ONLY)
install(CODE "set(RS_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${PROJECT_BINARY_DIR}/package/reshard.pc.in\" \"${PROJECT_BINARY_DIR}/package/install/reshard.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/package/install/reshard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Python package: pure Python over libreshard.so (ctypes). _install.py tells it where the library is,
# relative to itself, so the installed tree can be moved as a whole.
file(RELATIVE_PATH RS_PY_TO_LIB ${CMAKE_INSTALL_PREFIX}/${RESHARD_INSTALL_PYTHONDIR}/reshard
     ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/package/_install.py CONTENT
"# _install.py - written by `cmake --install`: where libreshard is, relative to this package.
LIBDIR = \"@RS_PY_TO_LIB@\"
" @ONLY)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/reshard DESTINATION ${RESHARD_INSTALL_PYTHONDIR}
        PATTERN __pycache__ EXCLUDE PATTERN *.pyc EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/package/_install.py DESTINATION ${RESHARD_INSTALL_PYTHONDIR}/reshard)

# Example layouts, to start a model's layout from.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/reshard/examples
        FILES_MATCHING PATTERN *.layout PATTERN README.md)
