/*
 * profile.c — see profile.h.
 */
#include "profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>

#include "args.h"
#include "freshfile.h"
#include "timeline.h"

int
profile_write(const char *prog, ipuof_client *c, ipuof_model *m, const char *dir,
              const char *title)
{
    struct timeline_view v = {.t0 = -1, .t1 = -1, .width = 1400, .title = title,
                              .iteration = 0};
    char path[4096], tmp[FRESHFILE_TMP_MAX], err[512];
    const char *step = "create";
    char *json = NULL;
    size_t len = 0;
    FILE *f;
    int rc;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: --profile %s: cannot make the directory: %s\n", prog, dir,
                strerror(errno));
        return EX_CANTCREAT;
    }
    rc = ipuof_model_trace(m, &json, &len);
    if (rc != IPUOF_OK)
        return args_fail(prog, c, "profile", rc, 0);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    if (freshfile_write(path, json, len, &step) != 0) {
        fprintf(stderr, "%s: --profile: cannot %s %s: %s\n", prog, step, path, strerror(errno));
        free(json);
        return EX_CANTCREAT;
    }
    printf("trace: %s\n", path);
    snprintf(path, sizeof path, "%s/timeline.svg", dir);
    f = freshfile_fopen(path, tmp);
    if (f == NULL) {
        fprintf(stderr, "%s: --profile: cannot create %s: %s\n", prog, path, strerror(errno));
        free(json);
        return EX_CANTCREAT;
    }
    rc = timeline_render(json, len, "trace.json", &v, f, err, sizeof err);
    if (rc == TIMELINE_EBAD && strstr(err, "device iteration") != NULL) {
        v.iteration = -1; /* a trace without iterations: all of it (nothing written yet) */
        rewind(f);
        rc = timeline_render(json, len, "trace.json", &v, f, err, sizeof err);
    }
    if (freshfile_fclose(f, tmp, path, rc == 0) != 0 || rc != 0) {
        fprintf(stderr, "%s: --profile: cannot draw %s: %s\n", prog, path,
                rc != 0 ? err : strerror(errno));
        free(json);
        return 1;
    }
    printf("timeline: %s\n", path);
    free(json);
    return 0;
}
