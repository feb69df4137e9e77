#!/bin/sh
# gpu.sh - the GPU check in one script: build with CUDA and NCCL (Release), run the GPU tests (ctest -L gpu:
# CUDA single-process and NCCL replays checked element by element, CUDA graph), then print the GPU table:
# pack/unpack kernel bandwidth vs cudaMemcpyAsync D2D (fragments from 256 bytes), host time per run call per
# step, a whole replay captured in a CUDA graph, and CUDA single-process replays of the scaled example plans, their
# variants and the golden layouts (bench/gpu_kit.sh plans).
#
#     bench/gpu.sh [BUILD_DIR]            (default: build-gpu next to this repository's sources)
#
# Exit status: 0 all GPU checks passed, 77 no GPU (after building), 1 a build or a check failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

mkdir -p "$build"
log="$build/gpu-configure.log"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESHARD_GPU=ON >"$log" 2>&1 ||
    { cat "$log"; echo "gpu.sh: configure failed"; exit 1; }
grep "reshard:" "$log"
cmake --build "$build" -j "$jobs" --target reshard test_gpu bench_runtime_gpu reshard-replay ||
    { echo "gpu.sh: build failed (is the CUDA toolkit installed? see $log)"; exit 1; }
cmake --build "$build" -j "$jobs" --target reshardc >/dev/null 2>&1 || echo "gpu.sh: reshardc did not build: no example plans"

# The plans to replay: every example scaled down, every variant of tests/examples/variants.txt, every golden layout.
plans=""
if [ -x "$build/compiler/reshardc" ] &&
    "$root/bench/gpu_kit.sh" plans "$build/compiler/reshardc" "$build/gpu-plans"; then
    plans=$(echo "$build"/gpu-plans/*.plan)
fi

echo "== GPU tests (ctest -L gpu)"
ctest --test-dir "$build" -L gpu --output-on-failure
tests=$?
"$build/tests/test_gpu" >/dev/null 2>&1
if [ $? -eq 77 ]; then
    echo "gpu.sh: no CUDA device visible: built and ready, nothing measured"
    exit 77
fi
echo "== GPU table"
# shellcheck disable=SC2086
"$build/bench/bench_runtime_gpu" $plans
table=$?
[ $tests -eq 0 ] && [ $table -eq 0 ] && exit 0
echo "gpu.sh: FAILED (tests $tests, table $table)"
exit 1
