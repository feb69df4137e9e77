# Runtime tests (libreshard on the CPU threads transport; GPU tests labelled `gpu`, skipped with 77).
# Included by tests/CMakeLists.txt. Every test is bounded by a CTest TIMEOUT.
set(RS_RT_DIR ${CMAKE_CURRENT_SOURCE_DIR}/runtime)

# Plans built in memory (layout from code + a naive planner), shared with the benchmarks.
add_library(rs_rt_build STATIC ${RS_RT_DIR}/rt_build.c ${RS_RT_DIR}/rt_samples.c)
target_link_libraries(rs_rt_build PUBLIC rsplan)
target_include_directories(rs_rt_build PUBLIC ${RS_RT_DIR})

add_executable(test_runtime ${RS_RT_DIR}/test_runtime.c)
target_link_libraries(test_runtime PRIVATE rs_rt_build rsreplay)
foreach(t replay_row replay_transpose replay_mixed replay_forward replay_local checker_bites host_memory recv_order bind_errors
          fingerprint_mismatch world_mismatch per_rank_load never_arrives abort inject api kjob_random)
  add_test(NAME runtime_${t} COMMAND test_runtime ${t})
  set_tests_properties(runtime_${t} PROPERTIES TIMEOUT 60 LABELS runtime)
endforeach()
# RESHARD_DEBUG=TRACE prints every op through the shared plan printer; the replay still checks out.
add_test(NAME runtime_trace COMMAND test_runtime replay_forward)
set_tests_properties(runtime_trace PROPERTIES TIMEOUT 60 LABELS runtime ENVIRONMENT RESHARD_DEBUG=TRACE
                     PASS_REGULAR_EXPRESSION "checked 256 elements")

# reshard-replay on plan files written by rt_mkplans (fixture), including a range and an injected failure.
add_executable(rt_mkplans ${RS_RT_DIR}/rt_mkplans.c)
target_link_libraries(rt_mkplans PRIVATE rs_rt_build)
set(RS_RT_PLANS ${CMAKE_CURRENT_BINARY_DIR}/runtime_plans)
add_test(NAME runtime_mkplans COMMAND rt_mkplans ${RS_RT_PLANS})
set_tests_properties(runtime_mkplans PROPERTIES TIMEOUT 60 LABELS runtime FIXTURES_SETUP rt_plans)
foreach(p row transpose mixed forward local)
  add_test(NAME runtime_cli_replay_${p} COMMAND reshard-replay ${RS_RT_PLANS}/${p}.plan)
  set_tests_properties(runtime_cli_replay_${p} PROPERTIES TIMEOUT 120 LABELS runtime FIXTURES_REQUIRED rt_plans
                       PASS_REGULAR_EXPRESSION "0 wrong, 0 bytes outside pieces overwritten, 0 source bytes changed.*OK")
endforeach()
add_test(NAME runtime_cli_ranks COMMAND reshard-replay ${RS_RT_PLANS}/mixed.plan --ranks 5-7 --iters 1)
set_tests_properties(runtime_cli_ranks PROPERTIES TIMEOUT 60 LABELS runtime FIXTURES_REQUIRED rt_plans
                     PASS_REGULAR_EXPRESSION "on ranks 5-7: 0 wrong")
add_test(NAME runtime_cli_inject COMMAND reshard-replay ${RS_RT_PLANS}/mixed.plan --inject 5:1 --timeout 5000)
set_tests_properties(runtime_cli_inject PROPERTIES TIMEOUT 60 LABELS runtime FIXTURES_REQUIRED rt_plans
                     WILL_FAIL TRUE)
add_test(NAME runtime_cli_bad_data COMMAND reshard-replay ${RS_RT_PLANS}/wrong.plan)
set_tests_properties(runtime_cli_bad_data PROPERTIES TIMEOUT 60 LABELS runtime FIXTURES_REQUIRED rt_plans
                     WILL_FAIL TRUE)
add_test(NAME runtime_cli_usage COMMAND reshard-replay)
set_tests_properties(runtime_cli_usage PROPERTIES TIMEOUT 10 LABELS runtime WILL_FAIL TRUE)
# Bad command lines name what is wrong (and exit 2, checked by tests/runtime/cli_errors.sh).
add_test(NAME runtime_cli_errors COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/runtime/cli_errors.sh $<TARGET_FILE:reshard-replay>
                                         ${RS_RT_PLANS}/row.plan)
set_tests_properties(runtime_cli_errors PROPERTIES TIMEOUT 30 LABELS runtime FIXTURES_REQUIRED rt_plans
                     PASS_REGULAR_EXPRESSION "cli errors OK")

# Replay of every compiled layout: tests/golden/*.layout and examples/*.layout, each compiled with the
# arguments of its `# replay-args:` line (scaled-down -D values), then replayed and checked element by element.
file(GLOB RS_RT_LAYOUTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/golden/*.layout
     ${PROJECT_SOURCE_DIR}/examples/*.layout)
list(SORT RS_RT_LAYOUTS)
foreach(layout ${RS_RT_LAYOUTS})
  get_filename_component(stem ${layout} NAME_WLE)
  get_filename_component(dir ${layout} DIRECTORY)
  get_filename_component(dirname ${dir} NAME)
  file(STRINGS ${layout} args_line REGEX "^# *replay-args:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^# *replay-args:" "" args "${args_line}")
  separate_arguments(args UNIX_COMMAND "${args}")
  add_test(NAME replay_${dirname}_${stem}
           COMMAND sh ${RS_RT_DIR}/replay_layout.sh $<TARGET_FILE:reshardc> $<TARGET_FILE:reshard-replay>
                   ${layout} ${CMAKE_CURRENT_BINARY_DIR}/replay_${dirname}_${stem}.plan ${args})
  set_tests_properties(replay_${dirname}_${stem} PROPERTIES TIMEOUT 600 LABELS "runtime;replay")
endforeach()

# GPU: the CUDA single-process transport and NCCL over the visible GPUs; exit 77 (skip) without a GPU.
if(RESHARD_HAVE_CUDA AND EXISTS ${RS_RT_DIR}/test_gpu.c)
  add_executable(test_gpu ${RS_RT_DIR}/test_gpu.c)
  target_link_libraries(test_gpu PRIVATE rs_rt_build rsreplay CUDA::cudart)
  if(RESHARD_HAVE_NCCL)
    target_link_libraries(test_gpu PRIVATE NCCL::nccl)
  endif()
  add_test(NAME gpu_replay COMMAND test_gpu)
  set_tests_properties(gpu_replay PROPERTIES TIMEOUT 300 LABELS gpu SKIP_RETURN_CODE 77)
endif()

# The same CPU replays with phase 1 and 3 run through the GPU kernel's descriptors and index math (host
# emulation of every block and thread), so the CUDA path's job building is tested without a GPU.
foreach(t replay_row replay_transpose replay_mixed replay_forward replay_local)
  add_test(NAME runtime_kernel_emulation_${t} COMMAND test_runtime ${t})
  set_tests_properties(runtime_kernel_emulation_${t} PROPERTIES TIMEOUT 120 LABELS runtime
                       ENVIRONMENT RESHARD_CPU_EMULATE_KERNELS=1)
endforeach()

# Receive fusion off: the CPU transport materializes every message in staging exactly as the GPU transports do.
foreach(t replay_row replay_transpose replay_mixed replay_forward inject abort)
  add_test(NAME runtime_nofusion_${t} COMMAND test_runtime ${t})
  set_tests_properties(runtime_nofusion_${t} PROPERTIES TIMEOUT 120 LABELS runtime ENVIRONMENT RESHARD_CPU_FUSE=0)
endforeach()

# Random layouts (tests/planner/gen.c) planned by the real planner, loaded and replayed, every element checked:
# as is, without receive fusion, and through the GPU kernel's descriptors. Built once the planner and the
# whole-plan verifier are in the tree.
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/planner/gen.c AND EXISTS ${PROJECT_SOURCE_DIR}/common/plan_verify_all.c
   AND EXISTS ${PROJECT_SOURCE_DIR}/compiler/planner.h)
  add_executable(test_planned ${RS_RT_DIR}/test_planned.c ${PROJECT_SOURCE_DIR}/tests/planner/gen.c
                 ${PROJECT_SOURCE_DIR}/tests/planner/lb.c ${PROJECT_SOURCE_DIR}/tests/planner/mutate.c)
  target_include_directories(test_planned PRIVATE ${PROJECT_SOURCE_DIR}/tests/planner)
  target_link_libraries(test_planned PRIVATE rscompiler rsreplay)
  add_test(NAME runtime_planned_random COMMAND test_planned 1 400)
  add_test(NAME runtime_planned_random_nofusion COMMAND test_planned 1000 200)
  add_test(NAME runtime_planned_random_kernels COMMAND test_planned 2000 200)
  # Damaged copies of those plans (tests/planner/mutate.c): every one the whole-plan verifier accepts must
  # replay correctly on the runtime, so the verifier's acceptance means what the runtime needs (this fails
  # when, say, the verifier's race check is skipped).
  add_test(NAME runtime_planned_mutants COMMAND test_planned 3000 300 6)
  add_test(NAME runtime_planned_mutants_kernels COMMAND test_planned 4000 200 6)
  set_tests_properties(runtime_planned_random runtime_planned_random_nofusion runtime_planned_random_kernels
                       runtime_planned_mutants runtime_planned_mutants_kernels
                       PROPERTIES TIMEOUT 300 LABELS "runtime;replay")
  set_tests_properties(runtime_planned_mutants_kernels PROPERTIES ENVIRONMENT RESHARD_CPU_EMULATE_KERNELS=1)
  set_tests_properties(runtime_planned_random_nofusion PROPERTIES ENVIRONMENT RESHARD_CPU_FUSE=0)
  set_tests_properties(runtime_planned_random_kernels PROPERTIES ENVIRONMENT RESHARD_CPU_EMULATE_KERNELS=1)
endif()

# Relay plans (issue 9: destination ranks read what they received from their destination buffer and send it
# on to other domains) replayed again without receive fusion and through the GPU kernel's descriptors.
foreach(g relay_chain relay_tree relay_fanout)
  set(layout ${PROJECT_SOURCE_DIR}/tests/golden/${g}.layout)
  file(STRINGS ${layout} args_line REGEX "^# *replay-args:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^# *replay-args:" "" args "${args_line}")
  separate_arguments(args UNIX_COMMAND "${args}")
  foreach(v nofusion kernels)
    add_test(NAME replay_${v}_${g}
             COMMAND sh ${RS_RT_DIR}/replay_layout.sh $<TARGET_FILE:reshardc> $<TARGET_FILE:reshard-replay>
                     ${layout} ${CMAKE_CURRENT_BINARY_DIR}/replay_${v}_${g}.plan ${args})
    set_tests_properties(replay_${v}_${g} PROPERTIES TIMEOUT 120 LABELS "runtime;replay"
                         PASS_REGULAR_EXPRESSION "0 wrong, 0 bytes outside pieces overwritten, 0 source bytes changed")
  endforeach()
  set_tests_properties(replay_nofusion_${g} PROPERTIES ENVIRONMENT RESHARD_CPU_FUSE=0)
  set_tests_properties(replay_kernels_${g} PROPERTIES ENVIRONMENT RESHARD_CPU_EMULATE_KERNELS=1)
endforeach()
