/*
 * drv.c — the shared part of the shell tests' drivers (see drv.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "drv.h"

static int passed, failed;

void
drv_check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s - ", ok ? "ok" : "not ok");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (ok)
        passed++;
    else
        failed++;
}

int
drv_load(const char *dir, const char *name, struct sim_host_tensor *t, int quiet_missing)
{
    char path[4096];
    struct sim_err err = {0};
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL) {
        if (!quiet_missing)
            printf("# cannot open %s\n", path);
        return -1;
    }
    fclose(f);
    if (sim_tensor_pb_read_file(path, t, &err) != 0) {
        printf("# %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

ipuof_client *
drv_attach(unsigned ipus)
{
    struct ipuof_attach_opts ao = {.num_ipus = ipus};
    ipuof_client *c = ipuof_client_new();
    int rc = c == NULL ? IPUOF_E_NOMEM : ipuof_client_connect(c, NULL);

    if (rc == IPUOF_OK)
        rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    drv_check(rc == IPUOF_OK, "connect and attach (%s)",
              rc == IPUOF_OK ? "ok" : c == NULL ? "out of memory" : ipuof_client_errmsg(c));
    if (rc != IPUOF_OK) {
        ipuof_client_free(c);
        return NULL;
    }
    return c;
}

int
drv_finish(ipuof_client *c)
{
    ipuof_client_free(c);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
