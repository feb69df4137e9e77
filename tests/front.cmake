# Front-end tests (layout language, issue 2). Label: front.
#   front.errors.NAME  tests/errors/NAME.layout: one diagnostic each; expected stderr in NAME.err
#   front.layout.NAME  tests/front/NAME.layout: valid layouts; expected `check` summary in NAME.out
#   front.api          tests/front_api.c: IR contents, limits, determinism, random layouts against a
#                      brute-force checker, mutated inputs (no crash)
# Refresh every expected file after an intended change (then review `git diff tests/`):
#   RESHARD_UPDATE=1 ctest --test-dir build -L front
set(RS_GOLDEN ${CMAKE_CURRENT_SOURCE_DIR}/run_golden.sh)

file(GLOB RS_FRONT_ERROR_CASES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/errors/*.layout)
foreach(f ${RS_FRONT_ERROR_CASES})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME front.errors.${n}
           COMMAND sh ${RS_GOLDEN} $<TARGET_FILE:reshardc> ${CMAKE_CURRENT_SOURCE_DIR}/errors ${n})
  set_tests_properties(front.errors.${n} PROPERTIES LABELS front TIMEOUT 60)
endforeach()

file(GLOB RS_FRONT_LAYOUT_CASES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/front/*.layout)
foreach(f ${RS_FRONT_LAYOUT_CASES})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME front.layout.${n}
           COMMAND sh ${RS_GOLDEN} $<TARGET_FILE:reshardc> ${CMAKE_CURRENT_SOURCE_DIR}/front ${n})
  set_tests_properties(front.layout.${n} PROPERTIES LABELS front TIMEOUT 60)
endforeach()

add_executable(front_api ${CMAKE_CURRENT_SOURCE_DIR}/front_api.c)
target_link_libraries(front_api PRIVATE rscompiler)
add_test(NAME front.api COMMAND front_api ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(front.api PROPERTIES LABELS front TIMEOUT 300)
