# reshardc's progress line (compiler/progress.c): its content (RESHARDC_PROGRESS=1 forces it, one line per
# phase), and when it shows (on a terminal: a pseudo-terminal from script(1); not with --quiet, not in a pipe).
# Included by tests/CMakeLists.txt.
add_test(NAME progress_forced COMMAND reshardc ${PROJECT_SOURCE_DIR}/tests/consumer/tiny.layout
                                       -o ${CMAKE_CURRENT_BINARY_DIR}/progress_tiny.plan)
set_tests_properties(progress_forced PROPERTIES TIMEOUT 60 LABELS progress ENVIRONMENT RESHARDC_PROGRESS=1
  PASS_REGULAR_EXPRESSION "reshardc: front end, [0-9.]+ s\nreshardc: planning, [0-9.]+ s\nreshardc: verifying and writing, [0-9.]+ s")
# The full-size asymmetric Qwen3-32B example: about a second of verification, 0.4 GB.
add_test(NAME progress_terminal COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/progress.sh $<TARGET_FILE:reshardc>
                                        ${PROJECT_SOURCE_DIR}/examples/qwen3-32b-asym-h100.layout
                                        ${CMAKE_CURRENT_BINARY_DIR}/progress)
set_tests_properties(progress_terminal PROPERTIES TIMEOUT 300 LABELS progress SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION "progress OK")
