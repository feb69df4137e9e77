#!/bin/sh
# golden.sh - compare a command's output with a checked-in golden file, or refresh it.
#
#   golden.sh [--status N] EXPECTED CMD [ARGS...]
#       Run CMD, compare its stdout with EXPECTED (diff -u); the command must exit with N (default 0).
#   golden.sh layout RESHARDC LAYOUT EXPECTED [COMPILE ARGS...]
#       Compile LAYOUT with RESHARDC (extra args such as -D N=V --staging B go to the compiler), check
#       the plan with `reshardc verify`, then compare `reshardc dump PLAN` with EXPECTED.
#
# Refresh instead of compare: set RESHARD_UPDATE=1 in the environment (the same switch as the front
# end's tests/run_golden.sh; RS_GOLDEN_REFRESH=1 works too), or pass --refresh first:
#   RESHARD_UPDATE=1 ctest --test-dir BUILD -L golden
# then review `git diff tests/` before committing. A missing EXPECTED is an error unless refreshing.
set -u

refresh=0
case "${RESHARD_UPDATE:-}${RS_GOLDEN_REFRESH:-}" in *1*) refresh=1 ;; esac
if [ "${1:-}" = "--refresh" ]; then refresh=1; shift; fi
status=0
if [ "${1:-}" = "--status" ]; then status=$2; shift 2; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rs_golden.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

compare() { # compare EXPECTED ACTUAL
    if [ "$refresh" = 1 ]; then
        mkdir -p "$(dirname "$1")" && cp "$2" "$1" && echo "golden.sh: refreshed $1"
        return $?
    fi
    if [ ! -f "$1" ]; then
        echo "golden.sh: $1 does not exist; create it with RESHARD_UPDATE=1" >&2
        return 1
    fi
    if ! diff -u "$1" "$2"; then
        echo "golden.sh: output differs from $1 (refresh: RESHARD_UPDATE=1 ctest -L golden)" >&2
        return 1
    fi
    return 0
}

if [ "${1:-}" = "layout" ]; then
    [ $# -ge 4 ] || { echo "usage: golden.sh layout RESHARDC LAYOUT EXPECTED [ARGS...]" >&2; exit 2; }
    reshardc=$2 layout=$3 expected=$4
    shift 4
    "$reshardc" "$layout" -o "$tmp/plan.bin" "$@" >/dev/null || { echo "golden.sh: compiling $layout failed" >&2; exit 1; }
    "$reshardc" verify --quiet "$tmp/plan.bin" || { echo "golden.sh: $layout: plan does not verify" >&2; exit 1; }
    # the listing on one thread, and on two (ranks listed by both, written in order): the same bytes
    RESHARD_THREADS=1 "$reshardc" dump "$tmp/plan.bin" >"$tmp/out" || { echo "golden.sh: dump failed" >&2; exit 1; }
    RESHARD_THREADS=2 "$reshardc" dump "$tmp/plan.bin" >"$tmp/out2" || { echo "golden.sh: dump failed" >&2; exit 1; }
    cmp -s "$tmp/out" "$tmp/out2" || { echo "golden.sh: $layout: the listing on two threads differs from one's" >&2; exit 1; }
    compare "$expected" "$tmp/out"
    exit $?
fi

[ $# -ge 2 ] || { echo "usage: golden.sh [--status N] EXPECTED CMD [ARGS...]" >&2; exit 2; }
expected=$1
shift
"$@" >"$tmp/out"
rc=$?
if [ "$rc" != "$status" ]; then
    echo "golden.sh: '$*' exited with $rc, expected $status" >&2
    exit 1
fi
compare "$expected" "$tmp/out"
