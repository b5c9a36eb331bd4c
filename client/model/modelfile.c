/*
 * modelfile.c — reading an ONNX file for the compile calls that take a path, and the model
 * name made from the file's name ("mnist" for "data/mnist.onnx").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_internal.h"

#define DEFAULT_MODEL_NAME "model"

/* strerror() may share a buffer between threads; the GNU strerror_r() writes to ours. */
#define ERRTEXT(e) strerror_r((e), (char[128]){0}, 128)

/* Reads the file at path into *buf (caller-owned) of *len bytes. */
static int
read_whole(ipuof_client *c, const char *path, void **buf, size_t *len)
{
    struct stat st;
    char *data = NULL;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = IPUOF_OK;

    *buf = NULL;
    *len = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = ipuof_err_set(c, errno == ENOENT ? IPUOF_E_NOTFOUND : IPUOF_E_IO, "client",
                           "cannot read model file '%s': %s", path,
                           ERRTEXT(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uintmax_t)st.st_size > SIZE_MAX) {
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client",
                           "model file '%s' is %s", path,
                           S_ISREG(st.st_mode) ? "empty" : "not a regular file");
        goto out;
    }
    data = malloc((size_t)st.st_size);
    if (data == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory for model file '%s' "
                           "(%lld bytes)", path, (long long)st.st_size);
        goto out;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = ipuof_err_set(c, IPUOF_E_IO, "client", "cannot read model file '%s': %s",
                               path, n == 0 ? "it shrank while being read"
                                            : ERRTEXT(errno));
            goto out;
        }
        got += (size_t)n;
    }
    *buf = data;
    *len = got;
    data = NULL;
out:
    if (fd >= 0)
        close(fd);
    free(data);
    return rc;
}

/* Writes the base name of path without a ".onnx" suffix into buf[0..len). */
static void
name_from_path(const char *path, char *buf, size_t len)
{
    const char *base = strrchr(path, '/');
    size_t n;

    base = base != NULL ? base + 1 : path;
    n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".onnx") == 0)
        n -= 5;
    if (n == 0) {
        base = DEFAULT_MODEL_NAME;
        n = strlen(base);
    }
    snprintf(buf, len, "%.*s", (int)n, base);
}

int
ipuof_model_file_read(ipuof_client *c, const char *path, void **buf, size_t *len,
                      char *name, size_t name_len)
{
    int rc = read_whole(c, path, buf, len);

    if (rc == IPUOF_OK)
        name_from_path(path, name, name_len);
    return rc;
}
