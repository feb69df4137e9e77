# Planner tests (compiler/planner.c, regions.c, fanout.c, sources.c, schedule.c and the whole-plan
# verifier common/plan_verify_all.c); included by tests/CMakeLists.txt.
#   planner_unit         hand-built layouts with exact expectations (fan-out, balance, merging, budget...)
#   planner_prop         4000 random layouts: plan + verify, every 4th replayed on the reference executor
#   planner_mutate       damaged plans: the verifier must reject every one the executor finds wrong
#   planner_determinism  the same layout twice gives byte-identical plans
# A failing random case prints its seed; rerun it with `test_planner prop 1 SEED`.
set(RS_PLANNER_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR}/planner)
add_executable(test_planner ${RS_PLANNER_TEST_DIR}/test_planner.c ${RS_PLANNER_TEST_DIR}/lb.c
               ${RS_PLANNER_TEST_DIR}/gen.c ${RS_PLANNER_TEST_DIR}/interp.c)
target_include_directories(test_planner PRIVATE ${RS_PLANNER_TEST_DIR})
target_link_libraries(test_planner PRIVATE rscompiler)
add_test(NAME planner_unit COMMAND test_planner unit)
add_test(NAME planner_prop COMMAND test_planner prop 4000 1)
add_test(NAME planner_mutate COMMAND test_planner mutate 600 7)
add_test(NAME planner_determinism COMMAND test_planner determinism)
set_tests_properties(planner_unit planner_prop planner_mutate planner_determinism PROPERTIES LABELS planner)

# Golden dumps of small layouts (tests/golden/NAME.layout -> tests/golden/NAME.dump): compile, verify,
# `reshardc dump`, compare. Refresh after an intended planner change with ONE command, then review:
#     RS_GOLDEN_REFRESH=1 ctest --test-dir build -L golden && git diff tests/golden
foreach(g row_to_column replicated_one_domain replicated_across_domains pipeline_stages experts ragged colocated
          fused_qkv)
  rs_add_golden_dump(${g} ${CMAKE_CURRENT_SOURCE_DIR}/golden/${g}.layout)
endforeach()
# the same fan-out layout with a tiny staging budget: several rounds, NVLink fan-out of round k
# overlapping the network transfer of round k + 1 (waits between the lanes)
rs_add_golden_dump(replicated_one_domain_rounds ${CMAKE_CURRENT_SOURCE_DIR}/golden/replicated_one_domain.layout
                   --staging 65536)
