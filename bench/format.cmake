# Plan format benchmark: load+verify time of one rank and of the whole plan (see docs/benchmarks.md).
#   format_load --synth /tmp/dsv3.bin && format_load /tmp/dsv3.bin      (synthetic DeepSeek-V3 scale)
#   format_load PLAN                                                     (any compiled plan)
add_executable(format_load ${CMAKE_CURRENT_SOURCE_DIR}/format_load.c)
target_link_libraries(format_load PRIVATE rsplan)
