/*
 * model.h — the imported model: sim's own IR of an ONNX graph, built by onnx_load.c and
 * read by the compiler. No protobuf types appear here.
 *
 * A model is immutable once loaded. Values (named tensors) and nodes are arrays indexed by
 * int; node inputs and outputs refer to values by index (-1: an omitted optional input).
 * Nodes are stored in topological order.
 */
#ifndef SIM_MODEL_H
#define SIM_MODEL_H

#include "sim_int.h"

/* Attribute types, numbered as ONNX's AttributeProto.AttributeType. */
enum sim_attr_type {
    SIM_ATTR_FLOAT = 1,
    SIM_ATTR_INT = 2,
    SIM_ATTR_STRING = 3,
    SIM_ATTR_TENSOR = 4,
    SIM_ATTR_GRAPH = 5,
    SIM_ATTR_FLOATS = 6,
    SIM_ATTR_INTS = 7,
    SIM_ATTR_STRINGS = 8
};

/* A host tensor with its own storage (initializers, tensor attributes, frozen inputs). */
struct sim_const {
    int dtype;
    struct sim_shape shape;
    int64_t numel;
    size_t bytes;
    void *data;                 /* SIM_ALIGN-aligned, at least 1 byte */
    bool view;                  /* data points into the model's weights buffer */
};

/* Frees c and its data unless the data is a view (NULL is a no-op). */
void sim_const_free(struct sim_const *c);

struct sim_attr {
    char *name;
    int type;                   /* enum sim_attr_type; other ONNX types are kept as 0 */
    float f;
    int64_t i;
    char *s;                    /* SIM_ATTR_STRING, NUL-terminated */
    size_t n;                   /* element count of floats / ints */
    float *floats;
    int64_t *ints;
    struct sim_const *t;        /* SIM_ATTR_TENSOR */
};

enum sim_mval_kind {
    SIM_MV_INPUT = 1,           /* a graph input fed at run time */
    SIM_MV_INIT = 2,            /* an initializer (weight / constant) */
    SIM_MV_NODE = 3             /* produced by a node */
};

struct sim_mval {
    char *name;
    int kind;                   /* enum sim_mval_kind */
    int dtype;                  /* declared elem type, 0 when unknown */
    int rank;                   /* declared rank, -1 when unknown */
    int64_t dims[SIM_MAX_RANK]; /* declared dims, -1 when symbolic or unknown */
    char *dim0_param;           /* inputs: the dim_param of dim 0, or NULL */
    struct sim_const *init;     /* SIM_MV_INIT: the data */
    int producer;               /* SIM_MV_NODE: node index */
};

struct sim_mnode {
    char *name;                 /* may be "" */
    char *op_type;
    char *domain;               /* "" for ai.onnx */
    int n_in, n_out;
    int *in;                    /* value indices, -1 for an omitted optional input */
    int *out;                   /* value indices, -1 for an omitted optional output */
    int n_attr;
    struct sim_attr *attr;
    int ipu;                    /* __ipu_number, 0 when absent */
    int stage;                  /* __pipeline_stage, -1 when absent */
    int guard;                  /* a node of an If's branch (onnx_ctrl.c): 1 + the value
                                 * index of the If's condition (__if_guard); 0: none */
    bool guard_then;            /* __if_side: the node runs when the condition is true */
};

/* PopART's RecomputationType (PopTorch's autoRecomputation values), recompute.c. */
enum sim_recompute {
    SIM_RECOMPUTE_UNSET = -1,   /* PopTorch's default: PIPELINE for pipelined training over
                                 * more than one IPU, else NONE */
    SIM_RECOMPUTE_NONE = 0,
    SIM_RECOMPUTE_STANDARD = 1, /* checkpoints every ~sqrt(n) nodes of each stage */
    SIM_RECOMPUTE_NORMONLY = 2, /* norms and the activation that follows each */
    SIM_RECOMPUTE_PIPELINE = 3, /* every forward stage but the last (pipelined) */
    SIM_RECOMPUTE_ALL = 4       /* every node but checkpoints */
};

struct sim_model {
    int64_t opset;              /* ai.onnx opset */
    void *weights;              /* every initializer's data, in graph order, each at a
                                 * SIM_ALIGN boundary: one flat buffer an optimizer can
                                 * walk (initializer consts are views into it) */
    size_t weights_bytes;
    int64_t ir_version;
    int n_vals;
    struct sim_mval *vals;
    int n_nodes;
    struct sim_mnode *nodes;    /* topological order */
    int n_in;
    int *inputs;                /* value indices of runtime graph inputs */
    unsigned char *in_needs_const;
    int n_out;
    int *outputs;
    /* The model's metadata_props "ipuof.stochastic_rounding" = "1" (PopTorch's
     * Precision.enableStochasticRounding): float16 results round stochastically. */
    bool stochastic_rounding;
    /* metadata_props "ipuof.partials_type" = "half" (Precision.setPartialsType(torch.half)):
     * float16 MatMul and Gemm accumulate in float16 (half_partials.c). */
    bool partials_half;
    /* metadata_props "ipuof.recomputation" = "0".."4" (PopART's RecomputationType, PopTorch's
     * _Popart.set("autoRecomputation", N)): enum sim_recompute; SIM_RECOMPUTE_UNSET when
     * absent (recompute.c picks PopTorch's default). */
    int recompute;
    /* metadata_props "ipuof.available_memory_proportion" = "p" or "p0,p1,...": the
     * proportion of each IPU's memory a convolution's or matmul's temporaries may take
     * (PopTorch's setAvailableMemoryProportion; one value: every IPU); 0 when absent. */
    float mem_prop[SIM_MAX_IPUS];
    /* metadata_props "ipuof.io_tiles" (PopTorch's TensorLocations.numIOTiles): tiles kept
     * for I/O, whose memory is not for compute. */
    unsigned io_tiles;
};

/* recompute.c: reads the memory options of a metadata_props entry (ipuof.recomputation,
 * ipuof.available_memory_proportion, ipuof.io_tiles; other keys are left alone) into m.
 * IPUOF_E_INVAL with what was wrong and what is accepted for a bad value, else 0. */
int sim_memory_meta(struct sim_model *m, const char *key, const char *value,
                    struct sim_err *err);

/* Attribute lookup; NULL when absent. */
const struct sim_attr *sim_attr_find(const struct sim_mnode *n, const char *name);

/* Writes a label such as "node 3 'conv1' (Conv)" for messages. */
char *sim_node_label(const struct sim_model *m, int node, char *buf, size_t n);

/* Fills m->in_needs_const by walking back from every op's shape operands (ops.c knows
 * which operands those are). Returns false when out of memory. */
bool sim_model_mark_const_inputs(struct sim_model *m);

#endif /* SIM_MODEL_H */
