/*
 * onnx_load.c — the only place where an ONNX ModelProto becomes a sim model (model.h).
 *
 * Does: unpack the bytes with protobuf-c, check the opset and every count against the
 * SIM_MAX_* limits, copy initializers (tensor_pb.c), graph inputs with their declared
 * types, nodes with their attributes (including PopART's __ipu_number and
 * __pipeline_stage), resolve names to indices, sort nodes topologically and find which
 * graph inputs decide shapes. Loop and If are expanded into plain nodes first
 * (onnx_ctrl.c). ai.graphcore::BufferUpdate nodes go last in the order (after every
 * reader of the old value); their outputs may feed no node, and one buffer takes one
 * update. Every problem is an error that says what was wrong.
 * Does not: check op support or shapes (the compiler does), keep any protobuf object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ctrl.h"
#include "pb_int.h"
#include "sim_int.h"

#define MAX_NODE_INPUTS 65536
#define MAX_NODE_OUTPUTS 1024
#define MAX_NODE_ATTRS 1024
#define MAX_PLACEMENT 64
#define MAX_PB_DEPTH 64                 /* nested messages (subgraphs nest legitimately) */
#define MAX_PB_MESSAGES 2000000u        /* messages in one model: each costs ~100 bytes */
#define ALIGN_UP(n) (((n) + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN)

/* ---- a pre-scan of the wire format -------------------------------------------------- */

/*
 * protobuf-c has no nesting or size limits: unpacking recurses once per nested message and
 * allocates a C struct for every message (a 2-byte empty message becomes ~100 bytes). The
 * scan walks the wire format with the message descriptors, before unpacking, and refuses
 * input nested deeper than MAX_PB_DEPTH or holding more than MAX_PB_MESSAGES messages.
 */
struct pb_scan {
    size_t messages;
    const char *problem;
};

static bool
pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;

    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = x;
            return true;
        }
    }
    return false;
}

static bool
pb_scan_message(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *d,
                int depth, struct pb_scan *s)
{
    if (depth > MAX_PB_DEPTH) {
        s->problem = "messages are nested too deeply";
        return false;
    }
    if (++s->messages > MAX_PB_MESSAGES) {
        s->problem = "it holds too many protobuf messages";
        return false;
    }
    while (p < end) {
        uint64_t key, len;
        const ProtobufCFieldDescriptor *f;
        if (!pb_varint(&p, end, &key))
            goto bad;
        switch (key & 7) {
        case 0:
            if (!pb_varint(&p, end, &len))
                goto bad;
            break;
        case 1:
            if (end - p < 8)
                goto bad;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                goto bad;
            p += 4;
            break;
        case 2:
            if (!pb_varint(&p, end, &len) || len > (uint64_t)(end - p))
                goto bad;
            f = key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !pb_scan_message(p, p + len, f->descriptor, depth + 1, s))
                return false;
            p += len;
            break;
        default:
            goto bad;
        }
    }
    return true;
bad:
    s->problem = "the protobuf encoding is broken";
    return false;
}

static const char *
nz(const char *s)
{
    return s != NULL ? s : "";
}

static void
free_attr(struct sim_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    sim_const_free(a->t);
}

void
sim_model_free(struct sim_model *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < m->n_vals; i++) {
        free(m->vals[i].name);
        free(m->vals[i].dim0_param);
        sim_const_free(m->vals[i].init);
    }
    free(m->vals);
    free(m->weights);
    for (int i = 0; i < m->n_nodes; i++) {
        struct sim_mnode *n = &m->nodes[i];
        free(n->name);
        free(n->op_type);
        free(n->domain);
        free(n->in);
        free(n->out);
        for (int j = 0; j < n->n_attr; j++)
            free_attr(&n->attr[j]);
        free(n->attr);
    }
    free(m->nodes);
    free(m->inputs);
    free(m->in_needs_const);
    free(m->outputs);
    free(m);
}

/* Loader state: the model under construction and the name -> value map. */
struct loader {
    struct sim_model *m;
    struct sim_strmap names;
    int cap_vals;
    struct sim_err *err;
};

static int
nomem(struct loader *L)
{
    return sim_err_set(L->err, IPUOF_E_NOMEM, "out of memory loading the model");
}

/* Adds a value called name; its index goes to *idx. Duplicate names are an error. */
static int
add_value(struct loader *L, const char *name, int kind, const char *what, int *idx)
{
    struct sim_mval *v;

    if (L->m->n_vals >= L->cap_vals)
        return sim_err_set(L->err, IPUOF_E_INTERNAL, "value table overflow");
    v = &L->m->vals[L->m->n_vals];
    v->name = strdup(name);
    if (v->name == NULL)
        return nomem(L);
    v->kind = kind;
    v->rank = -1;
    v->producer = -1;
    if (!sim_strmap_put(&L->names, v->name, L->m->n_vals)) {
        int rc = sim_err_set(L->err, IPUOF_E_INVAL, "%s '%s' reuses a name already defined "
                             "in the graph (ONNX names are single-assignment)", what, name);
        free(v->name);
        v->name = NULL;
        return rc;
    }
    *idx = L->m->n_vals++;
    return 0;
}

/* Copies the declared elem type and shape of a ValueInfoProto into v. */
static int
read_value_info(struct loader *L, const Onnx__ValueInfoProto *vi, struct sim_mval *v,
                bool must_be_tensor)
{
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TensorShapeProto *sh;

    if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        tp->tensor_type == NULL) {
        if (must_be_tensor && tp != NULL && tp->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET)
            return sim_err_set(L->err, IPUOF_E_UNSUPPORTED, "graph input '%s' is not a "
                               "tensor (sequences, maps and optionals are not supported)",
                               v->name);
        return 0;
    }
    if (tp->tensor_type->has_elem_type)
        v->dtype = tp->tensor_type->elem_type;
    sh = tp->tensor_type->shape;
    if (sh == NULL)
        return 0;
    if (sh->n_dim > SIM_MAX_RANK)
        return sim_err_set(L->err, IPUOF_E_TOO_LARGE, "'%s' has rank %zu, over the limit "
                           "of %d", v->name, sh->n_dim, SIM_MAX_RANK);
    v->rank = (int)sh->n_dim;
    for (size_t i = 0; i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        v->dims[i] = -1;
        if (d == NULL)
            continue;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return sim_err_set(L->err, IPUOF_E_INVAL, "'%s' dim %zu is negative (%lld)",
                                   v->name, i, (long long)d->dim_value);
            v->dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   i == 0 && d->dim_param != NULL) {
            free(v->dim0_param);
            v->dim0_param = strdup(d->dim_param);
            if (v->dim0_param == NULL)
                return nomem(L);
        }
    }
    return 0;
}

static int
copy_attr(struct loader *L, const Onnx__AttributeProto *ap, struct sim_attr *a,
          const char *label)
{
    char what[700];

    a->name = sim_strdup(ap->name);
    if (a->name == NULL)
        return nomem(L);
    if (!ap->has_type)
        return 0;
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->type = SIM_ATTR_FLOAT;
        a->f = ap->f;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->type = SIM_ATTR_INT;
        a->i = ap->i;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->type = SIM_ATTR_STRING;
        a->s = malloc(ap->s.len + 1);
        if (a->s == NULL)
            return nomem(L);
        if (ap->s.len > 0)
            memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = '\0';
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = SIM_ATTR_INTS;
        a->n = ap->n_ints;
        a->ints = malloc((ap->n_ints + 1) * sizeof(int64_t));
        if (a->ints == NULL)
            return nomem(L);
        if (ap->n_ints > 0)
            memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = SIM_ATTR_FLOATS;
        a->n = ap->n_floats;
        a->floats = malloc((ap->n_floats + 1) * sizeof(float));
        if (a->floats == NULL)
            return nomem(L);
        if (ap->n_floats > 0)
            memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (ap->t == NULL)
            return sim_err_set(L->err, IPUOF_E_INVAL, "%s: tensor attribute '%s' has no "
                               "tensor", label, a->name);
        a->type = SIM_ATTR_TENSOR;
        snprintf(what, sizeof(what), "%s: attribute '%s'", label, a->name);
        return sim_const_from_pb(ap->t, what, NULL, &a->t, L->err);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        a->type = SIM_ATTR_GRAPH;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = SIM_ATTR_STRINGS;
        return 0;
    default:
        return 0;
    }
}

/* Copies node k's name, op type, domain, attributes and output values (inputs are
 * resolved later, once every output exists). */
static int
copy_node(struct loader *L, const Onnx__NodeProto *np, int k, struct sim_mnode *n)
{
    char label[300];
    int rc;

    n->name = sim_strdup(np->name);
    n->op_type = sim_strdup(np->op_type);
    n->domain = sim_strdup(np->domain);
    if (n->name == NULL || n->op_type == NULL || n->domain == NULL)
        return nomem(L);
    if (strcmp(n->domain, "ai.onnx") == 0)
        n->domain[0] = '\0';
    n->stage = -1;
    snprintf(label, sizeof(label), "node %d '%s' (%s)", k, n->name, n->op_type);
    if (n->op_type[0] == '\0')
        return sim_err_set(L->err, IPUOF_E_INVAL, "%s has no op_type", label);
    if (np->n_input > MAX_NODE_INPUTS || np->n_output > MAX_NODE_OUTPUTS ||
        np->n_attribute > MAX_NODE_ATTRS)
        return sim_err_set(L->err, IPUOF_E_TOO_LARGE, "%s has %zu inputs, %zu outputs and "
                           "%zu attributes; the limits are %d, %d and %d", label, np->n_input,
                           np->n_output, np->n_attribute, MAX_NODE_INPUTS, MAX_NODE_OUTPUTS,
                           MAX_NODE_ATTRS);
    n->in = malloc((np->n_input + 1) * sizeof(int));
    n->out = malloc((np->n_output + 1) * sizeof(int));
    n->attr = calloc(np->n_attribute + 1, sizeof(*n->attr));
    if (n->in == NULL || n->out == NULL || n->attr == NULL)
        return nomem(L);
    n->n_in = (int)np->n_input;
    for (size_t j = 0; j < np->n_attribute; j++) {
        const struct sim_attr *a;
        if (np->attribute[j] == NULL)
            return sim_err_set(L->err, IPUOF_E_INVAL, "%s: attribute %zu is empty", label, j);
        rc = copy_attr(L, np->attribute[j], &n->attr[j], label);
        n->n_attr = (int)j + 1;
        if (rc != 0)
            return rc;
        a = &n->attr[j];
        if (strcmp(a->name, "__ipu_number") == 0 || strcmp(a->name, "__pipeline_stage") == 0) {
            if (a->type != SIM_ATTR_INT || a->i < 0 || a->i >= MAX_PLACEMENT)
                return sim_err_set(L->err, IPUOF_E_INVAL, "%s: %s must be an integer in "
                                   "[0, %d)", label, a->name, MAX_PLACEMENT);
            if (a->name[2] == 'i')
                n->ipu = (int)a->i;
            else
                n->stage = (int)a->i;
        }
    }
    for (size_t j = 0; j < np->n_output; j++) {
        const char *nm = nz(np->output[j]);
        n->out[j] = -1;
        n->n_out = (int)j + 1;
        if (nm[0] == '\0')
            continue;
        rc = add_value(L, nm, SIM_MV_NODE, "node output", &n->out[j]);
        if (rc != 0)
            return rc;
        L->m->vals[n->out[j]].producer = k;
    }
    return 0;
}

/* Node k's __if_guard (the name of the If's condition, set by onnx_ctrl.c) as
 * nodes[k].guard, __if_side as guard_then; the guard orders the node after the condition's
 * producer (topo_sort). */
static int
resolve_guard(struct loader *L, int k)
{
    struct sim_mnode *n = &L->m->nodes[k];
    const struct sim_attr *g = sim_attr_find(n, "__if_guard");
    const struct sim_attr *side = sim_attr_find(n, "__if_side");
    char label[300];
    int idx;

    if (g == NULL)
        return 0;
    idx = g->type == SIM_ATTR_STRING ? sim_strmap_get(&L->names, g->s) : -1;
    if (idx < 0 || side == NULL || side->type != SIM_ATTR_INT)
        return sim_err_set(L->err, IPUOF_E_INVAL, "%s: __if_guard must name a tensor of the "
                           "graph and come with an integer __if_side",
                           sim_node_label(L->m, k, label, sizeof(label)));
    n->guard = idx + 1;
    n->guard_then = side->i != 0;
    return 0;
}

/* The value node k depends on as its j-th edge: its inputs, then its guard (j == n_in). */
static int
dep_of(const struct sim_mnode *n, int j)
{
    return j < n->n_in ? n->in[j] : n->guard - 1;
}

/* Kahn's algorithm over producer -> consumer edges; rewrites node order and producer
 * indices. A cycle is an error. */
static bool
is_buffer_update(const struct sim_mnode *nd)
{
    return strcmp(nd->domain, "ai.graphcore") == 0 && strcmp(nd->op_type, "BufferUpdate") == 0;
}

/* Moves the BufferUpdate nodes of order (a topological order of n nodes) to its end, in
 * their order, so every other reader of a buffer reads it before it changes. users of node
 * k are users[users_start[k] .. users_start[k + 1]). Fails when a BufferUpdate's output
 * feeds a node or two update one buffer. */
static int
buffer_updates_last(struct loader *L, int *order, int n, const int *users_start)
{
    const struct sim_model *m = L->m;
    int *tmp = malloc(((size_t)n + 1) * sizeof(int));
    int k = 0, rc = 0;
    char label[300];

    if (tmp == NULL)
        return nomem(L);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (is_buffer_update(&m->nodes[order[i]]) == (pass == 1))
                tmp[k++] = order[i];
    for (int i = 0; i < n && rc == 0; i++) {
        const struct sim_mnode *nd = &m->nodes[i];
        if (!is_buffer_update(nd))
            continue;
        if (users_start[i + 1] > users_start[i])
            rc = sim_err_set(L->err, IPUOF_E_INVAL, "%s: its output feeds other nodes; a "
                             "buffer update may only be a graph output",
                             sim_node_label(m, i, label, sizeof(label)));
        for (int j = i + 1; j < n && rc == 0; j++)
            if (is_buffer_update(&m->nodes[j]) && nd->n_in > 0 && m->nodes[j].n_in > 0 &&
                m->nodes[j].in[0] == nd->in[0])
                rc = sim_err_set(L->err, IPUOF_E_INVAL, "%s: buffer '%s' has two updates; "
                                 "give it one", sim_node_label(m, j, label, sizeof(label)),
                                 nd->in[0] >= 0 ? m->vals[nd->in[0]].name : "?");
    }
    if (rc == 0)
        memcpy(order, tmp, (size_t)n * sizeof(int));
    free(tmp);
    return rc;
}

static int
topo_sort(struct loader *L)
{
    struct sim_model *m = L->m;
    int n = m->n_nodes, rc = 0, head = 0, tail = 0;
    int *pending = calloc((size_t)n + 1, sizeof(int));
    int *order = malloc(((size_t)n + 1) * sizeof(int));
    int *newidx = malloc(((size_t)n + 1) * sizeof(int));
    int *users_start = calloc((size_t)n + 2, sizeof(int));
    int *users = NULL;
    size_t edges = 0;
    struct sim_mnode *sorted = NULL;

    if (pending == NULL || order == NULL || newidx == NULL || users_start == NULL) {
        rc = nomem(L);
        goto out;
    }
    for (int k = 0; k < n; k++)
        for (int j = 0; j <= m->nodes[k].n_in; j++) {
            int v = dep_of(&m->nodes[k], j);
            if (v >= 0 && m->vals[v].producer >= 0) {
                pending[k]++;
                users_start[m->vals[v].producer + 1]++;
                edges++;
            }
        }
    for (int k = 0; k < n; k++)
        users_start[k + 1] += users_start[k];
    users = malloc((edges + 1) * sizeof(int));
    if (users == NULL) {
        rc = nomem(L);
        goto out;
    }
    {
        int *fill = calloc((size_t)n + 1, sizeof(int));
        if (fill == NULL) {
            rc = nomem(L);
            goto out;
        }
        for (int k = 0; k < n; k++)
            for (int j = 0; j <= m->nodes[k].n_in; j++) {
                int v = dep_of(&m->nodes[k], j);
                if (v >= 0 && m->vals[v].producer >= 0) {
                    int p = m->vals[v].producer;
                    users[users_start[p] + fill[p]++] = k;
                }
            }
        free(fill);
    }
    for (int k = 0; k < n; k++)
        if (pending[k] == 0)
            order[tail++] = k;
    while (head < tail) {
        int k = order[head++];
        for (int u = users_start[k]; u < users_start[k + 1]; u++)
            if (--pending[users[u]] == 0)
                order[tail++] = users[u];
    }
    if (tail != n) {
        for (int k = 0; k < n; k++)
            if (pending[k] > 0) {
                char label[300];
                rc = sim_err_set(L->err, IPUOF_E_INVAL, "the graph has a cycle through %s",
                                 sim_node_label(m, k, label, sizeof(label)));
                break;
            }
        goto out;
    }
    rc = buffer_updates_last(L, order, n, users_start);
    if (rc != 0)
        goto out;
    sorted = malloc(((size_t)n + 1) * sizeof(*sorted));
    if (sorted == NULL) {
        rc = nomem(L);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        sorted[i] = m->nodes[order[i]];
        newidx[order[i]] = i;
    }
    free(m->nodes);
    m->nodes = sorted;
    for (int v = 0; v < m->n_vals; v++)
        if (m->vals[v].producer >= 0)
            m->vals[v].producer = newidx[m->vals[v].producer];
out:
    free(pending);
    free(order);
    free(newidx);
    free(users_start);
    free(users);
    return rc;
}

static int
find_opset(struct loader *L, const Onnx__ModelProto *mp)
{
    bool found = false;

    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d;
        if (o == NULL)
            continue;
        d = nz(o->domain);
        if (d[0] == '\0' || strcmp(d, "ai.onnx") == 0) {
            L->m->opset = o->has_version ? o->version : 0;
            found = true;
        }
    }
    if (!found)
        return sim_err_set(L->err, IPUOF_E_UNSUPPORTED, "the model imports no ai.onnx opset");
    if (L->m->opset < SIM_OPSET_MIN || L->m->opset > SIM_OPSET_MAX)
        return sim_err_set(L->err, IPUOF_E_UNSUPPORTED, "the model uses ai.onnx opset %lld; "
                           "supported opsets are %d to %d (re-export with opset_version=%d)",
                           (long long)L->m->opset, SIM_OPSET_MIN, SIM_OPSET_MAX, SIM_OPSET_MAX);
    return 0;
}

/* Checks the graph's node and tensor counts against the limits and makes the model's
 * arrays for them (values, nodes, inputs, outputs) and the name map. 0, or the error set. */
static int
graph_alloc(struct loader *L, const Onnx__GraphProto *g)
{
    struct sim_model *m = L->m;
    uint64_t nv = (uint64_t)g->n_initializer + g->n_input;

    if (g->n_node > SIM_MAX_NODES)
        return sim_err_set(L->err, IPUOF_E_TOO_LARGE, "the graph has %zu nodes, over the "
                           "limit of %d", g->n_node, SIM_MAX_NODES);
    for (size_t k = 0; k < g->n_node; k++) {
        if (g->node[k] == NULL)
            return sim_err_set(L->err, IPUOF_E_INVAL, "node %zu is empty", k);
        nv += g->node[k]->n_output;
        if (nv > SIM_MAX_VALUES)
            break;
    }
    if (nv > SIM_MAX_VALUES || g->n_output > SIM_MAX_VALUES)
        return sim_err_set(L->err, IPUOF_E_TOO_LARGE, "the graph names more than %d tensors",
                           SIM_MAX_VALUES);
    if (g->n_sparse_initializer > 0)
        return sim_err_set(L->err, IPUOF_E_UNSUPPORTED, "sparse initializers are not "
                           "supported");
    L->cap_vals = (int)nv;
    m->vals = calloc(nv + 1, sizeof(*m->vals));
    m->nodes = calloc(g->n_node + 1, sizeof(*m->nodes));
    m->inputs = malloc((g->n_input + 1) * sizeof(int));
    m->in_needs_const = calloc(g->n_input + 1, 1);
    m->outputs = malloc((g->n_output + 1) * sizeof(int));
    if (m->vals == NULL || m->nodes == NULL || m->inputs == NULL || m->outputs == NULL ||
        m->in_needs_const == NULL || !sim_strmap_init(&L->names, (size_t)nv))
        return nomem(L);
    return 0;
}

/* Every initializer into one flat buffer, m->weights (see model.h), each a value of the
 * model. 0, or the error set. */
static int
load_initializers(struct loader *L, const Onnx__GraphProto *g)
{
    struct sim_model *m = L->m;
    int rc;

    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] != NULL)
            m->weights_bytes += ALIGN_UP(sim_pb_tensor_bytes(g->initializer[i]));
    m->weights = sim_aligned_alloc(m->weights_bytes);
    if (m->weights == NULL)
        return nomem(L);
    for (size_t i = 0, off = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        char what[300];
        int idx;
        if (t == NULL || nz(t->name)[0] == '\0')
            return sim_err_set(L->err, IPUOF_E_INVAL, "initializer %zu has no name", i);
        rc = add_value(L, t->name, SIM_MV_INIT, "initializer", &idx);
        if (rc != 0)
            return rc;
        snprintf(what, sizeof(what), "initializer '%s'", t->name);
        rc = sim_const_from_pb(t, what, (char *)m->weights + off, &m->vals[idx].init,
                               L->err);
        off += ALIGN_UP(sim_pb_tensor_bytes(t));
        if (rc != 0)
            return rc;
        m->vals[idx].dtype = m->vals[idx].init->dtype;
    }
    return 0;
}

/* The graph inputs that are not initializers: values of the model with their dtype and
 * shape (m->inputs). 0, or the error set. */
static int
load_inputs(struct loader *L, const Onnx__GraphProto *g)
{
    struct sim_model *m = L->m;
    int rc;

    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        int idx;
        if (vi == NULL || nz(vi->name)[0] == '\0')
            return sim_err_set(L->err, IPUOF_E_INVAL, "graph input %zu has no name", i);
        idx = sim_strmap_get(&L->names, vi->name);
        if (idx >= 0 && m->vals[idx].kind == SIM_MV_INIT)
            continue;   /* an initializer listed as input (IR < 4 style): a weight */
        rc = add_value(L, vi->name, SIM_MV_INPUT, "graph input", &idx);
        if (rc != 0)
            return rc;
        rc = read_value_info(L, vi, &m->vals[idx], true);
        if (rc != 0)
            return rc;
        if (!sim_dtype_ok(m->vals[idx].dtype))
            return sim_err_set(L->err, IPUOF_E_UNSUPPORTED, "graph input '%s' has dtype %s "
                               "(%d); supported: float, float16, uint8, int8, int32, int64, bool",
                               vi->name, sim_onnx_dtype_name(m->vals[idx].dtype),
                               m->vals[idx].dtype);
        m->inputs[m->n_in++] = idx;
    }
    return 0;
}

/* Each node's inputs by value index (an empty name: -1), and its guard resolved; every
 * named input must be some node's output, an initializer or a graph input. 0, or the error
 * set. */
static int
link_node_inputs(struct loader *L, const Onnx__GraphProto *g)
{
    struct sim_model *m = L->m;
    int rc;

    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *np = g->node[k];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *nm = nz(np->input[j]);
            int idx = nm[0] == '\0' ? -1 : sim_strmap_get(&L->names, nm);
            if (nm[0] != '\0' && idx < 0) {
                char label[300];
                return sim_err_set(L->err, IPUOF_E_INVAL, "%s: input '%s' is not produced by "
                                   "any node, initializer or graph input",
                                   sim_node_label(m, (int)k, label, sizeof(label)), nm);
            }
            m->nodes[k].in[j] = idx;
        }
        rc = resolve_guard(L, (int)k);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The graph outputs (m->outputs), a node's output taking the dtype the graph declares for
 * it. 0, or the error set (also when there is none). */
static int
load_outputs(struct loader *L, const Onnx__GraphProto *g)
{
    struct sim_model *m = L->m;
    int rc;

    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = g->output[i];
        int idx = vi != NULL ? sim_strmap_get(&L->names, nz(vi->name)) : -1;
        if (idx < 0)
            return sim_err_set(L->err, IPUOF_E_INVAL, "graph output '%s' is not produced by "
                               "any node, initializer or graph input",
                               vi != NULL ? nz(vi->name) : "");
        if (m->vals[idx].kind == SIM_MV_NODE) {
            struct sim_mval tmp = { 0 };
            tmp.name = m->vals[idx].name;
            tmp.rank = -1;
            rc = read_value_info(L, vi, &tmp, false);
            free(tmp.dim0_param);
            if (rc != 0)
                return rc;
            m->vals[idx].dtype = tmp.dtype;
        }
        m->outputs[m->n_out++] = idx;
    }
    if (m->n_out == 0)
        return sim_err_set(L->err, IPUOF_E_INVAL, "the graph has no outputs");
    return 0;
}

static int
load_graph(struct loader *L, const Onnx__GraphProto *g)
{
    int rc = graph_alloc(L, g);

    if (rc == 0)
        rc = load_initializers(L, g);
    if (rc == 0)
        rc = load_inputs(L, g);
    for (size_t k = 0; rc == 0 && k < g->n_node; k++) {
        rc = copy_node(L, g->node[k], (int)k, &L->m->nodes[k]);
        L->m->n_nodes = (int)k + 1;
    }
    if (rc == 0)
        rc = link_node_inputs(L, g);
    if (rc == 0)
        rc = load_outputs(L, g);
    return rc != 0 ? rc : topo_sort(L);
}

int
sim_model_load(const void *onnx, size_t len, struct sim_model **out, struct sim_err *err)
{
    Onnx__ModelProto *mp = NULL;
    struct loader L = { 0 };
    struct sim_onnx_flat flat = { 0 };
    int rc;

    *out = NULL;
    L.err = err;
    if (onnx == NULL || len == 0)
        return sim_err_set(err, IPUOF_E_INVAL, "the model is empty");
    if (len > SIM_MAX_MODEL_BYTES)
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "the model is %zu bytes, over the limit "
                           "of %zu", len, SIM_MAX_MODEL_BYTES);
    {
        struct pb_scan scan = { 0, NULL };
        if (!pb_scan_message(onnx, (const uint8_t *)onnx + len, &onnx__model_proto__descriptor,
                             0, &scan))
            return sim_err_set(err, scan.messages > MAX_PB_MESSAGES ? IPUOF_E_TOO_LARGE
                                                                    : IPUOF_E_INVAL,
                               "the bytes are not an acceptable ONNX ModelProto: %s (at most "
                               "%d levels and %u messages)", scan.problem, MAX_PB_DEPTH,
                               MAX_PB_MESSAGES);
    }
    mp = onnx__model_proto__unpack(NULL, len, onnx);
    if (mp == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "the bytes are not a serialized ONNX "
                           "ModelProto (protobuf decoding failed)");
    L.m = calloc(1, sizeof(*L.m));
    if (L.m == NULL) {
        rc = nomem(&L);
        goto out;
    }
    L.m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    L.m->recompute = SIM_RECOMPUTE_UNSET;
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *kv = mp->metadata_props[i];
        rc = kv->key != NULL && kv->value != NULL ? sim_memory_meta(L.m, kv->key, kv->value, err)
                                                  : 0;
        if (rc != 0)
            goto out;
        if (kv->key != NULL && kv->value != NULL &&
            strcmp(kv->key, "ipuof.stochastic_rounding") == 0)
            L.m->stochastic_rounding = strcmp(kv->value, "1") == 0;
        if (kv->key != NULL && kv->value != NULL && strcmp(kv->key, "ipuof.partials_type") == 0)
            L.m->partials_half = strcmp(kv->value, "half") == 0;
    }

    rc = find_opset(&L, mp);
    if (rc != 0)
        goto out;
    if (mp->graph == NULL) {
        rc = sim_err_set(err, IPUOF_E_INVAL, "the model has no graph");
        goto out;
    }
    /* Loop and If become plain nodes first (onnx_ctrl.c) */
    rc = sim_onnx_flatten(mp->graph, L.m->opset, &flat, err);
    if (rc == 0)
        rc = load_graph(&L, &flat.graph);
    if (rc != 0)
        goto out;
    if (!sim_model_mark_const_inputs(L.m)) {
        rc = nomem(&L);
        goto out;
    }
    *out = L.m;
    L.m = NULL;
out:
    sim_onnx_flat_fini(&flat);
    sim_strmap_fini(&L.names);
    sim_model_free(L.m);
    onnx__model_proto__free_unpacked(mp, NULL);
    return rc;
}

int64_t
sim_model_opset(const struct sim_model *m)
{
    return m->opset;
}

size_t
sim_model_node_count(const struct sim_model *m)
{
    return (size_t)m->n_nodes;
}

size_t
sim_model_input_count(const struct sim_model *m)
{
    return (size_t)m->n_in;
}

const char *
sim_model_input_name(const struct sim_model *m, size_t i)
{
    return i < (size_t)m->n_in ? m->vals[m->inputs[i]].name : NULL;
}

int
sim_model_input_decl(const struct sim_model *m, size_t i, int *dtype, int *rank,
                     int64_t *dims)
{
    const struct sim_mval *v;

    if (i >= (size_t)m->n_in)
        return IPUOF_E_INVAL;
    v = &m->vals[m->inputs[i]];
    *dtype = v->dtype;
    *rank = v->rank;
    for (int k = 0; k < v->rank; k++)
        dims[k] = v->dims[k];
    return 0;
}

int
sim_model_input_needs_constant(const struct sim_model *m, size_t i)
{
    return i < (size_t)m->n_in ? m->in_needs_const[i] : 0;
}

size_t
sim_model_output_count(const struct sim_model *m)
{
    return (size_t)m->n_out;
}

const char *
sim_model_output_name(const struct sim_model *m, size_t i)
{
    return i < (size_t)m->n_out ? m->vals[m->outputs[i]].name : NULL;
}
