#!/bin/sh
# One NIC per host, shared by every process on it: three network namespaces as hosts on one
# bridge (MTU 1500), each host's processes on its one address and UDP port 4791 through the
# host NIC daemon. Checks, each byte-exact where data moves:
# - two uroce-perf pairs at once between the same two hosts (WRITE and SEND), and a third host
#   talking to the same server host meanwhile;
# - two rdma_cm (rping) servers on one host, clients from two hosts at once (CM MADs passed
#   to the process that listens, by service ID, then by communication ID);
# - two perftest pairs at once (ib_write_bw, ib_send_bw through the drop-in) beside a uroce-perf
#   pair;
# - the uroce command lists the processes and their QPs;
# - kill -9 of one of two servers on a host mid-transfer: it leaves uroce's list, the other transfer completes
#   verified, the killed one's peer fails (retry exceeded) instead of hanging, and a new server
#   on that host gets a slot and works;
# - a process of another user shares the NIC too, its packets passed on by the daemon (it is
#   given no socket of the steering group);
# - kill -9 of the daemon mid-transfer ends the transfer cleanly; a new daemon serves the next;
# - ucmatose, udaddy, mckey (a multicast group with members on two hosts), ucx_perftest, ibv_rc_pingpong, fi_pingpong (rdm) and Open MPI (2 ranks on
#   each of 3 hosts) across hosts.
# - a wildcard rdma_cm listener on a host with two networks serves clients on both;
# - a daemon of another user is refused with what to do; root's uroced serves every user;
# - a user without root alone on two hosts: rping and ib_write_bw across them;
# - rsockets across hosts: rstream -T v, and TCP programs through librspreload.so (tcp_stream;
#   iperf3 each way, its bytes hashed at both ends).
# Needs root (ip netns); without it, says so loudly and exits 77 (CTest: skipped).
# usage: host_nic.sh BUILD_BIN_DIR
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/listen.sh"
. "$HERE/../common/mckey.sh"
PY=/usr/bin/python3
skip() { echo "## HOST NIC TEST NOT RUN: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "no ip (iproute2)"

tag=$$
net="10.79.$((tag % 200 + 20))"
SW="uroce-sw-$tag"
tmp=$(mktemp -d /tmp/uroce-hostnic.XXXXXX)
ns() { echo "uroce-h$1-$tag"; }
cleanup() {
  for h in 1 2 3 4 5 6; do ip netns pids "$(ns $h)" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  for h in 1 2 3 4 5 6; do ip netns del "$(ns $h)" 2>/dev/null; done
  ip netns del "$SW" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
ip netns add "$SW" || skip "cannot create network namespaces"
ip -n "$SW" link add br0 type bridge || skip "cannot create a bridge"
ip -n "$SW" link set br0 up
for h in 1 2 3 4 5 6; do
  ip netns add "$(ns $h)"
  ip link add "uh$h-$tag" type veth peer name "us$h-$tag" || skip "cannot create a veth pair"
  ip link set "uh$h-$tag" netns "$(ns $h)"
  ip -n "$(ns $h)" link set "uh$h-$tag" name eth0  # each host's interface is its eth0, as in a cluster
  ip link set "us$h-$tag" netns "$SW"
  ip -n "$SW" link set "us$h-$tag" master br0 up
  ip -n "$(ns $h)" link set lo up
  # The link-local address is a GID: usable at once, without duplicate address detection.
  ip netns exec "$(ns $h)" sysctl -qw "net.ipv6.conf.eth0.accept_dad=0"
  ip -n "$(ns $h)" addr add "$net.$h/24" dev eth0
  ip -n "$(ns $h)" link set eth0 mtu 1500 up
done
# A command on host h, with no uroce setting at all: each host's device is its interface's.
on() { h=$1; shift; ip netns exec "$(ns $h)" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "NOT OK - $*"; }
port=$((20000 + tag % 20000))
next_port() { port=$((port + 1)); }
# cm_wait HOST PORT [PORT_SPACE]: until a process on HOST listens on rdma_cm's PORT (its service
# ID in uroce's status; TCP's port space, 262, unless given), at most 20 s.
cm_wait() {
  sid=$(printf '0x00000000%04x%04x' "${3:-262}" "$2")
  for i in $(seq 1 200); do
    on "$1" "$BIN/uroce" 2>/dev/null | grep -q "services.*$sid" && return 0
    sleep 0.1
  done
  echo "## nothing listens on rdma_cm port $2 of host $1 after 20 s"
  return 1
}

# perf_server HOST PORT LOG: a uroce-perf server in the background; its pid in $!
perf_server() { on "$1" timeout 120 "$BIN/uroce-perf" --server --port "$2" > "$3" 2>&1 & }
verified() { grep -q '"verified":true' "$1"; }
# proc_pid HOST PATTERN: the process itself (not its timeout or shell) whose command line
# matches the shell pattern
proc_pid() {
  ip netns pids "$(ns $1)" | while read -r p; do
    c=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)
    case "$c" in $2) echo $p ;; esac
  done | head -1
}
server_pid() { proc_pid "$1" "$BIN/uroce-perf *--port $2 *"; }
# small_pair NAME WHAT: a fresh server on host 1, 200 verified 64 B SENDs from host 2
small_pair() {
  next_port
  perf_server 1 $port "$tmp/$1-s.log"; sp=$!
  on 2 timeout 60 "$BIN/uroce-perf" --connect "$net.1" --port $port --op send --mode lat --size 64 --iters 200 --json > "$tmp/$1-c.log" 2>&1
  se=$?
  wait $sp
  if [ $se = 0 ] && verified "$tmp/$1-c.log"; then ok "$2"
  else bad "$2: $(cat "$tmp/$1-c.log" "$tmp/$1-s.log")"; fi
}

# 0. Identity: each host's device has the node GUID of its interface's MAC (as rxe), the same
# before it is opened (ibv_devices) and after (ibv_devinfo), different on each host, and
# honest limits (max_ah).
guids=""
for h in 1 2; do
  mac=$(ip -n "$(ns $h)" link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  set -- $(echo "$mac" | tr : ' ')
  want=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x$1 ^ 2)) "$2" "$3" "$4" "$5" "$6")
  # The first device (ibv_devinfo's and every program's default) is the interface's.
  info=$(on $h "$BIN/uroce-run" -- ibv_devinfo -v 2>&1)
  got=$(echo "$info" | sed -n 's/.*node_guid:[[:space:]]*\([0-9a-f:]*\).*/\1/p' | head -1)
  first=$(echo "$info" | sed -n 's/^hca_id:[[:space:]]*//p' | head -1)
  devices=$(on $h "$BIN/uroce-run" -- ibv_devices 2>&1 | awk 'NR > 2 {printf "%s/%s ", $1, $2}')
  # Loopback's device is listed when asked for (UCX would stripe a job across hosts over it).
  with_lo=$(on $h env UROCE_DEVICES=eth0,lo "$BIN/uroce-run" -- ibv_devices 2>&1 | awk 'NR > 2 {printf "%s ", $1}')
  max_ah=$(echo "$info" | sed -n 's/.*max_ah:[[:space:]]*\([0-9]*\).*/\1/p' | head -1)
  if [ "$got" = "$want" ] && [ "$first" = "uroce_eth0" ] && [ "${max_ah:-0}" -gt 0 ] &&
     [ "$devices" = "uroce_eth0/$(echo "$want" | tr -d :) " ] && [ "$with_lo" = "uroce_eth0 uroce_lo " ]; then
    ok "host $h: devices $devices(its interface's alone; with UROCE_DEVICES=eth0,lo: $with_lo); node GUID $got from MAC $mac in both tools, max_ah $max_ah"
  else bad "host $h: devices '$devices' ('$with_lo' with lo), first '$first', node GUID '$got', want uroce_eth0 with $want from MAC $mac; max_ah '$max_ah'"; fi
  guids="$guids $got"
  # The uroce command lists the host's devices as rdma link does: name, interface, address.
  first_link=$(on $h "$BIN/uroce" --json | $PY -c 'import json,sys; l=json.load(sys.stdin)["links"]; print(l[0]["name"], l[0]["netdev"], l[0]["addr"], len(l))')
  [ "$first_link" = "uroce_eth0 eth0 $net.$h 1" ] && ok "host $h: uroce lists its links: $first_link" ||
    bad "host $h: uroce --json links '$first_link'"
done
set -- $guids
[ "$1" != "$2" ] && ok "the two hosts' node GUIDs differ" || bad "both hosts have node GUID $1"

# 1. Two pairs at once between hosts 1 and 2, and host 3 to host 1 meanwhile.
next_port; p1=$port; next_port; p2=$port; next_port; p3=$port
perf_server 1 $p1 "$tmp/s1.log"; s1=$!
perf_server 1 $p2 "$tmp/s2.log"; s2=$!
perf_server 1 $p3 "$tmp/s3.log"; s3=$!
on 2 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $p1 --op write --mode bw --size 65536 --iters 400 --json > "$tmp/c1.log" 2>&1 &
c1=$!
on 2 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $p2 --op send --mode lat --size 1024 --iters 400 --json > "$tmp/c2.log" 2>&1 &
c2=$!
on 3 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $p3 --op read --mode bw --size 30000 --iters 300 --json > "$tmp/c3.log" 2>&1
r3=$?
wait $c1; r1=$?
wait $c2; r2=$?
wait $s1 $s2 $s3
for k in 1 2 3; do
  eval rc=\$r$k
  if [ "$rc" = 0 ] && verified "$tmp/c$k.log"; then ok "pair $k of three at once on host 1's one address: verified"
  else bad "pair $k (exit $rc): $(cat "$tmp/c$k.log" "$tmp/s$k.log")"; fi
done

# 2. rdma_cm, with no uroce setting: two rping servers on host 1, clients from hosts 2 and 3
# at once, then the other way round (rdma_bind_addr to the host's own address opens its NIC).
next_port; q1=$port; next_port; q2=$port
on 1 timeout 60 "$BIN/uroce-run" -- rping -s -a "$net.1" -p $q1 -C 20 -S 1000 -V > "$tmp/rs1.log" 2>&1 &
rs1=$!
on 1 timeout 60 "$BIN/uroce-run" -- rping -s -a "$net.1" -p $q2 -C 20 -S 1000 -V > "$tmp/rs2.log" 2>&1 &
rs2=$!
cm_wait 1 $q1; cm_wait 1 $q2
on 2 timeout 60 "$BIN/uroce-run" -- rping -c -a "$net.1" -p $q1 -C 20 -S 1000 -V > "$tmp/rc1.log" 2>&1 &
rc1=$!
on 3 timeout 60 "$BIN/uroce-run" -- rping -c -a "$net.1" -p $q2 -C 20 -S 1000 -V > "$tmp/rc2.log" 2>&1
e2=$?
wait $rc1; e1=$?
wait $rs1; f1=$?
wait $rs2; f2=$?
if [ $e1 = 0 ] && [ $e2 = 0 ] && [ $f1 = 0 ] && [ $f2 = 0 ]; then ok "two rping servers on host 1, clients on hosts 2 and 3, verified (-V)"
else bad "rping (clients $e1 $e2, servers $f1 $f2): $(cat "$tmp"/r[sc][12].log)"; fi
next_port
on 2 timeout 60 "$BIN/uroce-run" -- rping -s -a "$net.2" -p $port -C 20 -S 1000 -V > "$tmp/rs4.log" 2>&1 &
rs4=$!
cm_wait 2 $port
on 1 timeout 60 "$BIN/uroce-run" -- rping -c -a "$net.2" -p $port -C 20 -S 1000 -V > "$tmp/rc4.log" 2>&1
e=$?
wait $rs4; f=$?
if [ $e = 0 ] && [ $f = 0 ]; then ok "rping the other way, host 2 serving host 1, verified"
else bad "rping host 1 -> host 2 (client $e, server $f): $(cat "$tmp/rs4.log" "$tmp/rc4.log")"; fi
on 1 timeout 30 "$BIN/uroce-run" -- rping -s -a "$net.1" -p $q1 -C 1 > "$tmp/rs3.log" 2>&1 &
rs3=$!
cm_wait 1 $q1
out=$(on 1 timeout 10 "$BIN/uroce-run" -- rping -s -a "$net.1" -p $q1 -C 1 2>&1)
case "$out" in
  *"in use"*|*"Address already in use"*) ok "a second listener on a taken rdma_cm port is refused: $(echo "$out" | head -1)" ;;
  *) bad "a second listener on port $q1: '$out'" ;;
esac
kill "$(proc_pid 1 "rping -s -a $net.1 -p $q1 -C 1 *")" 2>/dev/null; wait $rs3 2>/dev/null

# 3. Two perftest pairs at once between hosts 1 and 2 (WRITE and SEND, -F; no -d: each host's
# first device), beside a uroce-perf pair between the same hosts.
next_port; pp=$port; next_port; pw=$port; next_port; pv=$port
perf_server 1 $pp "$tmp/ps.log"; ps=$!
on 1 timeout 60 "$BIN/uroce-run" -- ib_write_bw -F -p $pw -s 65536 -n 500 > "$tmp/pws.log" 2>&1 &
pws=$!
on 1 timeout 60 "$BIN/uroce-run" -- ib_send_bw -F -p $pv -s 65536 -n 500 > "$tmp/pvs.log" 2>&1 &
pvs=$!
ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $pw; listen_wait $pv"
on 2 timeout 60 "$BIN/uroce-run" -- ib_write_bw -F -p $pw -s 65536 -n 500 "$net.1" > "$tmp/pwc.log" 2>&1 &
pwc=$!
on 2 timeout 60 "$BIN/uroce-run" -- ib_send_bw -F -p $pv -s 65536 -n 500 "$net.1" > "$tmp/pvc.log" 2>&1 &
pvc=$!
on 2 timeout 60 "$BIN/uroce-perf" --connect "$net.1" --port $pp --op write --mode bw --size 4096 --iters 2000 --json > "$tmp/pc.log" 2>&1
e=$?
for t in pwc pvc pws pvs; do eval "wait \$$t; r_$t=\$?"; done
wait $ps
# A result line: 65536 B, 500 iterations, a bandwidth above zero (perftest checks no data).
result() { awk '$1 == 65536 && $2 == 500 && $4 > 0 {found = 1} END {exit !found}' "$1"; }
for t in write:pw send:pv; do
  n=${t%%:*} f=${t##*:}
  eval "c=\$r_${f}c s=\$r_${f}s"
  if [ $c = 0 ] && [ $s = 0 ] && result "$tmp/${f}c.log" && result "$tmp/${f}s.log"; then
    ok "ib_${n}_bw host 2 -> host 1 at the same time as the other perftest pair: $(awk '$1 == 65536 {print $4 " MB/s"}' "$tmp/${f}c.log")"
  else bad "ib_${n}_bw (client $c, server $s): $(cat "$tmp/${f}c.log" "$tmp/${f}s.log")"; fi
done
if [ $e = 0 ] && verified "$tmp/pc.log"; then ok "uroce-perf beside both perftest pairs: verified"
else bad "uroce-perf beside the perftest pairs: $(cat "$tmp/pc.log")"; fi

# 4. kill -9 of one of two servers on host 1 while both transfer.
next_port; k1=$port; next_port; k2=$port
perf_server 1 $k1 "$tmp/k1.log"; ks1=$!
perf_server 1 $k2 "$tmp/k2.log"; ks2=$!
on 2 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $k1 --op write --mode bw --size 65536 --iters 200000 --json > "$tmp/kc1.log" 2>&1 &
kc1=$!
# Long enough to outlast the kill below at any speed this machine has (6.5 GB).
on 3 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $k2 --op write --mode bw --size 65536 --iters 100000 --json > "$tmp/kc2.log" 2>&1 &
kc2=$!
rts() {  # PID: the number of RC QPs in RTS the status lists for the process
  echo "$status" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for dev in d["devices"] for p in dev["processes"] if p["pid"]=='"${1:-0}"' for q in p["qps"] if q["type"]=="RC" and q["state"]=="RTS"))'
}
# The uroce command lists both servers, each with an RC QP in RTS, once both transfer.
for i in $(seq 1 100); do  # at most 10 s
  victim=$(server_pid 1 $k1)
  other=$(server_pid 1 $k2)
  status=$(on 1 "$BIN/uroce" --json)
  [ -n "$victim" ] && [ -n "$other" ] && [ "$(rts $victim)" -ge 1 ] && [ "$(rts $other)" -ge 1 ] && break
  sleep 0.1
done
if [ -n "$victim" ] && [ -n "$other" ] && [ "$(rts $victim)" -ge 1 ] && [ "$(rts $other)" -ge 1 ]; then
  ok "uroce --json lists both servers (pids $victim, $other) with their RC QPs in RTS"
else bad "uroce --json for pids '$victim' '$other': $status"; fi
# Per-QP counters: the other server's QP has received the WRITEs and sent their ACKs.
# RTS comes with the client's RTU, before its first WRITE: wait for traffic, at most 10 s.
counters() {
  echo "$status" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%d/%d/%d" % (q["rx_packets"], q["tx_packets"], q["rx_bytes"]) for dev in d["devices"] for p in dev["processes"] if p["pid"]=='"${other:-0}"' for q in p["qps"] if q["type"]=="RC" and q["state"]=="RTS"))' 2>&1
}
for i in $(seq 1 100); do
  counted=$(counters)
  case "$counted" in [1-9]*/[1-9]*/[1-9]*) break ;; esac
  sleep 0.1
  status=$(on 1 "$BIN/uroce" --json)
done
case "$counted" in
  [1-9]*/[1-9]*/[1-9]*) ok "its QP's counters (rx/tx packets, rx bytes): $counted" ;;
  *) bad "per-QP counters of pid '$other': '$counted'" ;;
esac
# Another user is told of its own processes only (next PSNs are what a forger needs).
theirs=$(on 1 setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/uroce" --json)
n=$(echo "$theirs" | $PY -c 'import json,sys; print(sum(len(d["processes"]) for d in json.load(sys.stdin)["devices"]))')
[ "$n" = 0 ] && ok "uid 65534 is told of none of root's processes" || bad "uid 65534 sees: $theirs"
[ -n "$victim" ] && kill -9 "$victim"
gone=no
for i in $(seq 1 100); do  # at most 10 s
  status=$(on 1 "$BIN/uroce" --json)
  [ "$(rts $victim)" = 0 ] && echo "$status" | grep -vq "\"pid\":$victim," && { gone=yes; break; }
  sleep 0.1
done
[ $gone = yes ] && ok "the killed server is gone from uroce's status within $((i / 10)).$((i % 10)) s" ||
  bad "the killed server $victim is still listed: $status"
t0=$(date +%s)
wait $kc1; e1=$?
t1=$(date +%s)
wait $kc2; e2=$?
wait $ks2
if [ -n "$victim" ] && [ $e1 != 0 ] && [ $e1 != 124 ] && grep -qi "retry\|RETRY_EXC\|error" "$tmp/kc1.log"; then
  ok "the killed server's peer failed in $((t1 - t0)) s: $(grep -i "retry\|error" "$tmp/kc1.log" | head -1)"
else bad "after kill -9 of pid '$victim': its peer exited $e1: $(tail -n 3 "$tmp/kc1.log")"; fi
if [ $e2 = 0 ] && verified "$tmp/kc2.log"; then ok "the other server's transfer completed, verified"
else bad "the other transfer (exit $e2): $(cat "$tmp/kc2.log" "$tmp/k2.log")"; fi
small_pair k3 "a new server on host 1 after the kill works"

# 5. Another user on host 1 beside root's processes: it gets no socket of the steering group
# (one could take the group's steering), the daemon passes it its slot's packets instead.
next_port; pr=$port; next_port; pn=$port
perf_server 1 $pr "$tmp/ur-s.log"; ur=$!
on 1 timeout 120 setpriv --reuid 65534 --regid 65534 --clear-groups "$BIN/uroce-perf" --server --port $pn > "$tmp/un-s.log" 2>&1 &
un=$!
on 2 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $pn --op write --mode bw --size 65536 --iters 300 --json > "$tmp/un-c.log" 2>&1 &
unc=$!
on 3 timeout 120 "$BIN/uroce-perf" --connect "$net.1" --port $pr --op send --mode lat --size 1024 --iters 300 --json > "$tmp/ur-c.log" 2>&1
e1=$?
wait $unc; e2=$?
wait $ur $un
if [ $e2 = 0 ] && verified "$tmp/un-c.log"; then ok "uid 65534's server beside root's on host 1: WRITEs through the daemon, verified"
else bad "uid 65534's server on host 1 (client $e2): $(cat "$tmp/un-c.log" "$tmp/un-s.log")"; fi
if [ $e1 = 0 ] && verified "$tmp/ur-c.log"; then ok "root's server beside it: verified"
else bad "root's server beside uid 65534's (client $e1): $(cat "$tmp/ur-c.log" "$tmp/ur-s.log")"; fi

# 6. kill -9 of host 1's daemon mid-transfer: the transfer ends (verified, or with an error
# status: never a hang or a crash), and once its processes are gone a new pair works.
next_port
perf_server 1 $port "$tmp/d1.log"; ds=$!
on 2 timeout 90 "$BIN/uroce-perf" --connect "$net.1" --port $port --op write --mode bw --size 65536 --iters 30000 --json > "$tmp/dc.log" 2>&1 &
dc=$!
for i in $(seq 1 100); do  # mid-transfer: once the server's QP is in RTS (at most 10 s), and a moment
  status=$(on 1 "$BIN/uroce" --json)
  [ "$(rts "$(server_pid 1 $port)")" -ge 1 ] && break
  sleep 0.1
done
sleep 0.3
daemon=$(ip netns pids "$(ns 1)" | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = uroced ] && echo $p; done)
[ -n "$daemon" ] && kill -9 $daemon
wait $dc; e1=$?
wait $ds; e2=$?
if [ -n "$daemon" ] && [ $e1 -lt 124 ] && [ $e2 -lt 124 ] && { verified "$tmp/dc.log" || grep -q "completion error" "$tmp/dc.log"; }; then
  ok "kill -9 of the daemon mid-transfer: the pair ended cleanly (client $e1, server $e2): $(grep -o '"verified":true\|completion error: [A-Z_]*' "$tmp/dc.log" | head -1)"
else bad "after kill -9 of the daemon '$daemon' (client $e1, server $e2): $(tail -n 3 "$tmp/dc.log")"; fi
small_pair d2 "a new daemon serves the next pair"

# 7. Clients written by others across hosts: ucmatose (RC) and udaddy (UD, SIDR), which bind
# the host's address; ucx_perftest, which opens the first device libibverbs lists.
for prog in ucmatose udaddy; do
  command -v $prog >/dev/null || { echo "## $prog is not installed (Debian: rdmacm-utils): not run"; continue; }
  on 1 timeout 60 "$BIN/uroce-run" -- $prog -b "$net.1" -c 2 -C 20 > "$tmp/$prog-s.log" 2>&1 &
  ps_=$!
  if [ $prog = udaddy ]; then cm_wait 1 7174 273; else cm_wait 1 7471; fi
  on 2 timeout 60 "$BIN/uroce-run" -- $prog -s "$net.1" -c 2 -C 20 > "$tmp/$prog-c.log" 2>&1
  e=$?
  wait $ps_; f=$?
  if [ $e = 0 ] && [ $f = 0 ] && grep -q "return status 0" "$tmp/$prog-c.log"; then ok "$prog host 2 -> host 1, 2 connections x 20 messages"
  else bad "$prog across hosts (client $e, server $f): $(tail -n 3 "$tmp/$prog-c.log" "$tmp/$prog-s.log")"; fi
done
# mckey: members of one IPv4 group on hosts 2 and 3, a sender on host 1 (IGMP on the bridge).
if command -v mckey >/dev/null; then
  mgroup=239.9.$((tag % 200)).$((1 + tag % 250))
  on 2 timeout 60 "$BIN/uroce-run" -- mckey -m $mgroup -b "$net.2" -C 20 > "$tmp/mk2.log" 2>&1 &
  mk2=$!
  on 3 timeout 60 "$BIN/uroce-run" -- mckey -m $mgroup -b "$net.3" -C 20 > "$tmp/mk3.log" 2>&1 &
  mk3=$!
  mckey_joined "$mgroup" "on 2" "on 3"
  on 1 timeout 60 "$BIN/uroce-run" -- mckey -m $mgroup -b "$net.1" -s -C 20 > "$tmp/mk1.log" 2>&1
  e=$?
  wait $mk2; f2=$?
  wait $mk3; f3=$?
  if [ $e = 0 ] && [ $f2 = 0 ] && [ $f3 = 0 ] && grep -q "data transfers complete" "$tmp/mk2.log" &&
    grep -q "data transfers complete" "$tmp/mk3.log"; then
    ok "mckey: 20 datagrams from host 1 to group $mgroup, received on hosts 2 and 3"
  else bad "mckey across hosts (sender $e, members $f2 $f3): $(tail -n 3 "$tmp/mk1.log" "$tmp/mk2.log" "$tmp/mk3.log")"; fi
fi
for tls in ud_verbs,self rc_verbs,ud_verbs,self; do
  command -v ucx_perftest >/dev/null || { echo "## ucx_perftest is not installed (Debian: ucx-utils): not run"; break; }
  next_port
  on 1 env UCX_TLS=$tls timeout 60 "$BIN/uroce-run" -- ucx_perftest -p $port > "$tmp/ucx-s.log" 2>&1 &
  us_=$!
  ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
  on 2 env UCX_TLS=$tls timeout 60 "$BIN/uroce-run" -- ucx_perftest "$net.1" -p $port -t tag_lat -s 8 -n 1000 > "$tmp/ucx-c.log" 2>&1
  e=$?
  wait $us_; f=$?
  if [ $e = 0 ] && [ $f = 0 ] && grep -q "^Final:" "$tmp/ucx-c.log"; then
    ok "ucx_perftest tag_lat UCX_TLS=$tls host 2 -> host 1: $(awk '/^Final:/ {print "p50", $3, "us"}' "$tmp/ucx-c.log")"
  else bad "ucx_perftest UCX_TLS=$tls across hosts (client $e, server $f): $(tail -n 3 "$tmp/ucx-c.log" "$tmp/ucx-s.log")"; fi
done

# 8. ibv_rc_pingpong across hosts with its defaults but for the GID index RoCE needs (-g 1:
# the IPv4 GID), every byte checked (-c); without -g, the one line that says why RTR fails.
next_port
on 1 timeout 60 "$BIN/uroce-run" -- ibv_rc_pingpong -g 1 -c -p $port > "$tmp/rcp-s.log" 2>&1 &
rs_=$!
ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
on 2 timeout 60 "$BIN/uroce-run" -- ibv_rc_pingpong -g 1 -c -p $port "$net.1" > "$tmp/rcp-c.log" 2>&1
e=$?
wait $rs_; f=$?
if [ $e = 0 ] && [ $f = 0 ] && grep -q "1000 iters" "$tmp/rcp-c.log"; then ok "ibv_rc_pingpong -g 1 -c host 2 -> host 1: $(grep iters "$tmp/rcp-c.log")"
else bad "ibv_rc_pingpong across hosts (client $e, server $f): $(cat "$tmp/rcp-c.log" "$tmp/rcp-s.log")"; fi
next_port
on 1 timeout 10 "$BIN/uroce-run" -- ibv_rc_pingpong -p $port > "$tmp/rcp0-s.log" 2>&1 &
rs_=$!
ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
on 2 timeout 10 "$BIN/uroce-run" -- ibv_rc_pingpong -p $port "$net.1" > "$tmp/rcp0-c.log" 2>&1
wait $rs_
# (The server reaches RTR first: it says so and closes, the client's exchange then fails.)
if grep -q "uroce: ibv_modify_qp: RoCE needs the peer's GID" "$tmp/rcp0-s.log"; then ok "ibv_rc_pingpong without -g is told why: $(grep -o "RoCE needs[^;]*" "$tmp/rcp0-s.log")"
else bad "ibv_rc_pingpong without -g: $(cat "$tmp/rcp0-s.log" "$tmp/rcp0-c.log")"; fi

# A QP of the loopback device aimed at another host is told at once that it cannot get there.
next_port
on 1 timeout 10 "$BIN/uroce-run" -- ibv_rc_pingpong -g 1 -p $port > "$tmp/rcl-s.log" 2>&1 &
rs_=$!
ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
on 2 env UROCE_DEVICES=eth0,lo timeout 10 "$BIN/uroce-run" -- ibv_rc_pingpong -d uroce_lo -g 0 -p $port "$net.1" > "$tmp/rcl-c.log" 2>&1
wait $rs_
if grep -q "uroce: a QP of uroce_lo, a loopback device, is connected to ::ffff:$net.1, which it cannot reach" "$tmp/rcl-c.log"; then
  ok "a loopback device's QP toward host 1 is told why it fails: $(grep -o "which it cannot reach[^(]*" "$tmp/rcl-c.log")"
else bad "a loopback device's QP toward another host: $(cat "$tmp/rcl-c.log")"; fi

# 9. libfabric's verbs provider across hosts: fi_pingpong -e rdm (RxD over UD), every size,
# data checked (-c). (-e msg is not run: Debian's fi_pingpong binds its MSG server to
# localhost, which no other host can reach.)
if command -v fi_pingpong >/dev/null; then
  next_port
  on 1 timeout 90 "$BIN/uroce-run" -- fi_pingpong -p verbs -e rdm -B $port -I 20 -S all -c > "$tmp/fi-s.log" 2>&1 &
  fs_=$!
  ip netns exec "$(ns 1)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
  on 2 timeout 90 "$BIN/uroce-run" -- fi_pingpong -p verbs -e rdm -P $port -I 20 -S all -c "$net.1" > "$tmp/fi-c.log" 2>&1
  e=$?
  wait $fs_; f=$?
  if [ $e = 0 ] && [ $f = 0 ] && grep -q "^6m " "$tmp/fi-c.log"; then ok "fi_pingpong -p verbs -e rdm -c host 2 -> host 1, 1 B .. 6 MiB"
  else bad "fi_pingpong -e rdm across hosts (client $e, server $f): $(tail -n 3 "$tmp/fi-c.log" "$tmp/fi-s.log")"; fi
else echo "## fi_pingpong is not installed (Debian: libfabric-bin): not run"; fi

# 10. Open MPI with pml ucx across hosts: 2 ranks on each of hosts 1, 2 and 3, launched into
# their namespaces by mpirun's rsh agent; point to point and collectives checked byte for byte.
# UCX as it comes (no UCX_TLS, no UCX_NET_DEVICES): its endpoints between hosts must be
# rc_verbs on the interface's device, as UCX's log of each endpoint's lanes says.
MPI_PROG="$BIN/mpi_hosts"
if command -v mpirun >/dev/null && [ -x "$MPI_PROG" ]; then
  cat > "$tmp/agent" <<'AGENT'
#!/bin/sh
# mpirun's rsh agent: [options] HOST COMMAND... runs COMMAND in the namespace HOST, with a /tmp
# of that host's own (Open MPI's session directories are named by hostname, which the
# namespaces share: orteds making theirs in one /tmp at once collide)
while [ "${1#-}" != "$1" ]; do shift; done
h=$1; shift
mkdir -p "$AGENT_TMP/$h"
exec ip netns exec "$h" env -u UROCE_DEVICES -u UROCE_ADDR TMPDIR="$AGENT_TMP/$h" sh -c "$*"
AGENT
  chmod +x "$tmp/agent"
  # Every host is named as the machine is (one UTS namespace): Open MPI's own TCP wire-up is
  # kept on the hosts' network, where 127.0.0.1 would be another host's.
  mkdir -p "$tmp/mpirun"
  on 1 env AGENT_TMP="$tmp" TMPDIR="$tmp/mpirun" timeout 240 mpirun --allow-run-as-root --oversubscribe --mca plm_rsh_agent "$tmp/agent" \
    --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 \
    --host "$(ns 1):2,$(ns 2):2,$(ns 3):2" -np 6 --map-by node --mca pml ucx --mca btl ^openib,uct \
    -x UCX_LOG_LEVEL=info "$BIN/uroce-run" -- "$MPI_PROG" > "$tmp/mpi.log" 2>&1
  e=$?
  # UCX logs each endpoint configuration a rank makes: every rank's toward the other hosts is
  # rc_verbs on uroce_eth0 (one at least per rank), and none names uroce_lo.
  rc=$(grep -c "ep_cfg\[[0-9]*\]: tag(rc_verbs/uroce_eth0:1)" "$tmp/mpi.log")
  if [ $e = 0 ] && grep -q "mpi_hosts: 6 ranks on 3 hosts, all verified" "$tmp/mpi.log" && [ "$rc" -ge 6 ] &&
     ! grep -q "uroce_lo" "$tmp/mpi.log"; then ok "Open MPI (pml ucx, UCX's defaults): $(grep -o "6 ranks on 3 hosts.*" "$tmp/mpi.log"); $rc endpoint kinds rc_verbs on uroce_eth0"
  else bad "Open MPI across hosts (exit $e): $(head -c 8000 "$tmp/mpi.log")"; fi
else echo "## mpirun or $MPI_PROG is missing (Debian: openmpi-bin, libopenmpi-dev): not run"; fi

# 11. A wildcard rdma_cm listener listens on every device, as the kernel's: host 1 gets a
# second network (its eth1, to host 3's eth1); rping -s with no address on host 1 serves a
# client on the second network, and a client on the first.
net2="10.80.$((tag % 200 + 20))"
ip link add "ux1-$tag" type veth peer name "ux3-$tag" &&
  for h in 1 3; do
    ip link set "ux$h-$tag" netns "$(ns $h)" && ip -n "$(ns $h)" link set "ux$h-$tag" name eth1 &&
      ip -n "$(ns $h)" addr add "$net2.$h/24" dev eth1 && ip -n "$(ns $h)" link set eth1 up
  done
for client in "3 $net2.1" "2 $net.1"; do
  set -- $client
  next_port
  on 1 timeout 60 "$BIN/uroce-run" -- rping -s -p $port -C 10 -S 1000 -V > "$tmp/rw-s.log" 2>&1 &
  rw=$!
  # Listening once its name is in the host's directory of listeners (at most 10 s).
  cm_wait 1 $port
  on $1 timeout 60 "$BIN/uroce-run" -- rping -c -a "$2" -p $port -C 10 -S 1000 -V > "$tmp/rw-c.log" 2>&1
  e=$?
  wait $rw; f=$?
  if [ $e = 0 ] && [ $f = 0 ]; then ok "a wildcard rping server on host 1 serves host $1 at $2, verified"
  else bad "wildcard rping server, client on host $1 to $2 (client $e, server $f): $(cat "$tmp/rw-c.log" "$tmp/rw-s.log")"; fi
done

# 11b. Loopback on a host whose interface has a device: lo has no listed device (as with rxe),
# so a client of 127.0.0.1 or ::1 reaches the host through its interface's device, where a
# wildcard listener hears it (the kernel's rdma_cm resolves loopback so); a bind to 127.0.0.1
# fails as the kernel's does.
for dst in 127.0.0.1 ::1; do
  next_port
  on 1 timeout 60 "$BIN/uroce-run" -- rping -s -p $port -C 10 -S 1000 -V > "$tmp/rl-s.log" 2>&1 &
  rw=$!
  cm_wait 1 $port
  on 1 timeout 60 "$BIN/uroce-run" -- rping -c -a $dst -p $port -C 10 -S 1000 -V > "$tmp/rl-c.log" 2>&1
  e=$?
  wait $rw; f=$?
  if [ $e = 0 ] && [ $f = 0 ]; then ok "host 1 to itself at $dst, with no loopback device listed: rping verified"
  else bad "rping to $dst on host 1 (client $e, server $f): $(cat "$tmp/rl-c.log" "$tmp/rl-s.log")"; fi
done
out=$(on 1 timeout 20 "$BIN/uroce-run" -- rping -s -a 127.0.0.1 -p 7471 -C 1 2>&1)
case "$out" in
  *"rdma_bind_addr: No such device"*) ok "rping -s -a 127.0.0.1 where lo has no listed device: $out" ;;
  *) bad "rping -s -a 127.0.0.1 on host 1: '$out'" ;;
esac

# 12. Users and the daemon: the first process of a host starts it as its own user, and a
# process trusts a daemon of its user or root only. On host 4 uid 65534 comes first: root's
# program is refused, told why and what to do; with root's uroced --idle-s 0 started first
# instead, both users' servers share host 4's NIC.
nobody() { h=$1; shift; on $h setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
daemon_of() { ip netns pids "$(ns $1)" | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = uroced ] && echo $p; done; }
nobody 4 timeout 20 "$BIN/uroce-run" -- ibv_devinfo -d uroce_eth0 > "$tmp/u4.log" 2>&1  # its daemon stays 10 s
[ -n "$(daemon_of 4)" ] || bad "uid 65534's ibv_devinfo left no daemon on host 4: $(cat "$tmp/u4.log")"
out=$(on 4 timeout 20 "$BIN/uroce-run" -- ibv_devinfo -d uroce_eth0 2>&1)
case "$out" in
  *"neither this user nor root: not trusted (where several users share a host, root runs uroced --idle-s 0 before them)"*)
    ok "root's program beside uid 65534's daemon is refused and told what to do" ;;
  *) bad "root's program beside uid 65534's daemon: '$out'" ;;
esac
kill -9 $(daemon_of 4) 2>/dev/null
for i in $(seq 1 100); do [ -z "$(daemon_of 4)" ] && break; sleep 0.05; done
on 4 "$BIN/uroced" --idle-s 0
next_port; pn=$port; next_port; pr=$port
nobody 4 timeout 60 "$BIN/uroce-perf" --server --port $pn > "$tmp/u4n-s.log" 2>&1 &
u4n=$!
on 4 timeout 60 "$BIN/uroce-perf" --server --port $pr > "$tmp/u4r-s.log" 2>&1 &
u4r=$!
on 2 timeout 60 "$BIN/uroce-perf" --connect "$net.4" --port $pn --op write --mode bw --size 65536 --iters 300 --json > "$tmp/u4n-c.log" 2>&1
e1=$?
on 2 timeout 60 "$BIN/uroce-perf" --connect "$net.4" --port $pr --op send --mode lat --size 1024 --iters 300 --json > "$tmp/u4r-c.log" 2>&1
e2=$?
wait $u4n $u4r
d4=$(daemon_of 4)
if [ $e1 = 0 ] && [ $e2 = 0 ] && verified "$tmp/u4n-c.log" && verified "$tmp/u4r-c.log" && [ -n "$d4" ] &&
   [ "$(awk '/^Uid:/ {print $2}' /proc/$d4/status)" = 0 ]; then
  ok "root's uroced --idle-s 0 first: uid 65534's and root's servers on host 4 both serve, verified"
else bad "host 4 with root's daemon (uid 65534 client $e1, root client $e2, daemon '$d4'): $(cat "$tmp"/u4*-c.log)"; fi

# 12b. The daemon follows its interface's addresses: an IPv6 address added to host 4's eth0
# after its daemon made the device (as a link-local one comes after duplicate address
# detection) is in the GID table of the next process, from the same daemon.
gids4() { on 4 timeout 20 "$BIN/uroce-run" -- ibv_devinfo -d uroce_eth0 -v 2>&1 | grep -c 'GID\['; }
before=$(gids4)
ip -n "$(ns 4)" addr add fd79:4::1/64 dev eth0 nodad
after=$(gids4)
listed=$(on 4 timeout 20 "$BIN/uroce-run" -- ibv_devinfo -d uroce_eth0 -v 2>&1 | grep -c 'fd79:4::1')
if [ -n "$d4" ] && [ "$(daemon_of 4)" = "$d4" ] && [ "$after" = $((before + 1)) ] && [ "$listed" = 1 ]; then
  ok "an address added after host 4's daemon started is a GID of the next process ($before GIDs, then $after)"
else bad "GIDs on host 4 before and after adding fd79:4::1: $before, $after (listed $listed; daemon '$d4', now '$(daemon_of 4)')"; fi
ip -n "$(ns 4)" addr del fd79:4::1/64 dev eth0

# 13. Without root at all: on hosts 5 and 6 a user's programs are the first, so each host's
# daemon is that user's; rping (verified) and ib_write_bw run across them.
next_port
nobody 5 timeout 60 "$BIN/uroce-run" -- rping -s -a "$net.5" -p $port -C 10 -S 1000 -V > "$tmp/n5-s.log" 2>&1 &
n5=$!
cm_wait 5 $port
nobody 6 timeout 60 "$BIN/uroce-run" -- rping -c -a "$net.5" -p $port -C 10 -S 1000 -V > "$tmp/n6-c.log" 2>&1
e=$?
wait $n5; f=$?
d5=$(daemon_of 5)
if [ $e = 0 ] && [ $f = 0 ] && [ -n "$d5" ] && [ "$(awk '/^Uid:/ {print $2}' /proc/$d5/status)" = 65534 ]; then
  ok "uid 65534 alone: rping host 6 -> host 5 verified, host 5's daemon is uid 65534's"
else bad "uid 65534 alone, rping (client $e, server $f, daemon '$d5'): $(cat "$tmp/n6-c.log" "$tmp/n5-s.log")"; fi
next_port
nobody 5 timeout 60 "$BIN/uroce-run" -- ib_write_bw -F -p $port -s 65536 -n 300 > "$tmp/n5w-s.log" 2>&1 &
n5=$!
ip netns exec "$(ns 5)" sh -c ". '$HERE/../common/listen.sh'; listen_wait $port"
nobody 6 timeout 60 "$BIN/uroce-run" -- ib_write_bw -F -p $port -s 65536 -n 300 "$net.5" > "$tmp/n6w-c.log" 2>&1
e=$?
wait $n5; f=$?
if [ $e = 0 ] && [ $f = 0 ] && awk '$1 == 65536 && $2 == 300 && $4 > 0 {found = 1} END {exit !found}' "$tmp/n6w-c.log"; then
  ok "uid 65534 alone: ib_write_bw host 6 -> host 5: $(awk '$1 == 65536 {print $4 " MB/s"}' "$tmp/n6w-c.log")"
else bad "uid 65534 alone, ib_write_bw (client $e, server $f): $(cat "$tmp/n6w-c.log" "$tmp/n5w-s.log")"; fi

# rsockets across hosts: rstream -T v (every byte checked) host 2 -> host 1, and a plain TCP
# program through Debian's librspreload.so host 1 -> host 2, every byte checked, its listener no
# kernel socket. The rstream client runs again while its server waits (not yet listening).
next_port
on 1 timeout 60 "$BIN/uroce-run" -- rstream -b "$net.1" -p $port -T v -S 65536 -C 100 > "$tmp/rst-s.log" 2>&1 &
rst=$!
for try in 1 2 3 4 5; do
  sleep 0.3
  on 2 timeout 60 "$BIN/uroce-run" -- rstream -s "$net.1" -p $port -T v -S 65536 -C 100 > "$tmp/rst-c.log" 2>&1 && break
  kill -0 $rst 2>/dev/null || break
done
wait $rst; f=$?
if [ $f = 0 ] && grep -q "^custom" "$tmp/rst-c.log"; then
  ok "rstream -T v host 2 -> host 1, 64 KiB x 100 each way: $(awk '/^custom/ {print $7 " Gb/s"}' "$tmp/rst-c.log")"
else bad "rstream across hosts (server $f): $(cat "$tmp/rst-c.log" "$tmp/rst-s.log")"; fi
preload=$(ls /usr/lib/*/rsocket/librspreload.so 2>/dev/null | head -1)
if [ -n "$preload" ]; then
  next_port
  on 2 env LD_PRELOAD="$preload" timeout 60 "$BIN/uroce-run" -- "$BIN/tcp_stream" server "$net.2" $port 30000000 $tag > "$tmp/ts-s.log" 2>&1 &
  tss=$!
  on 1 env LD_PRELOAD="$preload" timeout 60 "$BIN/uroce-run" -- "$BIN/tcp_stream" client "$net.2" $port 30000000 $tag > "$tmp/ts-c.log" 2>&1
  e=$?
  wait $tss; f=$?
  if [ $e = 0 ] && [ $f = 0 ] && grep -q "read 30000037 of 30000037 bytes, 0 wrong" "$tmp/ts-s.log" &&
    grep -q "kernel listeners on port $port: 0" "$tmp/ts-s.log"; then
    ok "a TCP program through librspreload.so host 1 -> host 2: 30 MB over rsockets, every byte checked"
  else bad "tcp_stream through librspreload.so across hosts (client $e, server $f): $(cat "$tmp/ts-c.log" "$tmp/ts-s.log")"; fi
  # iperf3 each way between host 1 (client) and host 2, its bytes hashed at both ends.
  if command -v iperf3 >/dev/null; then
    . "$HERE/../common/stream_tap.sh"
    for dir in "" -R; do
      next_port
      on 2 env LD_PRELOAD="$BIN/libstream_tap.so $preload" timeout 60 "$BIN/uroce-run" -- \
        iperf3 -s -1 -B "$net.2" -p $port > "$tmp/ip-s.json" 2> "$tmp/ip-s.tap" &
      ips=$!
      cm_wait 2 $port
      kernel=$(on 2 ss -Htln "sport = :$port" | wc -l)
      on 1 env LD_PRELOAD="$BIN/libstream_tap.so $preload" timeout 60 "$BIN/uroce-run" -- \
        iperf3 -c "$net.2" -p $port -n 64M $dir -J > "$tmp/ip-c.json" 2> "$tmp/ip-c.tap"
      e=$?
      wait $ips; f=$?
      if [ -z "$dir" ]; then tx=c rx=s; else tx=s rx=c; fi
      if line=$(iperf3_verdict "iperf3 ${dir:+$dir }through librspreload.so across hosts, 64 MiB" $e $f "$kernel" \
        "$tmp/ip-$tx.tap" "$tmp/ip-$rx.tap" "$tmp/ip-c.json"); then ok "${line#ok - }"
      else bad "$line: $(tail -n 3 "$tmp/ip-c.json" "$tmp/ip-s.json" "$tmp/ip-c.tap" "$tmp/ip-s.tap")"; fi
    done
  fi
fi

echo "host nic: $passed passed, $failed failed"
[ $failed = 0 ]
