#!/bin/sh
# cli_errors.sh - reshard-replay's bad command lines: each exits 2 and names what is wrong.
#   tests/runtime/cli_errors.sh REPLAY PLAN
set -u
replay=$1 plan=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fails=0
# expect STATUS MESSAGE ARGS...: run reshard-replay with ARGS, want exit STATUS and MESSAGE on stderr
expect() {
    want=$1 msg=$2
    shift 2
    "$replay" "$@" >/dev/null 2>"$out"
    rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$msg" ] && ! grep -qF -- "$msg" "$out"; }; then
        echo "reshard-replay $*: exit $rc (want $want), stderr:" >&2
        cat "$out" >&2
        echo "  (want: $msg)" >&2
        fails=$((fails + 1))
    fi
}
expect 2 "unknown option '--threads'" "$plan" --threads 2
expect 2 "--iters needs a whole number from 0 to 1000000, not 'abc'" "$plan" --iters abc
expect 2 "--iters needs a whole number from 0 to 1000000, not '-1'" "$plan" --iters -1
expect 2 "--timeout needs a whole number from 1 to 86400000, not '5s'" "$plan" --timeout 5s
expect 2 "--iters needs a value" "$plan" --iters
expect 2 "one plan only" "$plan" "$plan"
expect 2 "bad --ranks '3-1' (want N-M)" "$plan" --ranks 3-1
expect 2 "bad --inject 'x' (want RANK:STEP)" "$plan" --inject x
expect 2 "bad --inject '-1:0' (want RANK:STEP)" "$plan" --inject -1:0
expect 2 "bad --inject '3:4x' (want RANK:STEP)" "$plan" --inject 3:4x
# an injection that cannot happen: the replay would pass where the caller expects it to fail
expect 2 "--inject 99:0: rank 99 is outside the plan's" "$plan" --inject 99:0
expect 2 "--inject 0:99999: rank 0 has" "$plan" --inject 0:99999
expect 2 "cannot open" "$plan.missing"
# the plan is fine: a refused replay is not a bad command line
expect 0 "" "$plan" --iters 0 --timeout 10000 --no-memory-check
# a report that cannot reach standard output (a full disk): said, exit 1
if [ -w /dev/full ]; then
    "$replay" "$plan" --iters 0 >/dev/full 2>"$out"
    rc=$?
    if [ "$rc" != 1 ] || ! grep -qF "cannot write to standard output" "$out"; then
        echo "reshard-replay $plan >/dev/full: exit $rc (want 1)" >&2
        fails=$((fails + 1))
    fi
fi
[ "$fails" = 0 ] || exit 1
echo "cli errors OK"
