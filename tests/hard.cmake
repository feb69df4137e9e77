# Hardening tests (issue 7; docs/reliability.md); included by tests/CMakeLists.txt. Labels:
#   hard       hard.plan.<ex> compiles each example scaled down by its `# replay-args:` line (fixture);
#              hard.corrupt.<ex> damages that plan (every truncation, every header byte, sampled flips in
#              every section, resealed damage) against `reshardc verify` and the runtime loader;
#              hard.limits: hostile layouts against the front end's default limits, under a memory cap;
#              hard.huge_heap: reshardc's re-exec for huge pages (rs_reexec_huge_heap)
#   golden     hard.fingerprints: the scaled examples' plan fingerprints against tests/fingerprints.txt.
#              After an intended change to the planner, the format or an example, refresh with
#                  RESHARD_UPDATE=1 ctest --test-dir build -R hard.fingerprints && git diff tests/fingerprints.txt
#              (the same switch refreshes every golden: RESHARD_UPDATE=1 ctest --test-dir build -L golden)
#   sanitize   the whole CPU suite rebuilt with -DRESHARD_SANITIZE=ON in build/sanitize and run there
# The libFuzzer harnesses are in tests/fuzz.cmake (label fuzz).
set(RS_HARD_DIR ${CMAKE_CURRENT_SOURCE_DIR}/hard)
set(RS_HARD_WORK ${CMAKE_CURRENT_BINARY_DIR}/hard)
file(MAKE_DIRECTORY ${RS_HARD_WORK})

add_executable(hard_corrupt ${RS_HARD_DIR}/corrupt.c)
target_link_libraries(hard_corrupt PRIVATE rs_fmt_fixture rsreplay rscompiler)

# Every example, compiled with its replay-args (the same scaled plans the replay tests run).
file(GLOB RS_HARD_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.layout)
list(SORT RS_HARD_EXAMPLES)
set(RS_HARD_NAMES "")
foreach(layout ${RS_HARD_EXAMPLES})
  get_filename_component(ex ${layout} NAME_WLE)
  file(STRINGS ${layout} args_line REGEX "^# *replay-args:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^# *replay-args:" "" args "${args_line}")
  separate_arguments(args UNIX_COMMAND "${args}")
  add_test(NAME hard.plan.${ex}
           COMMAND $<TARGET_FILE:reshardc> ${layout} ${args} -o ${RS_HARD_WORK}/${ex}.plan --quiet)
  set_tests_properties(hard.plan.${ex} PROPERTIES LABELS hard TIMEOUT 300 FIXTURES_SETUP hard_plan_${ex})
  # flips per section, resealed per section, every Nth truncation also through files, every truncation length
  # up to 16 MiB (sampled above: only the largest example)
  add_test(NAME hard.corrupt.${ex} COMMAND hard_corrupt ${RS_HARD_WORK}/${ex}.plan 64 12 65521 16777216)
  set_tests_properties(hard.corrupt.${ex} PROPERTIES LABELS hard TIMEOUT 600 FIXTURES_REQUIRED hard_plan_${ex})
  list(APPEND RS_HARD_NAMES ${ex})
endforeach()

# Golden fingerprints of the scaled examples: a change in any plan's bytes is deliberate.
set(RS_HARD_FIXTURES "")
foreach(ex ${RS_HARD_NAMES})
  list(APPEND RS_HARD_FIXTURES hard_plan_${ex})
endforeach()
add_test(NAME hard.fingerprints
         COMMAND sh ${RS_GOLDEN_SH} ${PROJECT_SOURCE_DIR}/tests/fingerprints.txt
                 sh ${RS_HARD_DIR}/fingerprints.sh $<TARGET_FILE:reshardc> ${RS_HARD_WORK} ${RS_HARD_NAMES})
set_tests_properties(hard.fingerprints PROPERTIES LABELS "hard;golden" TIMEOUT 120
                     FIXTURES_REQUIRED "${RS_HARD_FIXTURES}")

# Hostile layouts against the front end's limits: a clean error at the position, inside a 1 GiB address-space
# cap per case (the program sets RLIMIT_AS, as `ulimit -v`; not in the sanitize build).
add_executable(hard_limits ${RS_HARD_DIR}/limits.c)
target_link_libraries(hard_limits PRIVATE rscompiler)
add_test(NAME hard.limits COMMAND hard_limits 1024)
set_tests_properties(hard.limits PROPERTIES LABELS hard TIMEOUT 300)

# reshardc's start with huge pages for its heap (rs_reexec_huge_heap; a no-op under the sanitizers, so not
# in their sub-builds): when it re-executes, with what GLIBC_TUNABLES, and that the plan is the same.
if(NOT RESHARD_SANITIZE)
  add_executable(hard_huge_heap ${RS_HARD_DIR}/huge_heap.c)
  target_link_libraries(hard_huge_heap PRIVATE rsplan)
  add_test(NAME hard.huge_heap
           COMMAND sh ${RS_HARD_DIR}/huge_heap.sh $<TARGET_FILE:hard_huge_heap> $<TARGET_FILE:reshardc>
                   ${PROJECT_SOURCE_DIR}/examples/qwen3-32b-h100.layout ${RS_HARD_WORK}/huge_heap)
  set_tests_properties(hard.huge_heap PROPERTIES LABELS hard TIMEOUT 120 PASS_REGULAR_EXPRESSION "huge heap OK")
endif()

# The CPU suite under ASan + UBSan: a sub-build of this tree in build/sanitize (-DRESHARD_SANITIZE=ON
# -DRESHARD_GPU=OFF), built and tested by tests/hard/sanitize.sh. Selection: everything but the `examples` label
# (full-size compiles, Python references) and `gpu`, and the largest scaled example (moe-2.5t: its replay and
# corruption run minutes under ASan; the seven others cover the same code; without its plan there is no
# fingerprint table to compare, so hard.fingerprints is left out too). That keeps front end, format,
# planner property tests, runtime replays of in-memory and scaled example plans, corruption, limits, fuzz
# regressions. Not registered inside the sub-builds themselves.
if(NOT RESHARD_SANITIZE AND NOT RESHARD_FUZZ)
  add_test(NAME sanitize
           COMMAND sh ${RS_HARD_DIR}/sanitize.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/sanitize "${CMAKE_GENERATOR}"
                   -LE "examples|gpu" -E "moe-2[.]5t|hard[.]fingerprints")
  # COST: started first, so that it overlaps the rest of the suite instead of running after it
  set_tests_properties(sanitize PROPERTIES LABELS sanitize TIMEOUT 1800 COST 100000)
  # The planner's and verifier's two-thread paths under ThreadSanitizer: a sub-build of reshardc and
  # test_planner only in build/tsan (tests/hard/tsan.sh says what it runs)
  add_test(NAME tsan COMMAND sh ${RS_HARD_DIR}/tsan.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/tsan "${CMAKE_GENERATOR}")
  set_tests_properties(tsan PROPERTIES LABELS sanitize TIMEOUT 1800 COST 50000)
endif()
