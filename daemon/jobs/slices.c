/*
 * slices.c — the rows of the input run buffers one connection fills (see slices.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ipuof/status.h"
#include "slices.h"
#include "wiremap.h"

/* The local replica that holds group s's row. */
static unsigned
group_row(const struct slice_plan *pl, unsigned s)
{
    return pl->orthogonal ? s : s * pl->group;
}

unsigned
slice_divisor(const struct slice_plan *pl)
{
    return pl->nproc * pl->group;
}

int
slice_fill(struct sim_exe *exe, const struct slice_plan *pl, struct slice_cursor *cur,
           struct conn_sink *sink)
{
    size_t n_in = sim_exe_input_count(exe), R = sim_exe_replicas(exe);
    unsigned rl = (unsigned)(R / pl->nproc), groups = rl / pl->group;
    int n = 0;

    while (cur->in < n_in && n < SLICE_SEGS) {
        struct sim_io_info io;
        uint8_t *buf = sim_exe_input_buffer(exe, cur->in);
        size_t row;

        sim_exe_input_info(exe, cur->in, &io);
        if (cur->step >= io.iterations || io.step_bytes == 0) {
            cur->in++;
            cur->step = cur->grp = 0;
            continue;
        }
        row = cur->step * R + (size_t)pl->proc * rl;
        if (pl->group <= 1) { /* the process's rows of this step, at once */
            uint8_t *at = buf + row * io.step_bytes;
            cur->step++;
            if (n > 0 && cur->seg[n - 1] + cur->seg_len[n - 1] == at) { /* adjacent: one */
                cur->seg_len[n - 1] += rl * io.step_bytes;
            } else {
                cur->seg[n] = at;
                cur->seg_len[n++] = rl * io.step_bytes;
            }
        } else {
            cur->seg[n] = buf + (row + group_row(pl, (unsigned)cur->grp)) * io.step_bytes;
            cur->seg_len[n++] = io.step_bytes;
            if (++cur->grp < groups)
                continue;
            cur->grp = 0;
            cur->step++;
        }
        if (cur->in + 1 == n_in)
            break; /* the last input: a step at a time (slice_steps_in) */
    }
    sink->seg = cur->seg;
    sink->seg_len = cur->seg_len;
    sink->nseg = n;
    return n > 0 ? 0 : -1;
}

uint64_t
slice_steps_in(struct sim_exe *exe, const struct slice_cursor *cur)
{
    size_t n_in = sim_exe_input_count(exe);

    if (cur->in >= n_in)
        return (uint64_t)sim_exe_device_iterations(exe) * sim_exe_gradient_accumulation(exe);
    return cur->in + 1 == n_in ? cur->step : 0; /* inputs arrive one after another */
}

void
slice_replicate(struct sim_exe *exe, const struct slice_plan *pl, uint64_t k0, uint64_t k1)
{
    size_t n_in = sim_exe_input_count(exe), R = sim_exe_replicas(exe);
    unsigned rl, groups;

    if (pl->group <= 1 || pl->nproc == 0)
        return;
    rl = (unsigned)(R / pl->nproc);
    groups = rl / pl->group;
    for (size_t i = 0; i < n_in; i++) {
        struct sim_io_info io;
        uint8_t *buf = sim_exe_input_buffer(exe, i);

        sim_exe_input_info(exe, i, &io);
        for (size_t k = k0; k < k1 && k < io.iterations; k++) {
            uint8_t *base = buf + (k * R + (size_t)pl->proc * rl) * io.step_bytes;
            for (unsigned r = 0; r < rl; r++) {
                unsigned s = pl->orthogonal ? r % groups : r / pl->group;
                unsigned src = group_row(pl, s);
                if (src != r)
                    memcpy(base + (size_t)r * io.step_bytes, base + (size_t)src * io.step_bytes,
                           io.step_bytes);
            }
        }
    }
}

/* slice_check of a whole run (one process, no groups): the simulator checks each input's
 * shape and dtype itself. */
static int
check_whole(struct sim_exe *exe, Ipuof__TensorInfo **inputs, size_t n_in, const char *model,
            uint64_t *total, char *msg, size_t len)
{
    for (size_t i = 0; i < n_in; i++) {
        const Ipuof__TensorInfo *ti = inputs[i];
        long idx = ti->name[0] ? sim_exe_input_index(exe, ti->name) : (long)i;
        struct sim_io_info io;
        struct sim_err err;
        int rc;

        if (idx < 0 || (size_t)idx != i) {
            snprintf(msg, len, "run input %zu is '%s', but model '%s' takes '%s' there (inputs "
                     "go in the order of the compile reply)", i, ti->name, model,
                     sim_exe_input_info(exe, i, &io) == 0 ? io.name : "?");
            return IPUOF_E_INVAL;
        }
        if (ti->n_dims > SIM_MAX_RANK) {
            snprintf(msg, len, "input '%s' has rank %zu; at most %d is supported", ti->name,
                     ti->n_dims, SIM_MAX_RANK);
            return IPUOF_E_SHAPE;
        }
        if (wiremap_sim_dtype(ti->dtype) < 0) {
            wiremap_refuse(&wiremap_dtype, ti->dtype, "a run input", err.msg, sizeof err.msg);
            snprintf(msg, len, "run input %zu ('%s'): %s", i, ti->name, err.msg);
            return IPUOF_E_DTYPE;
        }
        rc = sim_exe_check_input(exe, i, wiremap_sim_dtype(ti->dtype), (int)ti->n_dims,
                                 ti->dims, &err);
        if (rc != IPUOF_OK) {
            snprintf(msg, len, "%s", err.msg);
            return rc;
        }
        sim_exe_input_info(exe, i, &io);
        *total += io.run_bytes;
    }
    return IPUOF_OK;
}

int
slice_check(struct sim_exe *exe, const struct slice_plan *pl, Ipuof__TensorInfo **inputs,
            size_t n_inputs, const char *model, uint64_t *total, char *msg, size_t len)
{
    size_t n_in = sim_exe_input_count(exe);
    unsigned div = slice_divisor(pl);

    *total = 0;
    if (n_inputs != n_in) {
        snprintf(msg, len, "run of model '%s' gives %zu inputs; the model takes %zu", model,
                 n_inputs, n_in);
        return div == 1 ? IPUOF_E_INVAL : IPUOF_E_SHAPE;
    }
    if (div == 1)
        return check_whole(exe, inputs, n_in, model, total, msg, len);
    for (size_t i = 0; i < n_in; i++) {
        const Ipuof__TensorInfo *ti = inputs[i];
        struct sim_io_info io;
        int same;

        sim_exe_input_info(exe, i, &io);
        same = wiremap_sim_dtype(ti->dtype) == io.dtype && (int)ti->n_dims == io.run_rank &&
               (ti->name[0] == '\0' || strcmp(ti->name, io.name) == 0);
        for (int d = 0; same && d < io.run_rank; d++)
            same = ti->dims[d] == (d == 0 ? io.run_dims[0] / div : io.run_dims[d]);
        if (!same) {
            char want[160];
            size_t used = 0;
            for (int d = 0; d < io.run_rank && used + 24 < sizeof want; d++)
                used += (size_t)snprintf(want + used, sizeof want - used, "%s%" PRId64,
                                         d ? "," : "",
                                         d == 0 ? io.run_dims[0] / div : io.run_dims[d]);
            snprintf(msg, len, "run input %zu ('%s') does not match '%s' %s[%s]%s", i,
                     ti->name, io.name, sim_dtype_name(io.dtype), want,
                     pl->nproc > 1 ? ": each process sends its own replicas' share"
                     : pl->group > 1 ? ": one input per group of replicas" : "");
            return IPUOF_E_SHAPE;
        }
        *total += io.run_bytes / div;
    }
    return IPUOF_OK;
}
