# Planner benchmark (issue 3): compile the DeepSeek-V3 refit (examples/deepseek-v3-h100.layout with every
# expert TP-sharded over all 256 inference ranks) in one process and print the table of docs/benchmarks.md
# ("Planner"): CPU time per phase, peak RSS, ops, plan size, one rank's load + verify, balance, ingress.
#   ninja -C build planner_bench && build/bench/planner_bench [LAYOUT] [-D N=V]... [--staging B]
add_executable(planner_bench ${CMAKE_CURRENT_SOURCE_DIR}/planner_bench.c)
target_link_libraries(planner_bench PRIVATE rscompiler)
target_compile_definitions(planner_bench PRIVATE RS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
