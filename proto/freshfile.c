/*
 * freshfile.c — see freshfile.h.
 */
#include "freshfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* 64 unpredictable bits when the kernel gives them, else bits that differ per call. */
static uint64_t
fresh_bits(void)
{
    static _Atomic uint64_t counter;
    struct timespec ts;
    uint64_t v;

    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 20) ^
        (++counter * 0x9e3779b97f4a7c15ull);
    return v;
}

int
freshfile_open(const char *path, char *tmp)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    int dirlen = slash != NULL ? (int)(slash - path + 1) : 0;
    int baselen = (int)strlen(base);

    if (*base == '\0') { /* "dir/": no file name */
        errno = EISDIR;
        return -1;
    }
    if (strlen(path) > FRESHFILE_TMP_MAX - 40) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (baselen > 200)
        baselen = 200; /* the name stays within NAME_MAX (255) */
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd;

        snprintf(tmp, FRESHFILE_TMP_MAX, "%.*s.%.*s.%016llx.tmp", dirlen, path, baselen, base,
                 (unsigned long long)fresh_bits());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1; /* errno EEXIST: 100 names taken */
}

int
freshfile_commit(const char *tmp, const char *path)
{
    int saved;

    if (rename(tmp, path) == 0)
        return 0;
    saved = errno;
    unlink(tmp);
    errno = saved;
    return -1;
}

FILE *
freshfile_fopen(const char *path, char *tmp)
{
    int fd = freshfile_open(path, tmp), saved;
    FILE *f;

    if (fd < 0)
        return NULL;
    f = fdopen(fd, "w");
    if (f == NULL) {
        saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
    }
    return f;
}

int
freshfile_fclose(FILE *f, const char *tmp, const char *path, int keep)
{
    int bad = ferror(f), saved;

    if (fclose(f) != 0 || bad) {
        saved = bad ? EIO : errno;
        unlink(tmp);
        errno = saved;
        return keep ? -1 : 0;
    }
    if (!keep) {
        unlink(tmp);
        return 0;
    }
    return freshfile_commit(tmp, path);
}

int
freshfile_write(const char *path, const void *buf, size_t len, const char **step)
{
    char tmp[FRESHFILE_TMP_MAX];
    const char *what = "create";
    size_t done = 0;
    int fd = freshfile_open(path, tmp), rc = -1, saved;

    if (fd < 0)
        goto out;
    what = "write";
    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            goto out;
        }
        done += (size_t)n;
    }
    rc = close(fd);
    fd = -1;
    if (rc != 0)
        goto out;
    what = "rename";
    rc = freshfile_commit(tmp, path); /* removes tmp when it fails */
out:
    saved = errno;
    if (fd >= 0)
        close(fd);
    if (rc != 0 && strcmp(what, "write") == 0)
        unlink(tmp);
    if (rc != 0 && step != NULL)
        *step = what;
    errno = saved;
    return rc;
}
