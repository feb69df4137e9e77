#!/bin/sh
# sanitize.sh - the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer: configure a sub-build
# of this source tree with -DRESHARD_SANITIZE=ON -DRESHARD_GPU=OFF, build it, run its tests (CTest `sanitize`).
# usage: sanitize.sh SOURCE_DIR BUILD_DIR GENERATOR [ctest selection args...]
# Every sanitizer report is fatal (-fno-sanitize-recover, halt_on_error); leaks are reported too.
set -eu
src=$1 dir=$2 gen=$3
shift 3
start=$(date +%s)
if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$dir" -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRESHARD_SANITIZE=ON -DRESHARD_GPU=OFF \
        >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
fi
cmake --build "$dir" -j "${RS_SANITIZE_JOBS:-2}" >"$dir.build.log" 2>&1 || { tail -60 "$dir.build.log"; exit 1; }
built=$(date +%s)
echo "sanitize.sh: built $dir in $((built - start)) s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# replays on the CPU transport get staging of exactly the plan's size, so ASan sees any access past it
export RESHARD_REPLAY_EXACT_STAGING=1
rc=0
ctest --test-dir "$dir" --output-on-failure -j "${RS_SANITIZE_JOBS:-2}" "$@" || rc=$?
echo "sanitize.sh: tests ran in $(($(date +%s) - built)) s (exit $rc)"
exit $rc
