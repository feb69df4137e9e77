#!/usr/bin/env bash
# run.sh - one test of an example layout (tests/examples.cmake registers them; see examples/README.md).
#   run.sh check    LAYOUT [-D N=V]...         reshardc check at full size: valid, and no warnings
#   run.sh bytes    LAYOUT BYTES [-D N=V]...   tensor bytes (reshardc check) and distinct bytes covered by
#                                              each side (rs-example-coverage) all equal BYTES
#   run.sh verify   LAYOUT [-D N=V]...         compile at full size, then reshardc verify the plan
#   run.sh replay   LAYOUT [-D N=V]...         compile with the file's replay-args (then the extra -D), replay
#                                              on the CPU transport, every destination element checked, and
#                                              compare the plan's listing on one thread and on two
#   run.sh scaled   LAYOUT [-D N=V]...         only compile that scaled plan; its path is the last line printed
#   run.sh ref      LAYOUT [-D N=V]...         layout_ref.py at the replay-args sizes (Megatron / vLLM emulation)
# Environment: RESHARDC, RESHARD_REPLAY, RS_COVERAGE, PYTHON (tool paths), WORK (scratch directory),
# RS_EX_VMEM_KB (address-space limit for the full-size compile; unset under sanitizers), RS_PEAK_RSS and
# RS_EX_MAXRSS_MIB (rs-peak-rss and the full-size compile's peak resident memory limit; unset under sanitizers).
set -euo pipefail
mode=$1 layout=$2
shift 2
name=$(basename "$layout" .layout)
tag=$(printf '%s' "$*" | tr -c 'A-Za-z0-9=_-' '_')
work=${WORK:-/tmp}/$name${tag:+.$tag}
mkdir -p "$work"

replay_args() {
    local n
    n=$(grep -c '^# replay-args:' "$layout" || true)
    if [ "$n" != 1 ]; then
        echo "FAIL: $layout has $n '# replay-args:' lines (exactly one wanted)" >&2
        exit 1
    fi
    sed -n 's/^# replay-args://p' "$layout"
}

case $mode in
check)
    "$RESHARDC" check "$layout" "$@" >"$work/check.out" 2>"$work/check.err" || {
        cat "$work/check.err" >&2
        echo "FAIL: reshardc check $layout $*" >&2
        exit 1
    }
    cat "$work/check.out"
    if [ -s "$work/check.err" ]; then
        cat "$work/check.err" >&2
        echo "FAIL: reshardc check printed diagnostics (every weight must be transferred, nothing left over)" >&2
        exit 1
    fi
    ;;
bytes)
    want=$1
    shift
    "$RESHARDC" check "$layout" "$@" >"$work/check.out"
    tensors=$(sed -n 's/^tensors *[0-9]*, \([0-9]*\) bytes.*/\1/p' "$work/check.out")
    "$RS_COVERAGE" "$layout" "$@" >"$work/coverage.out"
    src=$(sed -n 's/^src *\([0-9]*\) bytes/\1/p' "$work/coverage.out")
    dst=$(sed -n 's/^dst *\([0-9]*\) bytes/\1/p' "$work/coverage.out")
    echo "expected $want; reshardc check: tensors $tensors; covered: src $src, dst $dst"
    for got in "$tensors" "$src" "$dst"; do
        if [ "$got" != "$want" ]; then
            echo "FAIL: byte total $got != $want (a weight is missing, doubled or not transferred)" >&2
            exit 1
        fi
    done
    ;;
verify)
    # a planner that blows up fails here cleanly instead of taking the machine down (issue 5's target is 2 GiB)
    if [ -n "${RS_EX_VMEM_KB:-}" ]; then ulimit -v "$RS_EX_VMEM_KB"; fi
    if [ -n "${RS_PEAK_RSS:-}" ] && [ -n "${RS_EX_MAXRSS_MIB:-}" ]; then
        "$RS_PEAK_RSS" "$RS_EX_MAXRSS_MIB" "$RESHARDC" "$layout" -o "$work/full.plan" "$@"
    else
        "$RESHARDC" "$layout" -o "$work/full.plan" "$@"
    fi
    "$RESHARDC" verify "$work/full.plan"
    ls -l "$work/full.plan"
    ;;
replay | scaled)
    # the file's replay-args, each overridden by a later -D of the same name (reshardc refuses a name twice)
    declare -A val=()
    order=()
    # shellcheck disable=SC2046
    set -- $(replay_args) "$@"
    while [ $# -gt 0 ]; do
        if [ "$1" = -D ]; then
            shift
            d=$1
        else
            d=${1#-D}
        fi
        shift
        [ -n "${val[${d%%=*}]+x}" ] || order+=("${d%%=*}")
        val[${d%%=*}]=${d#*=}
    done
    for k in "${order[@]}"; do set -- "$@" -D "$k=${val[$k]}"; done
    echo "scaled: $*"
    "$RESHARDC" "$layout" -o "$work/scaled.plan" "$@"
    if [ "$mode" = scaled ]; then
        echo "$work/scaled.plan"
    else
        "$RESHARD_REPLAY" "$work/scaled.plan"
        # the listing on one thread and on two (ranks listed by both, written in rank order): the same bytes
        RESHARD_THREADS=1 "$RESHARDC" dump "$work/scaled.plan" >"$work/scaled.dump1"
        RESHARD_THREADS=2 "$RESHARDC" dump "$work/scaled.plan" >"$work/scaled.dump2"
        cmp "$work/scaled.dump1" "$work/scaled.dump2" || { echo "FAIL: the listing on two threads differs" >&2; exit 1; }
        echo "dump: $(wc -l <"$work/scaled.dump1") lines, the same on one thread and two"
        rm -f "$work/scaled.dump1" "$work/scaled.dump2"
    fi
    ;;
ref)
    "${PYTHON:-python3}" "$(dirname "$0")/layout_ref.py" "$layout" --replay-args "$@"
    ;;
*)
    echo "run.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
