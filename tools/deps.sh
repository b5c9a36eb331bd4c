#!/bin/sh
# Installs the Debian packages ipuofd needs to build, test and run its demo, when missing.
#   sh tools/deps.sh          build + test + demo packages (the PyTorch parity tests included)
#   sh tools/deps.sh bench    also valgrind and time (bench/dist.sh's instruction counts,
#                             /usr/bin/time in docs/); PyTorch is a test dependency already
#   sh tools/deps.sh fuzz     also clang and its fuzzer runtime
# The first set runs every step of README.md and docs/ (python3-tqdm: Graphcore's
# mnist_pipeline.py in docs/python.md; openmpi-bin: mpirun; g++ and libgloo-dev: the Pod
# collective engine, pod/coll_gloo.cc; iproute2: bench/allreduce.sh's network namespaces;
# prometheus and curl: test_metrics scrapes /metrics with a real Prometheus; tmux: ipuctl top's
# test; libssl-dev: TLS, docs/service.md).
set -eu

pkgs="
gcc g++ libc6-dev make pkgconf
protobuf-c-compiler libprotobuf-c-dev
libevent-dev
libcmocka-dev
libinih-dev
libgloo-dev
zlib1g-dev
libopenblas-dev
libdnnl-dev
libonnx-dev
libonnx-testdata
dataset-fashion-mnist
systemd
procps
man-db groff-base
python3
python3-numpy
python3-onnx
python3-torch
python3-torchvision
python3-cffi
python3-pytest
python3-tqdm
openmpi-bin
iproute2
prometheus
curl
tmux
libssl-dev
"
case "${1:-}" in
bench) pkgs="$pkgs valgrind time" ;;
fuzz) pkgs="$pkgs clang libclang-rt-14-dev" ;;
esac

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "deps: missing packages:$missing; run as root: apt-get install$missing" >&2
    exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
