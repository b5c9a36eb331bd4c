/*
 * gradcases_layers.c — gradient-check cases of tests/unit/test_sim_train_grad.c: the layers
 * (Conv and ConvTranspose, the pools, the normalizations, Dropout, Resize and Upsample, LSTM
 * and GRU).
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
g_conv(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 2, 5, 5), D_ANY);
    gc_param(b, "w", 4, DIMS(3, 2, 3, 3), D_ANY);
    gc_param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "pads", DIMS(1, 0, 0, 1), 4);
}

static void
g_conv_groups(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 4, 7, 6), D_ANY);
    gc_param(b, "w", 4, DIMS(4, 2, 2, 3), D_ANY);
    gc_param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 1), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_conv_1d(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 8), D_ANY);
    gc_param(b, "w", 3, DIMS(2, 3, 3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
    sim_ob_attr_ints(b, "strides", DIMS(2), 1);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1), 2);
}

static void
g_conv_pointwise(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 4, 3, 3), D_ANY);
    gc_param(b, "w", 4, DIMS(4, 2, 1, 1), D_ANY);
    gc_param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
}

/* One image: the GEMM works in the output's and dY's own layout (no scatter, no gather). */
static void
g_conv_one_image(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(1, 2, 5, 6), D_ANY);
    gc_param(b, "w", 4, DIMS(3, 2, 3, 3), D_ANY);
    gc_param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

/* Images larger than half the im2col budget: one image per chunk, the backward redoes
 * im2col (nothing saved). */
static void
g_conv_image_chunks(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 8, 17, 17), D_ANY);
    gc_param(b, "w", 4, DIMS(1, 8, 5, 5), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
}

static void
g_conv_depthwise(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 3, 4, 19), D_ANY);
    gc_param(b, "w", 4, DIMS(3, 1, 3, 3), D_ANY);
    gc_param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 3);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_conv_depthwise_s2(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 2, 7, 9), D_ANY);
    gc_param(b, "w", 4, DIMS(4, 1, 3, 2), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(1, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 2, 0, 1), 4);
}

static void
g_maxpool(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 2, 4, 6), D_DISTINCT);
    sim_ob_node(b, "MaxPool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
}

static void
g_maxpool_pad(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(1, 2, 5, 5), D_DISTINCT);
    sim_ob_node(b, "MaxPool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(3, 3), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_avgpool(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 2, 5, 5), D_ANY);
    sim_ob_node(b, "AveragePool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(3, 3), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_avgpool_incl(struct sim_ob *b)
{
    g_avgpool(b);
    sim_ob_attr_int(b, "count_include_pad", 1);
}

static void
g_gavgpool(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 3, 3, 4), D_ANY);
    sim_ob_node(b, "GlobalAveragePool", "n", "x", "y");
}

/* A BatchNorm in eval() inside a training model (training_mode 0): the running statistics,
 * an affine map of x whose gradient flows to x, scale and bias. */
static void
g_bn_eval(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(3, 2, 2, 3), D_ANY);
    gc_param(b, "scale", 1, DIMS(2), D_POS);
    gc_param(b, "bias", 1, DIMS(2), D_ANY);
    gc_fconst(b, "mean", 1, DIMS(2), D_ANY);
    gc_fconst(b, "var", 1, DIMS(2), D_POS);
    sim_ob_node(b, "BatchNormalization", "n", "x,scale,bias,mean,var", "y");
}

static void
g_bn(struct sim_ob *b)
{
    g_bn_eval(b);
    sim_ob_attr_int(b, "training_mode", 1);   /* as torch.onnx.export writes a train() one */
}

static void
g_ln(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_param(b, "scale", 1, DIMS(4), D_POS);
    gc_param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "LayerNormalization", "n", "x,scale,bias", "y");
}

static void
g_ln_axis(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_param(b, "scale", 2, DIMS(3, 4), D_POS);
    sim_ob_node(b, "LayerNormalization", "n", "x,scale", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_dropout(struct sim_ob *b)
{
    const float ratio = 0.4f;

    gc_param(b, "x", 2, DIMS(6, 5), D_ANY);
    sim_ob_initializer(b, "ratio", F32, 0, NULL, &ratio);
    sim_ob_node(b, "Dropout", "n", "x,ratio", "y");
}

static void
g_convt(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 4, 3, 4), D_ANY);
    gc_param(b, "w", 4, DIMS(4, 2, 3, 2), D_ANY);
    gc_param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 3), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 1), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 0, 0, 1), 4);
    sim_ob_attr_ints(b, "output_padding", DIMS(1, 1), 2);
}

static void
g_convt_1d(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 5), D_ANY);
    gc_param(b, "w", 3, DIMS(3, 2, 4), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w", "y");
    sim_ob_attr_ints(b, "strides", DIMS(2), 1);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1), 2);
}

static void
g_convt_3d(struct sim_ob *b)
{
    gc_param(b, "x", 5, DIMS(1, 2, 2, 3, 2), D_ANY);
    gc_param(b, "w", 5, DIMS(2, 2, 2, 2, 3), D_ANY);
    gc_param(b, "bias", 1, DIMS(2), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "strides", DIMS(1, 2, 1), 3);
}

static void
g_resize_linear(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 1.5f };
    gc_param(b, "x", 4, DIMS(2, 2, 3, 4), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Resize", "n", "x,,scales", "y");
    sim_ob_attr_str(b, "mode", "linear");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "pytorch_half_pixel");
}

static void
g_resize_nearest(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 3.0f };
    gc_param(b, "x", 4, DIMS(1, 2, 3, 2), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Resize", "n", "x,,scales", "y");
    sim_ob_attr_str(b, "mode", "nearest");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "asymmetric");
    sim_ob_attr_str(b, "nearest_mode", "floor");
}

static void
g_resize_cubic(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(1, 1, 5, 4), D_ANY);
    gc_ints(b, "sizes", 1, DIMS(4), DIMS(1, 1, 3, 7));
    sim_ob_node(b, "Resize", "n", "x,,,sizes", "y");
    sim_ob_attr_str(b, "mode", "cubic");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "align_corners");
    sim_ob_attr_int(b, "exclude_outside", 1);
}

static void
g_resize_crop(struct sim_ob *b)
{
    static const float roi[6] = { 0.0f, 0.2f, -0.1f, 1.0f, 0.9f, 1.2f };
    gc_param(b, "x", 3, DIMS(2, 4, 5), D_ANY);
    sim_ob_initializer(b, "roi", F32, 1, DIMS(6), roi);
    gc_ints(b, "sizes", 1, DIMS(3), DIMS(2, 3, 6));
    sim_ob_node(b, "Resize", "n", "x,roi,,sizes", "y");
    sim_ob_attr_str(b, "mode", "linear");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "tf_crop_and_resize");
    sim_ob_attr_float(b, "extrapolation_value", 3.0f);
}

static void
g_upsample(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 2.0f };
    gc_param(b, "x", 4, DIMS(2, 1, 2, 3), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Upsample", "n", "x,scales", "y");
    sim_ob_attr_str(b, "mode", "linear");
}

static void
g_lstm(struct sim_ob *b)
{
    /* bidirectional, layout 0, bias, initial states, peepholes; Y, Y_h and Y_c all used */
    gc_param(b, "x", 3, DIMS(3, 2, 3), D_ANY);
    gc_param(b, "w", 3, DIMS(2, 8, 3), D_ANY);
    gc_param(b, "rw", 3, DIMS(2, 8, 2), D_ANY);
    gc_param(b, "bias", 2, DIMS(2, 16), D_ANY);
    gc_param(b, "h0", 3, DIMS(2, 2, 2), D_ANY);
    gc_param(b, "c0", 3, DIMS(2, 2, 2), D_ANY);
    gc_param(b, "p", 2, DIMS(2, 6), D_ANY);
    sim_ob_node(b, "LSTM", "n", "x,w,rw,bias,,h0,c0,p", "ya,yh,yc");
    sim_ob_attr_int(b, "hidden_size", 2);
    sim_ob_attr_str(b, "direction", "bidirectional");
    sim_ob_node(b, "Mul", "m", "yh,yc", "hc");
    sim_ob_node(b, "Add", "a", "ya,hc", "y");
}

static void
g_lstm_rev(struct sim_ob *b)
{
    /* reverse, layout 1 (batch first), no bias or states; Y_h only */
    gc_param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    gc_param(b, "w", 3, DIMS(1, 12, 3), D_ANY);
    gc_param(b, "rw", 3, DIMS(1, 12, 3), D_ANY);
    sim_ob_node(b, "LSTM", "n", "x,w,rw", ",y");
    sim_ob_attr_int(b, "hidden_size", 3);
    sim_ob_attr_int(b, "layout", 1);
    sim_ob_attr_str(b, "direction", "reverse");
}

static void
g_gru(struct sim_ob *b)
{
    /* PyTorch's form: linear_before_reset, bidirectional, layout 1, bias, initial_h */
    gc_param(b, "x", 3, DIMS(2, 3, 3), D_ANY);
    gc_param(b, "w", 3, DIMS(2, 6, 3), D_ANY);
    gc_param(b, "rw", 3, DIMS(2, 6, 2), D_ANY);
    gc_param(b, "bias", 2, DIMS(2, 12), D_ANY);
    gc_param(b, "h0", 3, DIMS(2, 2, 2), D_ANY);
    sim_ob_node(b, "GRU", "n", "x,w,rw,bias,,h0", "ya,yh");
    sim_ob_attr_int(b, "hidden_size", 2);
    sim_ob_attr_int(b, "layout", 1);
    sim_ob_attr_int(b, "linear_before_reset", 1);
    sim_ob_attr_str(b, "direction", "bidirectional");
    gc_ints(b, "shp", 1, DIMS(4), DIMS(2, 1, 2, 2));   /* Y_h (N, dirs, H) against Y (N, T, ..) */
    sim_ob_node(b, "Reshape", "t", "yh,shp", "yht");
    sim_ob_node(b, "Mul", "m", "ya,yht", "y");
}

static void
g_gru_reset(struct sim_ob *b)
{
    /* ONNX's default: the reset gate before the recurrent product */
    gc_param(b, "x", 3, DIMS(3, 2, 2), D_ANY);
    gc_param(b, "w", 3, DIMS(1, 9, 2), D_ANY);
    gc_param(b, "rw", 3, DIMS(1, 9, 3), D_ANY);
    gc_param(b, "bias", 2, DIMS(1, 18), D_ANY);
    gc_param(b, "h0", 3, DIMS(1, 2, 3), D_ANY);
    sim_ob_node(b, "GRU", "n", "x,w,rw,bias,,h0", "y");
    sim_ob_attr_int(b, "hidden_size", 3);
}

static void
g_instnorm(struct sim_ob *b)
{
    gc_param(b, "x", 4, DIMS(2, 3, 2, 3), D_ANY);
    gc_param(b, "scale", 1, DIMS(3), D_POS);
    gc_param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "InstanceNormalization", "n", "x,scale,bias", "y");
    sim_ob_attr_float(b, "epsilon", 1e-3f);
}

/* torch.nn.GroupNorm(2, 4)'s export: Reshape (N, 2, -1), InstanceNormalization with
 * constant scale 1 and bias 0, Reshape back, Mul by the weight, Add the bias */
static void
g_groupnorm(struct sim_ob *b)
{
    static const float ones[2] = { 1.0f, 1.0f }, zeros[2] = { 0.0f, 0.0f };

    gc_param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    gc_param(b, "w", 2, DIMS(4, 1), D_POS);
    gc_param(b, "bias", 2, DIMS(4, 1), D_ANY);
    gc_ints(b, "grouped", 1, DIMS(3), DIMS(2, 2, -1));
    gc_ints(b, "back", 1, DIMS(3), DIMS(2, 4, 3));
    sim_ob_node(b, "Constant", "c1", "", "ones");
    sim_ob_attr_tensor(b, "value", F32, 1, DIMS(2), ones);
    sim_ob_node(b, "Constant", "c0", "", "zeros");
    sim_ob_attr_tensor(b, "value", F32, 1, DIMS(2), zeros);
    sim_ob_node(b, "Reshape", "r1", "x,grouped", "xg");
    sim_ob_node(b, "InstanceNormalization", "n", "xg,ones,zeros", "ng");
    sim_ob_node(b, "Reshape", "r2", "ng,back", "nb");
    sim_ob_node(b, "Mul", "m", "nb,w", "nw");
    sim_ob_node(b, "Add", "a", "nw,bias", "y");
}

static void
g_conv3d(struct sim_ob *b)
{
    gc_param(b, "x", 5, DIMS(2, 4, 3, 4, 3), D_ANY);
    gc_param(b, "w", 5, DIMS(4, 2, 2, 3, 2), D_ANY);
    gc_param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(1, 2, 1), 3);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 1, 1), 3);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 0, 0, 1, 1), 6);
}

const struct gcase gradcases_layers[] = {
    { "Conv", "3x3, asymmetric pads", g_conv, 1e-2f, 1e-3f },
    { "Conv", "groups 2, strides, dilations, pads", g_conv_groups, 1e-2f, 1e-3f },
    { "Conv", "1-D, stride 2", g_conv_1d, 1e-2f, 1e-3f },
    { "Conv", "pointwise, groups 2", g_conv_pointwise, 1e-2f, 1e-3f },
    { "MaxPool", "2x2 stride 2", g_maxpool, 1e-3f, 1e-3f },
    { "MaxPool", "3x3 stride 2 pads 1", g_maxpool_pad, 1e-3f, 1e-3f },
    { "AveragePool", "3x3 stride 2 pads 1", g_avgpool, 1e-2f, 1e-3f },
    { "AveragePool", "count_include_pad", g_avgpool_incl, 1e-2f, 1e-3f },
    { "GlobalAveragePool", "", g_gavgpool, 1e-2f, 1e-3f },
    { "BatchNormalization", "training mode", g_bn, 1e-2f, 1e-3f },
    { "BatchNormalization", "eval mode (running statistics)", g_bn_eval, 1e-2f, 1e-3f },
    { "LayerNormalization", "axis -1, scale and bias", g_ln, 1e-2f, 1e-3f },
    { "LayerNormalization", "axis 1, no bias", g_ln_axis, 1e-2f, 1e-3f },
    { "Dropout", "training mode, ratio 0.4", g_dropout, 1e-2f, 1e-3f },
    { "Conv", "one image, bias, pads", g_conv_one_image, 1e-2f, 1e-3f },
    { "Conv", "one image per im2col chunk", g_conv_image_chunks, 1e-2f, 1e-3f },
    { "Conv", "depthwise 3x3, pads", g_conv_depthwise, 1e-2f, 1e-3f },
    { "Conv", "depthwise x2, strides, dilations, pads", g_conv_depthwise_s2, 1e-2f, 1e-3f },
    { "ConvTranspose", "groups 2, strides, dilations, pads, output_padding", g_convt, 1e-2f,
      1e-3f },
    { "ConvTranspose", "1-D, stride 2, pads", g_convt_1d, 1e-2f, 1e-3f },
    { "ConvTranspose", "3-D, bias", g_convt_3d, 1e-2f, 1e-3f },
    { "Resize", "linear, pytorch_half_pixel, scales 2 x 1.5", g_resize_linear, 1e-2f, 1e-3f },
    { "Resize", "nearest, asymmetric, floor", g_resize_nearest, 1e-2f, 1e-3f },
    { "Resize", "cubic, align_corners, exclude_outside, sizes", g_resize_cubic, 1e-2f,
      1e-3f },
    { "Resize", "linear, tf_crop_and_resize, extrapolation", g_resize_crop, 1e-2f, 1e-3f },
    { "Upsample", "linear, scales 2 x 2", g_upsample, 1e-2f, 1e-3f },
    { "LSTM", "bidirectional, bias, states, peepholes, Y Y_h Y_c", g_lstm, 1e-2f, 1e-3f },
    { "LSTM", "reverse, layout 1, Y_h only", g_lstm_rev, 1e-2f, 1e-3f },
    { "GRU", "linear_before_reset, bidirectional, layout 1", g_gru, 1e-2f, 1e-3f },
    { "GRU", "reset before the product, initial_h", g_gru_reset, 1e-2f, 1e-3f },
    { "InstanceNormalization", "(2,3,2,3), epsilon 1e-3", g_instnorm, 1e-2f, 1e-3f },
    { "InstanceNormalization", "torch.nn.GroupNorm(2, 4)'s export", g_groupnorm, 1e-2f,
      1e-3f },
    { "Conv", "3-D: groups 2, strides, dilations, pads, bias", g_conv3d, 1e-2f, 1e-3f },
};

const size_t gradcases_layers_n = sizeof gradcases_layers / sizeof gradcases_layers[0];
