/*
 * fuzz_config.c — libFuzzer target: arbitrary bytes as ipuofd.conf.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/ipuofd-fuzz-conf-XXXXXX";
    char err[1024];
    struct cfg c;
    int fd = mkstemp(path);
    FILE *f;

    if (fd < 0)
        return 0;
    f = fdopen(fd, "w");
    if (f != NULL) {
        fwrite(data, 1, size, f);
        fclose(f);
        cfg_defaults(&c);
        if (cfg_load_file(&c, path, err, sizeof err) == 0)
            (void)cfg_validate(&c, err, sizeof err);
    }
    unlink(path);
    return 0;
}
