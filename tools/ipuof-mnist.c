/*
 * ipuof-mnist — PopTorch's MNIST tutorial end to end on ipuofd: train the tutorial's
 * network (built here as ONNX, see tools/util/mnist_model.h) with AdamW, then measure its
 * accuracy on the test set with an inference model made from the trained one.
 *
 *   ipuof-mnist [--server HOST:PORT] [--data DIR] [--epochs N] [--batch-size 40]
 *               [--test-batch-size 8] [--device-iterations 10]
 *               [--gradient-accumulation 10] [--replicas 1] [--learning-rate 0.001]
 *               [--optimizer adamw|adam|sgd|rmsprop|lamb] [--seed 42] [--limit-train N]
 *               [--limit-test N] [--save FILE.onnx] [--load FILE.onnx] [--quiet]
 *               [--strategy single|pipelined|sharded|phased] [--offload-optimiser]
 *               [--profile DIR]
 *               [--process-id P --num-processes N]
 *
 * Several processes (--num-processes, else IPUOF_PROCESS_ID / IPUOF_NUM_PROCESSES, else the
 * variables of mpirun or poprun) train one model together on one partition of R x N IPUs:
 * each takes its share of every shuffled batch and prints its own figures; process 0 saves
 * the model and tests it.
 *
 * Data: DIR's train-images-idx3-ubyte(.gz) etc. (MNIST or Fashion-MNIST), read with the
 * client's IDX reader, normalised with mean 0.1307 and std 0.3081, batched by the client's
 * data loader (B x D x A x R samples per call, shuffled from the seed, loaded
 * asynchronously). Outputs: a tqdm-like bar per epoch on stderr when it is a terminal, else
 * one summary line per epoch on stdout; then "Accuracy on test set: XX.XX%" on stdout.
 * Errors go to stderr as "ipuof-mnist: <what failed>: <sentence>". Exit status: 0, 1 on
 * failure, 64 on bad usage (counts the data cannot fill), 69 when the daemon cannot be
 * reached, 73 when --save cannot create its file. Only main() exits.
 *
 * Placement, as the tutorial's: --strategy other than single splits the network into its
 * blocks B1..B4 (node-name prefixes, see mnist_model.h), one per IPU of each replica, run
 * pipelined, sharded or serial-phased; --offload-optimiser keeps the optimizer state off
 * chip. After training it prints the simulated clock's figures (device time, each IPU's
 * busy fraction, the samples/s and calls/s the run would reach on IPUs); --profile DIR
 * records the trace of the last training call into DIR/trace.json and draws it into
 * DIR/timeline.svg.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "args.h"
#include "human.h"
#include "ipuof/client.h"
#include "mnist_model.h"
#include "pbar.h"
#include "profile.h"

#define PROG "ipuof-mnist"  /* how messages start */
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define NORM_MEAN 0.1307f
#define NORM_STD 0.3081f
#define MAX_TEST_ITERATIONS 100  /* the tutorial's inference device iterations */
#define REQUEST_TIMEOUT_MS 600000

struct mnist_opts {
    const char *server;         /* NULL: IPUOF_SERVER, else 127.0.0.1:50052 */
    const char *data;
    unsigned epochs, batch, test_batch, iterations, accumulation, replicas;
    float lr;
    int optimizer;              /* enum ipuof_optimizer_kind */
    uint64_t seed;
    unsigned limit_train, limit_test;
    int wait;                  /* --wait: queue for IPUs when too few are free */
    unsigned wait_s;           /* its limit in seconds (0: for ever) */
    const char *save, *load;
    int quiet;
    int strategy;              /* enum ipuof_strategy; -1: single (one IPU per replica) */
    int offload;               /* --offload-optimiser */
    const char *profile;       /* --profile DIR, or NULL */
    unsigned process_id, num_processes; /* num_processes 0: from the environment */
};

/* The simulated clock's figures summed over the training calls. */
struct clock_sum {
    int code;                   /* IPUOF_OK once a call had figures, else why not */
    char reason[512];
    double secs;                /* simulated device seconds */
    unsigned long long samples;
    unsigned long long calls;
    size_t n_ipus;
    double busy_secs[64];       /* each IPU's busy fraction x device seconds */
    int bottleneck;             /* of the last call */
};

/* What a run holds; freed by release(). */
struct mnist_run {
    ipuof_client *c;
    ipuof_model *train, *infer;
    ipuof_idx_dataset *train_ds, *test_ds;
    ipuof_dataloader *train_dl, *test_dl;
    void *onnx;
    size_t onnx_len;
    int bar;                    /* draw progress bars on stderr */
    struct clock_sum clock;     /* of the training calls */
    char tag[32];               /* "[process P] " in a job of several processes, else "" */
};

/* Running sums over the batches of an epoch or of the test set. */
struct tally {
    double loss_sum;
    size_t losses;
    size_t correct, seen;
};

static void
usage(FILE *f, int full)
{
    fprintf(f,
            "usage: ipuof-mnist [--server HOST:PORT] [--data DIR] [--epochs N]\n"
            "                   [--batch-size 40] [--test-batch-size 8] [--device-iterations 10]\n"
            "                   [--gradient-accumulation 10] [--replicas 1]\n"
            "                   [--learning-rate 0.001] [--optimizer adamw|adam|sgd|rmsprop|lamb]\n"
            "                   [--seed 42]\n"
            "                   [--limit-train N] [--limit-test N] [--save FILE.onnx]\n"
            "                   [--wait[=SECONDS]]\n"
            "                   [--load FILE.onnx] [--quiet]\n"
            "                   [--strategy single|pipelined|sharded|phased]\n"
            "                   [--offload-optimiser] [--profile DIR]\n"
            "                   [--process-id P --num-processes N]\n");
    if (!full) {
        fprintf(f, "Try 'ipuof-mnist --help' for more information.\n");
        return;
    }
    fprintf(f,
            "\n"
            "Trains the MNIST network of PopTorch's pipelining tutorial on ipuofd (two\n"
            "ConvLayers, Linear(320, 256), ReLU, Linear(256, 10), cross-entropy loss) and\n"
            "prints its accuracy on the test set.\n"
            "\n"
            "  --data DIR           train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz),\n"
            "                       t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz)\n"
            "                       (default " DEFAULT_DATA ")\n"
            "  --epochs N           passes over the training set (default 3; 0: test only)\n"
            "  --batch-size B       training micro-batch (default 40)\n"
            "  --test-batch-size    inference micro-batch (default 8)\n"
            "  --device-iterations  optimizer steps per call (default 10)\n"
            "  --gradient-accumulation  micro-batches per optimizer step (default 10)\n"
            "  --replicas R         data-parallel replicas (default 1); the partition has R\n"
            "                       IPUs rounded up to a power of two\n"
            "  --learning-rate      (default 0.001)      --optimizer  adamw (default), adam, sgd,\n"
            "                                            rmsprop, lamb\n"
            "  --seed               weights and shuffle (default 42)\n"
            "  --limit-train N, --limit-test N   use only the first N samples\n"
            "  --save FILE.onnx     write the trained model, weights included\n"
            "  --load FILE.onnx     start from a saved model instead of new weights\n"
            "  --wait[=SECONDS]     queue for IPUs when too few are free (default: for ever)\n"
            "  --quiet              only the accuracy line\n"
            "  --strategy S         single (default: one IPU per replica), or the tutorial's\n"
            "                       blocks B1..B4 on 4 IPUs per replica: pipelined, sharded,\n"
            "                       phased (serial phased)\n"
            "  --offload-optimiser  keep the optimizer state off chip (in the daemon's host\n"
            "                       memory), as setOptimizerLocation(useOnChipStorage(False))\n"
            "  --profile DIR        write the last training call's trace to DIR/trace.json\n"
            "                       and its timeline to DIR/timeline.svg\n"
            "  --process-id P, --num-processes N   process P of N training one model\n"
            "                       together on R x N IPUs (default: IPUOF_PROCESS_ID and\n"
            "                       IPUOF_NUM_PROCESSES, else mpirun's or poprun's variables,\n"
            "                       else 0 of 1); process 0 saves and tests\n"
            "\n"
            "One training call takes B x D x A x R samples (4000 by default: 15 calls per\n"
            "epoch of 60000). Exit status: 0, 1 on failure, 64 on bad usage, 73 when --save\n"
            "cannot create its file, 69 when ipuofd\n"
            "cannot be reached. The server is IPUOF_SERVER without --server, else\n"
            "127.0.0.1:50052.\n");
}

/* Parses the options' values that are not counts; 0, or -1 with a message printed. */
static int
parse_other(int opt, const char *s, struct mnist_opts *o)
{
    char *end;

    errno = 0;
    if (opt == 'l') {
        double v = strtod(s, &end);

        if (errno != 0 || end == s || *end != '\0' || !(v > 0) || !isfinite(v)) {
            fprintf(stderr, "ipuof-mnist: --learning-rate expects a positive number, not "
                    "'%s'\n", s);
            return -1;
        }
        o->lr = (float)v;
    } else if (opt == 'S') {
        unsigned long long v = strtoull(s, &end, 10);

        if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
            fprintf(stderr, "ipuof-mnist: --seed expects a number, not '%s'\n", s);
            return -1;
        }
        o->seed = v;
    } else if (opt == 'P') {
        static const char *const names[] = {"single", "pipelined", "sharded", "phased"};
        static const int values[] = {-1, IPUOF_STRATEGY_PIPELINED, IPUOF_STRATEGY_SHARDED,
                                     IPUOF_STRATEGY_PHASED};
        for (size_t i = 0; i < 4; i++) {
            if (strcmp(s, names[i]) == 0) {
                o->strategy = values[i];
                return 0;
            }
        }
        fprintf(stderr, "ipuof-mnist: --strategy is single, pipelined, sharded or phased, not "
                "'%s'\n", s);
        return -1;
    } else {
        static const char *const names[] = {"adamw", "adam", "sgd", "rmsprop", "lamb"};
        static const int values[] = {IPUOF_OPTIMIZER_ADAMW, IPUOF_OPTIMIZER_ADAM,
                                     IPUOF_OPTIMIZER_SGD, IPUOF_OPTIMIZER_RMSPROP,
                                     IPUOF_OPTIMIZER_LAMB};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcmp(s, names[i]) == 0) {
                o->optimizer = values[i];
                return 0;
            }
        }
        fprintf(stderr, "ipuof-mnist: --optimizer is adamw, adam, sgd, rmsprop or lamb, not "
                "'%s'\n", s);
        return -1;
    }
    return 0;
}

/* Parses the command line into o. Returns EX_OK to run (or after --help, with *stop set),
 * or EX_USAGE. */
static int
parse_args(int argc, char **argv, struct mnist_opts *o, int *stop)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'}, {"data", required_argument, NULL, 'D'},
        {"epochs", required_argument, NULL, 'e'}, {"batch-size", required_argument, NULL, 'b'},
        {"test-batch-size", required_argument, NULL, 't'},
        {"device-iterations", required_argument, NULL, 'd'},
        {"gradient-accumulation", required_argument, NULL, 'a'},
        {"replicas", required_argument, NULL, 'r'},
        {"learning-rate", required_argument, NULL, 'l'},
        {"optimizer", required_argument, NULL, 'o'}, {"seed", required_argument, NULL, 'S'},
        {"limit-train", required_argument, NULL, 'L'},
        {"limit-test", required_argument, NULL, 'T'}, {"save", required_argument, NULL, 'w'},
        {"load", required_argument, NULL, 'R'}, {"quiet", no_argument, NULL, 'q'},
        {"wait", optional_argument, NULL, 'W'},
        {"strategy", required_argument, NULL, 'P'},
        {"offload-optimiser", no_argument, NULL, 'O'},
        {"offload-optimizer", no_argument, NULL, 'O'},
        {"profile", required_argument, NULL, 'F'},
        {"process-id", required_argument, NULL, 'p'},
        {"num-processes", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    int opt, bad = 0;

    *stop = 0;
    *o = (struct mnist_opts){.data = DEFAULT_DATA, .epochs = 3, .batch = 40, .test_batch = 8,
                             .iterations = 10, .accumulation = 10, .replicas = 1,
                             .lr = 0.001f, .optimizer = IPUOF_OPTIMIZER_ADAMW, .seed = 42,
                             .strategy = -1};
    while (!bad && (opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 's': o->server = optarg; break;
        case 'D': o->data = optarg; break;
        case 'e': bad = args_count(PROG, "--epochs", optarg, 0, &o->epochs); break;
        case 'b': bad = args_count(PROG, "--batch-size", optarg, 1, &o->batch); break;
        case 't': bad = args_count(PROG, "--test-batch-size", optarg, 1, &o->test_batch); break;
        case 'd': bad = args_count(PROG, "--device-iterations", optarg, 1, &o->iterations); break;
        case 'a':
            bad = args_count(PROG, "--gradient-accumulation", optarg, 1, &o->accumulation);
            break;
        case 'r': bad = args_count(PROG, "--replicas", optarg, 1, &o->replicas); break;
        case 'L': bad = args_count(PROG, "--limit-train", optarg, 1, &o->limit_train); break;
        case 'T': bad = args_count(PROG, "--limit-test", optarg, 1, &o->limit_test); break;
        case 'l': case 'S': case 'o': case 'P': bad = parse_other(opt, optarg, o); break;
        case 'O': o->offload = 1; break;
        case 'F': o->profile = optarg; break;
        case 'w': o->save = optarg; break;
        case 'R': o->load = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'W':
            o->wait = 1;
            if (optarg != NULL)
                bad = args_count(PROG, "--wait", optarg, 0, &o->wait_s);
            break;
        case 'p': bad = args_count(PROG, "--process-id", optarg, 0, &o->process_id); break;
        case 'n': bad = args_count(PROG, "--num-processes", optarg, 1, &o->num_processes); break;
        case 'h': usage(stdout, 1); *stop = 1; return EX_OK;
        default: bad = 1; break;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "ipuof-mnist: unexpected argument '%s'\n", argv[optind]);
        bad = 1;
    }
    if (!bad && o->num_processes == 0) {
        char why[256];
        if (ipuof_process_env(&o->process_id, &o->num_processes, why, sizeof why) != IPUOF_OK) {
            fprintf(stderr, "ipuof-mnist: %s\n", why);
            bad = 1;
        }
    } else if (!bad && o->process_id >= o->num_processes) {
        fprintf(stderr, "ipuof-mnist: --process-id %u is out of range for %u processes\n",
                o->process_id, o->num_processes);
        bad = 1;
    }
    if (bad) {
        usage(stderr, 0);
        *stop = 1;
        return EX_USAGE;
    }
    return EX_OK;
}

/* ---- failures --------------------------------------------------------------------------- */

/* As args_fail() for a failure of the data loader dl. */
static int
fail_loader(const ipuof_dataloader *dl, const char *what, int rc)
{
    char msg[4608];

    human_sanitize(msg, sizeof msg, ipuof_dataloader_errmsg(dl));
    fprintf(stderr, "ipuof-mnist: %s: %s (%s)\n", what, msg, ipuof_status_name(rc));
    return 1;
}

/* ---- data ------------------------------------------------------------------------------- */

/* Opens DIR/PREFIX-images-idx3-ubyte(.gz) and its labels, keeping limit items (0: all).
 * 0, or 1 after printing why. */
static int
open_split(const char *dir, const char *prefix, unsigned limit, ipuof_idx_dataset **out)
{
    struct ipuof_idx_opts io = {.mean = NORM_MEAN, .std = NORM_STD, .limit = limit};
    char images[4096], labels[4096], err[IPUOF_ERRBUF_SIZE];
    int rc;

    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (access(images, F_OK) != 0)
        images[strlen(images) - 3] = '\0';
    if (access(labels, F_OK) != 0)
        labels[strlen(labels) - 3] = '\0';
    rc = ipuof_idx_dataset_open(images, labels, &io, out, err, sizeof err);
    if (rc != IPUOF_OK) {
        fprintf(stderr, "ipuof-mnist: data: %s (%s)\n", err, ipuof_status_name(rc));
        return 1;
    }
    return 0;
}

/* A loader over ds giving B x D x A x R samples per batch, with the fields named as the
 * model's inputs. 0, or 1 after printing why. */
static int
make_loader(ipuof_idx_dataset *ds, unsigned b, unsigned d, unsigned a, unsigned r,
            int shuffle, uint64_t seed, unsigned pid, unsigned nproc, ipuof_dataloader **out)
{
    static const char *const names[] = {MNIST_INPUT_IMAGE, MNIST_INPUT_LABELS};
    struct ipuof_dataloader_opts lo = {.batch_size = b, .device_iterations = d,
                                       .gradient_accumulation = a, .replicas = r,
                                       .shuffle = shuffle, .seed = seed,
                                       .mode = IPUOF_DATALOADER_ASYNC, .names = names,
                                       .process_id = pid, .num_processes = nproc};
    struct ipuof_dataset dset;
    char err[IPUOF_ERRBUF_SIZE];
    int rc;

    ipuof_idx_dataset_describe(ds, &dset);
    rc = ipuof_dataloader_new(&dset, &lo, out, err, sizeof err);
    if (rc != IPUOF_OK) {
        fprintf(stderr, "ipuof-mnist: data: %s (%s)\n", err, ipuof_status_name(rc));
        return 1;
    }
    return 0;
}

/* Reads the whole file at path into *buf (caller-owned) of *len bytes; 0, or 1 after
 * printing why. */
static int
read_model(const char *path, void **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    long n = -1;
    int rc = 1;

    if (f != NULL && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n)) != NULL &&
        fread(data, 1, (size_t)n, f) == (size_t)n) {
        *buf = data;
        *len = (size_t)n;
        data = NULL;
        rc = 0;
    } else {
        fprintf(stderr, "ipuof-mnist: --load: cannot read '%s': %s\n", path,
                f == NULL || n < 0 ? strerror(errno) : n == 0 ? "empty file" : "read error");
    }
    if (f != NULL)
        fclose(f);
    free(data);
    return rc;
}

/* ---- one call's figures ------------------------------------------------------------------- */

/* Adds the last run of m over batch b to t: the loss values returned, and the logits'
 * arg-max against the labels (the last rows of the batch when fewer rows came back, as the
 * tutorial's accuracy() does). */
static void
tally_run(const ipuof_model *m, const struct ipuof_batch *b, struct tally *t)
{
    struct ipuof_tensor loss, logits;
    const int64_t *labels = b->tensors[1].data;
    long li = ipuof_model_output_index(m, MNIST_OUTPUT_LOSS);
    long gi = ipuof_model_output_index(m, MNIST_OUTPUT_LOGITS);

    if (li >= 0 && ipuof_model_output(m, (size_t)li, &loss) == IPUOF_OK) {
        const float *v = loss.data;

        for (size_t i = 0; i < loss.bytes / sizeof *v; i++)
            t->loss_sum += v[i];
        t->losses += loss.bytes / sizeof *v;
    }
    if (gi >= 0 && ipuof_model_output(m, (size_t)gi, &logits) == IPUOF_OK &&
        logits.rank == 2 && logits.dims[1] == MNIST_CLASSES) {
        const float *v = logits.data;
        size_t rows = (size_t)logits.dims[0];
        size_t first = b->samples > rows ? b->samples - rows : 0;

        for (size_t r = 0; r < rows && first + r < b->samples; r++) {
            const float *row = v + r * MNIST_CLASSES;
            int best = 0;

            for (int k = 1; k < MNIST_CLASSES; k++)
                if (row[k] > row[best])
                    best = k;
            t->correct += labels[first + r] == best;
            t->seen++;
        }
    }
}

/* Writes "loss=0.5100, acc=81.20%" for t into buf[0..len). */
static void
tally_text(const struct tally *t, char *buf, size_t len)
{
    snprintf(buf, len, "loss=%.4f, acc=%.2f%%", t->losses ? t->loss_sum / (double)t->losses : 0,
             t->seen ? 100.0 * (double)t->correct / (double)t->seen : 0);
}

/* Adds the simulated clock's figures of m's last run (samples samples) to *k; a run without
 * them leaves their reason in k (the first call's figures decide whether there are any). */
static void
clock_add(struct clock_sum *k, const ipuof_model *m, size_t samples, ipuof_client *c)
{
    double secs = 0, sps = 0;
    int stage = -1;
    int rc = ipuof_model_run_cost(m, &secs, &sps, &stage);

    if (rc != IPUOF_OK) {
        if (k->calls == 0) {
            k->code = rc;
            human_sanitize(k->reason, sizeof k->reason, ipuof_client_errmsg(c));
        }
        return;
    }
    k->code = IPUOF_OK;
    k->secs += secs;
    k->samples += samples;
    k->calls++;
    k->bottleneck = stage;
    k->n_ipus = ipuof_model_run_ipu_count(m);
    if (k->n_ipus > sizeof k->busy_secs / sizeof k->busy_secs[0])
        k->n_ipus = sizeof k->busy_secs / sizeof k->busy_secs[0];
    for (size_t i = 0; i < k->n_ipus; i++) {
        double f = 0;
        if (ipuof_model_run_busy(m, i, &f) == IPUOF_OK)
            k->busy_secs[i] += f * secs;
    }
}

/* Runs m over every batch of dl's current epoch into *t, drawing a bar labelled label when
 * r->bar; the simulated clock's figures go to *clock when it is not NULL. Returns 0, or the
 * exit status after printing why. */
static int
run_epoch(struct mnist_run *r, ipuof_model *m, ipuof_dataloader *dl, const char *label,
          struct tally *t, double *secs, struct clock_sum *clock)
{
    size_t total = ipuof_dataloader_batches_per_epoch(dl), done = 0;
    const struct ipuof_batch *b;
    struct pbar bar;
    char text[96];
    int rc;

    memset(t, 0, sizeof *t);
    pbar_start(&bar, stderr, label, total);
    if (r->bar)
        pbar_draw(&bar, 0, NULL);
    for (;;) {
        rc = ipuof_dataloader_next(dl, &b);
        if (rc != IPUOF_OK)
            return fail_loader(dl, "data", rc);
        if (b == NULL)
            break;
        rc = ipuof_model_run(m, b->tensors, b->n_tensors);
        if (rc != IPUOF_OK)
            return args_fail(PROG, r->c, "run", rc, 0);
        tally_run(m, b, t);
        if (clock != NULL)
            clock_add(clock, m, b->samples, r->c);
        done++;
        if (r->bar) {
            tally_text(t, text, sizeof text);
            pbar_draw(&bar, done, text);
        }
    }
    if (r->bar)
        pbar_end(&bar);
    *secs = pbar_elapsed(&bar);
    return 0;
}

/* ---- the steps -------------------------------------------------------------------------- */

/* The smallest power of two >= n (n >= 1). */
static unsigned
pow2_at_least(unsigned n)
{
    unsigned p = 1;

    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

/* Prints the memory the model uses on each of its IPUs, with stashes and off-chip state. */
static void
print_memory(const ipuof_model *m)
{
    for (size_t i = 0; i < ipuof_model_ipu_count(m); i++) {
        uint64_t total = 0, cap = 0, stash = 0, off = 0;
        unsigned id = 0;
        char a[32], b[32], c[32], d[32];

        if (ipuof_model_memory(m, i, &id, NULL, NULL, NULL, &total, &cap) != IPUOF_OK ||
            ipuof_model_memory_detail(m, i, NULL, NULL, &stash, &off, NULL) != IPUOF_OK)
            continue;
        human_bytes(a, sizeof a, total);
        human_bytes(b, sizeof b, cap);
        human_bytes(c, sizeof c, stash);
        human_bytes(d, sizeof d, off);
        printf("  IPU %u: %s of %s (stash %s, off chip %s)\n", id, a, b, c, d);
    }
}

/* The training model's compile options on h: the run's counts, both outputs every
 * micro-batch, the loss, the optimizer, the placement. IPUOF_OK or the refusal of a
 * setter (its sentence in ipuof_compile_opts_errmsg(h)). */
static int
training_opts(const struct mnist_opts *o, ipuof_compile_opts *h)
{
    int rc = ipuof_compile_opts_set_name(h, "mnist");

    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_device_iterations(h, o->iterations);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_replicas(h, o->replicas);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_micro_batch(h, o->batch);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_add_output(h, MNIST_OUTPUT_LOSS, IPUOF_OUTPUT_ALL, 0);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_add_output(h, MNIST_OUTPUT_LOGITS, IPUOF_OUTPUT_ALL, 0);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_loss(h, MNIST_OUTPUT_LOSS);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_gradient_accumulation(h, o->accumulation);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_seed(h, o->seed);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_optimizer_kind(h, o->optimizer);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_optimizer_param(h, 0, IPUOF_OPT_PARAM_LR, o->lr);
    if (rc == IPUOF_OK && o->strategy >= 0)
        rc = ipuof_compile_opts_set_strategy(h, o->strategy);
    for (unsigned i = 0; rc == IPUOF_OK && o->strategy >= 0 && i < MNIST_BLOCKS; i++)
        rc = ipuof_compile_opts_add_block(h, mnist_block_prefix[i], IPUOF_STAGE_AUTO, i);
    if (rc == IPUOF_OK && o->offload)
        rc = ipuof_compile_opts_set_location(h, IPUOF_TENSORS_OPTIMIZER,
                                             IPUOF_LOCATION_OFF_CHIP);
    if (rc == IPUOF_OK && o->profile != NULL)
        rc = ipuof_compile_opts_set_profile(h, 1);
    return rc;
}

/* Compiles the training model into r->train. Returns 0 or the exit status after printing
 * why. */
static int
compile_training(const struct mnist_opts *o, struct mnist_run *r)
{
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    int rc = h != NULL ? training_opts(o, h) : IPUOF_E_NOMEM;

    if (rc != IPUOF_OK) {
        fprintf(stderr, "ipuof-mnist: compile options: %s\n",
                h != NULL ? ipuof_compile_opts_errmsg(h) : "out of memory");
        ipuof_compile_opts_free(h);
        return 1;
    }
    rc = ipuof_model_compile_with(r->c, r->onnx, r->onnx_len, h, &r->train);
    ipuof_compile_opts_free(h);
    return rc == IPUOF_OK ? 0 : args_fail(PROG, r->c, "compile", rc, 0);
}

/* Connects, attaches R IPUs (a power of two) and compiles the training model. Returns 0 or
 * the exit status after printing why. */
static int
setup(const struct mnist_opts *o, struct mnist_run *r)
{
    unsigned per_replica = o->strategy >= 0 ? MNIST_BLOCKS : 1;
    struct ipuof_attach_opts ao = {.num_ipus = pow2_at_least(o->replicas * per_replica *
                                                            o->num_processes),
                                   .process_id = o->process_id,
                                   .num_processes = o->num_processes};
    int rc;

    r->c = ipuof_client_new();
    if (r->c == NULL) {
        fprintf(stderr, "ipuof-mnist: out of memory\n");
        return 1;
    }
    ipuof_client_set_name(r->c, "ipuof-mnist");
    ipuof_client_set_timeouts(r->c, 5000, REQUEST_TIMEOUT_MS);
    rc = ipuof_client_connect(r->c, o->server);
    if (rc != IPUOF_OK)
        return args_fail(PROG, r->c, "connect", rc, 1);
    ao.wait = o->wait;
    ao.wait_timeout_ms = o->wait_s > 4000000u ? 4000000000u : o->wait_s * 1000u;
    rc = ipuof_attach(r->c, &ao, NULL, 0, NULL);
    if (rc != IPUOF_OK)
        return args_fail(PROG, r->c, "attach", rc, 0);
    if (o->load != NULL ? read_model(o->load, &r->onnx, &r->onnx_len) != 0
                        : mnist_model_build(o->seed, &r->onnx, &r->onnx_len) != 0) {
        if (o->load == NULL)
            fprintf(stderr, "ipuof-mnist: out of memory building the model\n");
        return 1;
    }
    rc = compile_training(o, r);
    if (rc != 0)
        return rc;
    if (!o->quiet)
        printf("%straining model compiled in %.1f ms%s: %u x %u x %u x %u = %llu samples per "
               "call\n", r->tag,
               (double)ipuof_model_compile_us(r->train) / 1000.0,
               ipuof_model_cached(r->train) ? " (cached)" : "", o->batch, o->iterations,
               o->accumulation, o->replicas,
               (unsigned long long)o->batch * o->iterations * o->accumulation * o->replicas);
    if (!o->quiet)
        print_memory(r->train);
    return 0;
}

/* Prints the simulated clock's figures of the training calls beside the tutorial's 15 it/s
 * (4 IPUs, one call of 4000 samples per iteration). */
static void
print_clock(const struct clock_sum *k, const struct mnist_opts *o)
{
    double per_call;

    if (k->code != IPUOF_OK || k->calls == 0 || k->secs <= 0) {
        printf("simulated device time: none (%s)\n", k->reason[0] ? k->reason : "no calls");
        return;
    }
    per_call = k->secs / (double)k->calls;
    printf("simulated device time: %.4g s for %llu calls of %llu samples (%.4g ms per call)\n",
           k->secs, k->calls, k->samples / k->calls, per_call * 1e3);
    for (size_t i = 0; i < k->n_ipus; i++)
        printf("  IPU %zu busy %.1f%%\n", i, 100.0 * k->busy_secs[i] / k->secs);
    printf("predicted on IPUs: %.0f samples/s, %.1f calls/s (it/s) [%s, bottleneck stage %d]\n",
           (double)k->samples / k->secs, 1.0 / per_call,
           o->strategy == IPUOF_STRATEGY_PIPELINED ? "pipelined"
           : o->strategy == IPUOF_STRATEGY_SHARDED ? "sharded"
           : o->strategy == IPUOF_STRATEGY_PHASED  ? "phased" : "single",
           k->bottleneck);
}

/* Trains for o->epochs epochs, then saves the model when asked. Returns 0 or the exit
 * status after printing why. */
static int
train(const struct mnist_opts *o, struct mnist_run *r)
{
    struct tally t;
    char label[64], text[96];
    double secs;
    int rc;

    if (o->epochs > 0 && make_loader(r->train_ds, o->batch, o->iterations, o->accumulation,
                                     o->replicas, 1, o->seed, o->process_id,
                                     o->num_processes, &r->train_dl) != 0)
        return 1;
    for (unsigned e = 0; e < o->epochs; e++) {
        snprintf(label, sizeof label, "Epoch %u/%u", e + 1, o->epochs);
        ipuof_dataloader_set_epoch(r->train_dl, e);
        rc = run_epoch(r, r->train, r->train_dl, label, &t, &secs, &r->clock);
        if (rc != 0)
            return rc;
        if (!r->bar && !o->quiet) {
            tally_text(&t, text, sizeof text);
            printf("%s%s: %zu calls, %zu samples in %.1f s, %s\n", r->tag, label,
                   ipuof_dataloader_batches_per_epoch(r->train_dl), t.seen, secs, text);
            fflush(stdout);
        }
    }
    if (o->epochs > 0 && !o->quiet)
        print_clock(&r->clock, o);
    if (o->epochs > 0 && o->profile != NULL) {
        rc = profile_write(PROG, r->c, r->train, o->profile,
                           "ipuof-mnist: the first optimizer step of the last training call, "
                           "on the simulated clock");
        if (rc != 0)
            return rc;
    }
    if (o->save != NULL && o->process_id == 0) {
        rc = ipuof_model_save_onnx(r->train, o->save);
        if (rc != IPUOF_OK)
            return args_fail(PROG, r->c, "save", rc, 0);
        if (!o->quiet)
            printf("saved the trained model to %s\n", o->save);
    }
    return 0;
}

/* Device iterations for the test model: one call holds several micro-batches and, when a
 * divisor of the test set's micro-batches allows it, the calls cover it exactly. */
static unsigned
test_iterations(size_t items, unsigned batch, unsigned replicas)
{
    size_t groups = items / ((size_t)batch * replicas);
    unsigned best = 1;

    for (unsigned d = 1; d <= MAX_TEST_ITERATIONS && d <= groups; d++)
        if (groups % d == 0)
            best = d;
    if (best < 10 && groups > 0)
        best = groups < MAX_TEST_ITERATIONS ? (unsigned)groups : MAX_TEST_ITERATIONS;
    return best;
}

/* Measures the accuracy on the test set with an inference model made from the trained
 * one. Returns 0 or the exit status after printing why. */
static int
test(const struct mnist_opts *o, struct mnist_run *r)
{
    unsigned d = test_iterations(ipuof_idx_dataset_length(r->test_ds), o->test_batch,
                                 o->replicas);
    ipuof_compile_opts *h = ipuof_compile_opts_new();
    struct tally t;
    char text[96];
    double secs;
    int rc;

    rc = h != NULL ? ipuof_compile_opts_set_name(h, "mnist-inference") : IPUOF_E_NOMEM;
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_device_iterations(h, d);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_replicas(h, o->replicas);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_micro_batch(h, o->test_batch);
    if (rc == IPUOF_OK)
        rc = ipuof_compile_opts_set_output_default(h, IPUOF_OUTPUT_ALL, 0);
    if (rc != IPUOF_OK) {
        fprintf(stderr, "ipuof-mnist: inference options: %s\n",
                h != NULL ? ipuof_compile_opts_errmsg(h) : "out of memory");
        ipuof_compile_opts_free(h);
        return 1;
    }
    rc = ipuof_model_inference_from_with(r->train, h, &r->infer);
    ipuof_compile_opts_free(h);
    if (rc != IPUOF_OK)
        return args_fail(PROG, r->c, "inference model", rc, 0);
    if (make_loader(r->test_ds, o->test_batch, d, 1, o->replicas, 0, 0, 0, 1, &r->test_dl) != 0)
        return 1;
    rc = run_epoch(r, r->infer, r->test_dl, "Testing", &t, &secs, NULL);
    if (rc != 0)
        return rc;
    if (!o->quiet) {
        tally_text(&t, text, sizeof text);
        printf("tested %zu samples in %.1f s (%u x %u x %u per call): %s\n", t.seen, secs,
               o->test_batch, d, o->replicas, text);
    }
    printf("Accuracy on test set: %.2f%%\n",
           t.seen ? 100.0 * (double)t.correct / (double)t.seen : 0.0);
    return 0;
}

/* Checks what can be checked before any work: --save's directory can take the file, and
 * the training set holds at least one call's samples. 0, or EX_USAGE / EX_CANTCREAT after
 * printing why. */
static int
check_plan(const struct mnist_opts *o, const struct mnist_run *r)
{
    unsigned long long per_call = (unsigned long long)o->batch * o->iterations *
                                  o->accumulation * o->replicas * o->num_processes;

    if (o->save != NULL) {
        char dir[4096];
        const char *slash = strrchr(o->save, '/');

        if (slash == NULL)
            snprintf(dir, sizeof dir, ".");
        else
            snprintf(dir, sizeof dir, "%.*s", slash == o->save ? 1 : (int)(slash - o->save),
                     o->save);
        if (access(dir, W_OK) != 0) {
            fprintf(stderr, "ipuof-mnist: --save %s: cannot write into %s: %s; give a path in "
                    "an existing, writable directory\n", o->save, dir, strerror(errno));
            return EX_CANTCREAT;
        }
    }
    if (o->profile != NULL && access(o->profile, W_OK) != 0 &&
        (errno != ENOENT || mkdir(o->profile, 0777) != 0)) {
        fprintf(stderr, "ipuof-mnist: --profile %s: cannot write there: %s; give a writable "
                "directory (made when missing)\n", o->profile, strerror(errno));
        return EX_CANTCREAT;
    }
    if (r->train_ds != NULL && ipuof_idx_dataset_length(r->train_ds) < per_call) {
        size_t have = ipuof_idx_dataset_length(r->train_ds);

        fprintf(stderr, "ipuof-mnist: the training set has %zu samples%s, fewer than one call "
                "takes (batch %u x device iterations %u x gradient accumulation %u x replicas "
                "%u x processes %u = %llu): use --limit-train %llu or more, or lower those "
                "counts\n", have, o->limit_train ? " (--limit-train)" : "", o->batch,
                o->iterations, o->accumulation, o->replicas, o->num_processes, per_call,
                per_call);
        return EX_USAGE;
    }
    if (r->test_ds != NULL &&
        ipuof_idx_dataset_length(r->test_ds) < (size_t)o->test_batch * o->replicas) {
        fprintf(stderr, "ipuof-mnist: the test set has %zu samples, fewer than one test call "
                "takes (test batch %u x replicas %u): use --limit-test %u or more\n",
                ipuof_idx_dataset_length(r->test_ds), o->test_batch, o->replicas,
                o->test_batch * o->replicas);
        return EX_USAGE;
    }
    return 0;
}

/* Frees what r holds, loaders before their datasets, models before their client. */
static void
release(struct mnist_run *r)
{
    ipuof_dataloader_free(r->train_dl);
    ipuof_dataloader_free(r->test_dl);
    ipuof_idx_dataset_free(r->train_ds);
    ipuof_idx_dataset_free(r->test_ds);
    ipuof_model_free(r->infer);
    ipuof_model_free(r->train);
    if (r->c != NULL && ipuof_partition_name(r->c) != NULL)
        (void)ipuof_detach(r->c);
    ipuof_client_free(r->c);
    free(r->onnx);
}

int
main(int argc, char **argv)
{
    struct mnist_opts o;
    struct mnist_run r = {0};
    int stop;
    int rc;

    rc = parse_args(argc, argv, &o, &stop);
    if (stop)
        return rc;
    r.bar = !o.quiet && isatty(STDERR_FILENO);
    if (o.num_processes > 1)
        snprintf(r.tag, sizeof r.tag, "[process %u] ", o.process_id);
    rc = (o.epochs > 0 ? open_split(o.data, "train", o.limit_train, &r.train_ds) : 0) ||
         (o.process_id == 0 ? open_split(o.data, "t10k", o.limit_test, &r.test_ds) : 0);
    if (rc == 0)
        rc = check_plan(&o, &r);
    if (rc == 0)
        rc = setup(&o, &r);
    if (rc == 0)
        rc = train(&o, &r);
    if (rc == 0 && o.process_id == 0) /* the job's other processes leave it the test */
        rc = test(&o, &r);
    release(&r);
    return rc;
}
