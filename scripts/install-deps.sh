#!/bin/sh
# Installs the Debian packages the build, tests and benchmarks need, only those missing.
set -e
PKGS="cmake make g++ clang libclang-rt-14-dev libgtest-dev libgmock-dev libbenchmark-dev \
zlib1g-dev libxdp-dev libbpf-dev pkg-config tshark tcpdump iproute2 python3 libibverbs-dev ibverbs-utils perftest \
ucx-utils libfabric-bin openmpi-bin libopenmpi-dev python3-pyverbs librdmacm-dev rdmacm-utils qperf iperf3"
# `install-deps.sh bench`: also the baselines make bench measures, and its plotter.
[ "$1" = bench ] && PKGS="$PKGS sockperf gnuplot-nox"
# `install-deps.sh study`: the plotter of make study.
[ "$1" = study ] && PKGS="$PKGS gnuplot-nox"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
