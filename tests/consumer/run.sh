#!/bin/sh
# run.sh - the install test: `cmake --install` the build into a prefix inside it, check what is there, then use
# only that copy: compile tiny.layout with the installed reshardc, replay it with the installed reshard-replay,
# build the consumer project with find_package(reshard) (shared and static) and with pkg-config, run each, and
# import the installed Python package. Usage: run.sh BUILD_DIR SOURCE_DIR CC "C_FLAGS" GENERATOR [PYTHON]
set -eu
build=$1 src=$2 cc=$3 cflags=$4 gen=$5 py=${6:-}
work=$build/install-test
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(sed -n 's/^libdir=\${prefix}\///p' "$prefix"/lib*/pkgconfig/reshard.pc 2>/dev/null || true)
[ -n "$libdir" ] || { echo "no reshard.pc installed"; exit 1; }
for f in bin/reshardc bin/reshard-replay include/reshard.h "$libdir/libreshard.so" "$libdir/libreshard.a" \
         "$libdir/cmake/reshard/reshardConfig.cmake" "$libdir/cmake/reshard/reshardConfigVersion.cmake" \
         "$libdir/cmake/reshard/reshardTargets.cmake" "$libdir/pkgconfig/reshard.pc" \
         share/reshard/examples/qwen3-32b-h100.layout; do
  [ -e "$prefix/$f" ] || { echo "missing in the prefix: $f"; exit 1; }
done
grep -q "^prefix=$prefix\$" "$prefix/$libdir/pkgconfig/reshard.pc" || { echo "reshard.pc: wrong prefix"; exit 1; }
# The static library is self-contained: the plan code is in it, not in a library that is not installed.
nm "$prefix/$libdir/libreshard.a" 2>/dev/null | grep -q " T rs_plan_decode" || { echo "libreshard.a lacks the plan code"; exit 1; }

step "installed reshardc + reshard-replay"
"$prefix/bin/reshardc" "$src/tests/consumer/tiny.layout" -o "$work/tiny.plan" >/dev/null
"$prefix/bin/reshard-replay" "$work/tiny.plan" --iters 1 | tail -1 | grep -qx OK

step "find_package(reshard): consumer_shared, consumer_static"
cmake -S "$src/tests/consumer" -B "$work/build" -G "$gen" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_C_FLAGS="$cflags" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
grep "consumer: reshard" "$work/configure.log"
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/build/consumer_shared" "$work/tiny.plan" | tee "$work/consumer.out"
[ -x "$work/build/consumer_static" ] || { echo "reshard::reshard_static was not found"; exit 1; }
"$work/build/consumer_static" "$work/tiny.plan" | tail -1

step "find_package(reshard 0.2) must fail (SameMinorVersion)"
if cmake -S "$src/tests/consumer" -B "$work/build-v" -G "$gen" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DRESHARD_CONSUMER_VERSION=0.2 >"$work/configure-v.log" 2>&1; then
  echo "find_package(reshard 0.2) accepted version 0.1"; exit 1
fi
grep -q 'compatible with requested version "0.2"' "$work/configure-v.log" || { cat "$work/configure-v.log"; exit 1; }

if command -v pkg-config >/dev/null 2>&1; then
  step "pkg-config: consumer_pc (shared), consumer_pc_static"
  export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
  pkg-config --modversion reshard
  # shellcheck disable=SC2046,SC2086
  "$cc" $cflags -o "$work/consumer_pc" "$src/tests/consumer/consumer.c" $(pkg-config --cflags --libs reshard) \
        -lpthread -Wl,-rpath,"$(pkg-config --variable=libdir reshard)"
  "$work/consumer_pc" "$work/tiny.plan" | tail -1
  # shellcheck disable=SC2046,SC2086
  "$cc" $cflags -o "$work/consumer_pc_static" "$src/tests/consumer/consumer.c" $(pkg-config --cflags reshard) \
        "$(pkg-config --variable=libdir reshard)/libreshard.a" $(pkg-config --static --libs-only-L reshard) \
        $(pkg-config --static --libs-only-l reshard | sed 's/-lreshard//')
  "$work/consumer_pc_static" "$work/tiny.plan" | tail -1
else
  echo "pkg-config not installed: pkg-config consumer skipped"
fi

if [ -n "$py" ]; then
  step "installed Python package finds the installed library"
  pydir=$(find "$prefix" -type d -name reshard -path "*python*" | head -1)
  env -u RESHARD_LIBRARY PYTHONPATH="$(dirname "$pydir")" PYTHONDONTWRITEBYTECODE=1 "$py" -c "
import sys, reshard
p = reshard.library_path()
assert p.startswith('$prefix/'), p
plan = reshard.Plan('$work/tiny.plan', 2)
print('python:', p, plan.buffers())
import ctypes
from reshard import _lib
py = 'sizes: config %d plan_info %d buffer_info %d stats %d' % tuple(ctypes.sizeof(t) for t in (
    _lib.Config, _lib.PlanInfoC, _lib.BufferInfoC, _lib.ExecStatsC))
c = [l for l in open('$work/consumer.out') if l.startswith('sizes:')][0].strip()
assert py == c, 'ctypes structs differ from reshard.h: %s (C: %s)' % (py, c)
print('python structs match reshard.h:', py)
"
fi
echo "install test OK"
