#!/bin/sh
# huge_heap.sh - reshardc's start with huge pages for its heap (rs_reexec_huge_heap, README "reshardc").
# usage: huge_heap.sh HUGE_HEAP_PROGRAM RESHARDC LAYOUT WORKDIR
# Where the kernel leaves transparent huge pages to madvise, the program is started twice, the second time
# with glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES (after the user's own tunables); a GLIBC_TUNABLES that
# already names that tunable is left alone and the program started once; elsewhere ("always", "never", no
# THP) nothing changes. And a plan compiled either way is the same, byte for byte.
set -eu
prog=$1 reshardc=$2 layout=$3 work=$4
mkdir -p "$work"
mode=other
if grep -q '\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then mode=madvise; fi
fail=0
check() { # check EXPECTED_STARTS EXPECTED_TUNABLES [env settings...]
    want_starts=$1 want_tun=$2
    shift 2
    out=$(env -u GLIBC_TUNABLES -u RS_HUGE_HEAP_STARTS "$@" "$prog")
    got_starts=$(echo "$out" | sed -n 's/^starts //p')
    got_tun=$(echo "$out" | sed -n 's/^tunables //p')
    if [ "$got_starts" != "$want_starts" ] || [ "$got_tun" != "$want_tun" ]; then
        echo "FAIL ($mode; $*): started $got_starts times with GLIBC_TUNABLES '$got_tun';" \
             "expected $want_starts times with '$want_tun'"
        fail=1
    fi
}
if [ $mode = madvise ]; then
    check 2 glibc.malloc.hugetlb=1
    check 2 glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1 GLIBC_TUNABLES=glibc.malloc.arena_max=4
else
    check 1 "(unset)"
    check 1 glibc.malloc.arena_max=4 GLIBC_TUNABLES=glibc.malloc.arena_max=4
fi
check 1 glibc.malloc.hugetlb=0 GLIBC_TUNABLES=glibc.malloc.hugetlb=0
check 1 glibc.malloc.hugetlb=1 GLIBC_TUNABLES=glibc.malloc.hugetlb=1
env -u GLIBC_TUNABLES "$reshardc" "$layout" -o "$work/default.plan" --quiet
GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$reshardc" "$layout" -o "$work/small_pages.plan" --quiet
cmp "$work/default.plan" "$work/small_pages.plan" || { echo "FAIL: the plans differ"; fail=1; }
[ $fail = 0 ] && echo "huge heap OK (transparent huge pages: $mode)"
exit $fail
