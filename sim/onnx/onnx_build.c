/*
 * onnx_build.c — builds ONNX ModelProto bytes from calls (see onnx_build.h).
 *
 * The builder keeps its own copies of names, shapes and data; sim_ob_serialize() lays
 * protobuf-c structs over them only for the duration of the pack. Does not check the
 * model for consistency.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#include "onnx_build.h"
#include "sim_int.h"

struct ob_tensor {
    char *name;
    int dtype;
    int rank;
    int64_t dims[SIM_MAX_RANK];
    void *data;
    size_t bytes;
};

struct ob_attr {
    char *name;
    int type;                       /* enum sim_attr_type numbering */
    int64_t i;
    float f;
    char *s;
    int64_t *ints;
    float *floats;
    size_t n;
    struct ob_tensor t;
    struct sim_ob *g;               /* a graph attribute's body (owned) */
};

struct ob_node {
    char *op, *name, *domain;
    char **in, **out;
    size_t n_in, n_out;
    struct ob_attr *attrs;
    size_t n_attrs;
};

struct ob_vi {
    char *name;
    int dtype;
    int rank;                       /* -1: no shape */
    int64_t dims[SIM_MAX_RANK];
};

#define OB_MAX_META 8

struct sim_ob {
    int64_t opset;
    int64_t ir_version;
    int err;
    struct ob_vi *inputs, *outputs;
    size_t n_inputs, n_outputs;
    struct ob_tensor *inits;
    size_t n_inits;
    struct ob_node *nodes;
    size_t n_nodes;
    char meta[OB_MAX_META][2][128];     /* metadata_props: key, value */
    size_t n_meta;
};

/* Grows *arr (elements of size sz) by one zeroed element; returns it or NULL. */
static void *
grow(void **arr, size_t *n, size_t sz)
{
    char *p = realloc(*arr, (*n + 1) * sz);

    if (p == NULL)
        return NULL;
    memset(p + *n * sz, 0, sz);
    *arr = p;
    return p + (*n)++ * sz;
}

static int
fail(struct sim_ob *b, int code)
{
    if (b->err == 0)
        b->err = code;
    return code;
}

struct sim_ob *
sim_ob_new(int64_t opset)
{
    struct sim_ob *b = calloc(1, sizeof(*b));

    if (b != NULL) {
        b->opset = opset;
        b->ir_version = 8;
    }
    return b;
}

void
sim_ob_ir_version(struct sim_ob *b, int64_t v)
{
    b->ir_version = v;
}

int
sim_ob_metadata(struct sim_ob *b, const char *key, const char *value)
{
    if (b->n_meta >= OB_MAX_META || strlen(key) >= sizeof(b->meta[0][0]) ||
        strlen(value) >= sizeof(b->meta[0][1])) {
        b->err = IPUOF_E_INVAL;
        return IPUOF_E_INVAL;
    }
    strcpy(b->meta[b->n_meta][0], key);
    strcpy(b->meta[b->n_meta++][1], value);
    return 0;
}

static void
free_tensor(struct ob_tensor *t)
{
    free(t->name);
    free(t->data);
}

void
sim_ob_free(struct sim_ob *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n_inputs; i++)
        free(b->inputs[i].name);
    for (size_t i = 0; i < b->n_outputs; i++)
        free(b->outputs[i].name);
    for (size_t i = 0; i < b->n_inits; i++)
        free_tensor(&b->inits[i]);
    for (size_t i = 0; i < b->n_nodes; i++) {
        struct ob_node *n = &b->nodes[i];
        free(n->op);
        free(n->name);
        free(n->domain);
        for (size_t j = 0; j < n->n_in; j++)
            free(n->in[j]);
        for (size_t j = 0; j < n->n_out; j++)
            free(n->out[j]);
        free(n->in);
        free(n->out);
        for (size_t j = 0; j < n->n_attrs; j++) {
            free(n->attrs[j].name);
            free(n->attrs[j].s);
            free(n->attrs[j].ints);
            free(n->attrs[j].floats);
            free_tensor(&n->attrs[j].t);
            sim_ob_free(n->attrs[j].g);
        }
        free(n->attrs);
    }
    free(b->inputs);
    free(b->outputs);
    free(b->inits);
    free(b->nodes);
    free(b);
}

static int
fill_tensor(struct ob_tensor *t, const char *name, int dtype, int rank, const int64_t *dims,
            const void *data)
{
    struct sim_shape s;
    int64_t n;

    if (rank < 0 || rank > SIM_MAX_RANK || !sim_dtype_ok(dtype))
        return IPUOF_E_INVAL;
    s.rank = rank;
    for (int i = 0; i < rank; i++)
        s.d[i] = t->dims[i] = dims[i];
    if (!sim_shape_numel(&s, &n))
        return IPUOF_E_INVAL;
    t->rank = rank;
    t->dtype = dtype;
    t->bytes = (size_t)n * sim_dtype_size(dtype);
    t->name = sim_strdup(name);
    t->data = malloc(t->bytes + 1);
    if (t->name == NULL || t->data == NULL)
        return IPUOF_E_NOMEM;
    if (t->bytes > 0)
        memcpy(t->data, data, t->bytes);
    return 0;
}

static int
add_vi(struct sim_ob *b, struct ob_vi **arr, size_t *n, const char *name, int dtype, int rank,
       const int64_t *dims)
{
    struct ob_vi *v;

    if (rank > SIM_MAX_RANK)
        return fail(b, IPUOF_E_INVAL);
    v = grow((void **)arr, n, sizeof(*v));
    if (v == NULL)
        return fail(b, IPUOF_E_NOMEM);
    v->name = sim_strdup(name);
    v->dtype = dtype;
    v->rank = rank;
    for (int i = 0; i < rank; i++)
        v->dims[i] = dims[i];
    return v->name != NULL ? 0 : fail(b, IPUOF_E_NOMEM);
}

int
sim_ob_input(struct sim_ob *b, const char *name, int dtype, int rank, const int64_t *dims)
{
    return add_vi(b, &b->inputs, &b->n_inputs, name, dtype, rank < 0 ? 0 : rank, dims);
}

int
sim_ob_output(struct sim_ob *b, const char *name, int dtype)
{
    return add_vi(b, &b->outputs, &b->n_outputs, name, dtype, -1, NULL);
}

#define DIM_UNKNOWN (-2)

int
sim_ob_output_rank(struct sim_ob *b, const char *name, int dtype, int rank)
{
    int64_t dims[SIM_MAX_RANK];

    if (rank < 0 || rank > SIM_MAX_RANK)
        return fail(b, IPUOF_E_INVAL);
    for (int i = 0; i < rank; i++)
        dims[i] = DIM_UNKNOWN;
    return add_vi(b, &b->outputs, &b->n_outputs, name, dtype, rank, dims);
}

int
sim_ob_initializer(struct sim_ob *b, const char *name, int dtype, int rank,
                   const int64_t *dims, const void *data)
{
    struct ob_tensor *t = grow((void **)&b->inits, &b->n_inits, sizeof(*t));
    int rc;

    if (t == NULL)
        return fail(b, IPUOF_E_NOMEM);
    rc = fill_tensor(t, name, dtype, rank, dims, data);
    return rc != 0 ? fail(b, rc) : 0;
}

/* Splits "a,,b" into an array of strings ("a", "", "b"). */
static int
split(const char *list, char ***out, size_t *n)
{
    const char *p = list;

    *out = NULL;
    *n = 0;
    if (list == NULL || list[0] == '\0')
        return 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        char **slot = grow((void **)out, n, sizeof(char *));
        if (slot == NULL)
            return IPUOF_E_NOMEM;
        *slot = strndup(p, len);
        if (*slot == NULL)
            return IPUOF_E_NOMEM;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

int
sim_ob_node(struct sim_ob *b, const char *op_type, const char *name, const char *inputs,
            const char *outputs)
{
    struct ob_node *n = grow((void **)&b->nodes, &b->n_nodes, sizeof(*n));

    if (n == NULL)
        return fail(b, IPUOF_E_NOMEM);
    n->op = sim_strdup(op_type);
    n->name = sim_strdup(name);
    if (n->op == NULL || n->name == NULL || split(inputs, &n->in, &n->n_in) != 0 ||
        split(outputs, &n->out, &n->n_out) != 0)
        return fail(b, IPUOF_E_NOMEM);
    return 0;
}

static int
copy_names(const char *const *src, size_t n, char ***out, size_t *n_out)
{
    *out = calloc(n + 1, sizeof(char *));
    *n_out = 0;
    if (*out == NULL)
        return IPUOF_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        (*out)[i] = sim_strdup(src[i]);
        if ((*out)[i] == NULL)
            return IPUOF_E_NOMEM;
        *n_out = i + 1;
    }
    return 0;
}

int
sim_ob_node_v(struct sim_ob *b, const char *op_type, const char *name,
              const char *const *inputs, size_t n_in, const char *const *outputs, size_t n_out)
{
    struct ob_node *n = grow((void **)&b->nodes, &b->n_nodes, sizeof(*n));

    if (n == NULL)
        return fail(b, IPUOF_E_NOMEM);
    n->op = sim_strdup(op_type);
    n->name = sim_strdup(name);
    if (n->op == NULL || n->name == NULL || copy_names(inputs, n_in, &n->in, &n->n_in) != 0 ||
        copy_names(outputs, n_out, &n->out, &n->n_out) != 0)
        return fail(b, IPUOF_E_NOMEM);
    return 0;
}

int
sim_ob_node_domain(struct sim_ob *b, const char *domain)
{
    struct ob_node *n;

    if (b->n_nodes == 0)
        return fail(b, IPUOF_E_INVAL);
    n = &b->nodes[b->n_nodes - 1];
    free(n->domain);
    n->domain = sim_strdup(domain);
    return n->domain != NULL ? 0 : fail(b, IPUOF_E_NOMEM);
}

static struct ob_attr *
new_attr(struct sim_ob *b, const char *name, int type)
{
    struct ob_node *n;
    struct ob_attr *a;

    if (b->n_nodes == 0) {
        fail(b, IPUOF_E_INVAL);
        return NULL;
    }
    n = &b->nodes[b->n_nodes - 1];
    a = grow((void **)&n->attrs, &n->n_attrs, sizeof(*a));
    if (a != NULL)
        a->name = sim_strdup(name);
    if (a == NULL || a->name == NULL) {
        fail(b, IPUOF_E_NOMEM);
        return NULL;
    }
    a->type = type;
    return a;
}

int
sim_ob_attr_int(struct sim_ob *b, const char *name, int64_t v)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

    if (a == NULL)
        return b->err;
    a->i = v;
    return 0;
}

int
sim_ob_attr_float(struct sim_ob *b, const char *name, float v)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

    if (a == NULL)
        return b->err;
    a->f = v;
    return 0;
}

int
sim_ob_attr_str(struct sim_ob *b, const char *name, const char *v)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

    if (a == NULL)
        return b->err;
    a->s = sim_strdup(v);
    return a->s != NULL ? 0 : fail(b, IPUOF_E_NOMEM);
}

int
sim_ob_attr_ints(struct sim_ob *b, const char *name, const int64_t *v, size_t n)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

    if (a == NULL)
        return b->err;
    a->ints = malloc((n + 1) * sizeof(*v));
    if (a->ints == NULL)
        return fail(b, IPUOF_E_NOMEM);
    if (n > 0)
        memcpy(a->ints, v, n * sizeof(*v));
    a->n = n;
    return 0;
}

int
sim_ob_attr_floats(struct sim_ob *b, const char *name, const float *v, size_t n)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);

    if (a == NULL)
        return b->err;
    a->floats = malloc((n + 1) * sizeof(*v));
    if (a->floats == NULL)
        return fail(b, IPUOF_E_NOMEM);
    if (n > 0)
        memcpy(a->floats, v, n * sizeof(*v));
    a->n = n;
    return 0;
}

int
sim_ob_attr_tensor(struct sim_ob *b, const char *name, int dtype, int rank,
                   const int64_t *dims, const void *data)
{
    struct ob_attr *a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    int rc;

    if (a == NULL)
        return b->err;
    rc = fill_tensor(&a->t, "", dtype, rank, dims, data);
    return rc != 0 ? fail(b, rc) : 0;
}

int
sim_ob_attr_graph(struct sim_ob *b, const char *name, struct sim_ob *body)
{
    struct ob_attr *a;

    if (body == NULL)
        return fail(b, IPUOF_E_NOMEM);
    a = new_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    if (a == NULL || body->err != 0) {
        if (body->err != 0)
            fail(b, body->err);
        sim_ob_free(body);
        return b->err;
    }
    a->g = body;
    return 0;
}

/* ---- serialization: protobuf-c structs laid over the builder's data ----------------- */

struct tmp {
    void **p;
    size_t n;
};

static void *
tmp_alloc(struct tmp *t, size_t n, size_t sz)
{
    void **slot = grow((void **)&t->p, &t->n, sizeof(void *));

    if (slot == NULL)
        return NULL;
    *slot = calloc(n + 1, sz);
    return *slot;
}

static Onnx__TensorProto *
pb_tensor(struct tmp *t, const struct ob_tensor *src)
{
    Onnx__TensorProto *tp = tmp_alloc(t, 1, sizeof(*tp));

    if (tp == NULL)
        return NULL;
    onnx__tensor_proto__init(tp);
    tp->name = src->name;
    tp->n_dims = (size_t)src->rank;
    tp->dims = (int64_t *)src->dims;
    tp->has_data_type = 1;
    tp->data_type = src->dtype;
    tp->has_raw_data = 1;
    tp->raw_data.len = src->bytes;
    tp->raw_data.data = src->data;
    return tp;
}

static Onnx__ValueInfoProto *
pb_vi(struct tmp *t, const struct ob_vi *v)
{
    Onnx__ValueInfoProto *vi = tmp_alloc(t, 1, sizeof(*vi));
    Onnx__TypeProto *tp = tmp_alloc(t, 1, sizeof(*tp));
    Onnx__TypeProto__Tensor *tt = tmp_alloc(t, 1, sizeof(*tt));
    Onnx__TensorShapeProto *sh = tmp_alloc(t, 1, sizeof(*sh));
    Onnx__TensorShapeProto__Dimension **dims = tmp_alloc(t, SIM_MAX_RANK, sizeof(*dims));

    if (vi == NULL || tp == NULL || tt == NULL || sh == NULL || dims == NULL)
        return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    vi->name = v->name;
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = v->dtype != 0;
    tt->elem_type = v->dtype;
    if (v->rank < 0)
        return vi;
    tt->shape = sh;
    sh->n_dim = (size_t)v->rank;
    sh->dim = dims;
    for (int i = 0; i < v->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = tmp_alloc(t, 1, sizeof(*d));
        if (d == NULL)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (v->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v->dims[i];
        } else if (v->dims[i] == DIM_UNKNOWN) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)"N";
        }
        dims[i] = d;
    }
    return vi;
}

static int pb_graph(struct tmp *t, const struct sim_ob *b, const char *name,
                    Onnx__GraphProto *g);

static Onnx__NodeProto *
pb_node(struct tmp *t, const struct ob_node *n)
{
    Onnx__NodeProto *np = tmp_alloc(t, 1, sizeof(*np));
    Onnx__AttributeProto **attrs = tmp_alloc(t, n->n_attrs, sizeof(*attrs));

    if (np == NULL || attrs == NULL)
        return NULL;
    onnx__node_proto__init(np);
    np->op_type = n->op;
    np->name = n->name;
    np->domain = n->domain;
    np->n_input = n->n_in;
    np->input = n->in;
    np->n_output = n->n_out;
    np->output = n->out;
    np->n_attribute = n->n_attrs;
    np->attribute = attrs;
    for (size_t i = 0; i < n->n_attrs; i++) {
        const struct ob_attr *a = &n->attrs[i];
        Onnx__AttributeProto *ap = tmp_alloc(t, 1, sizeof(*ap));
        if (ap == NULL)
            return NULL;
        onnx__attribute_proto__init(ap);
        ap->name = a->name;
        ap->has_type = 1;
        ap->type = a->type;
        switch (a->type) {
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
            ap->has_i = 1;
            ap->i = a->i;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
            ap->has_f = 1;
            ap->f = a->f;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
            ap->has_s = 1;
            ap->s.len = strlen(a->s);
            ap->s.data = (uint8_t *)a->s;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
            ap->n_ints = a->n;
            ap->ints = a->ints;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
            ap->n_floats = a->n;
            ap->floats = a->floats;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
            ap->t = pb_tensor(t, &a->t);
            if (ap->t == NULL)
                return NULL;
            break;
        case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
            ap->g = tmp_alloc(t, 1, sizeof(*ap->g));
            if (ap->g == NULL || pb_graph(t, a->g, a->name, ap->g) != 0)
                return NULL;
            break;
        default:
            break;
        }
        attrs[i] = ap;
    }
    return np;
}

/* The opset imports: ai.onnx, then version 1 of each custom domain the nodes use. */
static Onnx__OperatorSetIdProto **
opset_imports(struct sim_ob *b, struct tmp *t, size_t *n)
{
    Onnx__OperatorSetIdProto **v = tmp_alloc(t, b->n_nodes + 1, sizeof(*v));

    *n = 0;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i <= b->n_nodes; i++) {
        const char *d = i == 0 ? "" : b->nodes[i - 1].domain;
        Onnx__OperatorSetIdProto *os;
        bool seen = false;
        if (i > 0 && (d == NULL || d[0] == '\0' || strcmp(d, "ai.onnx") == 0))
            continue;
        for (size_t j = 1; j < *n; j++)
            seen = seen || strcmp(v[j]->domain, d) == 0;
        if (seen)
            continue;
        os = tmp_alloc(t, 1, sizeof(*os));
        if (os == NULL)
            return NULL;
        onnx__operator_set_id_proto__init(os);
        os->domain = (char *)d;
        os->has_version = 1;
        os->version = i == 0 ? b->opset : 1;
        v[(*n)++] = os;
    }
    return v;
}

/* Lays g over b's nodes, initializers, inputs and outputs (g is initialized here); the
 * structs are t's. 0 or IPUOF_E_NOMEM. */
static int
pb_graph(struct tmp *t, const struct sim_ob *b, const char *name, Onnx__GraphProto *g)
{
    onnx__graph_proto__init(g);
    g->name = (char *)name;
    g->node = tmp_alloc(t, b->n_nodes, sizeof(*g->node));
    g->initializer = tmp_alloc(t, b->n_inits, sizeof(*g->initializer));
    g->input = tmp_alloc(t, b->n_inputs, sizeof(*g->input));
    g->output = tmp_alloc(t, b->n_outputs, sizeof(*g->output));
    if (g->node == NULL || g->initializer == NULL || g->input == NULL || g->output == NULL)
        return IPUOF_E_NOMEM;
    for (size_t i = 0; i < b->n_nodes; i++) {
        g->node[g->n_node] = pb_node(t, &b->nodes[i]);
        if (g->node[g->n_node++] == NULL)
            return IPUOF_E_NOMEM;
    }
    for (size_t i = 0; i < b->n_inits; i++) {
        g->initializer[g->n_initializer] = pb_tensor(t, &b->inits[i]);
        if (g->initializer[g->n_initializer++] == NULL)
            return IPUOF_E_NOMEM;
    }
    for (size_t i = 0; i < b->n_inputs; i++) {
        g->input[g->n_input] = pb_vi(t, &b->inputs[i]);
        if (g->input[g->n_input++] == NULL)
            return IPUOF_E_NOMEM;
    }
    for (size_t i = 0; i < b->n_outputs; i++) {
        g->output[g->n_output] = pb_vi(t, &b->outputs[i]);
        if (g->output[g->n_output++] == NULL)
            return IPUOF_E_NOMEM;
    }
    return 0;
}

int
sim_ob_serialize(struct sim_ob *b, void **out, size_t *len)
{
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g;
    Onnx__StringStringEntryProto kv[OB_MAX_META], *kvp[OB_MAX_META];
    struct tmp t = { 0 };
    int rc = 0;

    for (size_t i = 0; i < b->n_meta; i++) {
        onnx__string_string_entry_proto__init(&kv[i]);
        kv[i].key = b->meta[i][0];
        kv[i].value = b->meta[i][1];
        kvp[i] = &kv[i];
    }
    mp.n_metadata_props = b->n_meta;
    mp.metadata_props = b->n_meta > 0 ? kvp : NULL;
    *out = NULL;
    *len = 0;
    if (b->err != 0)
        return IPUOF_E_INVAL;
    mp.has_ir_version = 1;
    mp.ir_version = b->ir_version;
    mp.producer_name = (char *)"ipuofd-sim";
    mp.opset_import = opset_imports(b, &t, &mp.n_opset_import);
    mp.graph = &g;
    rc = IPUOF_E_NOMEM;
    /* rc stays IPUOF_E_NOMEM until the pack below succeeds */
    if (mp.opset_import == NULL || pb_graph(&t, b, "graph", &g) != 0)
        goto done;
    *len = onnx__model_proto__get_packed_size(&mp);
    *out = malloc(*len + 1);
    if (*out == NULL) {
        *len = 0;
        goto done;
    }
    onnx__model_proto__pack(&mp, *out);
    rc = 0;
done:
    for (size_t i = 0; i < t.n; i++)
        free(t.p[i]);
    free(t.p);
    return rc;
}
