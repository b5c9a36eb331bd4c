"""PyTorch CPU side of the training benchmark (bench/train.sh).

Trains the MNIST network of PopTorch's tutorial as ipuof-mnist does (two ConvLayers
Conv -> MaxPool 2 -> ReLU, Linear 320->256, ReLU, Linear 256->10, CrossEntropyLoss) on
Fashion-MNIST read from the IDX .gz files with gzip + struct, with the same settings:
micro-batch 40, gradient accumulation 10 as PopTorch does it (each micro-batch's mean loss
divided by 10, gradients summed, one optimizer.step() per 400 samples, so the update uses
the mean over 400 samples), AdamW(lr=1e-3) with PyTorch's defaults otherwise, a shuffle
per epoch from a seeded generator, drop_last. Then the accuracy on the test set.

  /usr/bin/python3 bench/train_torch.py [--data DIR] [--epochs 3] [--threads N]
                                        [--seed 42 [--seed 43 ...]]

Prints, for every seed, one line per epoch and one result line that bench/train.sh parses:
  epoch 1/3: 60000 samples in 9.8 s, loss=0.6512, acc=76.01%
  result seed=42 epochs=3 samples=180000 seconds=29.41 accuracy=84.60
The seconds are the training loops only (batching, forward, backward, optimizer), as
ipuof-mnist's per-epoch figures are; reading the files and testing are not timed.
"""

import argparse
import gzip
import os
import struct
import sys
import time

import torch
from torch import nn

NORM_MEAN = 0.1307
NORM_STD = 0.3081
TEST_BATCH = 1000


class ConvLayer(nn.Module):
    """The tutorial's ConvLayer: Conv2d, MaxPool2d, ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.pool = nn.MaxPool2d(pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    """The tutorial's network, with the parameter names ipuof-mnist's ONNX model uses."""

    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(x))
        x = self.layer3_act(self.layer3(x.flatten(1)))
        return self.layer4(x)


def read_idx(path):
    """An IDX file (gzip-compressed when it ends in .gz) as (dims, raw uint8 bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype, rank = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    dims = struct.unpack(">%dI" % rank, raw[4:4 + 4 * rank])
    body = raw[4 + 4 * rank:]
    n = 1
    for d in dims:
        n *= d
    if len(body) < n:
        raise ValueError("%s: %d bytes of data, %d expected" % (path, len(body), n))
    return dims, body[:n]


def load_split(data, prefix):
    """(images [N, 1, 28, 28] float32 normalised, labels [N] int64) of DATA/PREFIX-*."""
    def path(kind):
        p = os.path.join(data, "%s-%s-ubyte.gz" % (prefix, kind))
        return p if os.path.exists(p) else p[:-3]

    idims, ibytes = read_idx(path("images-idx3"))
    ldims, lbytes = read_idx(path("labels-idx1"))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        raise ValueError("%s: images %s and labels %s do not match" % (prefix, idims, ldims))
    x = torch.frombuffer(bytearray(ibytes), dtype=torch.uint8).float()
    x = ((x / 255.0 - NORM_MEAN) / NORM_STD).view(idims[0], 1, idims[1], idims[2])
    y = torch.frombuffer(bytearray(lbytes), dtype=torch.uint8).long()
    return x.contiguous(), y


def train_one(seed, epochs, batch, accum, lr, train_x, train_y, test_x, test_y):
    """Trains a new network from seed; returns (samples, seconds, test accuracy in %)."""
    torch.manual_seed(seed)
    net = Network()
    opt = torch.optim.AdamW(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    n = train_x.shape[0]
    step = batch * accum
    total_samples = 0
    total_secs = 0.0
    for e in range(epochs):
        net.train()
        loss_sum = 0.0
        correct = 0
        micro = 0
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen)
        steps = n // step                       # drop_last
        for s in range(steps):
            opt.zero_grad(set_to_none=True)
            for a in range(accum):
                idx = perm[s * step + a * batch:s * step + (a + 1) * batch]
                xb = train_x[idx]
                yb = train_y[idx]
                logits = net(xb)
                loss = loss_fn(logits, yb)
                (loss / accum).backward()
                loss_sum += loss.item()
                correct += int((logits.argmax(1) == yb).sum())
                micro += 1
            opt.step()
        secs = time.perf_counter() - t0
        samples = steps * step
        total_samples += samples
        total_secs += secs
        print("epoch %d/%d: %d samples in %.1f s, loss=%.4f, acc=%.2f%%"
              % (e + 1, epochs, samples, secs, loss_sum / max(micro, 1),
                 100.0 * correct / max(samples, 1)), flush=True)
    net.eval()
    correct = 0
    loss_sum = 0.0
    with torch.inference_mode():
        for i in range(0, test_x.shape[0], TEST_BATCH):
            out = net(test_x[i:i + TEST_BATCH])
            yb = test_y[i:i + TEST_BATCH]
            loss_sum += float(loss_fn(out, yb)) * yb.shape[0]
            correct += int((out.argmax(1) == yb).sum())
    n_test = test_x.shape[0]
    print("tested %d samples: loss=%.4f, acc=%.2f%%" % (n_test, loss_sum / n_test,
                                                       100.0 * correct / n_test))
    return total_samples, total_secs, 100.0 * correct / n_test


def training_flops():
    """FLOPs of one training sample of Network: 2 x the multiply-adds of every Conv2d and
    Linear forward (counted by forward hooks), again for each weight gradient, and again for
    each input gradient but the first layer's (the image needs none)."""
    net = Network()
    macs = []

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
            macs.append(out[0].numel() * k)
        else:
            macs.append(out[0].numel() * m.in_features)

    hs = [m.register_forward_hook(hook) for m in net.modules()
          if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.inference_mode():
        net(torch.zeros(1, 1, 28, 28))
    for h in hs:
        h.remove()
    fwd = 2 * sum(macs)
    return fwd + fwd + (fwd - 2 * macs[0])


def main():
    if sys.argv[1:] == ["--flops"]:
        from models import sgemm_peak  # bench/models.py, beside this script

        peak, ncpu = sgemm_peak()
        print("flops per_sample=%d peak_gflops=%.1f cpus=%d" % (training_flops(), peak, ncpu))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (default: the CPUs this process may use)")
    ap.add_argument("--seed", type=int, action="append",
                    help="weights and shuffle; repeat for several runs (default 42)")
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--gradient-accumulation", type=int, default=10)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    args = ap.parse_args()

    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    try:
        train_x, train_y = load_split(args.data, "train")
        test_x, test_y = load_split(args.data, "t10k")
    except (OSError, ValueError) as e:
        sys.exit("train_torch: data: %s" % e)
    print("pytorch %s, %d threads (torch.get_num_threads() = %d), %s"
          % (torch.__version__, threads, torch.get_num_threads(),
             torch.__config__.parallel_info().splitlines()[-1].strip()), flush=True)
    for seed in args.seed or [42]:
        samples, secs, acc = train_one(seed, args.epochs, args.batch_size,
                                       args.gradient_accumulation, args.learning_rate,
                                       train_x, train_y, test_x, test_y)
        print("Accuracy on test set: %.2f%%" % acc)
        print("result seed=%d epochs=%d samples=%d seconds=%.3f accuracy=%.2f"
              % (seed, args.epochs, samples, secs, acc), flush=True)


if __name__ == "__main__":
    main()
