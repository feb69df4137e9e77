#!/usr/bin/env bash
# stats.sh - the cost-model table of docs/benchmarks.md ("## Cost model"): for every examples/*.layout at full
# size, compile the plan and print `reshardc stats` figures: the lower bound (with and without relays), the
# modeled time and its ratio to the bound, the busiest link, both baselines with the plan's speedup, and the
# diagnostic `--merge-net-steps` time (the same plan with each rank's NET steps as one group: what the
# step barriers cost).
#   bench/stats.sh [BUILD_DIR [EXAMPLE...]]     (default: build, all; needs reshardc and python3)
# Extra `reshardc stats` options (e.g. --gb-roots 2) go in STATS_ARGS. A compile is limited to BENCH_VMEM_KB of
# address space (default 16 GiB); one that fails gets a row saying so.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
reshardc=$build/compiler/reshardc
[ -x "$reshardc" ] || { echo "stats.sh: $reshardc not built (ninja -C $build reshardc)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vmem=${BENCH_VMEM_KB:-16777216}
shift || true
files=()
for n in "$@"; do files+=("$here/examples/$n.layout"); done
[ ${#files[@]} -gt 0 ] || files=("$here"/examples/*.layout)

echo "| example | bound | bound w/o relays | modeled | ratio | busiest link (busy) | gather-broadcast | speedup | direct | speedup | merged NET steps (diagnostic) |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
for f in "${files[@]}"; do
    name=$(basename "$f" .layout)
    rm -f "$work/plan.bin"
    if ! ( ulimit -v "$vmem"; "$reshardc" "$f" -o "$work/plan.bin" --quiet ) >/dev/null 2>"$work/err"; then
        echo "| $name | compile failed: $(head -c 80 "$work/err" | tr '\n|' '  ') | | | | | | | | | |"
        continue
    fi
    # shellcheck disable=SC2086
    "$reshardc" stats "$work/plan.bin" --json ${STATS_ARGS:-} >"$work/stats.json"
    # shellcheck disable=SC2086
    "$reshardc" stats "$work/plan.bin" --json --merge-net-steps ${STATS_ARGS:-} >"$work/merged.json"
    python3 - "$name" "$work/stats.json" "$work/merged.json" <<'EOF'
import json, sys
name, j, m = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def s(x):
    return f"{x:.3f} s" if x >= 1 else f"{x * 1e3:.1f} ms"
b = j["busiest_link"]
print(f"| {name} | {s(j['lower_bound_s'])} | {s(j['lower_bound_no_relay_s'])} | {s(j['modeled_s'])} | "
      f"{j['ratio_to_bound']:.2f}x | {b['link']} of rank {b['rank']} ({100 * b['busy_s'] / j['modeled_s']:.0f}%) | "
      f"{s(j['gather_broadcast_s'])} | {j['speedup_gather_broadcast']:.2f}x | {s(j['direct_s'])} | "
      f"{j['speedup_direct']:.2f}x | {s(m['modeled_s'])} ({m['ratio_to_bound']:.2f}x) |")
EOF
done
