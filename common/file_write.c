/* file_write.c - rs_write_file: a whole file written so that a failure never leaves half of it (util.h). */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

static int write_parts(int fd, const rs_wpart *parts, size_t nparts)
{
    int bad = 0;
    for (size_t i = 0; i < nparts && !bad; i++) bad = write_all(fd, parts[i].p, parts[i].n);
    return bad;
}

/* A path that is not a regular file: a character device or pipe (`-o /dev/null`, `-o /dev/stdout`, a FIFO)
 * is written in place, since renaming a file over it would replace the device node or the pipe (as root,
 * `reshardc ... -o /dev/null` once replaced /dev/null); anything else but a regular file is refused.
 * Returns 1 when handled (*rc 0 written, -1 failed), 0 when the path is a regular file or does not exist. */
static int write_special(const char *path, const rs_wpart *parts, size_t nparts, int (*gate)(void *), void *arg,
                         int *rc, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    *rc = -1;
    if (S_ISDIR(st.st_mode)) return rs_errf(err, errlen, "%s: cannot write: Is a directory", path), 1;
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
        return rs_errf(err, errlen, "%s: cannot write: not a regular file, a character device or a pipe", path), 1;
    if (gate && gate(arg)) return *rc = 1, 1; /* what is written there cannot be taken back */
    /* O_NONBLOCK: a pipe nobody reads fails at once (ENXIO) instead of waiting for a reader; the writes
     * then block as usual */
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENXIO)
        return rs_errf(err, errlen, "%s: cannot write: no process is reading the pipe", path), 1;
    int bad = fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || write_parts(fd, parts, nparts);
    int e = errno;
    if (fd >= 0 && close(fd) && !bad) bad = 1, e = errno;
    if (bad) rs_errf(err, errlen, "%s: cannot write: %s", path, strerror(e));
    else *rc = 0;
    return 1;
}

int rs_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int rs_write_file(const char *path, const rs_wpart *parts, size_t nparts, char *err, size_t errlen)
{
    return rs_write_file_gated(path, parts, nparts, NULL, NULL, err, errlen);
}

int rs_write_file_gated(const char *path_in, const rs_wpart *parts, size_t nparts, int (*gate)(void *), void *arg,
                        char *err, size_t errlen)
{
    int rc = 0;
    if (write_special(path_in, parts, nparts, gate, arg, &rc, err, errlen)) return rc;
    /* A symbolic link to a regular file keeps pointing at it: the file it names is the one replaced. */
    const char *path = path_in;
    char *resolved = NULL;
    struct stat lst;
    if (lstat(path_in, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        if (!(resolved = realpath(path_in, NULL)))
            return rs_errf(err, errlen, "%s: cannot write through the symbolic link: %s", path_in, strerror(errno));
        path = resolved;
    }
    size_t plen = strlen(path);
    char *tmp = rs_xmalloc(plen + 64);
    int fd = -1;
    /* Ctrl-C, a hangup or a kill (not -9) while the temporary file exists waits until it is renamed or
     * removed, so that no half-written PATH.tmp.* is left behind; the signal is delivered at the end. */
    sigset_t was;
    rs_hold_interrupts(&was);
    /* O_EXCL on a fresh name in the same directory; the umask applies to the 0666 mode. */
    for (unsigned k = 0; k < 1000 && fd < 0; k++) {
        snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(), k);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        rs_errf(err, errlen, "%s: cannot create a temporary file next to it: %s", path_in, strerror(errno));
        pthread_sigmask(SIG_SETMASK, &was, NULL);
        free(tmp);
        free(resolved);
        return -1;
    }
    /* tests: a signal arriving while the file is written (tests/format.cmake, format_write_signal); sent to
     * the process, not this thread: the file may be written on a thread of its own */
    if (getenv("RESHARD_TEST_SIGNAL_IN_WRITE")) kill(getpid(), SIGINT);
    /* a file that is replaced keeps its permissions (the temporary one got 0666 less the umask) */
    struct stat old;
    int bad = stat(path, &old) == 0 && fchmod(fd, old.st_mode & 07777) != 0;
    if (!bad) bad = write_parts(fd, parts, nparts);
    if (!bad) bad = fsync(fd);
    int e = errno;
    if (close(fd) && !bad) bad = -1, e = errno;
    int no = !bad && gate && gate(arg);
    if (!bad && !no && rename(tmp, path)) bad = -1, e = errno;
    if (bad || no) {
        unlink(tmp);
        if (bad) rs_errf(err, errlen, "%s: cannot write: %s", path_in, strerror(e));
    } else {
        /* Make the rename durable: fsync the directory (best effort). */
        const char *slash = strrchr(path, '/');
        char *dirname = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
        int dfd = dirname ? open(dirname, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dirname);
    }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    free(tmp);
    free(resolved);
    return bad ? -1 : no;
}
