# Install test: `cmake --install` into a prefix inside the build tree, then build and run a consumer project
# against that copy only (find_package and pkg-config), use the installed tools and Python package
# (tests/consumer/run.sh). Included by tests/CMakeLists.txt.
set(RS_CONSUMER_CFLAGS "${CMAKE_C_FLAGS}")
if(RESHARD_SANITIZE)
  string(APPEND RS_CONSUMER_CFLAGS " -fsanitize=address,undefined")
endif()
# The installed Python package is imported only where the library can be loaded into a plain Python.
set(RS_CONSUMER_PYTHON "")
if(NOT RS_CONSUMER_CFLAGS MATCHES "-fsanitize")
  find_program(RS_SYSTEM_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT RS_SYSTEM_PYTHON3)
    find_program(RS_SYSTEM_PYTHON3 NAMES python3)
  endif()
  if(RS_SYSTEM_PYTHON3)
    set(RS_CONSUMER_PYTHON ${RS_SYSTEM_PYTHON3})
  endif()
endif()
add_test(NAME install_consumer
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                 ${CMAKE_C_COMPILER} "${RS_CONSUMER_CFLAGS}" ${CMAKE_GENERATOR} "${RS_CONSUMER_PYTHON}")
set_tests_properties(install_consumer PROPERTIES TIMEOUT 300 LABELS install
                     PASS_REGULAR_EXPRESSION "install test OK" ENVIRONMENT "RESHARD_LIBRARY=")
