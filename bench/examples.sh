#!/usr/bin/env bash
# examples.sh - the example-layout benchmark table of docs/benchmarks.md ("## Examples").
# For every examples/*.layout at full size: tensors, pieces, bytes per side, world size, compile time and peak
# memory of `reshardc LAYOUT -o plan.bin` (/usr/bin/time -v: wall and user+system CPU seconds), plan.bin size, the time to load and verify one
# rank's program (bench/format_load: best of 5, slowest of ranks 0, world/2, world-1), and the CPU-transport
# replay of the scaled-down copy (its `# replay-args:` line).
#   bench/examples.sh [BUILD_DIR [EXAMPLE...]]   (default: build, all; needs reshardc, reshard-replay, format_load)
# A compile is limited to BENCH_VMEM_KB of address space (default 8 GiB); one that fails gets a row saying so.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
reshardc=$build/compiler/reshardc
replay=$build/runtime/reshard-replay
load=$build/bench/format_load
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "$reshardc" "$replay" "$load"; do
    [ -x "$t" ] || { echo "examples.sh: $t not built (ninja -C $build)" >&2; exit 1; }
done
timev=/usr/bin/time
[ -x $timev ] || timev=

vmem=${BENCH_VMEM_KB:-8388608}
shift || true
files=()
for n in "$@"; do files+=("$here/examples/$n.layout"); done
[ ${#files[@]} -gt 0 ] || files=("$here"/examples/*.layout)

echo "| example | tensors | pieces (src + dst) | bytes per side | world | compile | peak memory | plan.bin | load+verify 1 rank | scaled replay |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for f in "${files[@]}"; do
    name=$(basename "$f" .layout)
    "$reshardc" check "$f" >"$work/check"
    tensors=$(sed -n 's/^tensors *\([0-9]*\), \([0-9]*\) bytes.*/\1/p' "$work/check")
    bytes=$(sed -n 's/^tensors *[0-9]*, [0-9]* bytes (\([0-9.]*\) GiB).*/\1 GiB/p' "$work/check")
    pieces=$(sed -n 's/^pieces *src \([0-9]*\), dst \([0-9]*\).*/\1 + \2/p' "$work/check")
    world=$(sed -n 's/^world *\([0-9]*\) ranks.*/\1/p' "$work/check")
    rm -f "$work/plan.bin"
    if [ -n "$timev" ]; then
        ( ulimit -v "$vmem"; $timev -v "$reshardc" "$f" -o "$work/plan.bin" --quiet ) 2>"$work/time" >/dev/null || true
        wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time")
        cpu=$(sed -n 's/.*\(User\|System\) time (seconds): //p' "$work/time" | awk '{ s += $1 } END { printf "%.2f", s }')
        secs=$(echo "$wall" | awk -F: -v cpu="$cpu" '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f s (cpu %s)", s, cpu }')
        rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time" | awk '{ printf "%.0f MiB", $1 / 1024 }')
    else
        t0=$(date +%s.%N)
        ( ulimit -v "$vmem"; "$reshardc" "$f" -o "$work/plan.bin" --quiet ) >/dev/null 2>"$work/time" || true
        secs=$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.2f s", $2 - $1 }')
        rss="n/a"
    fi
    if [ -f "$work/plan.bin" ]; then
        size=$(stat -c %s "$work/plan.bin" | awk '{ printf "%.1f MiB", $1 / 1048576 }')
        one="$("$load" "$work/plan.bin" 5 | sed -n 's/^load+verify rank .* \([0-9.]*\) ms best.*/\1/p' | sort -g | tail -1) ms"
    else
        why=$(grep -m1 -o 'out of memory' "$work/time" || echo failed)
        size="— ($why, limit $((vmem / 1048576)) GiB)"
        one="—"
    fi
    args=$(sed -n 's/^# replay-args://p' "$f")
    # shellcheck disable=SC2086
    "$reshardc" "$f" -o "$work/scaled.bin" --quiet $args >/dev/null
    t0=$(date +%s.%N)
    "$replay" "$work/scaled.bin" >"$work/replay" 2>&1 || { cat "$work/replay" >&2; exit 1; }
    rep=$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f s", $2 - $1 }')
    echo "| $name | $tensors | $pieces | $bytes | $world | $secs | $rss | $size | $one | $rep |"
done
