#!/bin/sh
# The host NIC's flow table between two hosts: namespaces A and B on a veth pair (MTU 1500), B
# with two addresses, .2 and .3, as two peers of A. Every uroce process on A shares A's host
# NIC, whose rules file is $tmp/rules. Checked:
# - bad rules are refused with a clear error, by the daemon and in the file alike;
# - "src .3 action drop": uroce-perf from .3 fails while one from .2 is verified, the rule
#   counts .3's packets, and A sends nothing at all to .3 on UDP 4791 (no ACK, no NAK);
# - the rule is kept: the daemon leaves, a new one starts with it and it still drops; one
#   that starts with a rule for every source still opens its device;
# - "src .3 action police 20mbit": a UDP flood from .3 gets through at no more than the rate
#   (and not much less), while uroce-perf from .2 is verified beside it; deleting the rules
#   lets .3 through again;
# - count and mirror pass .3's packets on (verified), counted, the mirrored WRITEs a capture
#   tshark decodes; a rule added while .2 streams leaves that stream verified;
# - "src .2 action prio 5": A's QPs to .2 send in priority 5.
# Needs root (ip netns); without it, says so loudly and exits 77 (CTest: skipped).
# usage: rules_netns.sh BUILD_BIN_DIR
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
skip() { echo "## RULES NAMESPACE TEST NOT RUN: $*"; exit 77; }
PY=/usr/bin/python3

tag=$$
. "$HERE/../common/two_hosts.sh"
. "$HERE/../common/capture.sh"
two_hosts rules "10.79.$((tag % 200 + 20))" "ura$tag" "urb$tag" off
ip -n "$B" addr add "$net.3/24" dev "urb$tag"
export UROCE_RULES="$tmp/rules"
port=$((22000 + tag % 20000))
rule() { inA env UROCE_RULES="$UROCE_RULES" "$BIN/uroce" rule "$@"; }
# perf FROM ITERS [OP]: uroce-perf from B's address FROM to A, 16 KiB WRITEs (or OP); 0 if both
# ends verified.
perf() {
  port=$((port + 1))
  inA env UROCE_RULES="$UROCE_RULES" timeout 60 "$BIN/uroce-perf" --server --port $port > "$tmp/srv$1.log" 2>&1 &
  srv=$!
  out=$(inB env UROCE_ADDR="$net.$1" timeout 60 "$BIN/uroce-perf" --connect "$net.1" --port $port --op "${3:-write}" \
        --mode bw --size 16384 --iters "$2" --json 2>&1)
  c=$?
  wait $srv
  echo "$out" > "$tmp/cli$1.log"
  [ $c = 0 ] && echo "$out" | grep -q '"verified":true'
}
# keep_daemon N: a process on A that keeps A's daemon (and its counters) up for up to 30 s, as
# $keeper, once the daemon answers.
keep_daemon() {
  inA env UROCE_RULES="$UROCE_RULES" timeout 30 "$BIN/uroce-perf" --server --port $((port + $1)) > /dev/null 2>&1 &
  keeper=$!
  for _ in $(seq 50); do rule list 2>/dev/null | grep -q "no host NIC daemon" || break; sleep 0.1; done
}
# stream2 NAME ITERS: 64 KiB WRITEs from .2 in the background, server $srv, client $cli (logs
# $tmp/srvNAME.log, $tmp/cliNAME.log).
stream2() {
  port=$((port + 1))
  inA env UROCE_RULES="$UROCE_RULES" timeout 60 "$BIN/uroce-perf" --server --port $port > "$tmp/srv$1.log" 2>&1 &
  srv=$!
  inB env UROCE_ADDR="$net.2" timeout 60 "$BIN/uroce-perf" --connect "$net.1" --port $port --op write --mode bw \
    --size 65536 --iters "$2" --json > "$tmp/cli$1.log" 2>&1 &
  cli=$!
}
# field ID KEY: a rule's counter from `uroce rule list --json`.
field() {
  rule list --json | $PY -c "import json,sys; print([r for r in json.load(sys.stdin)['rules'] if r['id'] == $1][0]['$2'])"
}

# Bad rules: refused, nothing written.
for words in "src 10.0.0.300 action drop" "src 10.0.0.1/33 action drop" "qpn 5-2 action drop" "action" \
             "dscp 64 action drop" "opcode push action drop" "src 10.0.0.1" "action police 1kbit" "action jump" \
             "action mirror relative.pcap" "sport 70000 action drop" "color red action drop"; do
  if err=$(rule add $words 2>&1); then bad "'$words' taken: $err"
  elif echo "$err" | grep -q "rule: "; then :
  else bad "'$words': no clear error: $err"; fi
done
[ -s "$UROCE_RULES" ] && grep -qv '^#' "$UROCE_RULES" && bad "a refused rule reached the file: $(cat "$UROCE_RULES")"
ok "12 bad rules refused with an error that says why"

perf 2 256 && ok "before any rule: .2 verified" || bad "before any rule: .2 failed: $(tail -2 "$tmp/cli2.log")"
if out=$(rule add src "$net.3" action drop); then ok "rule added: $out"; else bad "rule add: $out"; fi

# A capture on A's side: nothing of A's may go to .3 on UDP 4791.
capture_start "$A" "ura$tag" "$tmp/a.pcap" udp port 4791 || bad "no capture on A's side"
perf 3 64 && bad "dropped source .3 verified" || ok ".3 stopped by the drop rule"
perf 2 256 && ok "beside it .2 verified" || bad ".2 failed beside the drop rule: $(tail -2 "$tmp/cli2.log")"
capture_stop
to_3=$(tshark -r "$tmp/a.pcap" -Y "ip.src == $net.1 && ip.dst == $net.3" 2>/dev/null | wc -l)
from_3=$(tshark -r "$tmp/a.pcap" -Y "ip.src == $net.3" 2>/dev/null | wc -l)
[ "$to_3" = 0 ] && [ "$from_3" -gt 0 ] && ok "A answered none of .3's $from_3 packets" || bad "A sent $to_3 packets to .3 ($from_3 from it)"

# Counted while a daemon runs (a process keeps it), and kept across its restart.
keep_daemon 100
dropped=$(field 1 dropped)
[ "${dropped:-0}" -gt 0 ] && ok "rule 1 counts .3's packets: dropped $dropped" || bad "rule 1 dropped ${dropped:-?}"
kill $keeper 2>/dev/null
wait $keeper 2>/dev/null
inA pkill -x uroced
for _ in $(seq 50); do inA pgrep -x uroced > /dev/null || break; sleep 0.1; done
perf 3 64 && bad "after the daemon's restart .3 verified" || ok "after the daemon's restart the rule still drops .3"

# A rule without a source sends every packet through the daemon, its own probe of a new
# steering group included: a daemon that starts with one still opens its device.
out=$(rule add opcode cnp action count) || bad "broad rule: $out"
inA pkill -x uroced
for _ in $(seq 50); do inA pgrep -x uroced > /dev/null || break; sleep 0.1; done
perf 2 256 && ok "a daemon started with a rule for every source opens its device; .2 verified through it" \
  || bad "with a rule for every source: $(tail -2 "$tmp/cli2.log") $(tail -2 "$tmp/srv2.log")"
rule del "$(rule list --json | $PY -c "import json,sys; print(json.load(sys.stdin)['rules'][-1]['id'])")" > /dev/null

# Police: a flood from .3 for two seconds against a 20 Mb/s bucket of 64 KiB, .2 beside it.
rule del 1 > /dev/null || bad "rule del 1"
out=$(rule add src "$net.3" action police 20mbit burst 64k) || bad "police rule: $out"
stream2 p 8192
flood=$(inB $PY -c "
import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('$net.3', 0))
pkt = struct.pack('>BBHII', 0x0a, 0, 0xffff, 1 << 18 | 0x123, 0) + bytes(1024)  # to slot 1
end, n = time.time() + 2, 0
while time.time() < end:
    try:
        s.sendto(pkt, ('$net.1', 4791)); n += 1
    except OSError:
        pass
print(n, len(pkt))")
wait $cli
c=$?
wait $srv
[ $c = 0 ] && grep -q '"verified":true' "$tmp/clip.log" && ok ".2 verified beside the flood: $(grep -o '"bw_gbps":[0-9.]*' "$tmp/clip.log")" \
  || bad ".2 failed beside the flood: $(tail -2 "$tmp/clip.log")"
id=$(rule list --json | $PY -c "import json,sys; print(json.load(sys.stdin)['rules'][0]['id'])")
packets=$(field "$id" packets)
dropped=$(field "$id" dropped)
if $PY -c "
sent, size = map(int, '$flood'.split())
passed = $packets - $dropped
cap = 20e6 / 8 * 2.2 + 64 * 1024  # the rate over the flood's two seconds (and a margin), and the burst
print('flood sent %d, matched $packets, passed %d (%.1f Mb/s)' % (sent, passed, passed * (size + 28) * 8 / 2e6))
import sys; sys.exit(0 if $packets > 0 and passed * size <= cap and passed * size >= 20e6 / 8 * 2 * 0.5 else 1)"; then
  ok "police caps .3's flood"
else
  bad "police: flood $flood, matched $packets, dropped $dropped"
fi
rule del "$id" > /dev/null && perf 3 64 && ok "rules deleted: .3 verified again" || bad "after del .3 failed"

# Count and mirror pass packets on through the daemon: .3 verified, every packet counted, the
# mirrored ones a capture tshark reads as RoCE.
out=$(rule add src "$net.3" opcode write action mirror "$tmp/m.pcap") || bad "mirror rule: $out"
out=$(rule add src "$net.3" action count) || bad "count rule: $out"
perf 3 64 && perf 3 64 send && ok "count and mirror: .3's WRITEs and SENDs verified through the daemon" \
  || bad "count and mirror: .3 failed: $(tail -2 "$tmp/cli3.log")"
keep_daemon 200
ids=$(rule list --json | $PY -c "import json,sys; print(' '.join(str(r['id']) for r in json.load(sys.stdin)['rules']))")
set -- $ids
mirrored=$(field "$1" packets) counted=$(field "$2" packets)
writes=$(tshark -r "$tmp/m.pcap" -Y "infiniband.bth.opcode == 6 || infiniband.bth.opcode == 7 || infiniband.bth.opcode == 8 || infiniband.bth.opcode == 10" 2>/dev/null | wc -l)
if [ "${mirrored:-0}" -gt 0 ] && [ "$writes" = "$mirrored" ] && [ "${counted:-0}" -gt 0 ]; then
  ok "mirror: $mirrored WRITE packets captured and decoded; count: $counted others (the SENDs)"
else
  bad "mirror $mirrored (decoded $writes), count $counted"
fi
kill $keeper 2>/dev/null
wait $keeper 2>/dev/null
rule del "$1" > /dev/null; rule del "$2" > /dev/null

# A change while .2 streams: its QPs go on undisturbed, and .3 is stopped from then on.
stream2 l 16384
sleep 0.5
out=$(rule add src "$net.3" action drop) || bad "live rule: $out"
wait $cli
c=$?
wait $srv
[ $c = 0 ] && grep -q '"verified":true' "$tmp/clil.log" && ok "a rule added mid-stream leaves .2's stream verified" \
  || bad ".2's stream failed across a rule change: $(tail -2 "$tmp/clil.log")"
perf 3 64 && bad ".3 verified after the live drop rule" || ok "the live rule drops .3"

# A class: "src .2 action prio 5" puts A's QPs to .2 in priority 5 (their DSCP 0 maps to 0),
# while .2's packets to A still go straight to their process (the rule counts none).
out=$(rule add src "$net.2" action prio 5) || bad "prio rule: $out"
port=$((port + 1))
inB env UROCE_ADDR="$net.2" timeout 60 "$BIN/uroce-perf" --server --port $port > "$tmp/srvq.log" 2>&1 &
srv=$!
inB sh -c ". '$HERE/../common/listen.sh'; listen_wait $port" || true
inA env UROCE_RULES="$UROCE_RULES" UROCE_PERF_COUNTERS=1 timeout 60 "$BIN/uroce-perf" --connect "$net.2" --port $port \
  --op write --mode bw --size 16384 --iters 256 --json > "$tmp/cliq.log" 2>&1
c=$?
wait $srv
if [ $c = 0 ] && grep -q '"verified":true' "$tmp/cliq.log" && grep -q 'tx_prio5_bytes=' "$tmp/cliq.log" &&
   ! grep -q 'tx_prio0_bytes=' "$tmp/cliq.log"; then
  ok "prio rule: A's WRITEs to .2 went in priority 5 ($(grep -o 'tx_prio5_bytes=[0-9]*' "$tmp/cliq.log"))"
else
  bad "prio rule: $(grep -o 'tx_prio[0-9]_bytes=[0-9]*' "$tmp/cliq.log") $(tail -2 "$tmp/cliq.log")"
fi

echo "rules netns: $passed passed, $failed failed"
[ $failed = 0 ]
