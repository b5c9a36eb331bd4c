/*
 * fuzz_trace.c — libFuzzer target: arbitrary bytes as an execution trace for the timeline
 * renderer (proto/jsonparse.c's JSON reader and tools/util/timeline.c), SVG to nowhere.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "timeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null;
    struct timeline_view v = {.t0 = -1, .t1 = -1, .width = 800, .title = NULL,
                              .iteration = -1};
    char err[512];

    if (null == NULL)
        null = fopen("/dev/null", "w");
    if (null == NULL)
        return 0;
    (void)timeline_render((const char *)data, size, "fuzz", &v, null, err, sizeof err);
    v.iteration = 0;
    (void)timeline_render((const char *)data, size, "fuzz", &v, null, err, sizeof err);
    return 0;
}
