#!/bin/sh
# replay_layout.sh - compile a layout with reshardc (extra args: scaled-down -D values from its
# `# replay-args:` line) and replay the plan on the CPU transport, checking every destination element.
# usage: replay_layout.sh RESHARDC REPLAY LAYOUT PLAN [reshardc args...]
set -eu
reshardc=$1 replay=$2 layout=$3 plan=$4
shift 4
"$reshardc" "$layout" "$@" -o "$plan"
exec "$replay" "$plan" --iters 1
