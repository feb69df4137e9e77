#!/bin/sh
# run_golden.sh - golden test for the layout front end: runs `reshardc check NAME.layout ARGS` inside
# DIR and compares exit status, stdout and stderr with the expected files beside the layout.
#
#   usage: run_golden.sh RESHARDC DIR NAME
#
# The layout's own header says how to run it: a line "# args: ..." adds command-line arguments,
# "# exit: N" sets the expected exit status (default 1 in an `errors` directory, 0 elsewhere).
# Expected stdout is NAME.out and expected stderr NAME.err; a missing file means "empty".
# With RESHARD_UPDATE=1 in the environment the expected files are rewritten from the actual output
# (the exit status must still match). Refresh all front-end goldens with:
#   RESHARD_UPDATE=1 ctest --test-dir build -L front
set -u
bin=$1 dir=$2 name=$3
cd "$dir" || exit 2
layout=$name.layout
[ -f "$layout" ] || { echo "run_golden: no $dir/$layout" >&2; exit 2; }

args=$(sed -n 's/^# args: //p' "$layout" | head -n 1)
want=$(sed -n 's/^# exit: //p' "$layout" | head -n 1)
if [ -z "$want" ]; then
    case "$dir" in */errors|*/errors/) want=1 ;; *) want=0 ;; esac
fi

tmp=${TMPDIR:-/tmp}/rs_golden.$$
trap 'rm -f "$tmp.out" "$tmp.err"' EXIT INT TERM
# shellcheck disable=SC2086
"$bin" check "$layout" $args >"$tmp.out" 2>"$tmp.err"
got=$?

fail=0
if [ "$got" != "$want" ]; then
    echo "FAIL $name: exit status $got, expected $want" >&2
    fail=1
fi
if [ "${RESHARD_UPDATE:-0}" = 1 ]; then
    [ "$fail" = 1 ] && { cat "$tmp.err" >&2; exit 1; }
    for k in out err; do
        if [ -s "$tmp.$k" ]; then cp "$tmp.$k" "$name.$k"; else rm -f "$name.$k"; fi
    done
    echo "updated $dir/$name"
    exit 0
fi
for k in out err; do
    if [ -f "$name.$k" ]; then exp=$name.$k; else exp=/dev/null; fi
    if ! cmp -s "$exp" "$tmp.$k"; then
        echo "FAIL $name: std$k differs from $exp (- expected, + actual):" >&2
        diff -u "$exp" "$tmp.$k" >&2
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "ok $name"
exit "$fail"
