/*
 * freshfile.h — writing a file the safe way, shared by the client library, the tools and
 * the daemon: the bytes go into a new file created next to the target with O_CREAT |
 * O_EXCL | O_NOFOLLOW (never an existing file, never through a symlink), which is then
 * renamed over the target. A symlink planted at the target's name is replaced, not
 * followed, so it cannot redirect the write onto another file; a reader never sees a half
 * written file; a failed write leaves the old file as it was.
 *
 * The new file's mode is 0666 less the umask, as fopen(path, "w") gives a new file. The
 * target's directory must be writable (the new file is made there).
 */
#ifndef IPUOF_FRESHFILE_H
#define IPUOF_FRESHFILE_H

#include <stddef.h>
#include <stdio.h>

/* Room for the temporary name of any target path fresh_open() accepts. */
#define FRESHFILE_TMP_MAX 4200

/*
 * Creates a new, empty file in path's directory, named ".<base of path>.<random>.tmp", and
 * writes its name to tmp[0..FRESHFILE_TMP_MAX). Returns its descriptor (open for writing,
 * close-on-exec), or -1 with errno set (ENAMETOOLONG when path does not fit, or what
 * open() said: ENOENT for a missing directory, EACCES, ...).
 */
int freshfile_open(const char *path, char *tmp);

/*
 * Renames tmp (closed by the caller) over path. 0, or -1 with errno set, after removing
 * tmp (EISDIR when path is a directory).
 */
int freshfile_commit(const char *tmp, const char *path);

/*
 * Writes buf[0..len) to path as above. 0, or -1 with errno set and *step (may be NULL) the
 * verb of what failed ("create", "write" or "rename"); nothing is left behind then.
 */
int freshfile_write(const char *path, const void *buf, size_t len, const char **step);

/* freshfile_open() as a stdio stream open for writing. NULL with errno set. */
FILE *freshfile_fopen(const char *path, char *tmp);

/*
 * Closes f (from freshfile_fopen). With keep, renames tmp over path when everything was
 * written: 0, or -1 with errno set and tmp removed. Without keep, removes tmp: 0.
 */
int freshfile_fclose(FILE *f, const char *tmp, const char *path, int keep);

#endif
