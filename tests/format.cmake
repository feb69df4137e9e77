# Plan format tests (plan.bin writer, reader, verifier, dump, diff); included by tests/CMakeLists.txt.
#
# Golden files. Every golden test carries the label `golden` and compares a command's stdout with a
# checked-in file through tests/golden.sh. Refresh them all with ONE command, then review the diff:
#
#     RESHARD_UPDATE=1 ctest --test-dir build -L golden && git diff tests/
#
# (RESHARD_UPDATE=1 is also the front end's switch: `-L "golden|front"` refreshes both kinds.)
#
# Reuse (planner and others): this file is included first (tests/*.cmake are included sorted), so
#     rs_add_golden_dump(NAME LAYOUT [compile args...])
# compiles LAYOUT with reshardc (args such as -D L=2 --staging 4096), verifies the plan, and compares
# `reshardc dump` with tests/golden/NAME.dump (test `golden_NAME`). For any other command:
#     rs_add_golden(NAME EXPECTED [STATUS N] COMMAND cmd args...)

set(RS_FMT_DIR ${CMAKE_CURRENT_SOURCE_DIR}/format)
set(RS_GOLDEN_SH ${CMAKE_CURRENT_SOURCE_DIR}/golden.sh)

function(rs_add_golden name expected)
  cmake_parse_arguments(G "" "STATUS" "COMMAND" ${ARGN})
  if(NOT G_STATUS)
    set(G_STATUS 0)
  endif()
  add_test(NAME ${name} COMMAND sh ${RS_GOLDEN_SH} --status ${G_STATUS} ${expected} ${G_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS golden)
endfunction()

function(rs_add_golden_dump name layout)
  add_test(NAME golden_${name}
           COMMAND sh ${RS_GOLDEN_SH} layout $<TARGET_FILE:reshardc> ${layout}
                   ${PROJECT_SOURCE_DIR}/tests/golden/${name}.dump ${ARGN})
  set_tests_properties(golden_${name} PROPERTIES LABELS golden)
endfunction()

# ---- codec tests on a hand-built plan (tests/format/fixture.c) ----
add_library(rs_fmt_fixture STATIC ${RS_FMT_DIR}/fixture.c)
target_link_libraries(rs_fmt_fixture PUBLIC rsplan)
target_include_directories(rs_fmt_fixture PUBLIC ${RS_FMT_DIR})

add_executable(format_codec ${RS_FMT_DIR}/test_codec.c)
target_link_libraries(format_codec PRIVATE rs_fmt_fixture)
foreach(t roundtrip truncation header sections textmode resealed mutate longnames descs crc)
  add_test(NAME format_${t} COMMAND format_codec ${t})
  set_tests_properties(format_${t} PROPERTIES TIMEOUT 120) # roundtrip opens a pipe nobody writes: no hang
endforeach()

add_executable(format_verify ${RS_FMT_DIR}/test_verify.c)
target_link_libraries(format_verify PRIVATE rs_fmt_fixture)
add_test(NAME format_verify_rank COMMAND format_verify)

# Buffer groups (format 1.1): the member helpers of common/plan.c, the rank verifier's member rules on the
# fixture with some buffers made groups (each broken op refused with its reason, each valid variant
# accepted), minor version 1 only with a group, the flag round-trips, bad side fields are refused.
add_executable(format_groups ${RS_FMT_DIR}/test_groups.c)
target_link_libraries(format_groups PRIVATE rs_fmt_fixture)
foreach(t helpers verify codec)
  add_test(NAME format_groups_${t} COMMAND format_groups ${t} ${CMAKE_CURRENT_BINARY_DIR}/format)
endforeach()

# Relays (destination ranks forwarding from their destination buffers): the whole-plan verifier accepts a
# chain across four domains and relays combined with NVLink fan-out, which also replay on the CPU transport,
# and refuses each broken variant with its reason. Plans come from tests/runtime/rt_build.c; the planner
# tests' reference executor (tests/planner/interp.c) checks every plan as well.
add_executable(format_relay_verify ${RS_FMT_DIR}/test_relay_verify.c ${PROJECT_SOURCE_DIR}/tests/planner/interp.c)
target_include_directories(format_relay_verify PRIVATE ${PROJECT_SOURCE_DIR}/tests/planner)
target_link_libraries(format_relay_verify PRIVATE rs_rt_build rsreplay)
foreach(t chain fanout same_step never_written twice wrong_pack wrong_send other_lane stale_lane matrices)
  add_test(NAME format_relay_${t} COMMAND format_relay_verify ${t})
  set_tests_properties(format_relay_${t} PROPERTIES TIMEOUT 60)
endforeach()

# Every opcode of the X-macro is documented in docs/format.md.
add_executable(format_opdoc ${RS_FMT_DIR}/test_opdoc.c)
target_link_libraries(format_opdoc PRIVATE rsplan)
add_test(NAME format_opcodes_documented COMMAND format_opdoc ${PROJECT_SOURCE_DIR}/docs/format.md)

# ---- dump and diff goldens ----
# fmt_tool runs compiler/cmd_dump.c and cmd_diff.c exactly as reshardc does, without the front end.
add_executable(fmt_tool ${RS_FMT_DIR}/fmt_tool.c ${PROJECT_SOURCE_DIR}/compiler/cmd_dump.c
               ${PROJECT_SOURCE_DIR}/compiler/cmd_diff.c)
target_link_libraries(fmt_tool PRIVATE rs_fmt_fixture)
target_include_directories(fmt_tool PRIVATE ${PROJECT_SOURCE_DIR}/compiler)

set(RS_FMT_WORK ${CMAKE_CURRENT_BINARY_DIR}/format)
file(MAKE_DIRECTORY ${RS_FMT_WORK})
add_test(NAME format_fixture_write
         COMMAND sh -c "$<TARGET_FILE:fmt_tool> write fixture.bin && $<TARGET_FILE:fmt_tool> write fixture1.bin 1 && $<TARGET_FILE:fmt_tool> write fixture2.bin 2 && $<TARGET_FILE:fmt_tool> write fixture3.bin 3"
         WORKING_DIRECTORY ${RS_FMT_WORK})
set_tests_properties(format_fixture_write PROPERTIES FIXTURES_SETUP rs_fmt_plans)

set(RS_FMT_GOLD ${RS_FMT_DIR}/golden)
rs_add_golden(format_dump ${RS_FMT_GOLD}/fixture.dump COMMAND $<TARGET_FILE:fmt_tool> dump ${RS_FMT_WORK}/fixture.bin)
rs_add_golden(format_dump_rank ${RS_FMT_GOLD}/fixture-rank2.dump
              COMMAND $<TARGET_FILE:fmt_tool> dump ${RS_FMT_WORK}/fixture.bin --rank 2)
rs_add_golden(format_diff ${RS_FMT_GOLD}/fixture.diff STATUS 1
              COMMAND $<TARGET_FILE:fmt_tool> diff ${RS_FMT_WORK}/fixture.bin ${RS_FMT_WORK}/fixture1.bin)
# coalesced staging messages (ops of several tensors) are put back on their tensors: only staging changes
rs_add_golden(format_diff_coalesced ${RS_FMT_GOLD}/fixture-coalesced.diff STATUS 1
              COMMAND $<TARGET_FILE:fmt_tool> diff ${RS_FMT_WORK}/fixture.bin ${RS_FMT_WORK}/fixture2.bin)
rs_add_golden(format_diff_rerouted ${RS_FMT_GOLD}/fixture-rerouted.diff STATUS 1
              COMMAND $<TARGET_FILE:fmt_tool> diff ${RS_FMT_WORK}/fixture2.bin ${RS_FMT_WORK}/fixture1.bin)
rs_add_golden(format_diff_same ${RS_FMT_GOLD}/fixture-same.diff
              COMMAND $<TARGET_FILE:fmt_tool> diff ${RS_FMT_WORK}/fixture.bin ${RS_FMT_WORK}/fixture.bin)
# Command-line errors: a rank outside the world, a damaged plan (dump exits 1, diff 2), bad usage (2).
add_test(NAME format_tool_errors COMMAND sh -c "\
  t=$<TARGET_FILE:fmt_tool>; \
  $t dump fixture.bin --rank 9 2>e1; test $? = 1 && grep -q 'fixture.bin: rank 9 is outside the plan.s world of 4 ranks' e1 || exit 1; \
  head -c 300 fixture.bin > cut.bin; $t dump cut.bin 2>e2; test $? = 1 && grep -q 'cut.bin: bad plan (truncated section' e2 || exit 1; \
  $t diff fixture.bin cut.bin >/dev/null 2>e3; test $? = 2 && grep -q 'cut.bin: bad plan' e3 || exit 1; \
  $t dump fixture.bin --rank x 2>/dev/null; test $? = 2 || exit 1; \
  $t diff fixture.bin 2>/dev/null; test $? = 2"
  WORKING_DIRECTORY ${RS_FMT_WORK})
set_tests_properties(format_tool_errors PROPERTIES FIXTURES_REQUIRED rs_fmt_plans)
# The same listing through the real reshardc, and its verify (whole-plan checks included).
rs_add_golden(format_reshardc_dump ${RS_FMT_GOLD}/fixture.dump COMMAND $<TARGET_FILE:reshardc> dump ${RS_FMT_WORK}/fixture.bin)
add_test(NAME format_reshardc_verify COMMAND $<TARGET_FILE:reshardc> verify ${RS_FMT_WORK}/fixture.bin)
add_test(NAME format_reshardc_verify_bad COMMAND sh -c
         "head -c 500 fixture.bin > cut.bin; $<TARGET_FILE:reshardc> verify cut.bin 2> cut.err; test $? = 1 && grep -q 'cut.bin: bad plan (truncated section' cut.err"
         WORKING_DIRECTORY ${RS_FMT_WORK})
# Ctrl-C while the plan is written (a test hook raises SIGINT once the temporary file exists): the signal
# waits until the file is renamed, so the command dies of it (130) leaving a whole plan and no PATH.tmp.*.
add_test(NAME format_write_signal COMMAND sh -c "\
  rm -rf sig && mkdir sig && \
  RESHARD_TEST_SIGNAL_IN_WRITE=1 $<TARGET_FILE:reshardc> ${CMAKE_CURRENT_SOURCE_DIR}/golden/experts.layout \
    -o sig/p.bin --quiet; rc=$?; test $rc = 130 || { echo \"exit $rc, want 130 (SIGINT)\"; exit 1; }; \
  test -z \"$(ls sig | grep tmp)\" || { echo \"left behind:\"; ls sig; exit 1; }; \
  $<TARGET_FILE:reshardc> verify sig/p.bin"
  WORKING_DIRECTORY ${RS_FMT_WORK})
set_tests_properties(format_write_signal PROPERTIES TIMEOUT 60)
# A plan that fails verification (a test hook makes one SEND a byte longer than its RECV) while it is
# written beside it: exit 1 with the planner-bug message, the old file untouched, no PATH.tmp.* left, and
# nothing at all written to a pipe.
add_test(NAME format_write_unverified COMMAND sh -c "\
  rm -rf unv && mkdir unv && c=$<TARGET_FILE:reshardc> && l=${CMAKE_CURRENT_SOURCE_DIR}/golden/experts.layout && \
  $c $l -o unv/p.bin --quiet && cp unv/p.bin unv/good.bin && \
  RESHARD_TEST_DAMAGE_PLAN=1 $c $l -o unv/p.bin --quiet 2>unv/err; rc=$?; test $rc = 1 || { echo \"exit $rc\"; exit 1; }; \
  grep -q 'reshardc: error: internal error: the plan failed verification (a planner bug): bad plan' unv/err || { cat unv/err; exit 1; }; \
  cmp unv/p.bin unv/good.bin || exit 1; \
  test -z \"$(ls unv | grep tmp)\" || { echo \"left behind:\"; ls unv; exit 1; }; \
  RESHARD_TEST_DAMAGE_PLAN=1 $c $l -o /dev/stdout --quiet 2>/dev/null | wc -c > unv/n; test \"$(cat unv/n)\" = 0"
  WORKING_DIRECTORY ${RS_FMT_WORK})
set_tests_properties(format_dump format_dump_rank format_diff format_diff_same format_diff_coalesced
                     format_diff_rerouted format_reshardc_dump
                     format_reshardc_verify format_reshardc_verify_bad PROPERTIES FIXTURES_REQUIRED rs_fmt_plans)

# ---- libFuzzer harness for the loader (format/fuzz_plan.c): built and run from tests/fuzz.cmake ----
