#!/bin/sh
# tsan.sh - the planner's and verifier's threads under ThreadSanitizer (CTest `tsan`): configure a sub-build of
# this source tree with -fsanitize=thread -DRESHARD_GPU=OFF, build reshardc and test_planner only, and run
# what takes the two-thread paths: random plans and damaged plans with RESHARD_THREADS=2 (the builds of ranks
# done during pass 3's tensor loop beside it, the op adder beside that loop, the segments made in two halves, the message merges, the end-of-pass-3 builds, the checker thread, the split per-rank checks and coverage, the piece index and the relay check beside matching, matching in two halves, a full load's decode in two halves, the listing of a whole plan, the stats' gather-broadcast baseline, diff's summaries made ahead), one
# thread against two (determinism, mutate), and reshardc's write beside verification, passed and failed.
# usage: tsan.sh SOURCE_DIR BUILD_DIR GENERATOR. Any race report fails the test (halt_on_error).
set -eu
src=$1 dir=$2 gen=$3
start=$(date +%s)
if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$dir" -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRESHARD_GPU=OFF \
        -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
        -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
fi
cmake --build "$dir" -j "${RS_SANITIZE_JOBS:-2}" --target reshardc test_planner >"$dir.build.log" 2>&1 ||
    { tail -60 "$dir.build.log"; exit 1; }
echo "tsan.sh: built $dir in $(($(date +%s) - start)) s"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:exitcode=66}"
tp=$dir/tests/test_planner
rc=$dir/compiler/reshardc
work=$dir/tsan-work
rm -rf "$work" && mkdir -p "$work"
RESHARD_THREADS=2 "$tp" prop 300 5
"$tp" mutate 120 7
"$tp" determinism
layout=$src/examples/deepseek-v3-h100.layout
# shellcheck disable=SC2046
RESHARD_THREADS=2 "$rc" "$layout" $(sed -n 's/^# replay-args://p' "$layout") -o "$work/b.plan" --quiet
RESHARD_THREADS=2 "$rc" verify "$work/b.plan" >/dev/null # (the full load's ranks decoded in two halves)
RESHARD_THREADS=2 "$rc" dump "$work/b.plan" >"$work/b.dump2" # (ranks listed on two threads, written in order)
RESHARD_THREADS=1 "$rc" dump "$work/b.plan" >"$work/b.dump1"
cmp "$work/b.dump1" "$work/b.dump2" || { echo "tsan.sh: the listing on two threads differs from one's"; exit 1; }
RESHARD_THREADS=2 "$rc" stats "$work/b.plan" >/dev/null # (the gather-broadcast baseline on its own thread)
# shellcheck disable=SC2046
"$rc" "$layout" $(sed -n 's/^# replay-args://p' "$layout") --staging 64KiB -o "$work/b1.plan" --quiet
s=0
RESHARD_THREADS=2 "$rc" diff "$work/b.plan" "$work/b1.plan" >/dev/null || s=$? # (B's summaries made ahead)
[ "$s" = 1 ] || { echo "tsan.sh: diff exited $s, not 1"; exit 1; }
# shellcheck disable=SC2046
if RESHARD_THREADS=2 RESHARD_TEST_DAMAGE_PLAN=1 "$rc" "$layout" $(sed -n 's/^# replay-args://p' "$layout") \
    -o "$work/b.plan" --quiet 2>"$work/err"; then
    echo "tsan.sh: a damaged plan was accepted"; exit 1
fi
grep -q 'the plan failed verification' "$work/err" || { cat "$work/err"; exit 1; }
echo "tsan.sh: done in $(($(date +%s) - start)) s"
