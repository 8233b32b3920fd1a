#!/bin/sh
# make bench: builds are done by the Makefile; this runs the measurements: one host
# (bench/run.py), then two hosts joined by a veth pair (bench/between_hosts.py, and the
# port's scheduler, bench/policy.py; root only).
set -e
python3 "$(dirname "$0")/run.py" "${1:-build}" ${BENCH_ARGS:-}
if [ "$(id -u)" = 0 ]; then
  echo "== between two hosts (network namespaces joined by a veth pair, MTU 1500 and 9000) =="
  python3 "$(dirname "$0")/between_hosts.py" "${1:-build}" --out "$(dirname "$0")/results/between_hosts.md"
  echo "== policy: the port's scheduler between two hosts (ETS shares, latency under bulk) =="
  python3 "$(dirname "$0")/policy.py" "${1:-build}" --out "$(dirname "$0")/results/policy.md"
else
  echo "## BETWEEN TWO HOSTS AND POLICY NOT MEASURED: needs root for ip netns"
fi
