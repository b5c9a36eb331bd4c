/*
 * gradcases_shape.c — gradient-check cases of tests/unit/test_sim_train_grad.c: the ops that
 * move, pick or copy elements (Reshape, Flatten, Transpose, Concat, Squeeze, Unsqueeze,
 * Gather, Slice, Pad, Split, the scatters, Expand, Tile, DepthToSpace, SpaceToDepth, Trilu,
 * CumSum, TopK, OneHot).
 * Each builder adds nodes computing "y" from weights declared with gc_param (gradcases.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "gradcases.h"
#include "onnx_build.h"

static void
g_reshape(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_ints(b, "shape", 1, DIMS(2), DIMS(4, -1));
    sim_ob_node(b, "Reshape", "n", "x,shape", "y");
}

static void
g_flatten(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "Flatten", "n", "x", "y");
    sim_ob_attr_int(b, "axis", 2);
}

static void
g_transpose(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "Transpose", "n", "x", "y");
    sim_ob_attr_ints(b, "perm", DIMS(2, 0, 1), 3);
}

static void
g_concat(struct sim_ob *b)
{
    gc_param(b, "a", 3, DIMS(2, 1, 3), D_ANY);
    gc_param(b, "b", 3, DIMS(2, 2, 3), D_ANY);
    sim_ob_node(b, "Concat", "n", "a,b,a", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_squeeze(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(3, 1, 4), D_ANY);
    gc_ints(b, "axes", 1, DIMS(1), DIMS(1));
    sim_ob_node(b, "Squeeze", "n", "x,axes", "y");
}

static void
g_unsqueeze(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 4), D_ANY);
    gc_ints(b, "axes", 1, DIMS(2), DIMS(0, 2));
    sim_ob_node(b, "Unsqueeze", "n", "x,axes", "y");
}

static void
g_gather(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 5, 3), D_ANY);
    gc_ints(b, "idx", 2, DIMS(2, 2), DIMS(4, -1, 0, 4));
    sim_ob_node(b, "Gather", "n", "x,idx", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_slice(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(3, 6, 5), D_ANY);
    gc_ints(b, "starts", 1, DIMS(2), DIMS(5, 1));
    gc_ints(b, "ends", 1, DIMS(2), DIMS(0, 5));
    gc_ints(b, "axes", 1, DIMS(2), DIMS(1, 2));
    gc_ints(b, "steps", 1, DIMS(2), DIMS(-2, 2));
    sim_ob_node(b, "Slice", "n", "x,starts,ends,axes,steps", "y");
}

static void
b_pad(struct sim_ob *b, const char *mode)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_ints(b, "pads", 1, DIMS(6), DIMS(0, 2, 1, 1, 1, 3));
    sim_ob_node(b, "Pad", "n", "x,pads", "y");
    sim_ob_attr_str(b, "mode", mode);
}

static void g_pad_constant(struct sim_ob *b) { b_pad(b, "constant"); }

static void g_pad_reflect(struct sim_ob *b) { b_pad(b, "reflect"); }

static void g_pad_edge(struct sim_ob *b) { b_pad(b, "edge"); }

static void
g_pad_crop(struct sim_ob *b)
{
    const float v = 0.3f;

    gc_param(b, "x", 2, DIMS(4, 5), D_ANY);
    gc_ints(b, "pads", 1, DIMS(4), DIMS(-1, 2, 1, -2));
    sim_ob_initializer(b, "v", F32, 0, NULL, &v);
    sim_ob_node(b, "Pad", "n", "x,pads,v", "y");
}

static void
g_split(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 6, 3), D_ANY);
    gc_ints(b, "sizes", 1, DIMS(3), DIMS(1, 3, 2));
    sim_ob_node(b, "Split", "n", "x,sizes", "p0,p1,p2");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_node(b, "Concat", "cat", "p2,p0,p1", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_split_unused(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(4, 6), D_ANY);
    sim_ob_node(b, "Split", "n", "x", "y,rest");
    sim_ob_attr_int(b, "axis", -1);
}

static void
b_scatternd(struct sim_ob *b, const char *reduction)
{
    gc_param(b, "data", 3, DIMS(4, 3, 2), D_ANY);
    gc_ints(b, "idx", 2, DIMS(2, 1), DIMS(2, -4));
    gc_param(b, "upd", 3, DIMS(2, 3, 2), D_ANY);
    sim_ob_node(b, "ScatterND", "n", "data,idx,upd", "y");
    sim_ob_attr_str(b, "reduction", reduction);
}

static void g_scatternd(struct sim_ob *b) { b_scatternd(b, "none"); }

static void g_scatternd_add(struct sim_ob *b) { b_scatternd(b, "add"); }

static void
b_scatter_el(struct sim_ob *b, int v) /* axis 1 of (3, 4): none, add (duplicates), Scatter */
{
    static const int64_t idx[3][6] = {
        {1, -1, 0, 3, 0, 2}, {1, 1, 0, 3, 3, -1}, {2, 0, 1, 1, 3, 0}};
    gc_param(b, "data", 2, DIMS(3, 4), D_ANY);
    gc_ints(b, "idx", 2, DIMS(2, 3), idx[v]);
    gc_param(b, "upd", 2, DIMS(2, 3), D_ANY);
    sim_ob_node(b, v == 2 ? "Scatter" : "ScatterElements", "n", "data,idx,upd", "y");
    sim_ob_attr_int(b, "axis", 1);
    if (v < 2)
        sim_ob_attr_str(b, "reduction", v == 1 ? "add" : "none");
}

static void g_scel(struct sim_ob *b) { b_scatter_el(b, 0); }

static void g_scel_add(struct sim_ob *b) { b_scatter_el(b, 1); }

static void g_scatter(struct sim_ob *b) { b_scatter_el(b, 2); }

static void
g_expand(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 1), D_ANY);
    gc_ints(b, "shape", 1, DIMS(3), DIMS(2, 1, 4));
    sim_ob_node(b, "Expand", "n", "x,shape", "y");
}

static void
g_tile(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 1, 3), D_ANY);
    gc_ints(b, "rep", 1, DIMS(3), DIMS(2, 3, 2));
    sim_ob_node(b, "Tile", "n", "x,rep", "y");
}

static void
g_d2s(struct sim_ob *b, const char *mode)
{
    gc_param(b, "x", 4, DIMS(2, 8, 2, 3), D_ANY);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
    sim_ob_attr_str(b, "mode", mode);
}

static void g_d2s_dcr(struct sim_ob *b) { g_d2s(b, "DCR"); }

static void g_d2s_crd(struct sim_ob *b) { g_d2s(b, "CRD"); }

static void
g_s2d(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(1, 2, 4, 6), D_ANY);
    sim_ob_node(b, "SpaceToDepth", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
}

static void
g_triu(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_ints(b, "k", 0, NULL, DIMS(1));
    sim_ob_node(b, "Trilu", "n", "x,k", "y");
}

static void
g_tril(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(4, 3), D_ANY);
    gc_ints(b, "k", 0, NULL, DIMS(-1));
    sim_ob_node(b, "Trilu", "n", "x,k", "y");
    sim_ob_attr_int(b, "upper", 0);
}

static void
g_cumsum(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    gc_ints(b, "axis", 0, NULL, DIMS(1));
    sim_ob_node(b, "CumSum", "n", "x,axis", "y");
}

static void
g_cumsum_rev(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(5, 3), D_ANY);
    gc_ints(b, "axis", 1, DIMS(1), DIMS(-2));
    sim_ob_node(b, "CumSum", "n", "x,axis", "y");
    sim_ob_attr_int(b, "exclusive", 1);
    sim_ob_attr_int(b, "reverse", 1);
}

/* distinct values 0.05 apart, so eps never changes which are the top k */
static void
g_topk(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 5), D_DISTINCT);
    gc_ints(b, "k", 1, DIMS(1), DIMS(3));
    sim_ob_node(b, "TopK", "n", "x,k", "y,idx");
}

static void
g_topk_smallest(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(4, 2, 3), D_DISTINCT);
    gc_ints(b, "k", 1, DIMS(1), DIMS(2));
    sim_ob_node(b, "TopK", "n", "x,k", "y,idx");
    sim_ob_attr_int(b, "axis", 0);
    sim_ob_attr_int(b, "largest", 0);
}

/* OneHot's values [off, on] as weights; indices repeated, negative and out of range */
static void
g_onehot(struct sim_ob *b)
{
    gc_param(b, "v", 1, DIMS(2), D_ANY);
    gc_ints(b, "idx", 2, DIMS(2, 3), DIMS(0, 3, -1, 3, 5, -5));
    gc_ints(b, "depth", 1, DIMS(1), DIMS(4));
    sim_ob_node(b, "OneHot", "n", "idx,depth,v", "y");
    sim_ob_attr_int(b, "axis", 1);
}

const struct gcase gradcases_shape[] = {
    { "Reshape", "", g_reshape, 1e-2f, 1e-3f },
    { "Flatten", "axis 2", g_flatten, 1e-2f, 1e-3f },
    { "Transpose", "perm (2, 0, 1)", g_transpose, 1e-2f, 1e-3f },
    { "Concat", "an input used twice", g_concat, 1e-2f, 1e-3f },
    { "Squeeze", "", g_squeeze, 1e-2f, 1e-3f },
    { "Unsqueeze", "", g_unsqueeze, 1e-2f, 1e-3f },
    { "Gather", "repeated and negative indices", g_gather, 1e-2f, 1e-3f },
    { "Slice", "negative step and step 2", g_slice, 1e-2f, 1e-3f },
    { "Pad", "constant", g_pad_constant, 1e-2f, 1e-3f },
    { "Pad", "reflect", g_pad_reflect, 1e-2f, 1e-3f },
    { "Pad", "edge", g_pad_edge, 1e-2f, 1e-3f },
    { "Pad", "negative pads crop, constant_value input", g_pad_crop, 1e-2f, 1e-3f },
    { "Split", "sizes input, outputs concatenated out of order", g_split, 1e-2f, 1e-3f },
    { "Split", "equal parts, one output unused", g_split_unused, 1e-2f, 1e-3f },
    { "ScatterND", "reduction none, negative index", g_scatternd, 1e-2f, 1e-3f },
    { "ScatterND", "reduction add", g_scatternd_add, 1e-2f, 1e-3f },
    { "ScatterElements", "reduction none, negative index", g_scel, 1e-2f, 1e-3f },
    { "ScatterElements", "reduction add, duplicate indices", g_scel_add, 1e-2f, 1e-3f },
    { "Scatter", "opset 9's name, axis 1", g_scatter, 1e-2f, 1e-3f },
    { "Expand", "(3, 1) to (2, 3, 4)", g_expand, 1e-2f, 1e-3f },
    { "Tile", "repeats (2, 3, 2)", g_tile, 1e-2f, 1e-3f },
    { "DepthToSpace", "DCR, blocksize 2", g_d2s_dcr, 1e-2f, 1e-3f },
    { "DepthToSpace", "CRD, blocksize 2", g_d2s_crd, 1e-2f, 1e-3f },
    { "SpaceToDepth", "blocksize 2", g_s2d, 1e-2f, 1e-3f },
    { "Trilu", "upper, k 1, batch of 2", g_triu, 1e-2f, 1e-3f },
    { "Trilu", "lower, k -1", g_tril, 1e-2f, 1e-3f },
    { "CumSum", "axis 1", g_cumsum, 1e-2f, 1e-3f },
    { "CumSum", "exclusive, reverse, axis -2", g_cumsum_rev, 1e-2f, 1e-3f },
    { "TopK", "k 3 of 5, largest", g_topk, 1e-2f, 1e-3f },
    { "TopK", "k 2 of 4, smallest, axis 0", g_topk_smallest, 1e-2f, 1e-3f },
    { "OneHot", "values, axis 1, negative and out-of-range indices", g_onehot, 1e-2f, 1e-3f },
};

const size_t gradcases_shape_n = sizeof gradcases_shape / sizeof gradcases_shape[0];
