#!/bin/sh
# The NIC's policy between two hosts: two network namespaces joined by a veth pair at MTU 1500.
# DSCP: perftest's ib_write_bw with a GRH traffic class (--tclass) and over rdma_cm with a
# TOS (-R -T, which the passive side takes from the REQ, as the kernel's CM gives it),
# captured on the wire: the test QPs' packets both ways carry the DSCP.
# Rate limits: uroce-perf streaming 16 KiB RDMA WRITEs (byte-checked) from a QP limited to 10 Mb/s,
# 100 Mb/s and 1 Gb/s, and 64 KiB ones at 10 Gb/s, for about a second each. Its goodput (payload bytes; the limit counts
# the RoCE headers too, 1.5 % at MTU 1024) may never pass the limit, and at 10 and 100 Mb/s,
# far below what the link carries, must reach 90 % of it (98.4 % is all payload); at 1 and 10 Gb/s the ratio is reported
# (`make bench` measures it).
# Scheduler: ETS weights 3:1 and 1:1 behind a port rate, byte-checked goodputs (policy_share);
# two processes of one host on its shared port, by their shares.
# Needs root (ip netns); without it, says so loudly and exits 77 (CTest: skipped).
# usage: policy_netns.sh BUILD_BIN_DIR
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
skip() { echo "## POLICY NAMESPACE TEST NOT RUN: $*"; exit 77; }

tag=$$
. "$HERE/../common/two_hosts.sh"
. "$HERE/../common/capture.sh"
two_hosts policy "10.78.$((tag % 200 + 20))" "ura$tag" "urb$tag" off

port=$((21000 + tag % 20000))

# run KBPS ITERS [SIZE]: prints the client's JSON line; fails unless both ends verified every byte.
run() {
  port=$((port + 1))
  inA timeout 120 "$BIN/uroce-perf" --server --port $port > "$tmp/srv.log" 2>&1 &
  srv=$!
  out=$(inB timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $port --op write --mode bw --size "${3:-16384}" \
        --iters "$2" ${1:+--rate-limit "$1"} --json 2>&1)
  c=$?
  wait $srv
  s=$?
  echo "$out"
  [ $c = 0 ] && [ $s = 0 ] && echo "$out" | grep -q '"verified":true'
}

# dscp NAME DSCP PERFTEST_ARGS...: ib_write_bw between the hosts, captured on B's side of the
# veth; the test QPs' packets both ways must carry DSCP, and every packet ECT(0).
dscp() {
  name=$1 want=$2
  shift 2
  port=$((port + 1))
  capture_start "$B" "urb$tag" "$tmp/$name.pcap" udp port 4791 || bad "$name: no capture on B's side"
  inB timeout 60 "$BIN/uroce-run" -- ib_write_bw -p $port -s 4096 -n 200 "$@" > "$tmp/$name.srv" 2>&1 &
  srv=$!
  inB sh -c ". '$HERE/../common/listen.sh'; listen_wait $port" || true
  inA timeout 60 "$BIN/uroce-run" -- ib_write_bw -p $port -s 4096 -n 200 "$@" "$net.2" > "$tmp/$name.cli" 2>&1
  c=$?
  wait $srv
  s=$?
  capture_stop
  marks=$(tshark -r "$tmp/$name.pcap" -T fields -e ip.src -e ip.dsfield.dscp -e ip.dsfield.ecn 2>/dev/null | sort | uniq -c)
  from_a=$(echo "$marks" | awk -v a="$net.1" -v d="$want" '$2 == a && $3 == d {n += $1} END {print n + 0}')
  from_b=$(echo "$marks" | awk -v b="$net.2" -v d="$want" '$2 == b && $3 == d {n += $1} END {print n + 0}')
  not_ect=$(echo "$marks" | awk '$4 != 2 {n += $1} END {print n + 0}')
  # 200 WRITEs from A (a packet each at least), their ACKs from B; perftest's own rdma_cm handshake
  # connection (no TOS asked) and the CM's MADs keep DSCP 0.
  if [ $c = 0 ] && [ $s = 0 ] && [ "$from_a" -ge 200 ] && [ "$from_b" -gt 0 ] && [ "$not_ect" = 0 ]; then
    ok "DSCP $want by $name: $from_a packets from A, $from_b from B marked, every packet ECT(0)"
  else
    bad "DSCP $want by $name (client $c, server $s): $marks $(tail -3 "$tmp/$name.cli")"
  fi
}
if command -v tcpdump > /dev/null && command -v tshark > /dev/null && command -v ib_write_bw > /dev/null; then
  dscp tclass 46 -x 0 --tclass=184
  dscp rdma_cm 26 -R -T 104
else
  echo "## DSCP CASES NOT RUN: tcpdump, tshark or perftest missing"
fi

for kbps in 10000 100000 1000000 10000000; do
  size=16384
  [ $kbps -ge 10000000 ] && size=65536  # 10 Gb/s: fewer, larger WRITEs
  iters=$((kbps * 1000 / 8 / size))  # about a second of payload at the limit
  [ $iters -lt 64 ] && iters=64
  if out=$(run $kbps $iters $size); then
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

# The port's scheduler: two QPs in priorities 0 and 1 of ETS weights 3:1 behind a port rate of
# 500 Mb/s (far below what the veth carries, so the scheduler decides) for two seconds: their
# byte-checked goodputs within 5 % of 3:1, and the port's rate within 90-100 %.
sched() {
  port=$((port + 1))
  inA timeout 60 "$BIN/policy_share" --server --port $port > "$tmp/share.srv" 2>&1 &
  srv=$!
  out=$(inB env UROCE_QOS="$1" timeout 60 "$BIN/policy_share" --connect "$net.1" --port $port --tclass 0,32 \
        --seconds 2 2>&1 | tail -1)
  wait $srv
  echo "$out" | /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
r, g = d['bytes'][0] / d['bytes'][1], sum(d['bytes']) * 8 / d['seconds'] / 500e6
print('ratio %.3f port %.3f' % (r, g))
sys.exit(0 if d['verified'] and abs(r / $2 - 1) <= 0.05 and 0.9 <= g <= 1.0 else 1)" 2>&1
}
for w in "3 1" "1 1"; do
  set -- $w
  if res=$(sched "ets 0:$1 1:$2 rate 500mbit" "$1 / $2"); then
    ok "ETS $1:$2 at 500 Mb/s: $res"
  else
    bad "ETS $1:$2 at 500 Mb/s: $res $(tail -2 "$tmp/share.srv")"
  fi
done

# Two processes on host B share its port: each with "rate 500mbit" (shares 1:1, then 3:1),
# both streaming at once for two seconds; together they keep to 500 Mb/s, split by share.
procs() {
  p1=$((port + 1)) p2=$((port + 2))
  port=$((port + 2))
  inA timeout 60 "$BIN/policy_share" --server --port $p1 > "$tmp/p1.srv" 2>&1 &
  s1=$!
  inA timeout 60 "$BIN/policy_share" --server --port $p2 > "$tmp/p2.srv" 2>&1 &
  s2=$!
  inB env UROCE_QOS="rate 500mbit share $1" timeout 60 "$BIN/policy_share" --connect "$net.1" --port $p1 \
    --seconds 2 > "$tmp/p1.out" 2>&1 &
  c1=$!
  inB env UROCE_QOS="rate 500mbit share $2" timeout 60 "$BIN/policy_share" --connect "$net.1" --port $p2 \
    --seconds 2 > "$tmp/p2.out" 2>&1
  wait $c1 $s1 $s2
  /usr/bin/python3 -c "
import json, sys
a, b = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:3])
r, g = a['bytes'][0] / b['bytes'][0], (a['bytes'][0] + b['bytes'][0]) * 8 / max(a['seconds'], b['seconds']) / 500e6
print('ratio %.3f port %.3f' % (r, g))
sys.exit(0 if a['verified'] and b['verified'] and abs(r / ($1 / $2) - 1) <= 0.1 and 0.85 <= g <= 1.0 else 1)" \
    "$tmp/p1.out" "$tmp/p2.out" 2>&1
}
for w in "1 1" "3 1"; do
  set -- $w
  if res=$(procs $1 $2); then
    ok "two processes of shares $1:$2 on one 500 Mb/s port: $res"
  else
    bad "two processes of shares $1:$2 on one 500 Mb/s port: $res $(tail -n 2 "$tmp/p1.out" "$tmp/p2.out")"
  fi
done

echo "policy netns: $passed passed, $failed failed"
[ $failed = 0 ]
