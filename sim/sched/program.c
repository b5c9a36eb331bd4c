/*
 * program.c — builds the program of each simulated IPU (program.h states the contract and
 * each strategy's step formula) from the placement, the strategy and the run's shape.
 * Built once at compile time, before the simulated clock (which replays it) and the first
 * run (whose IPU threads interpret it); its size depends on the stages, never on D or A.
 * Does not: run or time anything.
 */
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "program.h"

#define MAX_SEG 8               /* pipelined: 3 segments + the collective */

enum { X_RECV, X_SEND, X_GRECV, X_GSEND, X_LISTS };

struct vec {
    struct sim_step *s;
    int n, cap;
};

struct bld {
    const struct sim_exe *e;
    struct sim_prog *g;
    struct vec v[SIM_MAX_IPUS];
    int starts[SIM_MAX_IPUS][MAX_SEG + 1];
    int (*xr)[X_LISTS][2];      /* per stage: its transfer lists in g->xi */
    int groups;                 /* works in the tick being built */
    bool oom;
};

static void
push(struct bld *b, unsigned p, struct sim_step st)
{
    struct vec *v = &b->v[p];

    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 64;
        struct sim_step *s = realloc(v->s, (size_t)cap * sizeof(*s));
        if (s == NULL) {
            b->oom = true;
            return;
        }
        v->s = s;
        v->cap = cap;
    }
    v->s[v->n++] = st;
}

/* The work of stage k for micro-batch mb (a forward, or a backward), logged as step tick,
 * laid out by the clock at position key of its tick. */
static void
work(struct bld *b, int k, bool bwd, unsigned mb, long long tick, int key)
{
    const struct sim_exe *e = b->e;
    unsigned p = (unsigned)e->stage_ipu[k];
    static const uint8_t fwd_kinds[] = { SIM_STEP_RECV, SIM_STEP_HOST_IN, SIM_STEP_FWD,
                                         SIM_STEP_SEND, SIM_STEP_HOST_OUT };
    static const uint8_t bwd_kinds[] = { SIM_STEP_GRECV, SIM_STEP_BWD, SIM_STEP_GSEND };
    const uint8_t *kinds = bwd ? bwd_kinds : fwd_kinds;
    int n = bwd ? 3 : 5;
    struct sim_step st = { .stage = (int16_t)k, .key = (uint16_t)key, .mb = mb,
                           .tick = tick };

    if (e->strategy == SIM_STRATEGY_PHASED) {
        st.kind = SIM_STEP_LOAD;
        push(b, p, st);
    }
    for (int i = 0; i < n; i++) {
        int list = kinds[i] == SIM_STEP_RECV ? X_RECV : kinds[i] == SIM_STEP_SEND ? X_SEND :
                   kinds[i] == SIM_STEP_GRECV ? X_GRECV :
                   kinds[i] == SIM_STEP_GSEND ? X_GSEND : -1;
        st.kind = kinds[i];
        st.lo = list >= 0 ? b->xr[k][list][0] : 0;
        st.hi = list >= 0 ? b->xr[k][list][1] : 0;
        push(b, p, st);
    }
    b->groups++;
}

/* Ends a tick on every IPU. */
static void
tick(struct bld *b, bool all)
{
    for (unsigned p = 0; p < b->g->n_ipus; p++)
        push(b, p, (struct sim_step){ .kind = SIM_STEP_TICK, .all = all, .stage = -1 });
    if (b->groups > b->g->max_groups)
        b->g->max_groups = b->groups;
    b->groups = 0;
}

static void
seg_begin(struct bld *b, unsigned reps, long long stride, bool scale, bool collective)
{
    struct sim_prog *g = b->g;

    for (unsigned p = 0; p < g->n_ipus; p++)
        b->starts[p][g->n_seg] = b->v[p].n;
    g->seg[g->n_seg++] = (struct sim_seg){ reps, stride, scale, collective };
}

/* Pipelined ticks [t0, t1) (program.h's formulas), M micro-batches. */
static void
pipe_ticks(struct bld *b, long long t0, long long t1, long long M)
{
    int N = b->e->n_stages;
    bool train = b->e->tr != NULL;

    for (long long t = t0; t < t1; t++) {
        for (int k = N - 1; train && k >= 0; k--) {     /* backwards first: frees a slot */
            long long m = t - (2 * N - 1 - k);
            if (m >= 0 && m < M)
                work(b, k, true, (unsigned)m, t, 2 * N - 1 - k);
        }
        for (int k = 0; k < N; k++) {
            long long m = t - k;
            if (m >= 0 && m < M)
                work(b, k, false, (unsigned)m, t, k);
        }
        tick(b, false);
    }
}

/* Every replica meets, reduces, updates (program.h). */
static void
collective(struct bld *b)
{
    const struct sim_exe *e = b->e;
    unsigned P = b->g->n_ipus;

    seg_begin(b, 1, 0, false, true);
    for (unsigned p = 0; p < P; p++) {
        push(b, p, (struct sim_step){ .kind = SIM_STEP_SYNC, .stage = -1, .key = (uint16_t)p });
        push(b, p, (struct sim_step){ .kind = SIM_STEP_REDUCE, .stage = -1,
                                      .key = (uint16_t)p });
    }
    if (e->R > 1) {
        b->groups = (int)P;
        tick(b, true);
    }
    for (unsigned p = 0; p < P; p++) {
        push(b, p, (struct sim_step){ .kind = SIM_STEP_STREAM, .stage = -1, .key = (uint16_t)p });
        push(b, p, (struct sim_step){ .kind = SIM_STEP_UPDATE, .stage = -1, .key = (uint16_t)p });
        push(b, p, (struct sim_step){ .kind = SIM_STEP_STREAM, .stage = -1, .key = (uint16_t)p });
    }
    b->groups = (int)P;
    tick(b, true);
}

/* Per stage, its four transfer lists (in e->xfer order) into g->xi. */
static int
transfer_lists(struct bld *b)
{
    const struct sim_exe *e = b->e;
    int n = 0;

    b->g->xi = malloc(((size_t)X_LISTS * (size_t)e->n_xfer + 1) * sizeof(int));
    b->xr = calloc((size_t)e->n_stages, sizeof(*b->xr));
    if (b->g->xi == NULL || b->xr == NULL)
        return IPUOF_E_NOMEM;
    for (int k = 0; k < e->n_stages; k++)
        for (int l = 0; l < X_LISTS; l++) {
            b->xr[k][l][0] = n;
            for (int i = 0; i < e->n_xfer; i++) {
                const struct sim_xfer *x = &e->xfer[i];
                bool in = l == X_RECV ? x->rstage == k :
                          l == X_SEND ? x->sstage == k :
                          l == X_GRECV ? x->sstage == k && x->goff >= 0 :
                                         x->rstage == k && x->goff >= 0;
                if (in)
                    b->g->xi[n++] = i;
            }
            b->xr[k][l][1] = n;
        }
    return 0;
}

static void
build(struct bld *b)
{
    const struct sim_exe *e = b->e;
    int N = e->n_stages;
    bool train = e->tr != NULL;
    long long M = train ? e->A : e->D;

    if (e->strategy == SIM_STRATEGY_PIPELINED) {
        long long V = train ? 2 * N : N, T = M + V - 1;
        if (T - V > V) {
            seg_begin(b, 1, 0, false, false);
            pipe_ticks(b, 0, V, M);
            seg_begin(b, (unsigned)(T - 2 * V), 1, true, false);
            pipe_ticks(b, V, V + 1, M);
            seg_begin(b, 1, 0, false, false);
            pipe_ticks(b, T - V, T, M);
        } else {
            seg_begin(b, 1, 0, false, false);
            pipe_ticks(b, 0, T, M);
        }
    } else {
        seg_begin(b, (unsigned)M, 2 * N, M > 2, false);
        for (int k = 0; k < N; k++) {
            work(b, k, false, 0, k, 0);
            tick(b, false);
        }
        for (int k = N - 1; train && k >= 0; k--) {
            work(b, k, true, 0, 2 * N - 1 - k, 0);
            tick(b, false);
        }
    }
    if (train)
        collective(b);
}

int
sim_prog_build(struct sim_exe *e, struct sim_err *err)
{
    struct bld *b = calloc(1, sizeof(*b));
    struct sim_prog *g = calloc(1, sizeof(*g));
    int rc = IPUOF_E_NOMEM, total = 0;

    if (b == NULL || g == NULL)
        goto out;
    b->e = e;
    b->g = g;
    g->n_ipus = e->ipr;
    g->seg = calloc(MAX_SEG, sizeof(*g->seg));
    if (g->seg == NULL || transfer_lists(b) != 0)
        goto out;
    build(b);
    if (b->oom)
        goto out;
    for (unsigned p = 0; p < g->n_ipus; p++)
        total += b->v[p].n;
    g->steps = malloc(((size_t)total + 1) * sizeof(*g->steps));
    g->start = malloc((size_t)g->n_ipus * (size_t)(g->n_seg + 1) * sizeof(int));
    if (g->steps == NULL || g->start == NULL)
        goto out;
    total = 0;
    for (unsigned p = 0; p < g->n_ipus; p++) {
        int *st = &g->start[(size_t)p * (size_t)(g->n_seg + 1)];
        b->starts[p][g->n_seg] = b->v[p].n;
        for (int s = 0; s <= g->n_seg; s++)
            st[s] = total + b->starts[p][s];
        if (b->v[p].n > 0)
            memcpy(&g->steps[total], b->v[p].s, (size_t)b->v[p].n * sizeof(*g->steps));
        total += b->v[p].n;
    }
    rc = 0;
    if (g->max_groups > 2 * SIM_MAX_IPUS)
        rc = sim_err_set(err, IPUOF_E_INTERNAL, "a tick of the schedule has %d works; at "
                         "most %d are supported", g->max_groups, 2 * SIM_MAX_IPUS);
out:
    if (rc == IPUOF_E_NOMEM)
        sim_err_set(err, rc, "out of memory");
    if (b != NULL) {
        for (unsigned p = 0; p < SIM_MAX_IPUS; p++)
            free(b->v[p].s);
        free(b->xr);
    }
    free(b);
    if (rc != 0) {
        sim_prog_free(g);
        return rc;
    }
    e->prog = g;
    return 0;
}

void
sim_prog_free(struct sim_prog *g)
{
    if (g == NULL)
        return;
    free(g->seg);
    free(g->steps);
    free(g->start);
    free(g->xi);
    free(g);
}
