/* util.h - small helpers shared by the compiler, the plan library and the runtime:
 * fatal invariant checks, checked 64-bit arithmetic, growable arrays, hashing. */
#ifndef RS_UTIL_H
#define RS_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Broken internal invariant: print file:line and abort. Never used for user errors. */
#define rs_die(...) rs_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define rs_assert(c) ((c) ? (void)0 : rs_die("assertion failed: %s", #c))
void rs_die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* Allocation that aborts on out-of-memory (compiler side only; the runtime checks). */
void *rs_xmalloc(size_t n);
void *rs_xcalloc(size_t n, size_t sz);
void *rs_xrealloc(void *p, size_t n);
char *rs_xstrdup(const char *s);
/* For a program that builds or checks large plans (reshardc, the benchmarks), called first thing in main:
 * where transparent huge pages are left to madvise (the kernel's usual setting), run the program again
 * (execv of /proc/self/exe, same arguments) with glibc's malloc told to advise them for its heap
 * (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, added to what is there). Filling hundreds of MiB then takes a
 * page fault per 2 MiB instead of per 4 KiB, and fewer TLB misses (docs/benchmarks.md). It returns (and
 * nothing changed) when GLIBC_TUNABLES already names that tunable (so =0 turns this off), under valgrind
 * or a sanitizer, without glibc or Linux, or when the exec fails. The plan library and the runtime never
 * call it. */
void rs_reexec_huge_heap(char **argv);
/* Give the heap's free pages back to the system (glibc's malloc_trim) when at least `min_free` bytes lie
 * free in it; below that, keeping them resident costs less than faulting them in again. min_free 0: at
 * once, without asking (glibc's count of the free bytes walks every free chunk: on a heap of millions of
 * them it costs more than the trim). */
void rs_heap_trim(size_t min_free);
/* An anonymous read-write mapping of len bytes (rounded up to 2 MiB), 2 MiB aligned (where the kernel
 * gives every region transparent huge pages, they fit it whole; no huge pages are asked for); NULL when
 * mmap fails (out of memory) or len is 0. Give it back with rs_unmap_aligned(p, the same len). */
void *rs_map_aligned(size_t len);
void rs_unmap_aligned(void *p, size_t len);

/* How many threads (1 or 2) to give work of `work` units: RESHARD_THREADS when it is set (1: one; 2 or
 * more: two), else 2 when work >= min_work and this process may run on two CPUs or more. The planner's and
 * the verifier's results do not depend on it. rs_threads_env_ok: 0 when RESHARD_THREADS is set to anything
 * but a whole number from 1 (rs_threads then decides as if it were unset); tools refuse that. */
int rs_threads(uint64_t work, uint64_t min_work);
int rs_threads_env_ok(void);
/* Start a helper thread that takes no signals (they go to the threads that expect them). 0, or -1 when it
 * could not be started. (th: a pthread_t.) */
int rs_thread_start(void *th, void *(*fn)(void *), void *arg);
/* Hold the interrupting signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) on the calling thread; they are delivered
 * once the mask saved in *was is restored (pthread_sigmask(SIG_SETMASK, was, NULL)). */
void rs_hold_interrupts(sigset_t *was);
/* The order that sorts keys[0..n) stably (a new array of n indices, to free): an LSD radix sort over the
 * keys' `bits` low bits, in as few passes of at most 13 bits as that takes (the counters stay in cache). */
size_t *rs_radix_order(const uint64_t *keys, size_t n, unsigned bits);

/* Checked arithmetic: return 0 on success, 1 on overflow. */
static inline int rs_add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int rs_sub_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }
static inline int rs_mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int rs_umul_ovf(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int rs_uadd_ovf(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline uint64_t rs_gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Growable array: a struct with fields `T *v; size_t n, cap;`.
 * rs_vec_push(&vec, value) appends; rs_vec_reserve(&vec, k) makes room for k more. */
#define rs_vec(T) struct { T *v; size_t n, cap; }
#define rs_vec_reserve(vp, k)                                                                      \
    do {                                                                                           \
        if ((vp)->n + (k) > (vp)->cap) {                                                           \
            size_t nc_ = (vp)->cap ? (vp)->cap * 2 : 16;                                           \
            while (nc_ < (vp)->n + (k)) nc_ *= 2;                                                  \
            (vp)->v = rs_xrealloc((vp)->v, nc_ * sizeof *(vp)->v);                                 \
            (vp)->cap = nc_;                                                                       \
        }                                                                                          \
    } while (0)
#define rs_vec_push(vp, x)                                                                         \
    do {                                                                                           \
        rs_vec_reserve(vp, 1);                                                                     \
        (vp)->v[(vp)->n++] = (x);                                                                  \
    } while (0)
#define rs_vec_free(vp) (free((vp)->v), (vp)->v = NULL, (vp)->n = (vp)->cap = 0)

/* 64-bit FNV-1a, for hash tables and fingerprints (stable across machines). */
/* Formats an error message into err (when err and errlen are given) and returns -1. */
int rs_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 when both paths exist and name the same file (device and inode: through links, ./ and ..), else 0. */
int rs_same_file(const char *a, const char *b);

/* A file's bytes, in pieces. rs_write_file writes them to path so that a failure never leaves half a file:
 * to a fresh temporary file next to it (PATH.tmp.PID.N, exclusive, 0666 less the umask or the mode of the
 * file it replaces; interrupting signals held meanwhile), fsynced and renamed over PATH, the directory
 * fsynced; through a symbolic link, the file it names (a dangling link is refused); a character device or
 * a pipe (/dev/null, /dev/stdout, a FIFO) in place, which a rename would replace; a directory or any other
 * kind of file refused. Returns 0, or -1 with err "PATH: reason". */
typedef struct {
    const void *p;
    size_t n;
} rs_wpart;
int rs_write_file(const char *path, const rs_wpart *parts, size_t nparts, char *err, size_t errlen);
/* rs_write_file, with the file put in place only if gate(arg) returns 0: it is called once the temporary
 * file is written and synced (for a pipe or device, before anything is written), and may wait, so that
 * the file is written while the caller decides whether it should be. Returns 0, -1 with err, or 1 when the
 * gate said no (nothing written or left behind, err untouched). */
int rs_write_file_gated(const char *path, const rs_wpart *parts, size_t nparts, int (*gate)(void *), void *arg,
                        char *err, size_t errlen);

uint64_t rs_hash64(const void *data, size_t len, uint64_t seed);
/* CRC32C (Castagnoli), used per section in plan.bin. */
uint32_t rs_crc32c(uint32_t crc, const void *data, size_t len);
/* The same from tables on any CPU (rs_crc32c uses the CPU's instruction where it has one; tests compare). */
uint32_t rs_crc32c_portable(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
