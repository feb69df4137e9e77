# Python package tests (python/reshard over libreshard.so, CPU threads transport, numpy), the runnable examples
# of docs/integration.md (python/examples/), and the check that the guide quotes them verbatim. Run with the
# system python3 (/usr/bin/python3: Debian's python3-numpy), skipped (77) when numpy is missing. With
# -DRESHARD_SANITIZE=ON the instrumented library is loaded into Python with the sanitizer runtimes preloaded
# (ctypes struct layouts are then checked by ASan too); other -fsanitize builds (TSan) leave these tests out.
# Included by tests/CMakeLists.txt.
find_program(RS_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT RS_PYTHON3)
  find_program(RS_PYTHON3 NAMES python3)
endif()
set(RS_PY_PRELOAD "")
if(RESHARD_SANITIZE)
  foreach(rt libasan.so libubsan.so)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${rt} OUTPUT_VARIABLE rt_path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${rt_path}" AND EXISTS "${rt_path}")
      list(APPEND RS_PY_PRELOAD ${rt_path})
    endif()
  endforeach()
  list(JOIN RS_PY_PRELOAD ":" RS_PY_PRELOAD)
endif()
if(RS_PYTHON3 AND NOT CMAKE_C_FLAGS MATCHES "-fsanitize" AND (NOT RESHARD_SANITIZE OR RS_PY_PRELOAD))
  set(RS_PY_ENV RESHARD_LIBRARY=$<TARGET_FILE:reshard> RESHARDC=$<TARGET_FILE:reshardc>
      RESHARD_REPLAY=$<TARGET_FILE:reshard-replay> PYTHONPATH=${PROJECT_SOURCE_DIR}/python PYTHONDONTWRITEBYTECODE=1
      RS_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/python)
  if(RS_PY_PRELOAD)
    # Python itself "leaks"; its own allocator would hide overflows of ctypes structs from ASan
    list(APPEND RS_PY_ENV LD_PRELOAD=${RS_PY_PRELOAD} ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc)
  endif()
  add_test(NAME python_reshard COMMAND ${RS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_reshard.py)
  add_test(NAME python_docs COMMAND ${RS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_docs.py)
  # the vLLM worker extension of the guide, with torch and vLLM stubbed: its refit rank and drafter binding
  add_test(NAME python_vllm_worker COMMAND ${RS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_vllm_worker.py)
  set_tests_properties(python_reshard python_docs python_vllm_worker PROPERTIES TIMEOUT 300 LABELS python
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${RS_PY_ENV}")
  # Every python/examples/*.py that can run here (CPU transport); the GPU ones are compiled by python_docs.
  file(GLOB RS_PY_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/examples/*.py)
  list(SORT RS_PY_EXAMPLES)
  foreach(ex ${RS_PY_EXAMPLES})
    file(STRINGS ${ex} cpu_line REGEX "^# runs-on: cpu" LIMIT_COUNT 1)
    if(cpu_line)
      get_filename_component(stem ${ex} NAME_WE)
      add_test(NAME python_example_${stem} COMMAND ${RS_PYTHON3} ${ex})
      set_tests_properties(python_example_${stem} PROPERTIES TIMEOUT 300 LABELS python SKIP_RETURN_CODE 77
                           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} ENVIRONMENT "${RS_PY_ENV}")
    endif()
  endforeach()
  # The worked example on the GPUs (torch tensors, the in-process CUDA transport), with the python3 first on
  # PATH (where a GPU machine keeps torch); 77 (skipped) without numpy, torch, a GPU or CUDA in libreshard.
  find_program(RS_PYTHON3_GPU NAMES python3)
  if(RESHARD_HAVE_CUDA AND RS_PYTHON3_GPU)
    add_test(NAME python_example_toy_refit_cuda
             COMMAND ${RS_PYTHON3_GPU} ${PROJECT_SOURCE_DIR}/python/examples/toy_refit.py --cuda)
    set_tests_properties(python_example_toy_refit_cuda PROPERTIES TIMEOUT 300 LABELS "python;gpu"
                         SKIP_RETURN_CODE 77 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} ENVIRONMENT "${RS_PY_ENV}")
  endif()
endif()
