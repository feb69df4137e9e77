/* hard.h - small helpers shared by the hardening tests and harnesses (tests/hard, tests/fuzz): whether
 * AddressSanitizer is on (and manual poisoning when it is), and a fresh scratch directory. */
#ifndef RS_HARD_H
#define RS_HARD_H

#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define RS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RS_ASAN 1
#endif
#endif
#ifdef RS_ASAN
#include <sanitizer/asan_interface.h>
#define RS_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define RS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define RS_POISON(p, n) ((void)(p), (void)(n))
#define RS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* mkdtemp "BASE/TAG.XXXXXX" under $TMPDIR, /dev/shm or /tmp (tmpfs first: the tests rewrite files often).
 * Returns 0, or -1 when none can be made. */
static inline int rs_hard_scratch(char *buf, size_t n, const char *tag)
{
    const char *bases[] = {getenv("TMPDIR"), "/dev/shm", "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        if (!bases[i]) continue;
        snprintf(buf, n, "%s/%s.XXXXXX", bases[i], tag);
        if (mkdtemp(buf)) return 0;
    }
    buf[0] = 0;
    return -1;
}

#endif
