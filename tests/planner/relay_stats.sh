#!/bin/sh
# relay_stats.sh - compile a layout and check the relayed bytes that `reshardc stats --json` reports (issue 9).
#   usage: relay_stats.sh RESHARDC LAYOUT PLAN EXPECT [COMPILE ARGS...]
# EXPECT is an exact byte count, or "positive" (relays used, any amount).
set -u
reshardc=$1 layout=$2 plan=$3 expect=$4
shift 4
"$reshardc" "$layout" -o "$plan" --quiet "$@" || { echo "relay_stats: compiling $layout failed" >&2; exit 1; }
json=$("$reshardc" stats --json "$plan") || { echo "relay_stats: stats failed" >&2; exit 1; }
got=$(printf '%s\n' "$json" | sed -n 's/^ *"relay_bytes": *\([0-9]*\),*$/\1/p')
[ -n "$got" ] || { echo "relay_stats: no relay_bytes in the stats of $plan" >&2; exit 1; }
echo "relay_stats: $layout $*: relay_bytes $got (expected $expect)"
case "$expect" in
positive) [ "$got" -gt 0 ] ;;
*) [ "$got" -eq "$expect" ] ;;
esac
