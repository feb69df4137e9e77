#!/bin/bash
# gpu_kit.sh - the GPU checks for a machine that has a GPU but cannot build reshard (no flex or bison there):
# `pack` builds here (Release, CUDA + NCCL) and copies the binaries and this script into KIT; `run`, on the GPU
# machine from the repository root, compiles the scaled example plans and a full-width one, then runs
# test_gpu, the GPU table (bench_runtime_gpu), python/examples/toy_refit.py --cuda (needs torch), a
# 10 GiB CUDA replay of Qwen3-32B (one layer, every element checked) and compute-sanitizer's memcheck,
# initcheck and synccheck on test_gpu. Logs go to $OUT (default /tmp/gpu-kit).
#
#     bench/gpu_kit.sh pack [BUILD_DIR] [KIT]      (defaults: build-gpu, build-kit: ignored by git)
#     build-kit/gpu_kit.sh run                     (on the GPU machine, from the repository root)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
pack)
    build=${2:-$root/build-gpu}
    kit=${3:-$root/build-kit}
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESHARD_GPU=ON >/dev/null || exit 1
    cmake --build "$build" --target reshard reshardc test_gpu bench_runtime_gpu || exit 1
    rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib" || exit 1
    cp "$build/tests/test_gpu" "$build/bench/bench_runtime_gpu" "$build/compiler/reshardc" "$kit/bin/" || exit 1
    for n in libreshard.so libreshard.so.0; do cp -L "$build/runtime/libreshard.so" "$kit/lib/$n" || exit 1; done
    cp "$0" "$kit/gpu_kit.sh"
    echo "gpu_kit.sh: $kit ready ($(du -sh "$kit" | cut -f1)); on the GPU machine: $(basename "$kit")/gpu_kit.sh run"
    ;;
run)
    kit=$(cd "$(dirname "$0")" && pwd)
    out=${OUT:-/tmp/gpu-kit}
    plans=$(mktemp -d)
    mkdir -p "$out"
    nccl=/usr/local/cuda/lib64
    [ -e $nccl/libnccl.so.2 ] || nccl=$(dirname "$(find /usr /opt -name libnccl.so.2 2>/dev/null | head -n 1)")
    export LD_LIBRARY_PATH=$kit/lib:/usr/local/cuda/lib64:$nccl
    sec() { echo; echo "== $1 ($(date +%T))"; }
    sec "environment"
    nvidia-smi -L
    echo "NCCL from $nccl, $(nproc) CPUs"
    sec "plans"
    for l in examples/*.layout; do
        args=$(sed -n 's/^# *replay-args://p' "$l" | head -n 1)
        # shellcheck disable=SC2086 # args are words by design
        "$kit/bin/reshardc" "$l" $args -o "$plans/$(basename "$l" .layout).plan" --quiet || echo "reshardc $l: FAILED"
    done
    "$kit/bin/reshardc" examples/qwen3-32b-h100.layout -D L=1 -D V=16000 -o "$plans/full-width.bin" --quiet
    sec "test_gpu"
    timeout 150 stdbuf -oL "$kit/bin/test_gpu"
    echo "test_gpu: exit $?"
    sec "GPU table"
    timeout 180 stdbuf -oL "$kit/bin/bench_runtime_gpu" "$plans"/*.plan
    echo "bench_runtime_gpu: exit $?"
    sec "toy_refit.py --cuda"
    RESHARD_LIBRARY=$kit/lib/libreshard.so RESHARDC=$kit/bin/reshardc PYTHONPATH=python timeout 90 \
        python3 python/examples/toy_refit.py --cuda
    echo "toy_refit.py --cuda: exit $?"
    sec "Qwen3-32B, one layer at full width, vocabulary 16000: 64 ranks on this GPU"
    timeout 150 stdbuf -oL "$kit/bin/test_gpu" "$plans/full-width.bin" | grep "full-width"
    echo "test_gpu full-width: exit ${PIPESTATUS[0]}"
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for tool in memcheck initcheck synccheck; do
        sec "compute-sanitizer --tool $tool test_gpu (log: $out/$tool.log)"
        timeout 150 "$cs" --tool $tool --error-exitcode 9 "$kit/bin/test_gpu" >"$out/$tool.log" 2>&1
        echo "$tool: exit $?"
        grep "^=========" "$out/$tool.log" | grep -v "Host Frame\|^========= *$\|Saved host" | sort | uniq -c | sort -rn | head
    done
    rm -rf "$plans"
    ;;
*)
    echo "usage: bench/gpu_kit.sh pack [BUILD_DIR] [KIT] | KIT/gpu_kit.sh run" >&2
    exit 2
    ;;
esac
