#!/bin/sh
# run.sh - build and run the libFuzzer harnesses (tests/fuzz.cmake, docs/reliability.md).
#
#   tests/fuzz/run.sh build              configure and build the fuzz build (clang, ASan + UBSan, coverage)
#   tests/fuzz/run.sh TARGET SECONDS     build, then fuzz TARGET (front or plan) for SECONDS on its seed corpus
#
# When libFuzzer stops on a crash, hang or out-of-memory, the input is replayed and matched against
# tests/fuzz/known-crashes.txt (open bugs that already have a regression input): a known one is counted and
# libFuzzer restarts on the same corpus for the time left; anything else ends the run and fails the script.
#
# Environment: RS_FUZZ_BUILD  build directory (default: build-fuzz in the source tree; CTest uses build/fuzz)
#              CC             clang to use (default: clang);  RS_FUZZ_NO_BUILD=1  skip the build step
#              RS_FUZZ_ARGS   extra libFuzzer flags (e.g. -jobs=2 -workers=2)
#              RS_FUZZ_KNOWN  UBSan suppressions of known, still open bugs (default tests/fuzz/known-ub.supp;
#                             empty: none). A campaign goes on past them; their regression inputs fail the
#                             sanitize build (CTest sanitize, fuzz.regress.*) until they are fixed.
# Corpus (kept between runs): $RS_FUZZ_BUILD/corpus/TARGET; seeds (made here each run): $RS_FUZZ_BUILD/seeds/TARGET.
# A crash leaves its input in $RS_FUZZ_BUILD/artifacts/TARGET/; make it a regression test by copying it into
# tests/fuzz/regress/TARGET/ (CTest fuzz.regress.TARGET runs every file there), then fix the bug.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
B=${RS_FUZZ_BUILD:-$src/build-fuzz}
CC=${CC:-clang}
case "$CC" in *clang*) ;; *) CC=clang ;; esac

build() {
    if [ ! -f "$B/CMakeCache.txt" ]; then
        # ASan + UBSan (recoverable, so that known issues can be suppressed at run time; halt_on_error
        # below makes every other report fatal) and coverage for libFuzzer, in every library
        cmake -S "$src" -B "$B" -G Ninja -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
              -DRESHARD_FUZZ=ON -DRESHARD_GPU=OFF \
              "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" >"$B.configure.log" 2>&1 ||
            { cat "$B.configure.log"; exit 1; }
    fi
    cmake --build "$B" --target fuzz_front fuzz_plan fmt_tool reshardc -j "${RS_FUZZ_JOBS:-2}" >"$B.build.log" 2>&1 ||
        { tail -50 "$B.build.log"; exit 1; }
    echo "run.sh: built $B/tests/fuzz_front and $B/tests/fuzz_plan"
}

seeds() { # seeds TARGET DIR
    rm -rf "$2" && mkdir -p "$2"
    case $1 in
    front)
        for f in "$src"/examples/*.layout "$src"/examples/include/*.layout "$src"/tests/front/*.layout \
                 "$src"/tests/front/inc/*.layout "$src"/tests/errors/*.layout "$src"/tests/stats/*.layout; do
            [ -f "$f" ] && cp "$f" "$2/$(basename "$(dirname "$f")")_$(basename "$f")"
        done ;;
    plan)
        (cd "$2" && "$B/tests/fmt_tool" write fixture.bin && "$B/tests/fmt_tool" write fixture1.bin 1 &&
            "$B/tests/fmt_tool" write fixture2.bin 2 && "$B/tests/fmt_tool" write fixture3.bin 3) >/dev/null
        # small compiled layouts, 64 ranks at most (a tight staging budget: several rounds, chunked messages)
        for f in "$src"/tests/front/*.layout "$src"/tests/stats/*.layout; do
            [ -f "$f" ] || continue
            world=$(ASAN_OPTIONS=detect_leaks=0 "$B/compiler/reshardc" check "$f" 2>/dev/null |
                    sed -n 's/^world *\([0-9]*\) ranks.*/\1/p')
            [ -n "$world" ] && [ "$world" -le 64 ] || continue
            out="$2/$(basename "$f" .layout).plan"
            ASAN_OPTIONS=detect_leaks=0 timeout 60 "$B/compiler/reshardc" "$f" -o "$out" --staging 4096 --quiet \
                >/dev/null 2>&1 || continue
            [ "$(wc -c <"$out")" -le 65536 ] || rm -f "$out"
        done ;;
    esac
    # (not tests/fuzz/regress: inputs of open bugs would stop every run at start; CTest runs them)
    return 0
}

target=${1:-}
case "$target" in
build) build; exit 0 ;;
front) maxlen=32768 dict="-dict=$src/tests/fuzz/layout.dict" ;;
plan) maxlen=65536 dict="" ;;
*) echo "usage: tests/fuzz/run.sh build | front SECONDS | plan SECONDS" >&2; exit 2 ;;
esac
secs=${2:?usage: tests/fuzz/run.sh $target SECONDS}
[ "${RS_FUZZ_NO_BUILD:-0}" = 1 ] || build
corpus=$B/corpus/$target seed=$B/seeds/$target art=$B/artifacts/$target
mkdir -p "$corpus" "$art"
seeds "$target" "$seed"
log=$B/fuzz-$target.log
echo "run.sh: fuzz_$target for $secs s, $(ls "$seed" | wc -l) seeds, corpus $corpus, log $log"
start=$(date +%s)
known=${RS_FUZZ_KNOWN-$src/tests/fuzz/known-ub.supp}
patterns=$B/known-crashes.$target.txt
grep -v -e '^#' -e '^$' "$src/tests/fuzz/known-crashes.txt" >"$patterns" || echo '^$^' >"$patterns"
: >"$log"
execs=0 knownc=0 runs=0 fail=0
while :; do
    left=$((secs - ($(date +%s) - start)))
    [ $left -gt 0 ] || break
    runs=$((runs + 1))
    mark=$(date +%s)
    set +e
    # -timeout: one input may take this long (the front end's limits keep it far lower); -rss_limit_mb: memory
    # stays bounded or it is a finding; no leak detection (the harnesses do not own every allocation path)
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1${known:+:suppressions=$known}} \
        "$B/tests/fuzz_$target" -max_total_time=$left -timeout=25 -rss_limit_mb=2048 -max_len=$maxlen \
        -print_final_stats=1 -artifact_prefix="$art/" $dict ${RS_FUZZ_ARGS:-} "$corpus" "$seed" >>"$log" 2>&1
    rc=$?
    set -e
    n=$(grep '^stat::number_of_executed_units:' "$log" | tail -1 | awk '{print $2}')
    execs=$((execs + ${n:-0}))
    sed -i 's/^stat::number_of_executed_units:/stat::counted_units:/' "$log"
    [ $rc -ne 0 ] || break
    # the input that stopped it: replayed, matched against the known open bugs
    a=$(ls -t "$art" 2>/dev/null | head -1)
    if [ -z "$a" ] || [ "$(stat -c %Y "$art/$a")" -lt "$mark" ]; then
        echo "run.sh: fuzz_$target exited $rc without a crash input; the end of $log:" >&2
        tail -30 "$log" >&2
        fail=1
        break
    fi
    out=$(ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1${known:+:suppressions=$known} \
          timeout 120 "$B/tests/fuzz_$target" -runs=1 -rss_limit_mb=2048 "$art/$a" 2>&1) || true
    if printf '%s\n' "$out" | grep -q -f "$patterns"; then
        knownc=$((knownc + 1))
        [ $knownc -lt 1000 ] || break
        continue
    fi
    echo "run.sh: NEW finding $art/$a:" >&2
    printf '%s\n' "$out" | grep -E 'ERROR|SUMMARY|runtime error|#[0-9]+ ' | head -24 >&2
    echo "run.sh: make it a regression test: copy it into $src/tests/fuzz/regress/$target/, then fix the bug" >&2
    fail=1
    break
done
cov=$(grep -E 'cov: [0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1, ft \2/p')
echo "run.sh: fuzz_$target: $execs executions in $(($(date +%s) - start)) s ($runs libFuzzer runs; $cov);" \
     "$knownc stops on known open bugs; $fail new findings"
exit $fail
