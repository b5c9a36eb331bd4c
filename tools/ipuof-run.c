/*
 * ipuof-run — compile an ONNX model on ipuofd, run it once, write its outputs.
 *
 *   ipuof-run [--server HOST:PORT] --model FILE.onnx [--input [NAME=]FILE.pb]...
 *             [--output-dir DIR] [--device-iterations N] [--replicas R]
 *             [--output-mode all|final|sum|every:N] [--ipus N] [--quiet]
 *             [--block PREFIX[:STAGE]:IPU]... [--strategy pipelined|sharded|phased]
 *             [--profile DIR]
 *
 * Inputs and outputs are ONNX TensorProto files, as in the ONNX backend test data, so
 * `ipuof-run --model test_relu/model.onnx --input test_relu/test_data_set_0/input_0.pb
 * --output-dir out` writes out/y.pb to compare with output_0.pb. One line of summary goes to
 * stdout, a progress bar to stderr when it is a terminal, errors to stderr as
 * "ipuof-run: <what failed>: <sentence>". Exit status: 0, 1 on failure, 64 on bad usage, 69
 * when the daemon cannot be reached. Only main() exits.
 *
 * Placement: each --block puts the nodes whose name starts with PREFIX (torch 1.13 names
 * nodes after the module path: "/layer1/conv/Conv") on IPU IPU of each replica, in pipeline
 * stage STAGE (default: one stage per block, in order), so any exported model can be split
 * from the command line; --strategy says how the stages run. With the run's cost figures
 * the summary adds the simulated device time, each IPU's busy fraction and the samples/s
 * predicted on IPUs; --profile DIR writes the run's trace and timeline there.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "ipuof/client.h"
#include "profile.h"
#include "tensorcmp.h"
#include "tensorfile.h"

#define PROG "ipuof-run"  /* how messages start */
#define MAX_INPUTS 256
#define BAR_WIDTH 30
#define CONST_MAX_ELEMS 4096 /* integer inputs up to this size are offered as constants */
#define CONST_MAX_FLOATS 16  /* and 1-D float inputs up to this size (Resize's scales, roi) */

/* One --input: a file, bound to a graph input by name or, without one, in order. */
struct input_arg {
    const char *name;          /* NULL: bind in order; points into argv */
    const char *path;
    struct tensorfile t;        /* the file's tensor, owned */
    void *tiled;               /* owned: t repeated to the run shape, or NULL */
    const char *const_name;    /* offered to the compiler as a constant under this name */
    int used;                  /* bound to a model input, or fixed by the compiler */
};

struct run_opts {
    const char *server;        /* NULL: IPUOF_SERVER, else 127.0.0.1:50052 */
    const char *model;
    const char *output_dir;    /* NULL: outputs are not written */
    struct input_arg in[MAX_INPUTS];
    size_t n_in;
    unsigned device_iterations;
    unsigned replicas;
    unsigned ipus;             /* 0: the smallest power of two >= replicas */
    unsigned micro_batch;      /* for a symbolic batch dimension; 0: from the graph, else
                                * from the first input's dim 0 */
    int wait;                  /* --wait: queue for IPUs when too few are free */
    unsigned wait_s;           /* --wait's limit in seconds (0: for ever) */
    int auto_round;            /* --auto-round: round --ipus up to a power of two */
    int out_kind;
    unsigned out_n;
    int quiet;
    const char *expect[MAX_INPUTS];   /* --expect files: outputs to compare with */
    size_t n_expect;
    struct ipuof_block blocks[IPUOF_MAX_BLOCKS]; /* --block; prefixes point into argv */
    size_t n_blocks;
    int strategy;              /* enum ipuof_strategy */
    const char *profile;       /* --profile DIR, or NULL */
    const char *loss;          /* --loss: compile for training (SGD, lr 0.01); NULL: inference */
    unsigned accumulation;     /* --gradient-accumulation (training) */
    int predict;               /* --predict: 1 text, 2 JSON; print the prediction, no run */
    unsigned predict_replicas; /* --predict-replicas: the prediction's replicas */
    unsigned io_tiles;         /* --io-tiles: numIOTiles */
    int synthetic;             /* --synthetic: no host I/O */
    double amp;                /* --available-memory-proportion */
};

/* Prints the synopsis to f, and the whole text when full. */
static void
usage(FILE *f, int full)
{
    fprintf(f,
            "usage: ipuof-run [--server HOST:PORT] --model FILE.onnx [--input [NAME=]FILE.pb]...\n"
            "                 [--output-dir DIR] [--device-iterations N] [--replicas R]\n"
            "                 [--output-mode all|final|sum|every:N] [--ipus N] [--quiet]\n"
            "                 [--micro-batch B] [--expect FILE.pb]... [--wait[=SECONDS]]\n"
            "                 [--auto-round] [--block PREFIX[:STAGE]:IPU]...\n"
            "                 [--strategy pipelined|sharded|phased] [--profile DIR] [--loss NAME]\n"
            "                 [--gradient-accumulation N] [--predict[=json]]\n"
            "                 [--predict-replicas R] [--io-tiles N] [--synthetic]\n"
            "                 [--available-memory-proportion P]\n");
    if (!full) {
        fprintf(f, "Try 'ipuof-run --help' for more information.\n");
        return;
    }
    fprintf(f,
            "\n"
            "Compiles an ONNX model on ipuofd, runs it once and writes each graph output to\n"
            "DIR/NAME.pb as an ONNX TensorProto (characters of NAME other than letters, digits,\n"
            "'.', '-' and '_' become '_'). Without --output-dir nothing is written.\n"
            "\n"
            "  --input NAME=FILE    a TensorProto for graph input NAME; without NAME= inputs\n"
            "                       bind to the graph inputs not named, in order\n"
            "  --device-iterations  micro-batches per replica in the call (default 1)\n"
            "  --replicas           data-parallel replicas (default 1)\n"
            "  --ipus               IPUs to attach (default: smallest power of two >= replicas)\n"
            "  --micro-batch B      the batch size of a model whose batch dimension is\n"
            "                       symbolic (as exported with a dynamic batch axis); by\n"
            "                       default the input's dim 0 (divided by device iterations\n"
            "                       x replicas when it divides), as onnxruntime would run it\n"
            "  --wait[=SECONDS]     queue for IPUs when too few are free (default: for ever)\n"
            "  --auto-round         round --ipus up to a power of two\n"
            "  --output-mode        what outputs return: every micro-batch (all, default),\n"
            "                       the last (final), the sum over device iterations (sum),\n"
            "                       or every N-th device iteration (every:N)\n"
            "  --quiet              no progress bar and no summary line\n"
            "  --block P[:S]:I      put the nodes whose name starts with P on IPU I of each\n"
            "                       replica, in pipeline stage S (default: one stage per\n"
            "                       block, in order); repeat for each block (at most 256)\n"
            "  --strategy S         how the stages run: pipelined (the default with blocks),\n"
            "                       sharded, or phased (serial phased)\n"
            "  --profile DIR        write the run's trace to DIR/trace.json and its\n"
            "                       timeline to DIR/timeline.svg\n"
            "  --expect FILE.pb     compare the graph output of the file's tensor name with\n"
            "                       it (rtol 1e-4, atol 1e-5, as the ONNX backend tests;\n"
            "                       exact for integers); a mismatch exits 1\n"
            "  --loss NAME          compile for training, minimising graph output NAME (one\n"
            "                       value per micro-batch): every device iteration takes one\n"
            "                       SGD step (lr 0.01, PopTorch's default optimizer)\n"
            "  --gradient-accumulation N  micro-batches per optimizer step (with --loss)\n"
            "  --predict[=json]     print the simulated clock's prediction after the compile\n"
            "                       (samples/s, the step's time by part, the bottleneck;\n"
            "                       docs/cost-model.md) as text or JSON, and run nothing\n"
            "  --predict-replicas R predict for R replicas (one replica's compile predicts a\n"
            "                       Pod: the host link's sharing and the all-reduce scale)\n"
            "  --io-tiles N         numIOTiles: host I/O overlaps compute (even, 32 to 192)\n"
            "  --synthetic          synthetic data: no host I/O in the prediction\n"
            "  --available-memory-proportion P  PopLibs' proportion for the prediction\n"
            "\n"
            "Small integer inputs (a Reshape's shape, reduction axes), scalars (Range's\n"
            "bounds) and 1-D float inputs of up to 16 values (Resize's scales) are offered\n"
            "to the compiler as constants under NAME or the file's tensor name: those that\n"
            "decide shapes are fixed at compile time, the others stay run inputs.\n"
            "\n"
            "One call consumes micro-batch x device-iterations x replicas samples along dim 0.\n"
            "An input with the shape of one micro-batch is tiled device-iterations x replicas\n"
            "times along dim 0; an input whose dim 0 is already the whole call is used as is.\n"
            "\n"
            "Prints \"compiled in X ms, ran N samples in Y ms, Z samples/s\". Exit status: 0,\n"
            "1 on failure, 64 on bad usage, 69 when ipuofd cannot be reached. The server is\n"
            "IPUOF_SERVER when --server is not given, else 127.0.0.1:50052.\n"
            "IPUOF_REQUEST_TIMEOUT_MS bounds each request (default 60000; 0: no limit).\n");
}

/* Parses --output-mode's value into o; 0 or -1 with a message printed. */
static int
parse_output_mode(const char *s, struct run_opts *o)
{
    if (strcmp(s, "all") == 0)
        o->out_kind = IPUOF_OUTPUT_ALL;
    else if (strcmp(s, "final") == 0)
        o->out_kind = IPUOF_OUTPUT_FINAL;
    else if (strcmp(s, "sum") == 0)
        o->out_kind = IPUOF_OUTPUT_SUM;
    else if (strncmp(s, "every:", 6) == 0) {
        o->out_kind = IPUOF_OUTPUT_EVERYN;
        return args_count(PROG, "--output-mode every:N", s + 6, 1, &o->out_n);
    } else {
        fprintf(stderr, "ipuof-run: --output-mode is all, final, sum or every:N, not '%s'\n", s);
        return -1;
    }
    return 0;
}

#define BLOCK_IPUS 64     /* IPU indexes of a block: a daemon has at most 64 IPUs */
#define BLOCK_STAGES 4096 /* the highest stage the daemon accepts */

/* Parses one --block value "PREFIX[:STAGE]:IPU" (split at the last colons) into o.
 * arg points into argv and stays there; 0 or -1 with a message printed. */
static int
add_block(struct run_opts *o, char *arg)
{
    char *last = strrchr(arg, ':');
    char *mid = NULL;
    struct ipuof_block *b;
    unsigned ipu, stage = 0;

    if (o->n_blocks == IPUOF_MAX_BLOCKS) {
        fprintf(stderr, "ipuof-run: at most %d --block options\n", IPUOF_MAX_BLOCKS);
        return -1;
    }
    if (last == NULL || last == arg) {
        fprintf(stderr, "ipuof-run: --block expects PREFIX[:STAGE]:IPU, as /layer1/:0 or "
                "/layer2/:1:1, not '%s'\n", arg);
        return -1;
    }
    *last = '\0';
    mid = strrchr(arg, ':');
    if (args_count(PROG, "--block's IPU", last + 1, 0, &ipu) != 0)
        return -1;
    if (ipu >= BLOCK_IPUS) {
        fprintf(stderr, "ipuof-run: --block %s:%s: IPU %u is out of range; a block's IPU is an "
                "index within one replica, 0 to %d (and below the partition's size)\n", arg,
                last + 1, ipu, BLOCK_IPUS - 1);
        return -1;
    }
    if (mid != NULL && mid != arg) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(mid + 1, &end, 10);
        if (mid[1] >= '0' && mid[1] <= '9' && *end == '\0' && (errno != 0 || v > BLOCK_STAGES)) {
            /* all digits: a stage, not the end of the prefix */
            fprintf(stderr, "ipuof-run: --block %s:%s: stage %s is out of range; stages are 0 "
                    "to %d\n", arg, last + 1, mid + 1, BLOCK_STAGES);
            return -1;
        }
        if (mid[1] >= '0' && mid[1] <= '9' && *end == '\0') {
            *mid = '\0';
            stage = (unsigned)v + 1;
        }
    }
    b = &o->blocks[o->n_blocks++];
    b->prefix = arg;
    b->stage = stage > 0 ? (int)stage - 1 : IPUOF_STAGE_AUTO;
    b->ipu = ipu;
    return 0;
}

/* Parses --strategy's value into o; 0 or -1 with a message printed. */
static int
parse_strategy(const char *s, struct run_opts *o)
{
    if (strcmp(s, "pipelined") == 0)
        o->strategy = IPUOF_STRATEGY_PIPELINED;
    else if (strcmp(s, "sharded") == 0)
        o->strategy = IPUOF_STRATEGY_SHARDED;
    else if (strcmp(s, "phased") == 0)
        o->strategy = IPUOF_STRATEGY_PHASED;
    else {
        fprintf(stderr, "ipuof-run: --strategy is pipelined, sharded or phased, not '%s'\n", s);
        return -1;
    }
    return 0;
}

/* Records one --input value: "NAME=FILE" when the part before the first '=' has no '/',
 * otherwise a file bound in order. arg points into argv and stays there. */
static int
add_input(struct run_opts *o, char *arg)
{
    char *eq = strchr(arg, '=');
    struct input_arg *in;

    if (o->n_in == MAX_INPUTS) {
        fprintf(stderr, "ipuof-run: at most %d --input options\n", MAX_INPUTS);
        return -1;
    }
    in = &o->in[o->n_in++];
    if (eq != NULL && eq != arg && memchr(arg, '/', (size_t)(eq - arg)) == NULL) {
        *eq = '\0';
        in->name = arg;
        in->path = eq + 1;
    } else {
        in->path = arg;
    }
    return 0;
}

/* Parses the command line into o. Returns 0 to run, EX_OK after --help, or EX_USAGE. */
static int
parse_args(int argc, char **argv, struct run_opts *o, int *stop)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},  {"model", required_argument, NULL, 'm'},
        {"input", required_argument, NULL, 'i'},   {"output-dir", required_argument, NULL, 'o'},
        {"device-iterations", required_argument, NULL, 'd'},
        {"replicas", required_argument, NULL, 'r'}, {"output-mode", required_argument, NULL, 'M'},
        {"ipus", required_argument, NULL, 'n'},    {"quiet", no_argument, NULL, 'q'},
        {"expect", required_argument, NULL, 'e'},  {"help", no_argument, NULL, 'h'},
        {"micro-batch", required_argument, NULL, 'b'},
        {"wait", optional_argument, NULL, 'W'},    {"auto-round", no_argument, NULL, 'A'},
        {"block", required_argument, NULL, 'B'},   {"strategy", required_argument, NULL, 'S'},
        {"profile", required_argument, NULL, 'P'},
        {"loss", required_argument, NULL, 'L'},
        {"gradient-accumulation", required_argument, NULL, 'G'},
        {"predict", optional_argument, NULL, 'E'},
        {"predict-replicas", required_argument, NULL, 'R'},
        {"io-tiles", required_argument, NULL, 'I'},
        {"synthetic", no_argument, NULL, 'Y'},
        {"available-memory-proportion", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    int bad = 0;

    *stop = 0;
    o->device_iterations = 1;
    o->replicas = 1;
    o->out_kind = IPUOF_OUTPUT_DEFAULT;
    while (!bad && (opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 's': o->server = optarg; break;
        case 'm': o->model = optarg; break;
        case 'i': bad = add_input(o, optarg) != 0; break;
        case 'o': o->output_dir = optarg; break;
        case 'd':
            bad = args_count(PROG, "--device-iterations", optarg, 1, &o->device_iterations);
            break;
        case 'r': bad = args_count(PROG, "--replicas", optarg, 1, &o->replicas); break;
        case 'M': bad = parse_output_mode(optarg, o) != 0; break;
        case 'n': bad = args_count(PROG, "--ipus", optarg, 1, &o->ipus); break;
        case 'b': bad = args_count(PROG, "--micro-batch", optarg, 1, &o->micro_batch); break;
        case 'W':
            o->wait = 1;
            if (optarg != NULL)
                bad = args_count(PROG, "--wait", optarg, 0, &o->wait_s);
            break;
        case 'A': o->auto_round = 1; break;
        case 'B': bad = add_block(o, optarg) != 0; break;
        case 'S': bad = parse_strategy(optarg, o) != 0; break;
        case 'P': o->profile = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'L': o->loss = optarg; break;
        case 'G':
            bad = args_count(PROG, "--gradient-accumulation", optarg, 1, &o->accumulation);
            break;
        case 'E':
            o->predict = optarg == NULL ? 1 : strcmp(optarg, "json") == 0 ? 2 : 0;
            if (o->predict == 0) {
                fprintf(stderr, "ipuof-run: --predict=%s: use --predict or --predict=json\n",
                        optarg);
                bad = 1;
            }
            break;
        case 'R':
            bad = args_count(PROG, "--predict-replicas", optarg, 1, &o->predict_replicas);
            break;
        case 'I': bad = args_count(PROG, "--io-tiles", optarg, 32, &o->io_tiles); break;
        case 'Y': o->synthetic = 1; break;
        case 'p': {
            char *end;
            o->amp = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(o->amp > 0 && o->amp <= 1)) {
                fprintf(stderr, "ipuof-run: --available-memory-proportion %s: give a number "
                        "in (0, 1]\n", optarg);
                bad = 1;
            }
            break;
        }
        case 'e':
            if (o->n_expect == MAX_INPUTS) {
                fprintf(stderr, "ipuof-run: more than %d --expect files\n", MAX_INPUTS);
                bad = 1;
            } else {
                o->expect[o->n_expect++] = optarg;
            }
            break;
        case 'h': usage(stdout, 1); *stop = 1; return EX_OK;
        default: bad = 1; break;
        }
    }
    if (!bad && (optind < argc || o->model == NULL)) {
        fprintf(stderr, "ipuof-run: %s\n", o->model == NULL ? "--model FILE.onnx is required"
                                                            : "unexpected argument");
        bad = 1;
    }
    if (bad) {
        usage(stderr, 0);
        *stop = 1;
        return EX_USAGE;
    }
    return EX_OK;
}

/* ---- talking to the daemon -------------------------------------------------------------- */

/* The model's name for ipuctl status into buf[0..len): the file's base name without ".onnx",
 * or its directory's name for the "model.onnx" of the ONNX test layout. */
static void
model_name(const char *path, char *buf, size_t len)
{
    const char *base = strrchr(path, '/');
    const char *dir = path;
    size_t n;

    base = base != NULL ? base + 1 : path;
    if (strcmp(base, "model.onnx") == 0 && base - path >= 2) {
        for (const char *p = path; p < base - 1; p++)
            if (*p == '/')
                dir = p + 1;
        n = (size_t)(base - 1 - dir);
        if (n > 0) {
            snprintf(buf, len, "%.*s", (int)n, dir);
            return;
        }
    }
    n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".onnx") == 0)
        n -= 5;
    snprintf(buf, len, "%.*s", (int)n, base);
}

/* Draws the compile progress bar on stderr: "compiling [#####     ] 50%". */
static void
progress_bar(int done, int total, void *user)
{
    int *drawn = user;
    int pct = total > 0 ? (int)((long long)done * 100 / total) : 0;
    int fill = pct * BAR_WIDTH / 100;

    if (pct < 0 || pct > 100)
        return;
    fprintf(stderr, "\rcompiling [%.*s%*s] %3d%%", fill,
            "##############################", BAR_WIDTH - fill, "", pct);
    fflush(stderr);
    *drawn = 1;
}

/* The smallest power of two >= n (n >= 1). */
static unsigned
pow2_at_least(unsigned n)
{
    unsigned p = 1;

    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

/* CLOCK_MONOTONIC in milliseconds. */
static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- inputs ---------------------------------------------------------------------------- */

/* Reads every --input file; 0, or 1 after printing why. */
static int
load_inputs(struct run_opts *o)
{
    char err[512];

    for (size_t i = 0; i < o->n_in; i++) {
        if (tensorfile_read(o->in[i].path, &o->in[i].t, err, sizeof err) != 0) {
            fprintf(stderr, "ipuof-run: input: %s\n", err);
            return 1;
        }
    }
    return 0;
}

/* The --input for model input i (description want): the one named so, else the next one
 * given without a name. NULL after printing why. */
static struct input_arg *
find_input(struct run_opts *o, const struct ipuof_tensor *want)
{
    for (size_t j = 0; j < o->n_in; j++)
        if (o->in[j].name != NULL && !o->in[j].used && strcmp(o->in[j].name, want->name) == 0)
            return &o->in[j];
    for (size_t j = 0; j < o->n_in; j++) {
        if (o->in[j].name == NULL && !o->in[j].used)
            return &o->in[j];
    }
    fprintf(stderr, "ipuof-run: input: the model needs input '%s' (%s, %zu bytes per call); "
            "give it with --input %s=FILE.pb\n",
            want->name, ipuof_dtype_name(want->dtype), want->bytes, want->name);
    return NULL;
}

/* 1 when shapes a[0..ra) and b[0..rb) are equal. */
static int
same_shape(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb)
        return 0;
    for (int d = 0; d < ra; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

/* Describes in's tensor for model input want in *t: as is, or tiled to the run shape when
 * it holds one micro-batch (the daemon's step shape, or dim 0 that many times smaller).
 * 0, or 1 after printing why (out of memory). */
static int
bind_one(const ipuof_model *m, const struct ipuof_tensor *want, const int64_t *step,
         struct input_arg *in, struct ipuof_tensor *t)
{
    const struct tensorfile *pb = &in->t;
    size_t k = (size_t)ipuof_model_device_iterations(m) * ipuof_model_replicas(m);
    int step_rank = 0;
    int tile;

    while (step_rank < 8 && step[step_rank] >= 0)
        step_rank++;
    *t = (struct ipuof_tensor){want->name, pb->dtype, pb->rank, {0}, pb->data, pb->bytes};
    memcpy(t->dims, pb->dims, sizeof t->dims);
    in->used = 1;
    if (same_shape(pb->rank, pb->dims, want->rank, want->dims) || pb->dtype != want->dtype ||
        pb->bytes == 0 || k < 2 || pb->bytes * k != want->bytes)
        return 0;
    tile = same_shape(pb->rank, pb->dims, step_rank, step);
    if (!tile && pb->rank == want->rank && pb->rank > 0 && pb->dims[0] * (int64_t)k ==
                                                               want->dims[0]) {
        tile = same_shape(pb->rank - 1, pb->dims + 1, want->rank - 1, want->dims + 1);
    }
    if (!tile)
        return 0; /* the library names both shapes */
    in->tiled = malloc(want->bytes);
    if (in->tiled == NULL) {
        fprintf(stderr, "ipuof-run: input: out of memory tiling '%s' to %zu bytes\n",
                want->name, want->bytes);
        return 1;
    }
    for (size_t r = 0; r < k; r++)
        memcpy((char *)in->tiled + r * pb->bytes, pb->data, pb->bytes);
    t->data = in->tiled;
    t->bytes = want->bytes;
    t->rank = want->rank;
    memcpy(t->dims, want->dims, sizeof t->dims);
    return 0;
}

/* Binds the --input files (but those the compiler fixed) to m's inputs into t[0..count) in
 * the model's order. 0, or 1 after printing why. */
static int
bind_inputs(struct run_opts *o, const ipuof_model *m, struct ipuof_tensor *t)
{
    size_t n = ipuof_model_input_count(m);

    for (size_t j = 0; j < o->n_in; j++) {
        if (o->in[j].name != NULL && !o->in[j].used &&
            ipuof_model_input_index(m, o->in[j].name) < 0) {
            fprintf(stderr, "ipuof-run: input: the model has no input '%s'; its inputs are:",
                    o->in[j].name);
            for (size_t i = 0; i < n; i++) {
                struct ipuof_tensor info;
                int64_t step[8];

                if (ipuof_model_input_info(m, i, &info, step) == IPUOF_OK)
                    fprintf(stderr, "%s '%s'", i ? "," : "", info.name);
            }
            fprintf(stderr, "%s\n", n == 0 ? " none" : "");
            return 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct ipuof_tensor want;
        int64_t step[8];
        struct input_arg *in;

        ipuof_model_input_info(m, i, &want, step);
        in = find_input(o, &want);
        if (in == NULL || bind_one(m, &want, step, in, &t[i]) != 0)
            return 1;
    }
    for (size_t j = 0; j < o->n_in; j++) {
        if (!o->in[j].used) {
            fprintf(stderr, "ipuof-run: input: %s is one input too many; the model takes %zu\n",
                    o->in[j].path, n);
            return 1;
        }
    }
    return 0;
}

/* Offers the small integer inputs and the scalars that have a name as constant inputs of
 * the compile (the daemon fixes only those that decide shapes: shapes, axes, Range's
 * bounds): fills consts (borrowing the inputs' data) and returns how many. A wrongly named
 * offer is indistinguishable from a fixed one afterwards, so floats are offered only as
 * scalars or 1-D vectors of up to CONST_MAX_FLOATS values (Resize's scales and roi), which
 * a data input rarely is. */
static size_t
offer_constants(struct run_opts *o, struct ipuof_tensor *consts)
{
    size_t n = 0;

    for (size_t j = 0; j < o->n_in; j++) {
        struct input_arg *in = &o->in[j];
        const char *name = in->name != NULL ? in->name : in->t.name;
        size_t elem = ipuof_dtype_size(in->t.dtype);
        int integer = in->t.dtype == IPUOF_DTYPE_INT64 || in->t.dtype == IPUOF_DTYPE_INT32;
        int vec = in->t.dtype == IPUOF_DTYPE_FLOAT && in->t.rank == 1 &&
                  elem != 0 && in->t.bytes / elem <= CONST_MAX_FLOATS;

        if (elem == 0 || name == NULL || name[0] == '\0' || in->t.bytes / elem > CONST_MAX_ELEMS ||
            (!integer && !vec && in->t.bytes != elem))
            continue;
        in->const_name = name;
        consts[n] = (struct ipuof_tensor){name, in->t.dtype, in->t.rank, {0}, in->t.data,
                                          in->t.bytes};
        memcpy(consts[n].dims, in->t.dims, sizeof consts[n].dims);
        n++;
    }
    return n;
}

/* Marks the offered constants the compiler fixed (they are no longer inputs of m) as used,
 * so they bind to nothing. */
static void
drop_fixed_constants(struct run_opts *o, const ipuof_model *m)
{
    for (size_t j = 0; j < o->n_in; j++) {
        if (o->in[j].const_name != NULL && ipuof_model_input_index(m, o->in[j].const_name) < 0)
            o->in[j].used = 1;
    }
}

/* ---- outputs --------------------------------------------------------------------------- */

/* Creates dir and its parents as needed; 0, or -1 with errno set. */
static int
mkdir_p(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Writes name with every character but [A-Za-z0-9._-] replaced by '_' into buf[0..len);
 * an empty name, "." or ".." becomes "output". */
static void
file_name(const char *name, char *buf, size_t len)
{
    size_t i;

    for (i = 0; name[i] != '\0' && i + 1 < len; i++) {
        char ch = name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
        buf[i] = ok ? ch : '_';
    }
    buf[i] = '\0';
    if (buf[0] == '\0' || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
        snprintf(buf, len, "output");
}

/* Writes every output of m's last run to dir/NAME.pb. 0, or 1 after printing why. */
static int
write_outputs(const ipuof_model *m, const char *dir)
{
    char err[512], fname[256], path[4400];

    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "ipuof-run: output: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < ipuof_model_output_count(m); i++) {
        struct ipuof_tensor t;

        if (ipuof_model_output(m, i, &t) != IPUOF_OK)
            return 1;
        file_name(t.name, fname, sizeof fname);
        snprintf(path, sizeof path, "%s/%s.pb", dir, fname);
        if (tensorfile_write(path, t.name, t.dtype, t.rank, t.dims, t.data, t.bytes, err,
                            sizeof err) != 0) {
            fprintf(stderr, "ipuof-run: output: %s\n", err);
            return 1;
        }
    }
    return 0;
}

/* Samples one call consumes: micro-batch x device iterations x replicas. */
static unsigned long long
samples(const ipuof_model *m)
{
    unsigned long long per = ipuof_model_micro_batch(m);
    struct ipuof_tensor t;
    int64_t step[8];

    if (per == 0 && ipuof_model_input_info(m, 0, &t, step) == IPUOF_OK && step[0] > 0)
        per = (unsigned long long)step[0];
    if (per == 0)
        per = 1;
    return per * ipuof_model_device_iterations(m) * ipuof_model_replicas(m);
}

/* ---- main ------------------------------------------------------------------------------ */

/*
 * The micro-batch for a model whose batch dimension is symbolic, from the --input bound to
 * the graph input the daemon's sentence msg names ("graph input 'x' has a symbolic batch
 * dimension ..."), else the first input: its dim 0 divided by device iterations x replicas
 * when that divides (the file holds the whole call), else its dim 0 (one micro-batch,
 * tiled). Returns 0 after printing why when there is nothing to take it from.
 */
static unsigned
derive_micro_batch(const struct run_opts *o, const char *msg)
{
    const struct input_arg *in = NULL;
    const char *q = strstr(msg, "graph input '");
    unsigned long long k = (unsigned long long)o->device_iterations * o->replicas;
    int64_t d0;
    unsigned b;

    if (q != NULL) {
        const char *name = q + 13, *end = strchr(name, '\'');

        for (size_t j = 0; end != NULL && j < o->n_in && in == NULL; j++) {
            const char *n = o->in[j].name != NULL ? o->in[j].name : o->in[j].t.name;
            if (n != NULL && strlen(n) == (size_t)(end - name) &&
                strncmp(n, name, (size_t)(end - name)) == 0)
                in = &o->in[j];
        }
    }
    for (size_t j = 0; in == NULL && j < o->n_in; j++)
        if (o->in[j].name == NULL && o->in[j].t.rank > 0)
            in = &o->in[j];
    if (in == NULL || in->t.rank < 1 || in->t.dims[0] < 1 || in->t.dims[0] > ARGS_COUNT_MAX) {
        fprintf(stderr, "ipuof-run: compile: %s; give --micro-batch B (for example "
                "--micro-batch 1), or an --input whose dim 0 is the batch\n", msg);
        return 0;
    }
    d0 = in->t.dims[0];
    b = (unsigned)(k > 1 && (unsigned long long)d0 % k == 0 ? (unsigned long long)d0 / k
                                                          : (unsigned long long)d0);
    if (!o->quiet)
        fprintf(stderr, "ipuof-run: the model's batch dimension is symbolic: micro-batch %u "
                "from %s (dim 0 = %lld); --micro-batch sets it\n", b, in->path,
                (long long)d0);
    return b;
}

/* Connects, attaches, compiles, runs and writes. Returns the exit status; what it holds is
 * freed by the caller from *cp and *mp. */
/* Compares outputs with the --expect files. 0 when all match, 1 otherwise (reported). */
static int
check_expected(const struct run_opts *o, const ipuof_model *m)
{
    double maxdiff = 0;
    int bad = 0;

    for (size_t i = 0; i < o->n_expect; i++) {
        struct tensorfile want;
        struct ipuof_tensor got;
        char msg[512];
        long idx;

        if (tensorfile_read(o->expect[i], &want, msg, sizeof msg) != 0) {
            fprintf(stderr, "ipuof-run: %s\n", msg);
            bad = 1;
            continue;
        }
        idx = ipuof_model_output_index(m, want.name);
        if (idx < 0) {
            fprintf(stderr, "ipuof-run: %s: the model has no output '%s'\n", o->expect[i],
                    want.name);
            bad = 1;
        } else if (ipuof_model_output(m, (size_t)idx, &got) != IPUOF_OK ||
                   tensorcmp(&got, &want, &maxdiff, msg, sizeof msg) != 0) {
            fprintf(stderr, "ipuof-run: output mismatch: %s\n", msg);
            bad = 1;
        }
        tensorfile_free(&want);
    }
    if (o->n_expect > 0 && !o->quiet)
        printf("%zu output%s %s, largest float difference %.3g\n", o->n_expect,
               o->n_expect == 1 ? "" : "s", bad ? "checked, MISMATCH" : "match", maxdiff);
    return bad;
}

/* IPUs one replica occupies: one more than the highest --block IPU (1 without blocks). */
static unsigned
ipus_per_replica(const struct run_opts *o)
{
    unsigned n = 1;

    for (size_t i = 0; i < o->n_blocks; i++)
        if (o->blocks[i].ipu + 1 > n)
            n = o->blocks[i].ipu + 1;
    return n;
}

/* Prints the simulated clock's figures of m's run, or why there are none. */
static void
print_cost(ipuof_client *c, const ipuof_model *m)
{
    double secs = 0, sps = 0, f;
    int stage = -1;

    if (ipuof_model_run_cost(m, &secs, &sps, &stage) != IPUOF_OK) {
        printf("simulated device time: none (%s)\n", ipuof_client_errmsg(c));
        return;
    }
    printf("simulated device time %.4g ms, predicted %.0f samples/s on IPUs, bottleneck "
           "stage %d, busy:", secs * 1e3, sps, stage);
    for (size_t i = 0; i < ipuof_model_run_ipu_count(m); i++)
        if (ipuof_model_run_busy(m, i, &f) == IPUOF_OK)
            printf(" IPU %zu %.3g%%", i, 100.0 * f);
    putchar('\n');
}

/* The run's compile options on h: its counts, outputs, blocks, strategy, profile, the
 * constants offered (consts, borrowed from the inputs, copied by h), the progress bar
 * (bar) and, with --loss, training (SGD, PopTorch's default). IPUOF_OK or the refusal of a
 * setter (its sentence in ipuof_compile_opts_errmsg(h)). */
static int
compile_opts(struct run_opts *o, ipuof_compile_opts *h, const char *name,
             struct ipuof_tensor *consts, int *bar)
{
    size_t n_consts = offer_constants(o, consts);
    int rc = ipuof_compile_opts_set_name(h, name);

    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_device_iterations(h, o->device_iterations);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_replicas(h, o->replicas);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_micro_batch(h, o->micro_batch);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_output_default(h, o->out_kind, o->out_n);
    for (size_t i = 0; rc == IPUOF_OK && i < o->n_blocks; i++)
        rc = ipuof_compile_opts_add_block(h, o->blocks[i].prefix, o->blocks[i].stage,
                                          o->blocks[i].ipu);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_strategy(h, o->strategy);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_profile(h, o->profile != NULL);
    for (size_t i = 0; rc == IPUOF_OK && i < n_consts; i++)
        rc = ipuof_compile_opts_add_constant_input(h, &consts[i]);
    if (rc == IPUOF_OK && !o->quiet && isatty(STDERR_FILENO))
        rc = ipuof_compile_opts_set_progress(h, progress_bar, bar);
    if (rc == IPUOF_OK && o->loss != NULL)
        rc = ipuof_compile_opts_set_loss(h, o->loss);
    if (rc == IPUOF_OK && o->loss != NULL && o->accumulation != 0)
        rc = ipuof_compile_opts_set_gradient_accumulation(h, o->accumulation);
    return rc;
}

/* Compiles o->model (named name) into *mp: for training when --loss names the loss, else
 * for inference; a symbolic batch dimension the daemon cannot size without --micro-batch is
 * sized from the input, as onnxruntime would. Returns 0, or the exit status after printing
 * why; *t_compile the compile's milliseconds. */
static int
compile_model(struct run_opts *o, ipuof_client *c, const char *name,
              struct ipuof_tensor *consts, ipuof_model **mp, double *t_compile)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    int bar = 0, rc = h != NULL ? compile_opts(o, h, name, consts, &bar) : IPUOF_E_NOMEM;
    double t0 = now_ms();

    if (rc != IPUOF_OK) {
        fprintf(stderr, "ipuof-run: compile options: %s\n",
                h != NULL ? ipuof_compile_opts_errmsg(h) : "out of memory");
        ipuof_compile_opts_free(h);
        return EX_USAGE;
    }
    rc = ipuof_model_compile_file_with(c, o->model, h, mp);
    if (rc == IPUOF_E_SHAPE && o->micro_batch == 0 &&
        strstr(ipuof_client_errmsg(c), "symbolic batch dimension") != NULL) {
        unsigned b = derive_micro_batch(o, ipuof_client_errmsg(c));
        if (b == 0 || ipuof_compile_opts_set_micro_batch(h, b) != IPUOF_OK) {
            ipuof_compile_opts_free(h);
            return 1;
        }
        rc = ipuof_model_compile_file_with(c, o->model, h, mp);
    }
    *t_compile = now_ms() - t0;
    ipuof_compile_opts_free(h);
    if (bar)
        fputc('\n', stderr);
    return rc == IPUOF_OK ? 0 : args_fail(PROG, c, "compile", rc, 0);
}

/* IPUOF_REQUEST_TIMEOUT_MS, when set, as the client's request timeout (0: no limit), as the
 * Python package reads it: a full-size model's compile can outlast the library's 60 s.
 * Returns 0, or -1 with a message printed for a value that is not a count. */
static int
request_timeout(ipuof_client *c)
{
    const char *v = getenv("IPUOF_REQUEST_TIMEOUT_MS");
    unsigned ms;

    if (v == NULL || v[0] == '\0')
        return 0;
    if (args_count(PROG, "IPUOF_REQUEST_TIMEOUT_MS", v, 0, &ms) != 0)
        return -1;      /* at most 2^24 ms: an int */
    return ipuof_client_set_timeouts(c, 5000, (int)ms) == IPUOF_OK ? 0 : -1;
}

/* --predict: the compile reply's prediction, as text or JSON; 0, or 1 without one. */
static int
print_prediction(const struct run_opts *o, ipuof_client *c, ipuof_model *m, double t_compile)
{
    const char *r = ipuof_model_prediction_report(m, o->predict == 2);

    if (r == NULL) {
        (void)ipuof_model_prediction(m, NULL, NULL, NULL);
        fprintf(stderr, "ipuof-run: %s\n", ipuof_client_errmsg(c));
        return 1;
    }
    fputs(r, stdout);
    if (o->predict == 1 && !o->quiet)
        printf("compiled in %.1f ms%s; nothing was run\n", t_compile,
               ipuof_model_cached(m) ? " (cached)" : "");
    return 0;
}

static int
run(struct run_opts *o, ipuof_client **cp, ipuof_model **mp, struct ipuof_tensor *inputs,
    struct ipuof_tensor *consts)
{
    struct ipuof_attach_opts ao = {0};
    char name[128];
    double t0, t_compile, t_run;
    unsigned long long n;
    ipuof_client *c;
    int rc;

    c = *cp = ipuof_client_new();
    if (c == NULL) {
        fprintf(stderr, "ipuof-run: out of memory\n");
        return 1;
    }
    ipuof_client_set_name(c, "ipuof-run");
    if (request_timeout(c) != 0)
        return 64;
    rc = ipuof_client_connect(c, o->server);
    if (rc != IPUOF_OK)
        return args_fail(PROG, c, "connect", rc, 1);
    ao.num_ipus = o->ipus != 0 ? o->ipus : pow2_at_least(o->replicas * ipus_per_replica(o));
    ao.wait = o->wait;
    ao.wait_timeout_ms = o->wait_s > UINT_MAX / 1000 ? UINT_MAX : o->wait_s * 1000;
    ao.auto_round = o->auto_round;
    rc = ipuof_attach(c, &ao, NULL, 0, NULL);
    if (rc != IPUOF_OK)
        return args_fail(PROG, c, "attach", rc, 0);
    model_name(o->model, name, sizeof name);
    rc = ipuof_client_set_clock_options(c, o->io_tiles, o->synthetic, o->amp,
                                        o->predict_replicas);
    if (rc != IPUOF_OK)
        return args_fail(PROG, c, "set the clock's options", rc, 0);
    rc = compile_model(o, c, name, consts, mp, &t_compile);
    if (rc != 0)
        return rc;
    if (o->predict)
        return print_prediction(o, c, *mp, t_compile);
    if (ipuof_model_input_count(*mp) > MAX_INPUTS) {
        fprintf(stderr, "ipuof-run: the model has more than %d inputs\n", MAX_INPUTS);
        return 1;
    }
    drop_fixed_constants(o, *mp);
    if (bind_inputs(o, *mp, inputs) != 0)
        return 1;
    t0 = now_ms();
    rc = ipuof_model_run(*mp, inputs, ipuof_model_input_count(*mp));
    t_run = now_ms() - t0;
    if (rc != IPUOF_OK)
        return args_fail(PROG, c, "run", rc, 0);
    if (o->output_dir != NULL && write_outputs(*mp, o->output_dir) != 0)
        return 1;
    if (check_expected(o, *mp) != 0)
        return 1;
    n = samples(*mp);
    if (!o->quiet)
        printf("compiled in %.1f ms%s, ran %llu sample%s in %.1f ms, %.0f samples/s\n",
               t_compile, ipuof_model_cached(*mp) ? " (cached)" : "", n, n == 1 ? "" : "s",
               t_run, (double)n * 1000.0 / (t_run > 0.001 ? t_run : 0.001));
    if (!o->quiet)
        print_cost(c, *mp);
    if (o->profile != NULL)
        return profile_write(PROG, c, *mp, o->profile, NULL);
    return 0;
}

int
main(int argc, char **argv)
{
    static struct run_opts o;
    static struct ipuof_tensor inputs[MAX_INPUTS], consts[MAX_INPUTS];
    ipuof_client *c = NULL;
    ipuof_model *m = NULL;
    int stop;
    int rc;

    rc = parse_args(argc, argv, &o, &stop);
    if (stop)
        return rc;
    rc = load_inputs(&o);
    if (rc == 0)
        rc = run(&o, &c, &m, inputs, consts);
    ipuof_model_free(m);
    if (c != NULL && ipuof_partition_name(c) != NULL)
        (void)ipuof_detach(c);
    ipuof_client_free(c);
    for (size_t i = 0; i < o.n_in; i++) {
        tensorfile_free(&o.in[i].t);
        free(o.in[i].tiled);
    }
    return rc;
}
