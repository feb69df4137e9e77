# Plan format tests (plan.bin writer, reader, verifier, dump, diff); included by tests/CMakeLists.txt.
set(RS_FMT_DIR ${CMAKE_CURRENT_SOURCE_DIR}/format)
add_library(rs_fmt_fixture STATIC ${RS_FMT_DIR}/fixture.c)
target_link_libraries(rs_fmt_fixture PUBLIC rsplan)
target_include_directories(rs_fmt_fixture PUBLIC ${RS_FMT_DIR})

add_executable(format_codec ${RS_FMT_DIR}/test_codec.c)
target_link_libraries(format_codec PRIVATE rs_fmt_fixture)
foreach(t roundtrip truncation header sections textmode resealed)
  add_test(NAME format_${t} COMMAND format_codec ${t})
endforeach()

# fmt_tool runs compiler/cmd_dump.c and cmd_diff.c exactly as reshardc does, without the front end.
add_executable(fmt_tool ${RS_FMT_DIR}/fmt_tool.c ${PROJECT_SOURCE_DIR}/compiler/cmd_dump.c
               ${PROJECT_SOURCE_DIR}/compiler/cmd_diff.c)
target_link_libraries(fmt_tool PRIVATE rs_fmt_fixture)
target_include_directories(fmt_tool PRIVATE ${PROJECT_SOURCE_DIR}/compiler)
