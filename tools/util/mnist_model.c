/*
 * mnist_model.c — the tutorial's MNIST network as ONNX bytes (see mnist_model.h): fixed
 * tables describe the parameters, the nodes and their attributes; one allocation holds
 * every protobuf-c struct of the ModelProto and the weights, which is packed and freed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mnist_model.h"
#include "onnx.pb-c.h"

#define OPSET 13
#define IR_VERSION 7
#define N_PARAMS 8
#define N_NODES 11
#define MAX_NODE_IN 3
#define MAX_ATTRS 5
#define N_VALUES 4 /* graph inputs and outputs */
#define MAX_RANK 4

/* One parameter: name, shape and fan_in (the bound is 1 / sqrt(fan_in)). */
struct param {
    const char *name;
    int rank;
    int64_t dims[MAX_RANK];
    size_t numel;
    int fan_in;
};

static const struct param params[N_PARAMS] = {
    {"layer1.conv.weight", 4, {10, 1, 5, 5}, 250, 25},
    {"layer1.conv.bias", 1, {10}, 10, 25},
    {"layer2.conv.weight", 4, {20, 10, 5, 5}, 5000, 250},
    {"layer2.conv.bias", 1, {20}, 20, 250},
    {"layer3.weight", 2, {256, 320}, 81920, 320},
    {"layer3.bias", 1, {256}, 256, 320},
    {"layer4.weight", 2, {10, 256}, 2560, 256},
    {"layer4.bias", 1, {10}, 10, 256},
};

/* One attribute: an int, a float, a string or a list of ints (by type). */
struct attr {
    const char *name;
    Onnx__AttributeProto__AttributeType type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    size_t n_ints;
};

struct node {
    const char *op;
    const char *name;
    const char *in[MAX_NODE_IN];
    size_t n_in;
    const char *out;
    struct attr attrs[MAX_ATTRS];
    size_t n_attrs;
};

static const int64_t k5[] = {5, 5}, ones[] = {1, 1}, zeros[] = {0, 0, 0, 0}, k2[] = {2, 2};

#define A_INT(n, v) {n, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, v, 0, NULL, NULL, 0}
#define A_FLOAT(n, v) {n, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, 0, v, NULL, NULL, 0}
#define A_STR(n, v) {n, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, 0, 0, v, NULL, 0}
#define A_INTS(n, v) {n, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, 0, 0, NULL, v, \
                      sizeof v / sizeof v[0]}
#define CONV_ATTRS {A_INTS("dilations", ones), A_INT("group", 1), A_INTS("kernel_shape", k5), \
                    A_INTS("pads", zeros), A_INTS("strides", ones)}, 5
#define POOL_ATTRS {A_INT("ceil_mode", 0), A_INTS("kernel_shape", k2), A_INTS("pads", zeros), \
                    A_INTS("strides", k2)}, 4
#define GEMM_ATTRS {A_FLOAT("alpha", 1.0f), A_FLOAT("beta", 1.0f), A_INT("transB", 1)}, 3

static const struct node nodes[N_NODES] = {
    {"Conv", "/model/layer1/conv/Conv",
     {MNIST_INPUT_IMAGE, "layer1.conv.weight", "layer1.conv.bias"}, 3, "layer1/conv_out",
     CONV_ATTRS},
    {"MaxPool", "/model/layer1/pool/MaxPool", {"layer1/conv_out"}, 1, "layer1/pool_out",
     POOL_ATTRS},
    {"Relu", "/model/layer1/relu/Relu", {"layer1/pool_out"}, 1, "layer1/out", {{0}}, 0},
    {"Conv", "/model/layer2/conv/Conv", {"layer1/out", "layer2.conv.weight", "layer2.conv.bias"},
     3, "layer2/conv_out", CONV_ATTRS},
    {"MaxPool", "/model/layer2/pool/MaxPool", {"layer2/conv_out"}, 1, "layer2/pool_out",
     POOL_ATTRS},
    {"Relu", "/model/layer2/relu/Relu", {"layer2/pool_out"}, 1, "layer2/out", {{0}}, 0},
    {"Flatten", "/model/Flatten", {"layer2/out"}, 1, "flat", {A_INT("axis", 1)}, 1},
    {"Gemm", "/model/layer3/Gemm", {"flat", "layer3.weight", "layer3.bias"}, 3, "layer3/out",
     GEMM_ATTRS},
    {"Relu", "/model/layer3_act/Relu", {"layer3/out"}, 1, "layer3/act", {{0}}, 0},
    {"Gemm", "/model/layer4/Gemm", {"layer3/act", "layer4.weight", "layer4.bias"}, 3,
     MNIST_OUTPUT_LOGITS, GEMM_ATTRS},
    {"SoftmaxCrossEntropyLoss", "/loss/SoftmaxCrossEntropyLoss",
     {MNIST_OUTPUT_LOGITS, MNIST_INPUT_LABELS}, 2, MNIST_OUTPUT_LOSS,
     {A_STR("reduction", "mean")}, 1},
};

const char *const mnist_block_prefix[MNIST_BLOCKS] = {"/model/layer1/", "/model/layer2/",
                                                      "/model/layer3", "/model/layer4/"};

/* Graph inputs and outputs: name, element type, shape (-1: the symbolic "batch"). */
struct value {
    const char *name;
    int elem_type;
    int rank;
    int64_t dims[MAX_RANK];
};

static const struct value values[N_VALUES] = {
    {MNIST_INPUT_IMAGE, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, {-1, 1, 28, 28}},
    {MNIST_INPUT_LABELS, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, {-1}},
    {MNIST_OUTPUT_LOGITS, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, {-1, MNIST_CLASSES}},
    {MNIST_OUTPUT_LOSS, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, {0}},
};

/* Every struct of the ModelProto; pointers between them point inside this allocation or at
 * the const tables above. */
struct build {
    Onnx__ModelProto model;
    Onnx__OperatorSetIdProto opset, *opset_p;
    Onnx__GraphProto graph;
    Onnx__NodeProto node[N_NODES], *node_p[N_NODES];
    char *node_in[N_NODES][MAX_NODE_IN], *node_out[N_NODES];
    Onnx__AttributeProto attr[N_NODES][MAX_ATTRS], *attr_p[N_NODES][MAX_ATTRS];
    Onnx__TensorProto init[N_PARAMS], *init_p[N_PARAMS];
    Onnx__ValueInfoProto vi[N_VALUES], *vi_p[N_VALUES];
    Onnx__TypeProto type[N_VALUES];
    Onnx__TypeProto__Tensor tensor_type[N_VALUES];
    Onnx__TensorShapeProto shape[N_VALUES];
    Onnx__TensorShapeProto__Dimension dim[N_VALUES][MAX_RANK], *dim_p[N_VALUES][MAX_RANK];
    float *weights;                  /* owned: every parameter, in order */
};

uint64_t
mnist_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void
mnist_fake_data(uint64_t *state, bool images, void *dst, size_t bytes)
{
    if (images) {
        float *x = dst;
        for (size_t k = 0; k < bytes / 4; k++)
            x[k] = (float)(mnist_splitmix64(state) >> 40) / (float)(1 << 24);
    } else {
        int64_t *y = dst;
        for (size_t k = 0; k < bytes / 8; k++)
            y[k] = (int64_t)(mnist_splitmix64(state) % 10);
    }
}

void
mnist_uniform(uint64_t *state, float *dst, size_t n, float bound)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mnist_splitmix64(state) >> 40) * (1.0 / 16777216.0);

        dst[i] = (float)((2.0 * u - 1.0) * bound);
    }
}

/* Fills attribute a from its table entry s (only read; strings and lists stay borrowed). */
static void
set_attr(Onnx__AttributeProto *a, const struct attr *s)
{
    onnx__attribute_proto__init(a);
    a->name = (char *)s->name;
    a->has_type = 1;
    a->type = s->type;
    switch (s->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->has_i = 1;
        a->i = s->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->has_f = 1;
        a->f = s->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->has_s = 1;
        a->s.data = (uint8_t *)s->s;
        a->s.len = strlen(s->s);
        break;
    default:
        a->n_ints = s->n_ints;
        a->ints = (int64_t *)s->ints;
        break;
    }
}

/* Fills node k of b from the table. */
static void
set_node(struct build *b, size_t k)
{
    const struct node *s = &nodes[k];
    Onnx__NodeProto *n = &b->node[k];

    onnx__node_proto__init(n);
    n->op_type = (char *)s->op;
    n->name = (char *)s->name;
    for (size_t i = 0; i < s->n_in; i++)
        b->node_in[k][i] = (char *)s->in[i];
    n->n_input = s->n_in;
    n->input = b->node_in[k];
    b->node_out[k] = (char *)s->out;
    n->n_output = 1;
    n->output = &b->node_out[k];
    for (size_t i = 0; i < s->n_attrs; i++) {
        set_attr(&b->attr[k][i], &s->attrs[i]);
        b->attr_p[k][i] = &b->attr[k][i];
    }
    n->n_attribute = s->n_attrs;
    n->attribute = b->attr_p[k];
    b->node_p[k] = n;
}

/* Fills graph input or output v of b from the table. */
static void
set_value(struct build *b, size_t v)
{
    const struct value *s = &values[v];

    onnx__value_info_proto__init(&b->vi[v]);
    onnx__type_proto__init(&b->type[v]);
    onnx__type_proto__tensor__init(&b->tensor_type[v]);
    onnx__tensor_shape_proto__init(&b->shape[v]);
    for (int d = 0; d < s->rank; d++) {
        Onnx__TensorShapeProto__Dimension *dim = &b->dim[v][d];

        onnx__tensor_shape_proto__dimension__init(dim);
        if (s->dims[d] < 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = (char *)"batch";
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = s->dims[d];
        }
        b->dim_p[v][d] = dim;
    }
    b->shape[v].n_dim = (size_t)s->rank;
    b->shape[v].dim = b->dim_p[v];
    b->tensor_type[v].has_elem_type = 1;
    b->tensor_type[v].elem_type = s->elem_type;
    b->tensor_type[v].shape = &b->shape[v];
    b->type[v].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->type[v].tensor_type = &b->tensor_type[v];
    b->vi[v].name = (char *)s->name;
    b->vi[v].type = &b->type[v];
    b->vi_p[v] = &b->vi[v];
}

/* Draws the parameters from seed into b->weights and makes them the initializers. */
static void
set_params(struct build *b, uint64_t seed)
{
    uint64_t state = seed;
    float *w = b->weights;

    for (size_t p = 0; p < N_PARAMS; p++) {
        Onnx__TensorProto *t = &b->init[p];

        mnist_uniform(&state, w, params[p].numel, (float)(1.0 / sqrt(params[p].fan_in)));
        onnx__tensor_proto__init(t);
        t->name = (char *)params[p].name;
        t->n_dims = (size_t)params[p].rank;
        t->dims = (int64_t *)params[p].dims;
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)w;
        t->raw_data.len = params[p].numel * sizeof *w;
        b->init_p[p] = t;
        w += params[p].numel;
    }
}

int
mnist_model_build(uint64_t seed, void **out, size_t *len)
{
    struct build *b = calloc(1, sizeof *b);
    size_t numel = 0;
    uint8_t *buf = NULL;
    int rc = -1;

    *out = NULL;
    *len = 0;
    for (size_t p = 0; p < N_PARAMS; p++)
        numel += params[p].numel;
    if (b == NULL || (b->weights = malloc(numel * sizeof *b->weights)) == NULL)
        goto out;
    set_params(b, seed);
    for (size_t k = 0; k < N_NODES; k++)
        set_node(b, k);
    for (size_t v = 0; v < N_VALUES; v++)
        set_value(b, v);
    onnx__graph_proto__init(&b->graph);
    b->graph.name = (char *)"mnist";
    b->graph.n_node = N_NODES;
    b->graph.node = b->node_p;
    b->graph.n_initializer = N_PARAMS;
    b->graph.initializer = b->init_p;
    b->graph.n_input = 2;
    b->graph.input = b->vi_p;
    b->graph.n_output = 2;
    b->graph.output = b->vi_p + 2;
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = (char *)"";
    b->opset.has_version = 1;
    b->opset.version = OPSET;
    b->opset_p = &b->opset;
    onnx__model_proto__init(&b->model);
    b->model.has_ir_version = 1;
    b->model.ir_version = IR_VERSION;
    b->model.producer_name = (char *)"ipuof-mnist";
    b->model.n_opset_import = 1;
    b->model.opset_import = &b->opset_p;
    b->model.graph = &b->graph;
    *len = onnx__model_proto__get_packed_size(&b->model);
    buf = malloc(*len);
    if (buf == NULL) {
        *len = 0;
        goto out;
    }
    onnx__model_proto__pack(&b->model, buf);
    *out = buf;
    rc = 0;
out:
    if (b != NULL)
        free(b->weights);
    free(b);
    return rc;
}
