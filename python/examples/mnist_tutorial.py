#!/usr/bin/python3
"""PopTorch's pipelining tutorial (reference 002) as a PopTorch program: the MNIST network
in blocks B1..B4, trained with AdamW through poptorch.trainingModel on data from
poptorch.DataLoader (Async), then tested with poptorch.inferenceModel on the trained
weights. Nothing here is specific to ipuofd: `import poptorch` reaches the daemon named by
IPUOF_SERVER (default 127.0.0.1:50052).

    mnist_tutorial.py --data-root DIR [--epochs 3] [--batch-size 40] [--test-batch-size 8]
                      [--device-iterations 10] [--gradient-accumulation 10]
                      [--strategy none|pipelined|sharded|phased] [--offload-optimiser]
                      [--learning-rate 0.001] [--seed 42] [--limit-train N]
                      [--limit-test N] [--workers 2] [--preload]

DIR is a torchvision root: DIR/FashionMNIST/raw/ (or DIR/MNIST/raw/) holding the IDX files;
nothing is downloaded. Prints one line per epoch ("Epoch 1/3: 15 calls, 60000 samples in
6.1 s, loss=0.5100, acc=81.20%") and "Accuracy on test set: XX.XX%".
"""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torchvision

import poptorch


class ConvLayer(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        with poptorch.Block("B1"):
            x = self.layer1(x)
        with poptorch.Block("B2"):
            x = self.layer2(x)
        with poptorch.Block("B3"):
            x = x.view(-1, 320)
            x = self.layer3_act(self.layer3(x))
        with poptorch.Block("B4"):
            x = self.layer4(x)
        return x


class TrainingModelWithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        if labels is None:
            return output
        with poptorch.Block("B4"):
            loss = self.loss(output, labels)
        return output, loss


def accuracy(predictions, labels):
    _, ind = torch.max(predictions, 1)
    labels = labels[-predictions.size()[0]:]
    return torch.sum(torch.eq(ind, labels)).item() / labels.size()[0] * 100.0


def dataset(root, train, limit, preload=False):
    if preload:
        # The whole split decoded and normalised once into one tensor (as the C path's
        # IDX reader does), instead of a PIL image and two transforms per sample.
        raw = torchvision.datasets.FashionMNIST(root, train=train, download=False)
        n = min(limit, len(raw)) if limit else len(raw)
        images = (raw.data[:n].unsqueeze(1).float() / 255 - 0.1307) / 0.3081
        return torch.utils.data.TensorDataset(images, raw.targets[:n])
    transform = torchvision.transforms.Compose([
        torchvision.transforms.ToTensor(),
        torchvision.transforms.Normalize((0.1307,), (0.3081,))])
    try:
        ds = torchvision.datasets.FashionMNIST(root, train=train, download=False,
                                               transform=transform)
    except RuntimeError:
        ds = torchvision.datasets.MNIST(root, train=train, download=False,
                                        transform=transform)
    if limit:
        ds = torch.utils.data.Subset(ds, range(min(limit, len(ds))))
    return ds


def set_strategy(opts, name):
    blocks = ["B1", "B2", "B3", "B4"]
    if name == "pipelined":
        strategy = poptorch.PipelinedExecution(*blocks)
        for i, b in enumerate(blocks):
            strategy.stage(b).ipu(i)
    elif name == "sharded":
        strategy = poptorch.ShardedExecution(*blocks)
        for i, b in enumerate(blocks):
            strategy.stage(b).ipu(i)
    elif name == "phased":
        strategy = poptorch.SerialPhasedExecution(*blocks)
        for b in blocks:
            strategy.stage(b).ipu(0)
    else:
        return
    opts.setExecutionStrategy(strategy)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--test-batch-size", type=int, default=8)
    ap.add_argument("--device-iterations", type=int, default=10)
    ap.add_argument("--test-device-iterations", type=int, default=100)
    ap.add_argument("--gradient-accumulation", type=int, default=10)
    ap.add_argument("--strategy", default="none",
                    choices=["none", "pipelined", "sharded", "phased"])
    ap.add_argument("--offload-optimiser", action="store_true")
    ap.add_argument("--learning-rate", type=float, default=0.001)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--limit-train", type=int, default=0)
    ap.add_argument("--limit-test", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--preload", action="store_true",
                    help="decode the dataset into tensors once, not per sample")
    args = ap.parse_args()

    train_opts = poptorch.Options()
    train_opts.randomSeed(args.seed)
    train_opts.deviceIterations(args.device_iterations)
    train_opts.Training.gradientAccumulation(args.gradient_accumulation)
    train_opts.outputMode(poptorch.OutputMode.All)
    set_strategy(train_opts, args.strategy)
    if args.offload_optimiser:
        train_opts.TensorLocations.setOptimizerLocation(
            poptorch.TensorLocationSettings().useOnChipStorage(False))

    training_data = poptorch.DataLoader(
        train_opts, dataset(args.data_root, True, args.limit_train, args.preload),
        batch_size=args.batch_size, shuffle=True, drop_last=True,
        num_workers=args.workers, mode=poptorch.DataLoaderMode.Async)

    model = Network()
    training_model = poptorch.trainingModel(
        TrainingModelWithLoss(model), train_opts,
        optimizer=poptorch.optim.AdamW(model.parameters(), lr=args.learning_rate))

    # Compile before the first epoch (as PopTorch's compile()), so epochs time training only.
    n = args.batch_size * args.device_iterations * args.gradient_accumulation
    start = time.perf_counter()
    training_model.compile(torch.zeros(n, 1, 28, 28), torch.zeros(n, dtype=torch.int64))
    print(f"training model compiled in {time.perf_counter() - start:.1f} s", flush=True)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        calls = samples = 0
        loss_sum = acc_sum = 0.0
        for data, labels in training_data:
            preds, losses = training_model(data, labels)
            calls += 1
            samples += data.shape[0]
            loss_sum += torch.mean(losses).item()
            acc_sum += accuracy(preds, labels)
        secs = time.perf_counter() - start
        print(f"Epoch {epoch}/{args.epochs}: {calls} calls, {samples} samples in {secs:.1f} s, "
              f"loss={loss_sum / max(calls, 1):.4f}, acc={acc_sum / max(calls, 1):.2f}%",
              flush=True)
    training_model.detachFromDevice()

    test_opts = train_opts.clone()
    test_opts.Training.gradientAccumulation(1)
    test_opts.deviceIterations(args.test_device_iterations)
    test_opts.outputMode(poptorch.OutputMode.All)
    test_data = poptorch.DataLoader(test_opts, dataset(args.data_root, False, args.limit_test,
                                                      args.preload),
                                    batch_size=args.test_batch_size, num_workers=args.workers)
    inference_model = poptorch.inferenceModel(model, test_opts)
    sum_acc = 0.0
    for data, labels in test_data:
        sum_acc += accuracy(inference_model(data), labels)
    inference_model.detachFromDevice()
    print(f"Accuracy on test set: {sum_acc / max(len(test_data), 1):0.2f}%")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except poptorch.Error as exc:
        print(f"mnist_tutorial: {exc}", file=sys.stderr)
        sys.exit(1)
