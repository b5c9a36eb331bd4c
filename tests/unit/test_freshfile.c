/*
 * test_freshfile.c — files written into a new file renamed into place (proto/freshfile.c),
 * as the client library's trace and model files and the tools' outputs are (issue 17,
 * defect 6): a symlink planted at the name is replaced and its target keeps its bytes; an
 * existing file is replaced whole; a failure leaves the old file and no temporary; the mode
 * is 0666 less the umask, as fopen's. tensorfile_write (ipuof-run's outputs) goes the same
 * way. On main the writers opened the name with O_TRUNC and followed the link.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "freshfile.h"
#include "ipuof/client.h"
#include "tensorfile.h"

struct dir {
    char path[64];
    char victim[128];
};

/* A fresh directory holding "victim" with the bytes "precious". */
static void
dir_new(struct dir *d)
{
    FILE *f;

    snprintf(d->path, sizeof d->path, "/tmp/ipuof-fresh-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    snprintf(d->victim, sizeof d->victim, "%s/victim", d->path);
    f = fopen(d->victim, "w");
    assert_non_null(f);
    fputs("precious", f);
    assert_int_equal(fclose(f), 0);
}

/* The entries of d other than "victim" and the names in keep (NULL-terminated). */
static int
strays(const struct dir *d, const char *const *keep)
{
    DIR *dd = opendir(d->path);
    struct dirent *e;
    int n = 0;

    assert_non_null(dd);
    while ((e = readdir(dd)) != NULL) {
        int known = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
                    strcmp(e->d_name, "victim") == 0;
        for (const char *const *k = keep; *k != NULL; k++)
            known |= strcmp(e->d_name, *k) == 0;
        if (!known) {
            print_message("stray file: %s\n", e->d_name);
            n++;
        }
    }
    closedir(dd);
    return n;
}

/* Asserts that path holds exactly text. */
static void
assert_holds(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_int_equal(n, strlen(text));
    assert_string_equal(buf, text);
}

/* Removes every entry of d and d itself. */
static void
dir_free(struct dir *d)
{
    DIR *dd = opendir(d->path);
    struct dirent *e;
    char p[512];

    while (dd != NULL && (e = readdir(dd)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    if (dd != NULL)
        closedir(dd);
    rmdir(d->path);
}

static void
test_symlink_replaced_not_followed(void **state)
{
    static const char *const keep[] = {"link", NULL};
    struct dir d;
    struct stat st;
    char link[160];

    (void)state;
    dir_new(&d);
    snprintf(link, sizeof link, "%s/link", d.path);
    assert_int_equal(symlink(d.victim, link), 0);
    assert_int_equal(freshfile_write(link, "new bytes", 9, NULL), 0);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_holds(link, "new bytes");
    assert_holds(d.victim, "precious");
    assert_int_equal(strays(&d, keep), 0);
    dir_free(&d);
}

static void
test_replaces_whole_with_umask_mode(void **state)
{
    static const char *const keep[] = {"out", NULL};
    struct dir d;
    struct stat st;
    char path[160];
    mode_t old = umask(027);

    (void)state;
    dir_new(&d);
    snprintf(path, sizeof path, "%s/out", d.path);
    assert_int_equal(freshfile_write(path, "a longer first version", 22, NULL), 0);
    assert_int_equal(freshfile_write(path, "short", 5, NULL), 0);
    assert_holds(path, "short"); /* no tail of the first version */
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    umask(old);
    assert_int_equal(strays(&d, keep), 0);
    dir_free(&d);
}

static void
test_failures_leave_nothing(void **state)
{
    static const char *const keep[] = {"sub", NULL};
    struct dir d;
    char path[160], tmp[FRESHFILE_TMP_MAX];
    const char *step = NULL;
    FILE *f;

    (void)state;
    dir_new(&d);
    /* No such directory: the create fails, saying so. */
    snprintf(path, sizeof path, "%s/missing/out", d.path);
    assert_int_equal(freshfile_write(path, "x", 1, &step), -1);
    assert_int_equal(errno, ENOENT);
    assert_string_equal(step, "create");
    /* The name is a directory: the rename fails and its temporary goes. */
    snprintf(path, sizeof path, "%s/sub", d.path);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(freshfile_write(path, "x", 1, &step), -1);
    assert_string_equal(step, "rename");
    assert_int_equal(strays(&d, keep), 0);
    /* A name ending in '/' has no file name. */
    snprintf(path, sizeof path, "%s/", d.path);
    assert_int_equal(freshfile_write(path, "x", 1, &step), -1);
    assert_int_equal(errno, EISDIR);
    /* A stream given up (keep 0) leaves the old file and no temporary. */
    f = freshfile_fopen(d.victim, tmp);
    assert_non_null(f);
    fputs("half", f);
    assert_int_equal(freshfile_fclose(f, tmp, d.victim, 0), 0);
    assert_holds(d.victim, "precious");
    assert_int_equal(strays(&d, keep), 0);
    /* A stream kept replaces it. */
    f = freshfile_fopen(d.victim, tmp);
    assert_non_null(f);
    fputs("whole", f);
    assert_int_equal(freshfile_fclose(f, tmp, d.victim, 1), 0);
    assert_holds(d.victim, "whole");
    assert_int_equal(strays(&d, keep), 0);
    dir_free(&d);
}

/* ipuof-run's output tensors: a symlink at DIR/y.pb is replaced, its target untouched. */
static void
test_tensorfile_write_through_symlink(void **state)
{
    static const char *const keep[] = {"y.pb", NULL};
    struct dir d;
    struct tensorfile t;
    struct stat st;
    char path[160], err[256];
    float y[2] = {1.5f, -2.0f};
    int64_t dims[1] = {2};

    (void)state;
    dir_new(&d);
    snprintf(path, sizeof path, "%s/y.pb", d.path);
    assert_int_equal(symlink(d.victim, path), 0);
    assert_int_equal(tensorfile_write(path, "y", IPUOF_DTYPE_FLOAT, 1, dims, y, sizeof y, err,
                                      sizeof err), 0);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_holds(d.victim, "precious");
    assert_int_equal(tensorfile_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.bytes, sizeof y);
    assert_memory_equal(t.data, y, sizeof y);
    tensorfile_free(&t);
    assert_int_equal(strays(&d, keep), 0);
    dir_free(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symlink_replaced_not_followed),
        cmocka_unit_test(test_replaces_whole_with_umask_mode),
        cmocka_unit_test(test_failures_leave_nothing),
        cmocka_unit_test(test_tensorfile_write_through_symlink),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
