/* util.c - fatal checks, checked allocation, FNV-1a and CRC32C, heap trims, thread counts. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "util.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/auxv.h>
#endif
#include <sys/mman.h>

void rs_die_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "reshard: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *rs_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) rs_die("out of memory (%zu bytes)", n);
    return p;
}

void *rs_xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) rs_die("out of memory (%zu x %zu bytes)", n, sz);
    return p;
}

void *rs_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) rs_die("out of memory (%zu bytes)", n);
    return q;
}

char *rs_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = rs_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

uint64_t rs_hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t crc_table[8][256];
static int crc_hw; /* the CPU has SSE4.2's crc32 instruction (x86-64) */
/* Built once at load time so concurrent runtime threads never race on it. */
__attribute__((constructor)) static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t rs_crc32c_portable(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
              crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
              crc_table[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same CRC with SSE4.2's crc32 instruction, 8 bytes at a time (5.5 GB/s against the tables' 2.1 here). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, sizeof v); /* (little-endian, as the tables read it) */
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

uint32_t rs_crc32c(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_hw) return crc32c_sse42(crc, data, len);
#endif
    return rs_crc32c_portable(crc, data, len);
}

int rs_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void *rs_map_aligned(size_t len)
{
    const size_t A = (size_t)2 << 20;
    if (!len || len > SIZE_MAX - 2 * A) return NULL;
    len = (len + A - 1) & ~(A - 1);
    /* mapped one huge page longer, then cut to a huge page boundary at both ends */
    uint8_t *m = mmap(NULL, len + A, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)m + A - 1) & ~(uintptr_t)(A - 1));
    if (a > m) munmap(m, (size_t)(a - m));
    if (a + len < m + len + A) munmap(a + len, (size_t)(m + len + A - (a + len)));
    /* No madvise(MADV_HUGEPAGE) (until the twentieth session there was): a transparent huge page is
     * taken from the system's free 2 MiB blocks, and on a VM whose balloon hands free memory back to the
     * host those are the ones handed back, so each costs 512 faults in the host; 4 KiB pages come from the
     * pages just freed. DeepSeek-V3/H100 2.6-2.8 -> 2.1-2.3 s, the 2.5 T MoE 6.6-7.8 -> 5.6-6.3 s; where
     * the free memory was fresh, the same within 2 % (docs/planner.md, "Planner mappings without huge
     * pages"). */
    return a;
}

void rs_unmap_aligned(void *p, size_t len)
{
    const size_t A = (size_t)2 << 20;
    if (p) munmap(p, (len + A - 1) & ~(A - 1));
}

void rs_heap_trim(size_t min_free)
{
#ifdef __GLIBC__
    if (min_free && mallinfo2().fordblks < min_free) return;
    malloc_trim(0);
#else
    (void)min_free;
#endif
}

/* 1 when transparent huge pages are left to madvise (the kernel's usual setting: "always" gives them to
 * the heap already, "never" to nothing). */
static int thp_madvise(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char line[128];
    int yes = fgets(line, sizeof line, f) && strstr(line, "[madvise]");
    fclose(f);
    return yes;
}

void rs_reexec_huge_heap(char **argv)
{
#if defined(__GLIBC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    static const char tun[] = "glibc.malloc.hugetlb";
    const char *had = getenv("GLIBC_TUNABLES"), *pre = getenv("LD_PRELOAD");
    if (had && strstr(had, tun)) return;             /* done, or the user's own choice (=0 keeps 4 KiB pages) */
    if (pre && strstr(pre, "vgpreload")) return;     /* under valgrind, an exec would leave it */
    if (!getauxval(AT_BASE)) return; /* static, or started as `ld.so reshardc`: /proc/self/exe is not us */
    if (!thp_madvise()) return;
    size_t n = (had ? strlen(had) + 1 : 0) + sizeof tun + 2;
    char *val = malloc(n), *old = had ? strdup(had) : NULL;
    if (!val || (had && !old)) goto out;
    snprintf(val, n, "%s%s%s=1", had ? had : "", had ? ":" : "", tun);
    if (setenv("GLIBC_TUNABLES", val, 1)) goto out;
    execv("/proc/self/exe", argv);
    /* (no /proc, or no exec allowed: carry on with 4 KiB pages, the environment as it was) */
    if (old) setenv("GLIBC_TUNABLES", old, 1);
    else unsetenv("GLIBC_TUNABLES");
out:
    free(val);
    free(old);
#else
    (void)argv;
#endif
}

/* RESHARD_THREADS: 0 unset or empty, -1 not a whole number from 1, else the number (capped at 1000) */
static long threads_env(void)
{
    const char *e = getenv("RESHARD_THREADS");
    if (!e || !*e) return 0;
    long n = 0;
    for (const char *p = e; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        if (n < 1000) n = n * 10 + (*p - '0');
    }
    return n >= 1 ? n : -1;
}

int rs_threads_env_ok(void) { return threads_env() >= 0; }

int rs_threads(uint64_t work, uint64_t min_work)
{
    long n = threads_env();
    if (n > 0) return n >= 2 ? 2 : 1;
    if (work < min_work) return 1;
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2 ? 2 : 1;
}

void rs_hold_interrupts(sigset_t *was)
{
    sigset_t hold;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigaddset(&hold, SIGHUP);
    sigaddset(&hold, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &hold, was);
}

int rs_thread_start(void *th, void *(*fn)(void *), void *arg)
{
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    int bad = pthread_create((pthread_t *)th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return bad ? -1 : 0;
}

size_t *rs_radix_order(const uint64_t *keys, size_t n, unsigned bits)
{
    size_t *ord = rs_xmalloc((n + 1) * sizeof *ord), *tmp = rs_xmalloc((n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++) ord[i] = i;
    unsigned passes = (bits + 12) / 13, db = passes ? (bits + passes - 1) / passes : 1;
    uint64_t mask = (1ull << db) - 1;
    size_t *cnt = rs_xmalloc(((size_t)1 << db) * sizeof *cnt);
    for (unsigned sh = 0; sh < bits; sh += db) {
        memset(cnt, 0, ((size_t)1 << db) * sizeof *cnt);
        for (size_t i = 0; i < n; i++) cnt[(keys[ord[i]] >> sh) & mask]++;
        size_t sum = 0;
        for (size_t d = 0; d < ((size_t)1 << db); d++) {
            size_t t = cnt[d];
            cnt[d] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) tmp[cnt[(keys[ord[i]] >> sh) & mask]++] = ord[i];
        size_t *t = ord;
        ord = tmp;
        tmp = t;
    }
    free(cnt);
    free(tmp);
    return ord;
}
