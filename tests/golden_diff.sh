#!/bin/sh
# golden_diff.sh - what the golden `reshardc diff` tests run (tests/planner.cmake, rs_add_golden_diffs):
#   golden_diff.sh RESHARDC LAYOUT PREFIX [COMPILE ARGS...]
# compiles LAYOUT as it is (PREFIX_a.bin) and with the arguments (PREFIX_b.bin), diffs them on two threads
# (B's per-rank summaries made ahead) and on one, and prints the diff, exiting with its status (golden.sh
# compares both with the golden). Fails with status 9 when the two threads' output is not the one's.
set -u
rc=$1 layout=$2 p=$3
shift 3
"$rc" "$layout" -o "${p}_a.bin" --quiet || exit 8
"$rc" "$layout" "$@" -o "${p}_b.bin" --quiet || exit 8
RESHARD_THREADS=2 "$rc" diff "${p}_a.bin" "${p}_b.bin" >"${p}_2.txt"
s=$?
RESHARD_THREADS=1 "$rc" diff "${p}_a.bin" "${p}_b.bin" >"${p}_1.txt"
if [ $? != $s ] || ! cmp -s "${p}_1.txt" "${p}_2.txt"; then
    echo "golden_diff.sh: the diff on two threads is not the one on one thread" >&2
    exit 9
fi
cat "${p}_1.txt"
exit $s
