#!/bin/bash
# gpu_kit.sh - the GPU checks for a machine that has a GPU but cannot build reshard (no flex or bison there):
# `pack` builds here (Release, CUDA + NCCL), copies the binaries and this script into KIT and compiles the plans
# to replay into KIT/plans: every example at its `# replay-args:`, every variant of tests/examples/variants.txt,
# every golden layout of tests/golden that compiles, and Qwen3-32B's layout at full width (one layer, vocabulary
# 16000). `run`, on the GPU machine from the repository root, runs test_gpu (CUDA single-process samples, NCCL,
# CUDA graphs), the GPU table (bench_runtime_gpu) with CUDA single-process replays of all those plans (every
# destination element checked), compute-sanitizer's memcheck, synccheck and initcheck on test_gpu,
# python/examples/toy_refit.py --cuda (needs torch) and the full-width replay, each section bounded so that the
# whole run ends within KIT_BUDGET seconds (default 420). Logs go to $OUT (default /tmp/gpu-kit).
#
#     bench/gpu_kit.sh pack [BUILD_DIR] [KIT]      (defaults: build-gpu, build-kit: ignored by git)
#     build-kit/gpu_kit.sh run                     (on the GPU machine, from the repository root)
#     bench/gpu_kit.sh plans RESHARDC DIR          (only the plans; bench/gpu.sh uses it)
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
pack)
    build=${2:-$root/build-gpu}
    kit=${3:-$root/build-kit}
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESHARD_GPU=ON >/dev/null || exit 1
    cmake --build "$build" --target reshard reshardc test_gpu bench_runtime_gpu || exit 1
    rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib" "$kit/plans" || exit 1
    cp "$build/tests/test_gpu" "$build/bench/bench_runtime_gpu" "$build/compiler/reshardc" "$kit/bin/" || exit 1
    for n in libreshard.so libreshard.so.0; do cp -L "$build/runtime/libreshard.so" "$kit/lib/$n" || exit 1; done
    cp "$0" "$kit/gpu_kit.sh"
    "$0" plans "$build/compiler/reshardc" "$kit/plans" || exit 1
    "$build/compiler/reshardc" "$root/examples/qwen3-32b-h100.layout" -D L=1 -D V=16000 -o "$kit/full-width.bin" \
        --quiet || exit 1
    echo "gpu_kit.sh: $kit ready ($(du -sh "$kit" | cut -f1), $(ls "$kit/plans" | wc -l) plans);" \
        "on the GPU machine: $(basename "$kit")/gpu_kit.sh run"
    ;;
plans)
    # the plans both scripts replay on a GPU: every example at its replay-args, every variant, every golden layout
    [ $# -eq 3 ] || { echo "usage: bench/gpu_kit.sh plans RESHARDC DIR" >&2; exit 2; }
    dir=$3
    mkdir -p "$dir" || exit 1
    export RESHARDC=$2 WORK=$dir/work
    scaled() { # scaled NAME LAYOUT [-D N=V]...: the plan run.sh's replay test compiles, as DIR/NAME.plan
        local name=$1 plan
        shift
        if ! plan=$(bash "$root/tests/examples/run.sh" scaled "$@" | tail -n 1) || [ ! -f "$plan" ]; then
            echo "gpu_kit.sh: $name did not compile"
            return 1
        fi
        mv "$plan" "$dir/$name.plan"
    }
    for l in "$root"/examples/*.layout; do scaled "$(basename "$l" .layout)" "$l" || exit 1; done
    while read -r ex variant args; do
        case $ex in '' | '#'*) continue ;; esac
        # shellcheck disable=SC2086 # args are words by design
        scaled "$ex.$variant" "$root/examples/$ex.layout" $args || exit 1
    done <"$root/tests/examples/variants.txt"
    for l in "$root"/tests/golden/*.layout; do
        "$RESHARDC" "$l" -o "$dir/golden.$(basename "$l" .layout).plan" --quiet 2>/dev/null ||
            echo "gpu_kit.sh: tests/golden/$(basename "$l") is not a plan on its own: skipped"
    done
    rm -rf "$WORK"
    ;;
run)
    kit=$(cd "$(dirname "$0")" && pwd)
    out=${OUT:-/tmp/gpu-kit}
    budget=${KIT_BUDGET:-420}
    mkdir -p "$out"
    nccl=/usr/local/cuda/lib64
    [ -e $nccl/libnccl.so.2 ] || nccl=$(dirname "$(find /usr /opt -name libnccl.so.2 2>/dev/null | head -n 1)")
    export LD_LIBRARY_PATH=$kit/lib:/usr/local/cuda/lib64:$nccl
    sec() { echo; echo "== $1 ($(date +%T), ${SECONDS} s in)"; }
    # bounded LIMIT COMMAND...: COMMAND with at most LIMIT seconds, and never past the run's budget
    bounded() {
        local lim=$1 left=$((budget - SECONDS))
        shift
        [ "$left" -lt "$lim" ] && lim=$left
        if [ "$lim" -le 5 ]; then echo "(skipped: the budget of $budget s is spent)"; return 124; fi
        timeout "$lim" "$@"
    }
    sec "environment"
    nvidia-smi -L
    nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv,noheader
    echo "NCCL from $nccl, $(nproc) CPUs, $(ls "$kit/plans" | wc -l) plans"
    sec "test_gpu"
    bounded 90 stdbuf -oL "$kit/bin/test_gpu"
    echo "test_gpu: exit $?"
    sec "GPU table, then every plan replayed (CUDA single process, every element checked)"
    bounded 150 stdbuf -oL "$kit/bin/bench_runtime_gpu" "$kit"/plans/*.plan | tee "$out/table.log"
    echo "bench_runtime_gpu: exit ${PIPESTATUS[0]}"
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    for tool in memcheck synccheck initcheck; do
        sec "compute-sanitizer --tool $tool test_gpu (log: $out/$tool.log)"
        bounded 90 "$cs" --tool $tool --error-exitcode 9 "$kit/bin/test_gpu" >"$out/$tool.log" 2>&1
        echo "$tool: exit $?"
        grep "^=========" "$out/$tool.log" | grep -v "Host Frame\|^========= *$\|Saved host" | sort | uniq -c |
            sort -rn | head
    done
    sec "toy_refit.py --cuda"
    RESHARD_LIBRARY=$kit/lib/libreshard.so RESHARDC=$kit/bin/reshardc PYTHONPATH=python bounded 60 \
        python3 python/examples/toy_refit.py --cuda
    echo "toy_refit.py --cuda: exit $?"
    sec "Qwen3-32B, one layer at full width, vocabulary 16000: 64 ranks on this GPU"
    bounded 180 stdbuf -oL "$kit/bin/test_gpu" "$kit/full-width.bin" | grep "full-width"
    echo "test_gpu full-width: exit ${PIPESTATUS[0]}"
    sec "done"
    ;;
*)
    echo "usage: bench/gpu_kit.sh pack [BUILD_DIR] [KIT] | KIT/gpu_kit.sh run | bench/gpu_kit.sh plans RESHARDC DIR" >&2
    exit 2
    ;;
esac
