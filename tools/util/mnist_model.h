/*
 * mnist_model.h — the MNIST network of PopTorch's pipelining tutorial as ONNX bytes, built
 * in C with the protoc-c types of onnx.proto, for ipuof-mnist.
 *
 *   image [batch, 1, 28, 28] -> Conv(1->10, k5) MaxPool(2) Relu      (layer1: ConvLayer)
 *                            -> Conv(10->20, k5) MaxPool(2) Relu     (layer2: ConvLayer)
 *                            -> Flatten -> Gemm(320->256, transB) Relu (layer3)
 *                            -> Gemm(256->10, transB) = logits       (layer4)
 *   SoftmaxCrossEntropyLoss(logits, labels [batch] int64, reduction mean) = loss
 *
 * Nodes are named as torch 1.13 names them when it exports the tutorial's
 * TrainingModelWithLoss (module path, then op: "/model/layer1/conv/Conv", "/model/Flatten",
 * "/model/layer3_act/Relu", "/loss/SoftmaxCrossEntropyLoss"), so the tutorial's blocks are
 * node-name prefixes: B1 "/model/layer1/", B2 "/model/layer2/", B3 "/model/layer3" (layer3
 * and layer3_act), B4 "/model/layer4/"; the Flatten and the loss follow their producers.
 *
 * The batch dimension of the inputs and of logits is symbolic ("batch"): the compile gives
 * the micro-batch. Opset 13. The initializers carry PyTorch's parameter names
 * (layer1.conv.weight, layer1.conv.bias, layer2.conv.weight, layer2.conv.bias,
 * layer3.weight, layer3.bias, layer4.weight, layer4.bias) and PyTorch's default
 * initialisation of Conv2d and Linear: kaiming_uniform with a = sqrt(5) for the weight and
 * the matching uniform bias, both U(-b, b) with b = 1 / sqrt(fan_in) (fan_in = in_channels x
 * kernel area, or in_features).
 *
 * The values come from a documented generator, not from torch's: splitmix64 started at
 * seed (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
 * z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31). Every parameter, in the order
 * listed above and row-major within each, takes the next output r: u = (r >> 40) * 2^-24 in
 * [0, 1), and the value (2u - 1) * b in float. So one seed gives the same model everywhere.
 */
#ifndef IPUOF_TOOLS_MNIST_MODEL_H
#define IPUOF_TOOLS_MNIST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MNIST_INPUT_IMAGE "image"
#define MNIST_INPUT_LABELS "labels"
#define MNIST_OUTPUT_LOGITS "logits"
#define MNIST_OUTPUT_LOSS "loss"
#define MNIST_CLASSES 10
#define MNIST_BLOCKS 4

/* The prefixes of the tutorial's blocks B1..B4 (see above). */
extern const char *const mnist_block_prefix[MNIST_BLOCKS];

/* Builds the model with weights drawn from seed. On success returns 0 with *out (caller-
 * owned, free()) holding *len bytes of a serialized ModelProto; -1 when out of memory. */
int mnist_model_build(uint64_t seed, void **out, size_t *len);

/* The generator above: the next splitmix64 output of *state (advanced). */
uint64_t mnist_splitmix64(uint64_t *state);

/* Fills dst[0..n) with U(-bound, bound) values drawn from *state as described above. */
void mnist_uniform(uint64_t *state, float *dst, size_t n, float bound);

/*
 * Stand-in data for the benches and tests that run the model without a data set, drawn
 * from *state (advanced): images (float) r -> (r >> 40) * 2^-24 in [0, 1), one output r a
 * value; labels (int64) r % 10. dst holds `bytes` bytes (whole values).
 */
void mnist_fake_data(uint64_t *state, bool images, void *dst, size_t bytes);

struct sim_exe;     /* sim.h */

/*
 * Fills every input buffer of e (an executable compiled from this model: float images,
 * int64 labels) with mnist_fake_data from one generator seeded 12345, in input order: the
 * same values every call. Returns 0, or -1 when an input's info could not be read (that
 * input is left as it was, the others filled). In mnist_feed.c: it links the simulator.
 */
int mnist_fill_inputs(struct sim_exe *e);

#endif /* IPUOF_TOOLS_MNIST_MODEL_H */
