#!/bin/sh
# gpu.sh - the GPU check in one script: build with CUDA and NCCL (Release), run the GPU tests (ctest -L gpu:
# CUDA single-process and NCCL replays checked element by element, CUDA graph), then print the GPU table:
# pack/unpack kernel bandwidth vs cudaMemcpyAsync D2D (fragments >= 64 KiB), host time per run call per step,
# a whole replay captured in a CUDA graph, and CUDA single-process replays of the scaled example plans.
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

# Scaled-down example plans (the -D values of each layout's `# replay-args:` line).
plans=""
if [ -x "$build/compiler/reshardc" ]; then
    for l in "$root"/examples/*.layout; do
        args=$(sed -n 's/^# *replay-args://p' "$l" | head -n 1)
        out="$build/gpu-$(basename "$l" .layout).plan"
        # shellcheck disable=SC2086 # args are words by design
        if "$build/compiler/reshardc" "$l" $args -o "$out" >/dev/null 2>&1; then plans="$plans $out"; fi
    done
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
