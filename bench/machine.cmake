# Machine facts the planner's memory choices depend on: page_faults (see docs/benchmarks.md, "Page faults").
add_executable(page_faults ${CMAKE_CURRENT_SOURCE_DIR}/page_faults.c)
