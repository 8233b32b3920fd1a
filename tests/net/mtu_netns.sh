#!/bin/sh
# uroce on a real Ethernet link: two network namespaces joined by a veth pair, first at MTU
# 1500, then at 9000. Every uroce-perf operation at every size over IPv4, a subset over the
# IPv6 link-local GID (index 0, as rxe orders its GIDs), rdma-check (byte-exact, through the
# libibverbs drop-in) and perftest run across it with default settings, and every packet
# captured must fit the link: IB MTU 1024 at 1500, 4096 at 9000. Both run again with
# UROCE_LINK=xdp, through AF_XDP (declined in one line without capabilities), and AF_XDP with
# the sockets at the other end. Hostile frames go through each receive path (UDP, raw, AF_XDP).
# mckey sends to an IPv6 multicast group with members on both hosts; raw packet QPs send
# Ethernet frames from one host to the other.
# Needs root (ip netns); without it, says so loudly and exits 77 (CTest: skipped).
# usage: mtu_netns.sh BUILD_BIN_DIR
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/listen.sh"
. "$HERE/../common/mckey.sh"
PY=/usr/bin/python3
skip() { echo "## MTU NAMESPACE TEST NOT RUN: $*"; exit 77; }

tag=$$
. "$HERE/../common/two_hosts.sh"
# No uroce setting: each side's first device is its veth's.
two_hosts mtu "10.77.$((tag % 200 + 20))" "uma$tag" "umb$tag" ll

port=$((20000 + tag % 20000))

# Largest IPv4 total length in a capture, and how many RoCE payloads had exactly N bytes.
pcap_stats() {
  $PY - "$@" <<'EOF'
import struct, sys
biggest, full = 0, 0
want = int(sys.argv[1])
for name in sys.argv[2:]:
    d = open(name, 'rb').read()
    off = 24
    while off + 16 <= len(d):
        incl = struct.unpack_from('<I', d, off + 8)[0]
        f = d[off + 16: off + 16 + incl]
        off += 16 + incl
        ip = f[14:]
        if ip[0] >> 4 == 6:
            ihl, total = 40, 40 + struct.unpack_from('>H', ip, 4)[0]
        else:
            ihl, total = (ip[0] & 15) * 4, struct.unpack_from('>H', ip, 2)[0]
        biggest = max(biggest, total)
        bth = ip[ihl + 8:]
        op = bth[0]
        hdr = {0x06: 16, 0x07: 0, 0x08: 0, 0x0a: 16, 0x0d: 4, 0x0e: 0, 0x0f: 4, 0x00: 0, 0x01: 0}.get(op)
        if hdr is not None and total - ihl - 8 - 12 - hdr - 4 == want:
            full += 1
print(biggest, full)
EOF
}

perf_case() {  # MTU OP MODE SIZE ITERS [GID-INDEX]: GID 1 is IPv4, 0 the IPv6 link-local one; $perf_extra: more client options
  port=$((port + 1))
  gid=${6:-1}
  fam=IPv4
  [ "$gid" = 0 ] && fam=IPv6
  cap="$tmp/perf-$1-$2-$3-$4-$gid.pcap"
  inA env UROCE_PCAP="$cap" ${srv_link_env-$link_env} timeout 120 "$BIN/uroce-perf" --server --port $port --gid "$gid" > "$tmp/srv.log" 2>&1 &
  srv=$!
  out=$(inB env $link_env timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $port --gid "$gid" --op "$2" \
        --mode "$3" --size "$4" --iters "$5" $perf_extra --json 2>&1)
  c=$?
  wait $srv
  s=$?
  if [ $c = 0 ] && [ $s = 0 ] && echo "$out" | grep -q '"verified":true' && link_used "$out" "$(cat "$tmp/srv.log")"; then
    ok "MTU $1: uroce-perf over $fam $link_name$2 $3 $4 B x $5 $perf_extra, verified"
  else
    bad "MTU $1: uroce-perf over $fam $link_name$2 $3 $4 B x $5 $perf_extra (client $c, server $s): $out $(cat "$tmp/srv.log")"
  fi
}
link_env="" link_name=""
link_used() { :; }  # the sockets: nothing more to check
# With UROCE_LINK=xdp both ends send and receive through AF_XDP: their counters say so, for
# most packets (the first ones to a peer the kernel has not resolved yet go by the socket).
xdp_used() {
  for log in "$1" "$2"; do
    echo "$log" | grep -q "AF_XDP is not available" && return 1
    echo "$log" | tr ' ' '\n' | awk -F= '{v[$1] = $2}
      END {exit !(v["xdp_tx_packets"] > 0 && v["xdp_rx_packets"] > 0 &&
                  2 * v["xdp_tx_packets"] >= v["tx_packets"] && 2 * v["xdp_rx_packets"] >= v["rx_packets"])}' || return 1
  done
}
# Where AF_XDP cannot run (no capabilities) each end says why in one line, once, and the
# sockets carry everything.
xdp_declined() {
  for log in "$1" "$2"; do
    [ "$(echo "$log" | grep -c "AF_XDP is not available")" = 1 ] || return 1
    echo "$log" | grep -q "xdp_" && return 1
  done
  return 0
}

pair() {  # NAME SERVER-CMD... -- CLIENT-CMD...: runs a drop-in program pair across the link
  name=$1
  shift
  port=$((port + 1))
  srv_cmd="" cli_cmd="" side=srv
  for a in "$@"; do
    if [ "$a" = "--" ]; then side=cli; continue; fi
    a=$(printf '%s\n' "$a" | sed "s/PORT/$port/; s/SERVER/$net.1/")
    if [ $side = srv ]; then srv_cmd="$srv_cmd $a"; else cli_cmd="$cli_cmd $a"; fi
  done
  inA env UROCE_PCAP="$tmp/pair-$name.pcap" timeout 120 "$BIN/uroce-run" -- $srv_cmd > "$tmp/psrv.log" 2>&1 &
  srv=$!
  ip netns exec "$A" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
  inB timeout 120 "$BIN/uroce-run" -- $cli_cmd > "$tmp/pcli.log" 2>&1
  c=$?
  wait $srv
  s=$?
  if [ $c = 0 ] && [ $s = 0 ]; then
    ok "MTU $mtu: $name through the drop-in"
  else
    bad "MTU $mtu: $name (client $c, server $s)"
    cat "$tmp/psrv.log" "$tmp/pcli.log"
  fi
}

op_matrix() {  # MTU: every operation at every size over IPv4, latency and bandwidth
for op in send send_imm write write_imm read; do
  for size in 1 1023 1024 65536 1048576; do
    it=100
    [ $size = 1048576 ] && it=10
    perf_case $1 $op lat $size $it
    [ $size = 1048576 ] && it=30 || it=300
    perf_case $1 $op bw $size $it
  done
done
for op in atomic cas; do
  perf_case $1 $op lat 8 100
  perf_case $1 $op bw 8 300
done
# One buffer each side, as iperf3 and perftest: the server checks the one the client says.
perf_extra="--buffers 1"
perf_case $1 write bw 1048576 30
perf_extra=""
}

# Hostile frames through each receive path while a transfer runs: the fuzz seeds' packets
# readdressed to the server's steering slot (good and bad ICRCs, varying IPv4 IDs) and frames
# whose lengths lie, sent raw from host B. Each is counted once, exactly, and the transfer goes
# on verified. Lying lengths reach raw and AF_XDP receive, which count them; the kernel's UDP
# sockets drop them before uroce (0 counted).
# usage: hostile_case NAME FRAMING-COUNTED GID ENV...
hostile_case() {
  name=$1 counted=$2 gid=$3
  shift 3
  port=$((port + 1))
  if [ $gid = 0 ]; then
    from=$(ip -n "$B" -6 -br addr show dev "umb$tag" scope link | awk '{sub("/.*", "", $3); print $3}')
    to=$(ip -n "$A" -6 -br addr show dev "uma$tag" scope link | awk '{sub("/.*", "", $3); print $3}')
    name="$name, IPv6"
  else
    from=$net.2 to=$net.1 name="$name, IPv4"
  fi
  inA env "$@" timeout 120 "$BIN/uroce-perf" --server --port $port --gid $gid > "$tmp/srv.log" 2>&1 &
  srv=$!
  # Long enough (about 3 to 6 s) for the status polls below to find its QP on a loaded runner:
  # at 100000 round trips (under 2 s) one raw-receive case once ended before it was found.
  inB env "$@" timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $port --gid $gid --op send \
    --mode lat --size 64 --iters 300000 --json > "$tmp/cli.log" 2>&1 &
  cli=$!
  # The server's QP in RTS: its slot and QPN (at most 10 s).
  for i in $(seq 1 100); do
    qp=$(inA "$BIN/uroce" --json | $PY -c 'import json,sys
for d in json.load(sys.stdin)["devices"]:
    for p in d["processes"]:
        for q in p["qps"]:
            if q["type"] == "RC" and q["state"] == "RTS": print(p["slot"], q["qpn"])')
    [ -n "$qp" ] && break
    sleep 0.1
  done
  [ -n "$qp" ] || echo "## $name: the server's QP was not seen in RTS within 10 s"
  a_mac=$(ip -n "$A" -br link show "uma$tag" | awk '{print $3}')
  seed=27
  sent=$(inB $PY "$HERE/hostile_frames.py" "umb$tag" "$a_mac" "$from" "$to" $qp "$HERE/../../fuzz/seeds" $seed $mtu 2>&1)
  good=$(echo "$sent" | sed -n 's/.*good=\([0-9]*\).*/\1/p') bad=$(echo "$sent" | sed -n 's/.*bad=\([0-9]*\).*/\1/p')
  framing=$(echo "$sent" | sed -n 's/.*framing=\([0-9]*\).*/\1/p')
  [ "$counted" = all ] && counted=$framing
  # Counted: bad ICRCs as such, the rest by what is wrong with them (no QP, malformed, ...).
  want="${bad:-x} ${good:-x} $counted"
  for i in $(seq 1 50); do  # at most 5 s
    got=$(inA "$BIN/uroce" --json | $PY -c 'import json,sys
drops = ("rx_malformed", "rx_unknown_qp", "rx_bad_pkey", "rx_bad_opcode", "rx_wrong_state", "rx_bad_source",
         "rx_runt", "rx_bad_dest")
for d in json.load(sys.stdin)["devices"]:
    for p in d["processes"]:
        c = p["counters"]
        if any(q["type"] == "RC" and q["state"] == "RTS" for q in p["qps"]):
            print(c.get("rx_bad_icrc", 0), sum(c.get(k, 0) for k in drops), c.get("link_rx_malformed", 0))')
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  wait $cli
  c=$?
  wait $srv
  s=$?
  if [ "$got" = "$want" ] && [ $c = 0 ] && [ $s = 0 ] && grep -q '"verified":true' "$tmp/cli.log"; then
    ok "MTU $mtu: $name: $bad frames with bad ICRCs, $good readdressed seeds, $counted of $framing lying lengths counted, each once; the transfer beside them verified"
  else
    bad "MTU $mtu: $name hostile frames (seed $seed): sent '$sent' to '$qp', counted (bad ICRC, dropped, malformed) '$got', want '$want'; client $c, server $s: $(cat "$tmp/cli.log" "$tmp/srv.log")"
  fi
}
# Two processes want AF_XDP on one interface: the first has it, the second is told in one line
# and runs on the sockets; kill -9 of the first takes its program off the interface (a BPF
# link dies with its process), and the next process has AF_XDP again.
xdp_shared() {
  port=$((port + 1)) p1=$port
  port=$((port + 1)) p2=$port
  x="UROCE_LINK=xdp UROCE_PERF_COUNTERS=1"
  inA env $x timeout 120 "$BIN/uroce-perf" --server --port $p1 --gid 1 > "$tmp/x1s.log" 2>&1 &
  s1=$!
  inB env $x timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $p1 --gid 1 --op send --mode lat --size 64 \
    --iters 2000000 --json > "$tmp/x1c.log" 2>&1 &
  c1=$!
  for i in $(seq 1 100); do  # the first pair's program on A's interface, at most 10 s
    ip -n "$A" link show "uma$tag" | grep -q "prog/xdp" && break
    sleep 0.1
  done
  inA env $x timeout 120 "$BIN/uroce-perf" --server --port $p2 --gid 1 > "$tmp/x2s.log" 2>&1 &
  s2=$!
  out=$(inB env UROCE_PERF_COUNTERS=1 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $p2 --gid 1 --op write \
        --mode bw --size 65536 --iters 300 --json 2>&1)
  c=$?
  wait $s2
  s=$?
  n=$(grep -c "AF_XDP is not available" "$tmp/x2s.log")
  if [ $c = 0 ] && [ $s = 0 ] && echo "$out" | grep -q '"verified":true' && [ "$n" = 1 ] &&
     grep -q "AF_XDP is not available (another XDP program is on uma$tag)" "$tmp/x2s.log" && ! grep -q xdp_ "$tmp/x2s.log"; then
    ok "MTU $mtu: a second process asking for AF_XDP on the interface is told in one line and WRITEs by UDP, verified"
  else
    bad "MTU $mtu: second AF_XDP process (client $c, server $s): $out $(cat "$tmp/x2s.log")"
  fi
  pkill -9 -f "uroce-perf --server --port $p1 " 2>/dev/null  # the process itself, whatever forked it
  wait $s1 2>/dev/null
  kill $(ps -o pid= --ppid $c1) 2>/dev/null  # its peer has nobody to talk to
  wait $c1 2>/dev/null
  for i in $(seq 1 300); do  # at most 30 s: the kernel detaches a dead link from a work queue
    ip -n "$A" link show "uma$tag" | grep -q "prog/xdp" || break
    sleep 0.1
  done
  if ip -n "$A" link show "uma$tag" | grep -q "prog/xdp"; then
    bad "MTU $mtu: the XDP program stayed on the interface after kill -9 of its process"
  else
    ok "MTU $mtu: kill -9 of the AF_XDP process takes its program off the interface"
  fi
  link_env="$x" link_name="AF_XDP after a kill -9 "
  link_used() { xdp_used "$@"; }
  perf_case $mtu write bw 65536 300 1
  link_env="" link_name=""
  link_used() { :; }
}
hostile() {
  hostile_case "UDP sockets (GRO)" 0 1 UROCE_LINK=udp
  hostile_case "UDP sockets (GRO)" 0 0 UROCE_LINK=udp
  hostile_case "raw receive" all 1 UROCE_RAW_RX=1
  hostile_case "AF_XDP" all 1 UROCE_LINK=xdp
  hostile_case "AF_XDP" all 0 UROCE_LINK=xdp
}
# mckey over IPv6: members of group ff0e::db8:N on both hosts (the sender's own included), the
# sender on A, every address link-local (the GIDs at index 0).
mckey6() {
  command -v mckey >/dev/null || { echo "## mckey is not installed (Debian: rdmacm-utils): not run"; return; }
  g=$(printf "ff0e::db8:%x" $((tag % 65536)))
  la=$(ip -n "$A" -6 -br addr show dev "uma$tag" scope link | awk '{sub("/.*", "", $3); print $3}')
  lb=$(ip -n "$B" -6 -br addr show dev "umb$tag" scope link | awk '{sub("/.*", "", $3); print $3}')
  inB timeout 60 "$BIN/uroce-run" -- mckey -m "$g" -b "$lb%umb$tag" -C 10 > "$tmp/mkb.log" 2>&1 &
  mkb=$!
  inA timeout 60 "$BIN/uroce-run" -- mckey -m "$g" -b "$la%uma$tag" -C 10 > "$tmp/mka.log" 2>&1 &
  mka=$!
  mckey_joined "$g" inA inB
  inA timeout 60 "$BIN/uroce-run" -- mckey -m "$g" -b "$la%uma$tag" -s -C 10 > "$tmp/mks.log" 2>&1
  e=$?
  wait $mka; fa=$?
  wait $mkb; fb=$?
  if [ $e = 0 ] && [ $fa = 0 ] && [ $fb = 0 ] && grep -q "data transfers complete" "$tmp/mka.log" &&
    grep -q "data transfers complete" "$tmp/mkb.log"; then
    ok "MTU $1: mckey, 10 datagrams to IPv6 group $g, received on both hosts"
  else bad "MTU $1: mckey over IPv6 (sender $e, members $fa $fb):"; cat "$tmp/mks.log" "$tmp/mka.log" "$tmp/mkb.log"; fi
}

# Raw packet QPs across the link: 40 frames of every size up to the MTU from A's raw QP to B's,
# byte-exact; A's own rule sees its broadcast frame come back and none of its unicast ones.
raw_frames() {
  ma=$(ip -n "$A" link show "uma$tag" | awk '/ether/ {print $2}')
  mb=$(ip -n "$B" link show "umb$tag" | awk '/ether/ {print $2}')
  inB timeout 60 "$BIN/uroce-run" -- "$BIN/raw_peer" recv "$ma" 40 $tag > "$tmp/rawb.log" 2>&1 &
  rb=$!
  i=0
  while [ $i -lt 200 ] && ! grep -q ready "$tmp/rawb.log" && kill -0 $rb 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
  inA timeout 60 "$BIN/uroce-run" -- "$BIN/raw_peer" send "$ma" "$mb" 40 $tag > "$tmp/rawa.log" 2>&1
  e=$?
  wait $rb; r=$?
  if [ $e = 0 ] && [ $r = 0 ]; then
    ok "MTU $1: raw packet QPs, 40 frames of 60..1514 bytes A -> B byte-exact, A's broadcast looped back to A alone of its frames"
  else bad "MTU $1: raw packet QPs (sender $e, receiver $r):"; cat "$tmp/rawa.log" "$tmp/rawb.log"; fi
}

ipv6_subset() {  # MTU: over the IPv6 link-local GID
  for op in send write read; do
    for size in 1024 65536 1048576; do
      perf_case $1 $op bw $size 30 0
    done
  done
  perf_case $1 cas lat 8 100 0
}

for mtu in 1500 9000; do
  ip -n "$A" link set "uma$tag" mtu $mtu
  ip -n "$B" link set "umb$tag" mtu $mtu
  ib=1024
  [ $mtu = 9000 ] && ib=4096
  rm -f "$tmp"/*.pcap
  active=$(inA "$BIN/uroce-run" -- ibv_devinfo -d "uroce_uma$tag" -v 2>&1 | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
  [ "$active" = $ib ] && ok "MTU $mtu: the port's active MTU is $ib" || bad "MTU $mtu: active_mtu '$active', want $ib"
  gids=$(inA "$BIN/uroce-run" -- ibv_devinfo -d "uroce_uma$tag" -v 2>&1 | sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*\([^ ,]*\).*/\1=\2/p' | tr '\n' ' ')
  case "$gids" in
    "0=fe80:"*" 1=::ffff:$net.1 ") ok "MTU $mtu: GID 0 is the IPv6 link-local address, GID 1 the IPv4 one ($gids)" ;;
    *) bad "MTU $mtu: GID table '$gids'" ;;
  esac
  op_matrix $mtu
  ipv6_subset $mtu
  [ $mtu = 1500 ] && mckey6 $mtu
  [ $mtu = 1500 ] && raw_frames $mtu
  pair "rdma-check over IPv4" "$BIN/rdma-check" -g 1 -p PORT -- "$BIN/rdma-check" -g 1 -p PORT SERVER
  pair "rdma-check over IPv6" "$BIN/rdma-check" -g 0 -p PORT -- "$BIN/rdma-check" -g 0 -p PORT SERVER
  for t in "ib_write_bw -s 65536 -n 200" "ib_read_bw -s 65536 -n 200" "ib_send_bw -s 65536 -n 200"; do
    pair "${t%% *} over IPv4" $t -x 1 --use_old_post_send -p PORT -- $t -x 1 --use_old_post_send -p PORT SERVER
  done
  t="ib_write_bw -s 65536 -n 200"
  pair "${t%% *} over IPv6" $t -x 0 --use_old_post_send -p PORT -- $t -x 0 --use_old_post_send -p PORT SERVER
  # The op matrix and the IPv6 subset again with kernel bypass forced (UROCE_LINK=xdp), through
  # AF_XDP (at 9000 each frame in two or three buffers: multi-buffer AF_XDP).
  link_env="UROCE_LINK=xdp UROCE_PERF_COUNTERS=1" link_name="AF_XDP "
  link_used() { xdp_used "$@"; }
  op_matrix $mtu
  ipv6_subset $mtu
  # AF_XDP's sends to a kernel's socket (its UDP checksum over IPv6 checked there), and the
  # kernel's segmented runs (UDP GSO) into AF_XDP.
  srv_link_env="UROCE_LINK=udp UROCE_PERF_COUNTERS=1" link_name="AF_XDP to UDP "
  link_used() { echo "$1" | grep -q "xdp_tx_packets=[1-9]" && ! echo "$2" | grep -q xdp_; }
  perf_case $mtu write bw 65536 300 0
  perf_case $mtu read bw 65536 300 0
  perf_case $mtu send lat 1024 100 1
  srv_link_env="UROCE_LINK=xdp UROCE_PERF_COUNTERS=1" link_env="UROCE_LINK=udp UROCE_PERF_COUNTERS=1"
  link_name="UDP to AF_XDP "
  link_used() { echo "$2" | grep -q "xdp_rx_packets=[1-9]" && ! echo "$2" | grep -q "link_rx_malformed" && ! echo "$1" | grep -q xdp_; }
  perf_case $mtu write bw 1048576 30 1
  perf_case $mtu send bw 65536 300 0
  unset srv_link_env
  link_env="" link_name=""
  link_used() { :; }
  if [ $mtu = 1500 ]; then  # root without capabilities: one line, then the sockets
    port=$((port + 1))
    nocap="setpriv --bounding-set=-all --inh-caps=-all"
    inA env UROCE_LINK=xdp UROCE_PERF_COUNTERS=1 $nocap timeout 120 "$BIN/uroce-perf" --server --port $port --gid 1 \
      > "$tmp/srv.log" 2>&1 &
    srv=$!
    out=$(inB env UROCE_LINK=xdp UROCE_PERF_COUNTERS=1 $nocap timeout 120 "$BIN/uroce-perf" --connect "$net.1" \
          --port $port --gid 1 --op write --mode bw --size 65536 --iters 300 --json 2>&1)
    c=$?
    wait $srv
    s=$?
    if [ $c = 0 ] && [ $s = 0 ] && echo "$out" | grep -q '"verified":true' && xdp_declined "$out" "$(cat "$tmp/srv.log")" &&
       echo "$out" | grep -q "AF_XDP is not available (cannot load the XDP program (needs CAP_NET_ADMIN and CAP_BPF)"; then
      ok "MTU $mtu: without CAP_NET_ADMIN/CAP_BPF, UROCE_LINK=xdp says so in one line and WRITEs go by UDP, verified"
    else
      bad "MTU $mtu: without capabilities (client $c, server $s): $out $(cat "$tmp/srv.log")"
    fi
  fi
  hostile
  xdp_shared
  set -- $(pcap_stats $ib "$tmp"/*.pcap)
  if [ "${1:-99999}" -le $mtu ] && [ "${2:-0}" -gt 0 ]; then
    ok "MTU $mtu: every captured packet fits (largest IP packet $1 B), $2 packets carry $ib-byte payloads"
  else
    bad "MTU $mtu: largest IP packet ${1:-?} B, ${2:-0} packets with $ib-byte payloads"
  fi
done

echo "mtu netns: $passed passed, $failed failed"
[ $failed = 0 ]
