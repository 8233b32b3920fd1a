#!/bin/sh
# Per-QP rate limits between two hosts: two network namespaces joined by a veth pair at MTU
# 1500, uroce-perf streaming 16 KiB RDMA WRITEs (byte-checked) from a QP limited to 10 Mb/s,
# 100 Mb/s and 1 Gb/s, for about a second each. Its goodput (payload bytes; the limit counts
# the RoCE headers too, 1.5 % at MTU 1024) may never pass the limit, and at 10 and 100 Mb/s,
# far below what the link carries, must reach 90 % of it (98.4 % is all payload); at 1 Gb/s the ratio is reported
# (`make bench` measures it).
# Needs root (ip netns); without it, says so loudly and exits 77 (CTest: skipped).
# usage: rate_netns.sh BUILD_BIN_DIR
BIN=$(cd "$1" && pwd)
skip() { echo "## RATE NAMESPACE TEST NOT RUN: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "no ip (iproute2)"

tag=$$
net="10.78.$((tag % 200 + 20))"
A="uroce-rate-a-$tag" B="uroce-rate-b-$tag"
tmp=$(mktemp -d /tmp/uroce-rate.XXXXXX)
cleanup() {
  ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
ip netns add "$A" && ip netns add "$B" || skip "cannot create network namespaces"
ip link add "ura$tag" type veth peer name "urb$tag" || skip "cannot create a veth pair"
ip link set "ura$tag" netns "$A"
ip link set "urb$tag" netns "$B"
ip -n "$A" addr add "$net.1/24" dev "ura$tag"
ip -n "$B" addr add "$net.2/24" dev "urb$tag"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "ura$tag" up
ip -n "$B" link set "urb$tag" up
inA() { ip netns exec "$A" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }
inB() { ip netns exec "$B" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "NOT OK - $*"; }
port=$((21000 + tag % 20000))

# run KBPS ITERS: prints the client's JSON line; fails unless both ends verified every byte.
run() {
  port=$((port + 1))
  inA timeout 120 "$BIN/uroce-perf" --server --port $port > "$tmp/srv.log" 2>&1 &
  srv=$!
  out=$(inB timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $port --op write --mode bw --size 16384 \
        --iters "$2" ${1:+--rate-limit "$1"} --json 2>&1)
  c=$?
  wait $srv
  s=$?
  echo "$out"
  [ $c = 0 ] && [ $s = 0 ] && echo "$out" | grep -q '"verified":true'
}

for kbps in 10000 100000 1000000; do
  iters=$((kbps * 1000 / 8 / 16384))  # about a second of payload at the limit
  [ $iters -lt 64 ] && iters=64
  if out=$(run $kbps $iters); then
    ratio=$(echo "$out" | /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('%.4f' % (d['size'] * d['iters'] * 8 / d['seconds'] / ($kbps * 1e3)))")
    echo "rate limit $kbps kb/s: goodput $ratio of it"
    low=0.90
    [ $kbps -ge 1000000 ] && low=0.0
    if /usr/bin/python3 -c "import sys; sys.exit(0 if $low <= $ratio <= 1.0 else 1)"; then
      ok "limit $kbps kb/s: goodput ratio $ratio in [$low, 1.0]"
    else
      bad "limit $kbps kb/s: goodput ratio $ratio not in [$low, 1.0]: $out"
    fi
  else
    bad "limit $kbps kb/s: uroce-perf failed: $out $(cat "$tmp/srv.log")"
  fi
done

echo "rate netns: $passed passed, $failed failed"
[ $failed = 0 ]
