#!/bin/sh
# progress.sh - reshardc's progress line: shown on a terminal (a pseudo-terminal made by script(1)), erased
# before the summary, absent with --quiet and when stderr is not a terminal. Usage: progress.sh RESHARDC LAYOUT DIR
set -eu
reshardc=$1 layout=$2 dir=$3
mkdir -p "$dir"
command -v script >/dev/null 2>&1 || { echo "script(1) not installed: skipped"; exit 77; }
export RESHARDC_PROGRESS_DELAY=0
unset RESHARDC_PROGRESS
script -qec "'$reshardc' '$layout' -o '$dir/p.plan'" /dev/null >"$dir/tty.out" </dev/null
grep -q "reshardc: verifying and writing, " "$dir/tty.out" || { echo "no progress line on a terminal:"; cat "$dir/tty.out"; exit 1; }
# erased with CR + erase-to-end-of-line before the summary line
grep -q "$(printf '\r\033\\[K')$dir/p.plan: " "$dir/tty.out" || { echo "progress line not erased before the summary"; exit 1; }
script -qec "'$reshardc' '$layout' -o '$dir/p.plan' --quiet" /dev/null >"$dir/quiet.out" </dev/null
if grep -q "reshardc: " "$dir/quiet.out"; then echo "progress shown with --quiet"; exit 1; fi
"$reshardc" "$layout" -o "$dir/p.plan" >"$dir/pipe.out" 2>"$dir/pipe.err"
if [ -s "$dir/pipe.err" ]; then echo "stderr not a terminal, yet:"; cat "$dir/pipe.err"; exit 1; fi
echo "progress OK"
