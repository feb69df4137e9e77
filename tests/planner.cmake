# Planner tests (compiler/planner.c, regions.c, fanout.c, sources.c, schedule.c and the whole-plan
# verifier common/plan_verify_all.c); included by tests/CMakeLists.txt.
#   planner_unit         hand-built layouts with exact expectations (fan-out, balance, merging, budget...)
#   planner_prop         4000 random layouts: plan + verify, every 4th replayed on the reference executor
#   planner_prop_threads 1000 more, with RESHARD_THREADS=2: programs built and checks run on two threads
#   planner_mutate       damaged plans: the verifier must reject every one the executor finds wrong, with the
#                        same message and work on one thread and on two
#   planner_determinism  the same layout twice gives byte-identical plans (once on one thread, once on two)
#   planner_blocks       the programs lie in the plan's blocks (common/plan.c) and are the same moved out of
#                        them (rs_prog_unblock, rs_prog_desc_trim, a descriptor added), 60 layouts
#   planner_bound        the cost model's lower bound (box unions) against counting elements, 1000 layouts
#   planner_fine_whole   runs of a grouped part's fine boxes taken whole (schedule.c, group_whole) against
#                        their visits one by one (RESHARD_CHECK_FINE=1: any difference aborts), 1500 layouts
#                        and full-size DeepSeek-V3 (B: 6.7 M fine boxes, relays)
#   planner_wide         every op kept in a wide record with all its strides (RESHARD_CHECK_WIDE=1, the
#                        general layout no descriptor needs), 600 layouts; planner_wide_b: the scaled
#                        DeepSeek-V3 (stacked experts: 5- and 6-dim ops) byte-identical with and without
# A failing random case prints its seed; rerun it with `test_planner prop 1 SEED`.
set(RS_PLANNER_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR}/planner)
add_executable(test_planner ${RS_PLANNER_TEST_DIR}/test_planner.c ${RS_PLANNER_TEST_DIR}/lb.c
               ${RS_PLANNER_TEST_DIR}/gen.c ${RS_PLANNER_TEST_DIR}/interp.c ${RS_PLANNER_TEST_DIR}/mutate.c)
target_include_directories(test_planner PRIVATE ${RS_PLANNER_TEST_DIR})
target_link_libraries(test_planner PRIVATE rscompiler)
add_test(NAME planner_unit COMMAND test_planner unit)
add_test(NAME planner_prop COMMAND test_planner prop 4000 1)
add_test(NAME planner_prop_threads COMMAND test_planner prop 1000 90001)
set_tests_properties(planner_prop_threads PROPERTIES ENVIRONMENT RESHARD_THREADS=2)
add_test(NAME planner_mutate COMMAND test_planner mutate 600 7)
add_test(NAME planner_determinism COMMAND test_planner determinism)
add_test(NAME planner_blocks COMMAND test_planner blocks)
add_test(NAME planner_bound COMMAND test_planner bound 1000 1)
# the verifier's work on the scaled DeepSeek-V3 example is the same for the plan and two decoded copies of
# it at other addresses (162 k descriptors: more than the verifier's descriptor-cache slots)
set(RS_VW_LAYOUT ${PROJECT_SOURCE_DIR}/examples/deepseek-v3-h100.layout)
add_test(NAME planner_verify_work COMMAND sh -c
         "exec \"$0\" verify-work \"$1\" $(sed -n 's/^# replay-args://p' \"$1\")"
         $<TARGET_FILE:test_planner> ${RS_VW_LAYOUT})
# forwarded chunks under the zero-copy size that go zero-copy rather than wait a round (vLLM data-parallel
# attention: Qwen3-235B TP1 x DP128 with EP128, 8 layers at full width)
add_test(NAME planner_fanout_spill
         COMMAND test_planner fanout-spill ${PROJECT_SOURCE_DIR}/examples/qwen3-235b-h100.layout -D TPI=1 -D EXPERTS=2
                 -D L=8 -D FIRST=1 -D LAST=1)
# staged chunks that would wait a round: cut in two (then contiguous at their receivers, zero-copy there):
# DeepSeek-V3 with a stage's experts stacked, every expert TP-sharded over all 256 inference ranks, 4 stages
add_test(NAME planner_spill_halves
         COMMAND test_planner spill-halves ${PROJECT_SOURCE_DIR}/examples/deepseek-v3-h100.layout -D EXPERTS=1
                 -D STACK=1 -D PP=4 -D FIRST=3 -D LAST=4 -D L=15)
add_test(NAME planner_fine_whole COMMAND test_planner prop 1500 300001)
add_test(NAME planner_fine_whole_b COMMAND reshardc ${PROJECT_SOURCE_DIR}/examples/deepseek-v3-h100.layout
                                           -o ${CMAKE_CURRENT_BINARY_DIR}/fine_whole_b.plan --quiet)
set_tests_properties(planner_fine_whole planner_fine_whole_b PROPERTIES ENVIRONMENT RESHARD_CHECK_FINE=1)
add_test(NAME planner_wide COMMAND test_planner prop 600 400001)
set_tests_properties(planner_wide PROPERTIES ENVIRONMENT RESHARD_CHECK_WIDE=1)
add_test(NAME planner_wide_b COMMAND sh -c
         "set -e; a=$(sed -n 's/^# replay-args://p' \"$1\"); \"$0\" \"$1\" $a -D STACK=1 -o \"$2.narrow\" --quiet; \
          RESHARD_CHECK_WIDE=1 \"$0\" \"$1\" $a -D STACK=1 -o \"$2.wide\" --quiet; cmp \"$2.narrow\" \"$2.wide\""
         $<TARGET_FILE:reshardc> ${PROJECT_SOURCE_DIR}/examples/deepseek-v3-h100.layout
         ${CMAKE_CURRENT_BINARY_DIR}/planner_wide_b)
set_tests_properties(planner_unit planner_prop planner_prop_threads planner_mutate planner_determinism planner_blocks planner_bound planner_verify_work
                     planner_fanout_spill planner_spill_halves planner_fine_whole planner_fine_whole_b planner_wide
                     planner_wide_b PROPERTIES LABELS planner)

# Golden dumps of small layouts (tests/golden/NAME.layout -> tests/golden/NAME.dump): compile, verify,
# `reshardc dump`, compare. Refresh after an intended planner change with ONE command, then review:
#     RS_GOLDEN_REFRESH=1 ctest --test-dir build -L golden && git diff tests/golden
# Each is compiled with the arguments of its layout's `# replay-args:` line when it has one (the same ones
# tests/runtime.cmake replays it with).
function(rs_golden_args layout out)
  file(STRINGS ${layout} args_line REGEX "^# *replay-args:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^# *replay-args:" "" args "${args_line}")
  separate_arguments(args UNIX_COMMAND "${args}")
  set(${out} ${args} PARENT_SCOPE)
endfunction()
# Buffer groups (names with "{*}", format 1.1): experts_grouped is experts with each EP rank's experts as one
# group; experts_grouped_ep has whole experts per inference rank (boxes covering whole members, which must
# not fold into one run across members); colocated_grouped has local COPYs between a group and a plain
# buffer on the same rank. experts_balanced (format 1.2): vLLM's uneven expert split, shard(0, balanced)
# over a mesh view. experts_stacked (format 1.3): a whole stage's per-expert parameters as one group of two
# member dims, vLLM's per-layer stacks as a group over layers, both with a member offset in their names.
# `reshardc verify` (run by each) refuses any descriptor that crosses a member.
foreach(g row_to_column replicated_one_domain replicated_across_domains pipeline_stages experts ragged colocated
          fused_qkv experts_grouped experts_grouped_ep colocated_grouped experts_balanced experts_stacked
          experts_stacked_ep fanout_zero_copy fanout_zero_copy_option)
  rs_golden_args(${CMAKE_CURRENT_SOURCE_DIR}/golden/${g}.layout args)
  rs_add_golden_dump(${g} ${CMAKE_CURRENT_SOURCE_DIR}/golden/${g}.layout ${args})
endforeach()
# Golden `reshardc diff`s of golden/NAME.layout compiled as it is (A) and with each variant's options (B):
# each variant "V:OPTIONS" is the test golden_NAME_V against golden/NAME_V.diff. tests/golden_diff.sh runs the
# diff on one thread and on two (B's per-rank summaries made ahead, 8 at most: diff_layouts has 10 ranks),
# and the two outputs must be the same.
function(rs_add_golden_diffs name)
  set(layout ${CMAKE_CURRENT_SOURCE_DIR}/golden/${name}.layout)
  foreach(d ${ARGN})
    string(REPLACE ":" ";" d "${d}")
    list(GET d 0 n)
    list(GET d 1 args)
    separate_arguments(args UNIX_COMMAND "${args}")
    rs_add_golden(golden_${name}_${n} ${CMAKE_CURRENT_SOURCE_DIR}/golden/${name}_${n}.diff STATUS 1
                  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/golden_diff.sh $<TARGET_FILE:reshardc> ${layout}
                          ${name}_${n} ${args})
  endforeach()
endfunction()
# across layouts: a balanced split against a nested chunked one (format 1.2 -> 1.1, every inference rank's
# experts), then a changed mesh and its view (TPI 3 -> 2: ranks, sizes, world)
rs_add_golden_diffs(diff_layouts "bal0:-D BAL=0" "tpi2:-D TPI=2")
# coalesced messages (several tensors each, packed in the NVL step before the round's NET step, unpacked
# in the one after, forwarded in the domain): one tensor resharded (C = 1) names that tensor alone; a
# staging budget of 1 KiB (17 rounds instead of 1) changes staging, steps and ops, and no (rank, tensor)
# pair
rs_add_golden_diffs(diff_coalesced "c1:-D C=1" "staging:--staging 1024")
# the same fan-out layout with a tiny staging budget: several rounds, NVLink fan-out of round k
# overlapping the network transfer of round k + 1 (waits between the lanes)
rs_golden_args(${CMAKE_CURRENT_SOURCE_DIR}/golden/replicated_one_domain.layout args)
rs_add_golden_dump(replicated_one_domain_rounds ${CMAKE_CURRENT_SOURCE_DIR}/golden/replicated_one_domain.layout
                   ${args} --staging 65536)

# Relays (issue 9): golden dumps of relay plans, compiled with the arguments of each layout's `# replay-args:`
# line (the same ones tests/runtime.cmake replays them with, test replay_golden_relay_*):
#   relay_chain      1 source domain -> 4 destination domains, --relays on: a chain, several rounds
#   relay_tree       1 -> 6 domains, --relay-fanout 2: a binary tree
#   relay_fanout     1 -> 3 domains of 4 ranks that all need the tensor: relays + NVLink fan-out
#   relay_plentiful  sources as many as the destinations: the default (auto) must not relay
#   relay_auto       1 -> 4 domains, slow NICs: the default (auto) relays
foreach(g relay_chain relay_tree relay_fanout relay_plentiful relay_auto)
  set(layout ${CMAKE_CURRENT_SOURCE_DIR}/golden/${g}.layout)
  rs_golden_args(${layout} args)
  rs_add_golden_dump(${g} ${layout} ${args})
endforeach()
# relayed bytes from `reshardc stats --json`: exact for on/off, zero or positive under auto
set(RS_RELAY_STATS sh ${RS_PLANNER_TEST_DIR}/relay_stats.sh $<TARGET_FILE:reshardc>)
set(RS_RELAY_GOLD ${CMAKE_CURRENT_SOURCE_DIR}/golden)
set(RS_RELAY_WORK ${CMAKE_CURRENT_BINARY_DIR}/relay_stats)
file(MAKE_DIRECTORY ${RS_RELAY_WORK})
add_test(NAME planner_relay_stats_chain   # 3 later domains x 4 KiB
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_chain.layout ${RS_RELAY_WORK}/chain.plan 12288 --relays on)
add_test(NAME planner_relay_stats_chain_off
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_chain.layout ${RS_RELAY_WORK}/chain_off.plan 0 --relays off)
add_test(NAME planner_relay_stats_tree    # 5 relayed domains x 1 KiB
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_tree.layout ${RS_RELAY_WORK}/tree.plan 5120
                 --relays on --relay-fanout 2)
add_test(NAME planner_relay_stats_fanout  # 2 relayed domains x 64 KiB
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_fanout.layout ${RS_RELAY_WORK}/fanout.plan 131072 --relays on)
add_test(NAME planner_relay_stats_plentiful_auto
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_plentiful.layout ${RS_RELAY_WORK}/plentiful.plan 0)
add_test(NAME planner_relay_stats_plentiful_on   # the same layout relays when forced: the auto test bites
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_plentiful.layout ${RS_RELAY_WORK}/plentiful_on.plan positive
                 --relays on)
add_test(NAME planner_relay_stats_auto
         COMMAND ${RS_RELAY_STATS} ${RS_RELAY_GOLD}/relay_auto.layout ${RS_RELAY_WORK}/auto.plan 786432)
add_test(NAME planner_relay_stats_partial     # auto: 1 of 5 domains relayed (heads 4; groups 2, 1, 1, 1)
         COMMAND ${RS_RELAY_STATS} ${RS_PLANNER_TEST_DIR}/relay_partial.layout ${RS_RELAY_WORK}/partial.plan 188743680
                 --staging 8388608)
add_test(NAME planner_relay_stats_partial_one_round  # auto: the gap is under two rounds
         COMMAND ${RS_RELAY_STATS} ${RS_PLANNER_TEST_DIR}/relay_partial.layout ${RS_RELAY_WORK}/partial1.plan 0)
set_tests_properties(planner_relay_stats_chain planner_relay_stats_chain_off planner_relay_stats_tree
                     planner_relay_stats_fanout planner_relay_stats_plentiful_auto planner_relay_stats_plentiful_on
                     planner_relay_stats_auto planner_relay_stats_partial planner_relay_stats_partial_one_round
                     PROPERTIES LABELS planner TIMEOUT 60)
# Bad compile options: each a clear message, exit 2, and no output file written.
add_test(NAME planner_compile_option_errors COMMAND sh -c "\
  c=$<TARGET_FILE:reshardc>; l=${CMAKE_CURRENT_SOURCE_DIR}/golden/relay_chain.layout; rm -f o.plan; \
  for a in '--staging 100' '--fanout-split 0' '--fanout-split=x' '--fanout-zero-copy 0' '--fanout-zero-copy=1Q' \
           '--relays maybe' '--relays' '--relay-fanout 0' '--relay-fanout=65' '--relay-fanout 2x'; do \
    $c $l -o o.plan $a 2>err; test $? = 2 || { echo \"$a: not exit 2\"; exit 1; }; \
    grep -q \"^reshardc: --\" err || { echo \"$a: no message\"; cat err; exit 1; }; \
    test ! -e o.plan || { echo \"$a: wrote a plan\"; exit 1; }; \
  done; \
  for v in x 0 -1 2x ' '; do \
    RESHARD_THREADS=\"$v\" $c $l -o o.plan 2>err; test $? = 2 || { echo \"RESHARD_THREADS=$v: not exit 2\"; exit 1; }; \
    grep -q \"^reshardc: RESHARD_THREADS is '$v': it takes a number of threads\" err || { cat err; exit 1; }; \
    test ! -e o.plan || { echo \"RESHARD_THREADS=$v: wrote a plan\"; exit 1; }; \
  done; \
  RESHARD_THREADS=8 $c $l -o o.plan --quiet && RESHARD_THREADS= $c $l -o o.plan --quiet && \
  $c $l -o o.plan --relays=on --relay-fanout=2 --fanout-split=16K --fanout-zero-copy=2M --staging=64K --quiet && \
  test -s o.plan"
  WORKING_DIRECTORY ${RS_RELAY_WORK})
set_tests_properties(planner_compile_option_errors PROPERTIES LABELS planner TIMEOUT 60)
# -o naming the layout itself (also through a link) or a file it includes: refused, exit 2, the file intact.
add_test(NAME planner_compile_output_is_input COMMAND sh -c "\
  c=$<TARGET_FILE:reshardc>; rm -rf oi && mkdir -p oi/inc && cd oi && \
  cp ${CMAKE_CURRENT_SOURCE_DIR}/golden/relay_chain.layout main.layout && echo 'const UNUSED = 1;' >inc/x.layout && \
  echo 'include \"inc/x.layout\";' >>main.layout && cp main.layout keep && cp inc/x.layout keep.inc && \
  ln -s main.layout link.layout && \
  for o in main.layout ./main.layout link.layout inc/x.layout; do \
    $c main.layout -o $o 2>err; test $? = 2 || { echo \"-o $o: not exit 2\"; exit 1; }; \
    grep -q 'the plan would replace it' err || { echo \"-o $o: no message\"; cat err; exit 1; }; \
    cmp -s main.layout keep && cmp -s inc/x.layout keep.inc || { echo \"-o $o: input replaced\"; exit 1; }; \
  done; $c main.layout -o o.plan --quiet && test -s o.plan"
  WORKING_DIRECTORY ${RS_RELAY_WORK})
set_tests_properties(planner_compile_output_is_input PROPERTIES LABELS planner TIMEOUT 60)
