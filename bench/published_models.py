"""Graphcore's published training configurations, written again in plain torch (Debian has
no transformers) at the published shapes, for tests (python/tests/test_published.py) and
benches (make bench-clock).

- ResNet-50 as graphcore/examples vision/cnns/pytorch builds it for configs.yml `resnet50`:
  torchvision's resnet50, images normalised on the IPU (eight-bit input by default),
  precision "16.16" (model.half(), half partials), stochastic rounding, loss scaling 128,
  SGD with momentum 0.9 (the combined variant), label smoothing 0.1, recomputation
  `manual` (PopART's RecomputeAll with the listed checkpoints, checkpoints placed on the
  torch.fx graph as Graphcore's recompute_model does), available memory proportion 0.16,
  one IPU per replica, micro-batch 18, gradient accumulation 57, 16 replicas.
- BERT-Base phase-1 pre-training, sequence length 128, as nlp/bert/pytorch builds it for
  configs_pretraining.yml `pretrain_base_128`: 12 layers, hidden 768, 12 heads, vocabulary
  30 522, 20 masked tokens, layers_per_ipu [0, 4, 4, 4] (embeddings, pooler and heads on
  IPU 0), each encoder layer a BeginBlock of the ModuleList `bert.encoder.layer`,
  PipelinedExecution(AutoStage.AutoIncrement), a recomputation checkpoint on each layer's
  output, the tied decoder a serialised matmul, LAMB without bias correction, float16 with
  half partials and stochastic rounding, matmul proportion 0.25, micro-batch 32, gradient
  accumulation 512, 4 replicas, output mode Sum.

Each `*_config(...)` returns (model, poptorch.Options, optimizer, example batch): build
the training model with poptorch.trainingModel(model, opts, optimizer) and call it with
*batch. The batch holds one step's inputs: micro-batch x gradient accumulation x replicas
x device iterations rows.
"""
import math
import re

import torch
import torch.nn.functional as F
from torch import nn

import poptorch

# --- ResNet-50 (configs.yml `resnet50`) ---------------------------------------------------

RESNET50 = dict(micro_batch=18, gradient_accumulation=57, replicas=16, loss_scaling=128.0,
                lr=2.0, momentum=0.9, weight_decay=1e-4, label_smoothing=0.1,
                available_memory_proportion=0.16, image_size=224, classes=1000)

# The checkpoints configs.yml lists (recompute_mode: manual), in its spelling: torch.fx node
# names with "_" read as "/" ("add_13" is the 14th residual add, "layer4/0/conv1" a layer).
RESNET50_CHECKPOINTS = [
    "add", "add_1", "add_2", "add_3", "add_5", "add_6", "add_7", "add_9", "add_11", "add_12",
    "layer4/0/conv1", "layer4/0/bn1", "layer4/0/conv2", "layer4/0/bn2", "layer4/0/conv3",
    "layer4/0/bn3", "layer4/0/downsample_0", "layer4/0/downsample/1", "add_13",
    "layer4/1/conv1", "layer4/1/bn1", "layer4/1/conv2", "layer4/1/bn2", "layer4/1/conv3",
    "layer4/1/bn3", "add_14", "layer4/2/conv1", "layer4/2/bn1", "layer4/2/conv2",
    "layer4/2/bn2", "layer4/2/conv3", "layer4/2/bn3", "add_15", "avgpool", "fc"]

# ImageNet's channel means and deviations, on a 0..255 scale (eight-bit input).
_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def _fx_name(name):
    """A node or checkpoint name in one spelling: "_" and "/" are the same separator."""
    return name.replace("/", "_")


def add_checkpoints(model, checkpoints):
    """model traced with torch.fx, poptorch.recomputationCheckpoint applied to the output
    of each node whose name is one of `checkpoints` (regular expressions, "/" or "_"
    separators, matched in full). Returns (graph module, names of the nodes checkpointed);
    ValueError when a checkpoint matches no node (a misspelt list places nothing)."""
    traced = torch.fx.symbolic_trace(model)
    wanted = [re.compile(_fx_name(c)) for c in checkpoints]
    hit = set()
    done = []
    for node in list(traced.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        for k, rx in enumerate(wanted):
            if rx.fullmatch(_fx_name(node.name)):
                hit.add(k)
                with traced.graph.inserting_after(node):
                    cp = traced.graph.call_function(poptorch.recomputationCheckpoint,
                                                    args=(node,))
                node.replace_all_uses_with(cp)
                cp.args = (node,)
                done.append(node.name)
                break
    missing = [checkpoints[k] for k in range(len(checkpoints)) if k not in hit]
    if missing:
        raise ValueError(f"recomputation checkpoints {missing} match no node of the traced "
                         "model")
    traced.recompile()
    return traced, done


class _NormalisedResNet(nn.Module):
    """A network whose input is normalised on the IPU (normalization_location: ipu): uint8
    (eight_bit_io) or float16 images, cast to the network's precision, less the mean, over
    the deviation."""

    def __init__(self, net):
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1))

    def forward(self, images):
        x = (images.to(self.mean.dtype) - self.mean) / self.std
        return self.net(x)


class _TrainingResNet(nn.Module):
    """The classifier with its loss, as Graphcore's TrainingModelWithLoss: label-smoothed
    cross entropy, computed in float32, returned with the logits."""

    def __init__(self, net, label_smoothing):
        super().__init__()
        self.model = net
        self.label_smoothing = label_smoothing

    def forward(self, images, labels):
        out = self.model(images)
        # label smoothing written out (ONNX's NegativeLogLikelihoodLoss has none):
        # (1 - e) * NLL of the label + e * the mean NLL over the classes
        logp = F.log_softmax(out.float(), dim=1)
        e = self.label_smoothing
        loss = (1.0 - e) * F.nll_loss(logp, labels) - e * logp.mean(dim=1).mean()
        return out, poptorch.identity_loss(loss, reduction="mean")


def resnet50_model(half=True, recompute=True, eight_bit_io=True, classes=1000,
                   checkpoints=None):
    """torchvision's ResNet-50 normalising its input on the IPU, float16 when `half`, with
    the published recomputation checkpoints when `recompute`, wrapped with its loss."""
    import torchvision
    torch.manual_seed(42)
    net = _NormalisedResNet(torchvision.models.resnet50(num_classes=classes))
    if half:
        net.half()
    if recompute:
        net.net, _ = add_checkpoints(net.net, checkpoints or RESNET50_CHECKPOINTS)
    del eight_bit_io  # the input's type, given by the batch
    return _TrainingResNet(net, RESNET50["label_smoothing"])


def resnet50_config(micro_batch=18, gradient_accumulation=57, replicas=16,
                    device_iterations=1, recompute=True, half=True, eight_bit_io=True,
                    image_size=224, available_memory_proportion=0.16):
    """(model, options, optimizer, batch) for configs.yml `resnet50` at the given batch
    sizes: one IPU per replica, precision 16.16, stochastic rounding, recompute_mode manual
    (explicit RecomputeAll with the published checkpoints) unless `recompute` is False,
    the memory proportion on IPU 0, SGD (combined) with loss scaling 128."""
    model = resnet50_model(half=half, recompute=recompute, eight_bit_io=eight_bit_io)
    opts = poptorch.Options()
    opts.replicationFactor(replicas)
    opts.deviceIterations(device_iterations)
    opts.Training.gradientAccumulation(gradient_accumulation)
    opts.randomSeed(42)
    opts.Precision.enableStochasticRounding(True)
    if half:
        opts.Precision.setPartialsType(torch.float16)
    opts._Popart.set("scheduleNonWeightUpdateGradientConsumersEarly", True)
    opts._Popart.set("disableGradAccumulationTensorStreams", True)
    if recompute:
        opts._Popart.set("explicitRecomputation", True)
        # PopART's RecomputationType: None 0, Standard 1, NormOnly 2, Pipeline 3, RecomputeAll 4
        opts._Popart.set("autoRecomputation", 4)
    if available_memory_proportion is not None:
        opts.setAvailableMemoryProportion({"IPU0": available_memory_proportion})
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    optimizer = poptorch.optim.SGD(
        [{"params": decay, "weight_decay": RESNET50["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=RESNET50["lr"] / 1000.0, momentum=RESNET50["momentum"],
        loss_scaling=RESNET50["loss_scaling"], use_combined_accum=True,
        velocity_scaling=RESNET50["loss_scaling"])
    rows = micro_batch * gradient_accumulation * replicas * device_iterations
    g = torch.Generator().manual_seed(7)
    if eight_bit_io:
        images = torch.randint(0, 256, (rows, 3, image_size, image_size), generator=g,
                               dtype=torch.uint8)
    else:
        images = (torch.rand(rows, 3, image_size, image_size, generator=g) * 255)
        images = images.half() if half else images
    labels = torch.randint(0, RESNET50["classes"], (rows,), generator=g)
    return model, opts, optimizer, (images, labels)


# --- BERT-Base phase 1, SL 128 (configs_pretraining.yml `pretrain_base_128`) --------------

BERT_BASE_128 = dict(vocab=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                     seq=128, mask_tokens=20, max_positions=512, type_vocab=2,
                     layer_norm_eps=1e-3, micro_batch=32, gradient_accumulation=512,
                     replicas=4, layers_per_ipu=(0, 4, 4, 4), matmul_proportion=0.25,
                     loss_scaling=16384.0, lr=0.006, weight_decay=0.01,
                     embedding_serialization_factor=1)


class SerializedLinear(nn.Linear):
    """nn.Linear whose product is poptorch.serializedMatMul, split `factor` ways along
    its output channels (the tied decoder's vocabulary)."""

    def __init__(self, in_features, out_features, factor, bias=True):
        super().__init__(in_features, out_features, bias)
        self.factor = factor

    def forward(self, x):
        y = poptorch.serializedMatMul(x, self.weight.t(),
                                      poptorch.MatMulSerializationMode.OutputChannels,
                                      self.factor)
        return y + self.bias if self.bias is not None else y


class BertEmbeddings(nn.Module):
    """Word, position and token-type embeddings, summed, normalised."""

    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab"], c["hidden"])
        self.position_embeddings = nn.Embedding(c["max_positions"], c["hidden"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=c["layer_norm_eps"])

    def forward(self, input_ids, token_type_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(pos)
             + self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(x)


class BertLayer(nn.Module):
    """One encoder layer: fused-QKV self-attention, output projection, residual and
    norm, then the GELU feed-forward, residual and norm."""

    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.heads = c["heads"]
        self.qkv = nn.Linear(h, 3 * h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.intermediate = nn.Linear(h, c["intermediate"])
        self.output = nn.Linear(c["intermediate"], h)
        self.out_norm = nn.LayerNorm(h, eps=c["layer_norm_eps"])

    def forward(self, x, mask_bias):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + mask_bias
        ctx = torch.matmul(F.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, h)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    """The layers, held in an nn.ModuleList as transformers' BertEncoder holds them."""

    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c["layers"])])

    def forward(self, x, mask_bias):
        for layer in self.layer:
            x = layer(x, mask_bias)
        return x


class BertPooler(nn.Module):
    """tanh of a dense layer on the first token."""

    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden"], c["hidden"])

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    """Embeddings, encoder and pooler; the attention mask becomes an additive bias."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c)

    def forward(self, input_ids, attention_mask, token_type_ids):
        x = self.embeddings(input_ids, token_type_ids)
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -1000.0
        x = self.encoder(x, bias)
        return x, self.pooler(x)


class BertPreTrainingHeads(nn.Module):
    """The masked-LM head (dense, GELU, norm, the decoder tied to the word embeddings)
    and the next-sentence head."""

    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.transform = nn.Linear(h, h)
        self.transform_norm = nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.decoder = SerializedLinear(h, c["vocab"], c["embedding_serialization_factor"])
        self.seq_relationship = nn.Linear(h, 2)

    def forward(self, masked, pooled):
        x = self.transform_norm(F.gelu(self.transform(masked)))
        return self.decoder(x), self.seq_relationship(pooled)


def _init_weights(module):
    """BERT's initialisation: weights of linear and embedding layers from a normal
    distribution of deviation 0.02 truncated at 2 deviations, biases 0, norms 1 and 0."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertForPretraining(nn.Module):
    """BERT pre-training with Graphcore's loss: the masked positions gathered by a one-hot
    matmul, MLM cross entropy (label 0 ignored) plus NSP cross entropy, in float32."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.bert = BertModel(c)
        self.cls = BertPreTrainingHeads(c)
        self.apply(_init_weights)
        self.cls.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied

    def parallelize(self):
        """BeginBlock on the embeddings, on each layer of the ModuleList (replaced by
        index), on the pooler and on the heads; a recomputation checkpoint on each layer's
        output. Returns self."""
        ipu_of = [ipu for ipu, n in enumerate(self.c["layers_per_ipu"]) for _ in range(n)]
        self.bert.embeddings = poptorch.BeginBlock(self.bert.embeddings, "Embedding",
                                                   ipu_id=0)
        for index, layer in enumerate(self.bert.encoder.layer):
            layer.register_forward_hook(
                lambda mod, inp, out: poptorch.recomputationCheckpoint(out))
            self.bert.encoder.layer[index] = poptorch.BeginBlock(
                layer, f"Encoder{index}", ipu_id=ipu_of[index])
        self.bert.pooler = poptorch.BeginBlock(self.bert.pooler, "Pooler", ipu_id=0)
        self.cls = poptorch.BeginBlock(self.cls, "Classifier", ipu_id=0)
        return self

    def forward(self, input_ids, attention_mask, token_type_ids, masked_lm_positions,
                masked_lm_labels, next_sentence_label):
        seq, pooled = self.bert(input_ids, attention_mask, token_type_ids)
        onehot = F.one_hot(masked_lm_positions, seq.shape[1]).to(seq.dtype).detach()
        masked = torch.matmul(onehot, seq)
        mlm, nsp = self.cls(masked, pooled)
        mlm_loss = F.cross_entropy(mlm.float().view(-1, self.c["vocab"]),
                                   masked_lm_labels.view(-1), ignore_index=0)
        nsp_loss = F.cross_entropy(nsp.float().view(-1, 2), next_sentence_label.view(-1))
        total = poptorch.identity_loss(mlm_loss + nsp_loss, reduction="none")
        return total, mlm_loss, nsp_loss


def bert_base_128_model(half=True, recompute=True, layers=None, **overrides):
    """The pre-training model at pretrain_base_128's shapes (or `layers` encoder layers),
    parallelised as Graphcore's, float16 when `half`; without `recompute` the layers carry
    no checkpoint."""
    c = dict(BERT_BASE_128, **overrides)
    if layers is not None:
        c["layers"] = layers
    torch.manual_seed(5)
    model = BertForPretraining(c)
    if recompute:
        model.parallelize()
    else:
        _place_without_checkpoints(model)
    return model.half() if half else model


def _place_without_checkpoints(model):
    """The blocks of parallelize() without the per-layer checkpoints."""
    c = model.c
    ipu_of = [ipu for ipu, n in enumerate(c["layers_per_ipu"]) for _ in range(n)]
    model.bert.embeddings = poptorch.BeginBlock(model.bert.embeddings, "Embedding", ipu_id=0)
    for index, layer in enumerate(model.bert.encoder.layer):
        model.bert.encoder.layer[index] = poptorch.BeginBlock(layer, f"Encoder{index}",
                                                              ipu_id=ipu_of[index])
    model.bert.pooler = poptorch.BeginBlock(model.bert.pooler, "Pooler", ipu_id=0)
    model.cls = poptorch.BeginBlock(model.cls, "Classifier", ipu_id=0)


def bert_base_128_config(micro_batch=32, gradient_accumulation=512, replicas=4,
                         device_iterations=1, recompute=True, half=True, layers=None,
                         **overrides):
    """(model, options, optimizer, batch) for pretrain_base_128 at the given batch sizes
    (`overrides` change BERT_BASE_128's shapes, e.g. seq=384, mask_tokens=56 for phase 2):
    4 IPUs per replica pipelined with AutoIncrement stages, the matmul proportion 0.25 on
    each IPU, float16 with half partials and stochastic rounding, optimizer state off chip,
    mean reduction, output mode Sum, LAMB without bias correction (loss scaling 16384).
    Without `recompute` the layers carry no checkpoint and PopART's recomputation is
    explicitly None (PopTorch's default for pipelined training would be Pipeline)."""
    model = bert_base_128_model(half=half, recompute=recompute, layers=layers, **overrides)
    c = model.c
    opts = poptorch.Options()
    opts.replicationFactor(replicas)
    opts.autoRoundNumIPUs(True)
    opts.deviceIterations(device_iterations)
    opts.Training.gradientAccumulation(gradient_accumulation)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    opts.outputMode(poptorch.OutputMode.Sum)
    opts.randomSeed(5)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False))
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.setAvailableMemoryProportion({f"IPU{i}": c["matmul_proportion"] for i in range(4)})
    opts.Precision.enableStochasticRounding(True)
    if half:
        opts.Precision.setPartialsType(torch.float16)
    if not recompute:
        opts._Popart.set("autoRecomputation", 0)  # RecomputationType::None
    opts._Popart.set("disableGradAccumulationTensorStreams", True)
    opts._Popart.set("scheduleNonWeightUpdateGradientConsumersEarly", True)
    decay = [p for n, p in model.named_parameters() if "norm" not in n.lower()
             and not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if "norm" in n.lower()
                or n.endswith("bias")]
    optimizer = poptorch.optim.LAMB(
        [{"params": decay, "weight_decay": c["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=c["lr"], bias_correction=False, loss_scaling=c["loss_scaling"],
        accum_type=torch.float16 if half else torch.float32)
    rows = micro_batch * gradient_accumulation * replicas * device_iterations
    return model, opts, optimizer, bert_batch(rows, c)


def bert_batch(rows, c=BERT_BASE_128):
    """`rows` random pre-training samples: token ids, a mask with a padded tail, two
    segments, `mask_tokens` masked positions with their labels (some 0: padding, ignored)
    and next-sentence labels."""
    g = torch.Generator().manual_seed(11)
    s, m = c["seq"], c["mask_tokens"]
    ids = torch.randint(1, c["vocab"], (rows, s), generator=g)
    lengths = torch.randint(s // 2, s + 1, (rows, 1), generator=g)
    mask = (torch.arange(s)[None, :] < lengths).long()
    types = (torch.arange(s)[None, :] >= lengths // 2).long() * mask
    positions = torch.stack([torch.randperm(s, generator=g)[:m] for _ in range(rows)])
    labels = torch.randint(1, c["vocab"], (rows, m), generator=g)
    labels[:, m - 3:] = 0
    nsp = torch.randint(0, 2, (rows,), generator=g)
    return ids, mask, types, positions, labels, nsp
