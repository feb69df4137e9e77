# libFuzzer harnesses (issue 7; docs/reliability.md); included by tests/CMakeLists.txt. Label: fuzz.
#   fuzz_front  layout text -> rs_front_load (small limits, sandboxed includes) -> planner -> plan.bin round trip
#               (tests/fuzz/fuzz_front.c)
#   fuzz_plan   plan.bin bytes -> loader (all ranks, one rank), verifiers, dumper, encoder (tests/format/fuzz_plan.c)
#
# In every build:  fuzz.regress.<target>  runs each committed crash input (tests/fuzz/regress/<target>/) and the
#                  checked-in seeds once through the harness, without libFuzzer (tests/fuzz/fuzz_main.c).
# With clang and libFuzzer on this machine (checked at configure time; otherwise not registered):
#   fuzz.build            configures and builds build/fuzz (clang, -DRESHARD_FUZZ=ON) through tests/fuzz/run.sh
#   fuzz.smoke.<target>   runs each harness for RS_FUZZ_SMOKE_SECONDS (20) on its seed corpus
# A longer campaign:  tests/fuzz/run.sh front 1800  (see docs/reliability.md). A crash found becomes a regression
# test by copying its input into tests/fuzz/regress/<target>/.
#
# RESHARD_FUZZ=ON (a clang build) adds the libFuzzer executables fuzz_front and fuzz_plan. tests/fuzz/run.sh
# configures that build with CMAKE_C_FLAGS=-fsanitize=fuzzer-no-link,address,undefined, so that every
# library under test is checked and gives coverage feedback.
option(RESHARD_FUZZ "Build the libFuzzer harnesses (clang; see tests/fuzz/run.sh)" OFF)
set(RS_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
set(RS_FUZZ_PLAN_SRC ${CMAKE_CURRENT_SOURCE_DIR}/format/fuzz_plan.c)
set(RS_FUZZ_DEFS RS_SOURCE_DIR="${PROJECT_SOURCE_DIR}") # fuzz_front copies include files from the tree

if(RESHARD_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RESHARD_FUZZ needs clang (-DCMAKE_C_COMPILER=clang; tests/fuzz/run.sh does it)")
  endif()
  if(NOT CMAKE_C_FLAGS MATCHES "fuzzer-no-link")
    message(WARNING "RESHARD_FUZZ without CMAKE_C_FLAGS=-fsanitize=fuzzer-no-link,address,undefined: "
                    "the libraries give no coverage feedback (tests/fuzz/run.sh sets it)")
  endif()
  add_executable(fuzz_front ${RS_FUZZ_DIR}/fuzz_front.c)
  target_link_libraries(fuzz_front PRIVATE rscompiler)
  target_compile_definitions(fuzz_front PRIVATE ${RS_FUZZ_DEFS})
  target_include_directories(fuzz_front PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hard)
  add_executable(fuzz_plan ${RS_FUZZ_PLAN_SRC})
  target_link_libraries(fuzz_plan PRIVATE rs_fmt_fixture)
  foreach(t fuzz_front fuzz_plan)
    target_compile_options(${t} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${t} PRIVATE -fsanitize=fuzzer,address,undefined)
  endforeach()
endif()

# The same harnesses as plain programs: regressions and seeds in every build (and under ASan in the sanitize
# build).
add_executable(fuzz_front_once ${RS_FUZZ_DIR}/fuzz_front.c ${RS_FUZZ_DIR}/fuzz_main.c)
target_link_libraries(fuzz_front_once PRIVATE rscompiler)
target_compile_definitions(fuzz_front_once PRIVATE ${RS_FUZZ_DEFS})
target_include_directories(fuzz_front_once PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hard)
add_executable(fuzz_plan_once ${RS_FUZZ_PLAN_SRC} ${RS_FUZZ_DIR}/fuzz_main.c)
target_link_libraries(fuzz_plan_once PRIVATE rs_fmt_fixture)
add_test(NAME fuzz.regress.front
         COMMAND fuzz_front_once ${RS_FUZZ_DIR}/regress/front ${PROJECT_SOURCE_DIR}/examples
                 ${CMAKE_CURRENT_SOURCE_DIR}/front ${CMAKE_CURRENT_SOURCE_DIR}/errors)
add_test(NAME fuzz.regress.plan COMMAND fuzz_plan_once ${RS_FUZZ_DIR}/regress/plan ${RS_FMT_WORK})
set_tests_properties(fuzz.regress.front fuzz.regress.plan PROPERTIES LABELS fuzz TIMEOUT 300)
set_tests_properties(fuzz.regress.plan PROPERTIES FIXTURES_REQUIRED rs_fmt_plans) # the fixture plans as seeds

# Smoke runs with libFuzzer: only where clang can link -fsanitize=fuzzer (clang, libclang-rt-14-dev), and
# not inside the sanitize or fuzz sub-builds themselves.
set(RS_FUZZ_SMOKE_SECONDS 20 CACHE STRING "Seconds each libFuzzer harness runs in the fuzz.smoke tests")
if(NOT RESHARD_SANITIZE AND NOT RESHARD_FUZZ)
  find_program(RS_CLANG NAMES clang clang-14)
  set(RS_HAVE_LIBFUZZER OFF)
  if(RS_CLANG)
    set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
    file(MAKE_DIRECTORY ${probe})
    file(WRITE ${probe}/probe.c
         "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n")
    execute_process(COMMAND ${RS_CLANG} -fsanitize=fuzzer,address,undefined probe.c -o probe
                    WORKING_DIRECTORY ${probe} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(RS_HAVE_LIBFUZZER ON)
    endif()
  endif()
  if(RS_HAVE_LIBFUZZER)
    message(STATUS "reshard: libFuzzer found (${RS_CLANG}): fuzz.smoke tests run each harness ${RS_FUZZ_SMOKE_SECONDS} s")
    set(RS_FUZZ_ENV "RS_FUZZ_BUILD=${CMAKE_BINARY_DIR}/fuzz" "CC=${RS_CLANG}")
    add_test(NAME fuzz.build COMMAND sh ${RS_FUZZ_DIR}/run.sh build)
    set_tests_properties(fuzz.build PROPERTIES LABELS fuzz TIMEOUT 900 FIXTURES_SETUP rs_fuzz_build
                         ENVIRONMENT "${RS_FUZZ_ENV}" COST 500)
    foreach(t front plan)
      add_test(NAME fuzz.smoke.${t} COMMAND sh ${RS_FUZZ_DIR}/run.sh ${t} ${RS_FUZZ_SMOKE_SECONDS})
      set_tests_properties(fuzz.smoke.${t} PROPERTIES LABELS fuzz TIMEOUT 300 FIXTURES_REQUIRED rs_fuzz_build
                           ENVIRONMENT "${RS_FUZZ_ENV};RS_FUZZ_NO_BUILD=1")
    endforeach()
  else()
    message(STATUS "reshard: clang with libFuzzer not found (install clang libclang-rt-14-dev): "
                   "the fuzz.smoke tests are not registered; fuzz.regress still runs")
  endif()
endif()
