# Front-end benchmark (layout language, issue 2); see docs/benchmarks.md, "Front end".
#   gen_big_layout  writes the 200,333-tensor / 600,606-piece / 1,536-rank layout (loops, or --flat)
#   bench_front     parses and checks it in fresh processes and prints CPU time, wall time, peak RSS
# Run: ninja -C build bench_front && build/bench/bench_front
add_executable(gen_big_layout ${CMAKE_CURRENT_SOURCE_DIR}/gen_big_layout.c)
add_executable(bench_front ${CMAKE_CURRENT_SOURCE_DIR}/front_bench.c)
target_link_libraries(bench_front PRIVATE rscompiler)
target_compile_definitions(bench_front PRIVATE GEN_BIG_LAYOUT="$<TARGET_FILE:gen_big_layout>")
add_dependencies(bench_front gen_big_layout)
