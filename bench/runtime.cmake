# Runtime benchmarks (programs that print a table; not timed tests). See docs/benchmarks.md.
#   bench_runtime_cpu [--mib N] [--iters K] [PLAN...]   CPU transport replay vs memcpy of the same bytes
#   bench_runtime_gpu [PLAN...]                         GPU table (kernels vs cudaMemcpyAsync, host time per
#                                                       step, CUDA graph); run through bench/gpu.sh
add_executable(bench_runtime_cpu ${CMAKE_CURRENT_SOURCE_DIR}/rt_cpu_bench.c)
target_link_libraries(bench_runtime_cpu PRIVATE rs_rt_build rsreplay)
if(RESHARD_HAVE_CUDA)
  add_executable(bench_runtime_gpu ${CMAKE_CURRENT_SOURCE_DIR}/rt_gpu_bench.c)
  target_link_libraries(bench_runtime_gpu PRIVATE rs_rt_build rsreplay CUDA::cudart)
  if(RESHARD_HAVE_NCCL)
    target_link_libraries(bench_runtime_gpu PRIVATE NCCL::nccl)
  endif()
endif()
