/*
 * ipuof-trace — renders an execution trace of ipuofd (Chrome trace-event JSON, as
 * ipuof_model_write_trace(), `ipuof-mnist --profile` and POPLAR_ENGINE_OPTIONS write it) as
 * an SVG timeline like the pipeline figure of PopTorch's pipelining tutorial: one row per
 * IPU, forward spans in one colour and backward spans in another, each labelled F or B
 * with its micro-batch number (counted from 1, as the tutorial's figure counts), exchange,
 * host transfers, weight updates and reductions in colours of their own, and a time axis
 * in simulated time.
 *
 *   ipuof-trace [-o OUT.svg] [--width PX] [--start US] [--end US] [--iteration N] [--title TEXT]
 *             TRACE.json
 *
 * Reads the whole trace (at most 256 MiB), keeps complete events ("ph":"X") and thread
 * names ("ph":"M", "thread_name"), and writes the SVG to OUT.svg or standard output.
 * Exit status: 0, 1 for a trace it cannot read (the message says where), 64 for bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "args.h"
#include "freshfile.h"
#include "timeline.h"

#define PROG "ipuof-trace"
#define MAX_TRACE_BYTES ((size_t)256 << 20)

/* Reads the file at path into a caller-owned buffer. NULL with a message on stderr. */
static char *
slurp(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    char *buf = NULL;

    if (f == NULL) {
        fprintf(stderr, PROG ": cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        char *nb = n + 1 >= cap || buf == NULL ? realloc(buf, cap *= 2) : buf;
        size_t got;
        if (nb == NULL) {
            fprintf(stderr, PROG ": out of memory reading '%s'\n", path);
            goto fail;
        }
        buf = nb;
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > MAX_TRACE_BYTES) {
            fprintf(stderr, PROG ": '%s' is over %zu MiB; not a trace this tool reads\n", path,
                    MAX_TRACE_BYTES >> 20);
            goto fail;
        }
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, PROG ": cannot read '%s': %s\n", path, strerror(errno));
        goto fail;
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
fail:
    if (f != stdin)
        fclose(f);
    free(buf);
    return NULL;
}

static void
usage(FILE *f)
{
    fputs("usage: " PROG " [-o OUT.svg] [--width PX] [--start US] [--end US] [--iteration N]\n"
          "                   [--title TEXT] TRACE.json\n"
          "Renders an ipuofd execution trace as an SVG timeline: one row per IPU, forward and\n"
          "backward spans labelled with their micro-batch, a simulated-time axis.\n", f);
}

/* Parses a number of microseconds for opt; 0 or -1 after a message. */
static int
parse_us(const char *opt, const char *s, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(*out) || *out < 0) {
        fprintf(stderr, PROG ": %s expects microseconds (a number >= 0), not '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"width", required_argument, NULL, 'w'},
        {"start", required_argument, NULL, 's'},  {"end", required_argument, NULL, 'e'},
        {"title", required_argument, NULL, 't'},  {"help", no_argument, NULL, 'h'},
        {"iteration", required_argument, NULL, 'i'},
        {NULL, 0, NULL, 0},
    };
    struct timeline_view v = {.t0 = -1, .t1 = -1, .width = 1200, .title = NULL, .iteration = -1};
    unsigned iteration;
    const char *out = NULL;
    char err[512], tmp[FRESHFILE_TMP_MAX];
    char *text = NULL;
    size_t len = 0;
    FILE *f = stdout;
    int opt, rc = 1, r;

    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': out = optarg; break;
        case 'w':
            v.width = atoi(optarg);
            if (v.width < 300 || v.width > 100000) {
                fprintf(stderr, PROG ": --width expects 300 to 100000 pixels, not '%s'\n",
                        optarg);
                return EX_USAGE;
            }
            break;
        case 's': if (parse_us("--start", optarg, &v.t0) < 0) return EX_USAGE; break;
        case 'e': if (parse_us("--end", optarg, &v.t1) < 0) return EX_USAGE; break;
        case 't': v.title = optarg; break;
        case 'i':
            if (args_count(PROG, "--iteration", optarg, 0, &iteration) != 0)
                return EX_USAGE;
            v.iteration = iteration;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EX_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, PROG ": one trace file expected (\"-\" for standard input)\n");
        usage(stderr);
        return EX_USAGE;
    }
    text = slurp(argv[optind], &len);
    if (text == NULL)
        return 1;
    if (out != NULL && (f = freshfile_fopen(out, tmp)) == NULL) {
        fprintf(stderr, PROG ": cannot create '%s': %s\n", out, strerror(errno));
        goto out;
    }
    r = timeline_render(text, len, argv[optind], &v, f, err, sizeof err);
    if (r != 0) {
        fprintf(stderr, PROG ": %s: %s\n", argv[optind], err);
        rc = r == TIMELINE_EWINDOW ? EX_USAGE : 1;
        if (out != NULL)
            freshfile_fclose(f, tmp, out, 0); /* nothing is left behind */
        goto out;
    }
    if (out != NULL && freshfile_fclose(f, tmp, out, 1) != 0) {
        fprintf(stderr, PROG ": cannot write '%s': %s\n", out, strerror(errno));
        goto out;
    }
    if (out == NULL && fflush(stdout) != 0)
        goto out;
    rc = 0;
out:
    free(text);
    return rc;
}
