/*
 * ops.c — the op registry: the family tables gathered in one place, lookup by op_type, the
 * supported-op lists, and which model inputs must be compile-time values. It uses the
 * op_*.c family files; they use only op_util.c (the helpers infer functions share), never
 * this file, so the registry and the ops import no cycle.
 *
 * Op semantics live in the op_*.c family files, not here.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct family {
    const struct sim_op *ops;
    const int *count;
};

static const struct family families[] = {
    { sim_ops_elementwise, &sim_ops_elementwise_count },
    { sim_ops_unary, &sim_ops_unary_count },
    { sim_ops_activation, &sim_ops_activation_count },
    { sim_ops_matmul, &sim_ops_matmul_count },
    { sim_ops_conv, &sim_ops_conv_count },
    { sim_ops_pool, &sim_ops_pool_count },
    { sim_ops_reduce, &sim_ops_reduce_count },
    { sim_ops_norm, &sim_ops_norm_count },
    { sim_ops_shape, &sim_ops_shape_count },
    { sim_ops_select, &sim_ops_select_count },
    { sim_ops_loss, &sim_ops_loss_count },
    { sim_ops_logic, &sim_ops_logic_count },
    { sim_ops_pad, &sim_ops_pad_count },
    { sim_ops_gen, &sim_ops_gen_count },
    { sim_ops_split, &sim_ops_split_count },
    /* ConvTranspose, Resize, LSTM and GRU */
    { sim_ops_convt, &sim_ops_convt_count },
    { sim_ops_resize, &sim_ops_resize_count },
    { sim_ops_rnn, &sim_ops_rnn_count },
    /* the ops of PyTorch's layers beyond those: InstanceNormalization, Max Min PRelu Selu
     * Celu Sign Round IsNaN, Tile DepthToSpace SpaceToDepth Trilu, CumSum TopK */
    { sim_ops_instnorm, &sim_ops_instnorm_count },
    { sim_ops_arith, &sim_ops_arith_count },
    { sim_ops_layout, &sim_ops_layout_count },
    { sim_ops_scan, &sim_ops_scan_count },
    /* Sin to Atanh, Reciprocal, the bitwise ops */
    { sim_ops_math, &sim_ops_math_count },
    /* OneHot; RandomUniform, RandomNormal and their Like forms */
    { sim_ops_onehot, &sim_ops_onehot_count },
    { sim_ops_random, &sim_ops_random_count },
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

const struct sim_op *
sim_op_find(const char *op_type)
{
    return sim_op_find_in("", op_type);
}

const struct sim_op *
sim_op_find_in(const char *domain, const char *op_type)
{
    bool dflt = domain == NULL || domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0;

    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count; i++) {
            const struct sim_op *op = &families[f].ops[i];
            if (strcmp(op->name, op_type) != 0)
                continue;
            if (dflt ? op->domain == NULL : op->domain != NULL && strcmp(op->domain, domain) == 0)
                return op;
        }
    return NULL;
}

void
sim_op_foreach(void (*fn)(const struct sim_op *op, void *ud), void *ud)
{
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count; i++)
            fn(&families[f].ops[i], ud);
}

static char supported_list[2048], gradient_list[2048];
static pthread_once_t supported_once = PTHREAD_ONCE_INIT, gradient_once = PTHREAD_ONCE_INIT;

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the sorted names of every op (only those with a gradient rule when grad_only) into
 * buf as "A, B, C"; custom-domain ops as domain.op. */
static void
build_list(char *buf, size_t cap, bool grad_only)
{
    static char custom[2][16][64];
    const char *names[256];
    size_t n = 0, n_custom = 0, used = 0;

    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; i < *families[f].count && n < 256; i++) {
            const struct sim_op *op = &families[f].ops[i];
            if (grad_only && op->backward == NULL)
                continue;
            if (op->domain == NULL) {
                names[n++] = op->name;
            } else if (n_custom < 16) {
                char *c = custom[grad_only][n_custom++];
                snprintf(c, sizeof(custom[0][0]), "%s.%s", op->domain, op->name);
                names[n++] = c;
            }
        }
    qsort(names, n, sizeof(names[0]), cmp_str);
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
}

static void build_supported(void) { build_list(supported_list, sizeof(supported_list), false); }
static void build_gradient(void) { build_list(gradient_list, sizeof(gradient_list), true); }

const char *
sim_supported_ops(void)
{
    pthread_once(&supported_once, build_supported);
    return supported_list;
}

const char *
sim_gradient_ops(void)
{
    pthread_once(&gradient_once, build_gradient);
    return gradient_list;
}

bool
sim_model_mark_const_inputs(struct sim_model *m)
{
    unsigned char *need = calloc((size_t)m->n_vals + 1, 1);

    if (need == NULL)
        return false;
    /* Walk nodes backwards: a value needed at compile time makes its producer's inputs
     * needed too (except through Shape, which only needs a shape). */
    for (int k = m->n_nodes - 1; k >= 0; k--) {
        const struct sim_mnode *nd = &m->nodes[k];
        const struct sim_op *op = sim_op_find_in(nd->domain, nd->op_type);
        bool out_needed = false;

        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0 && need[nd->out[j]])
                out_needed = true;
        if (op != NULL && (op->flags & SIM_OPF_SHAPE_ONLY))
            out_needed = false;
        for (int j = 0; j < nd->n_in; j++) {
            if (nd->in[j] < 0)
                continue;
            if (out_needed || (op != NULL && j < 32 && (op->const_inputs & (1u << j))))
                need[nd->in[j]] = 1;
        }
    }
    for (int i = 0; i < m->n_in; i++)
        m->in_needs_const[i] = need[m->inputs[i]];
    free(need);
    return true;
}
