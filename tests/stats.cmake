# Cost model and `reshardc stats` tests (issue 6): hand-computed cases checked exactly, the SVG checked
# as XML, the command line on a compiled example. Included by tests/CMakeLists.txt.
set(RS_STATS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/stats)
add_executable(stats_cost ${RS_STATS_DIR}/test_cost.c ${RS_STATS_DIR}/build.c)
target_include_directories(stats_cost PRIVATE ${RS_STATS_DIR})
target_link_libraries(stats_cost PRIVATE rscompiler)
foreach(c two_ranks replicas row_to_col relay held_in_domain holder_group)
  add_test(NAME stats_${c} COMMAND stats_cost ${c})
  # the same with the gather-broadcast baseline on a thread of its own (rs_cost_report_build)
  add_test(NAME stats_${c}_threads COMMAND stats_cost ${c})
  set_tests_properties(stats_${c}_threads PROPERTIES ENVIRONMENT RESHARD_THREADS=2)
endforeach()

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME stats_svg_xml
           COMMAND Python3::Interpreter ${RS_STATS_DIR}/check_svg.py $<TARGET_FILE:stats_cost> --svg @SVG@ replicas)
endif()
if(Python3_Interpreter_FOUND)
  add_test(NAME stats_cli
           COMMAND Python3::Interpreter ${RS_STATS_DIR}/check_cli.py $<TARGET_FILE:reshardc> ${RS_STATS_DIR}/tiny.layout)
endif()
