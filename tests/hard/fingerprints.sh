#!/bin/sh
# fingerprints.sh - print the plan fingerprint of each compiled example (the "plan fp" line of the
# `reshardc dump` header), in the format of tests/fingerprints.txt; tests/golden.sh compares or refreshes.
# usage: fingerprints.sh RESHARDC PLAN_DIR NAME...   (PLAN_DIR/NAME.plan)
set -eu
reshardc=$1 dir=$2
shift 2
cat <<'HEAD'
# tests/fingerprints.txt - plan fingerprints of the examples compiled with their `# replay-args:` lines
# (the "plan fp" of `reshardc dump PLAN`). A change in any plan byte changes its line: refresh deliberately,
#   RESHARD_UPDATE=1 ctest --test-dir build -R hard.fingerprints && git diff tests/fingerprints.txt
HEAD
for name in "$@"; do
    fp=$("$reshardc" dump "$dir/$name.plan" --rank 0 | sed -n 's/^plan fp *//p')
    [ -n "$fp" ] || { echo "fingerprints.sh: no fingerprint for $name" >&2; exit 1; }
    printf '%-24s %s\n' "$name" "$fp"
done
