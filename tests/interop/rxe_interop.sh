#!/bin/bash
# uroce <-> Linux Soft-RoCE (rxe) in a qemu guest, on a private link inside a network namespace
# (../shared/rxe-peer). uroce runs on the host side at 10.99.0.1 with default settings, and every
# case runs twice: by default (UDP socket with segmentation and receive offload; uroce solves for
# the IP ID the socket hides, and rxe checks the ID each segment got), and with UROCE_RAW_RX=1,
# where uroce receives through a raw socket and checks the ICRC of rxe's packets over their real
# IP ID; and a third time with UROCE_LINK=xdp (AF_XDP). rxe runs unmodified
# rdma-core tools. Every case checks the data on both sides and every captured packet (ICRC
# over the captured IP header, decoding, tshark).
# Usage: tests/interop/rxe_interop.sh [BUILD_DIR]      (root; ends with "N passed, M failed")
#        ONLY=rdmacm tests/interop/rxe_interop.sh ...   (the rdma_cm cases alone, as root)
#        ONLY=lossy tests/interop/rxe_interop.sh ...    (the cases under loss alone, both ways)
#        ONLY=xdp tests/interop/rxe_interop.sh ...      (the AF_XDP cases alone)
#        ONLY=mw tests/interop/rxe_interop.sh ...       (the memory window cases alone)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
PEER=${RXE_PEER:-$ROOT/../shared/rxe-peer}
OUT=${OUT:-/tmp/uroce-interop}
NS=rxepeer
passed=0
failed=0
results=()

say() { echo "[interop] $*"; }
loud_skip() {
  echo "######################################################################"
  echo "## INTEROP SUITE NOT RUN: $*"
  echo "######################################################################"
  exit 0
}

[ "$(id -u)" = 0 ] || loud_skip "needs root (network namespace, tap, raw sockets)"
[ -d "$PEER" ] || loud_skip "rxe peer harness not found at $PEER"
[ -e /dev/net/tun ] || loud_skip "no /dev/net/tun"
rm -rf "$OUT" && mkdir -p "$OUT"

say "building the guest image (first time: packages and a kernel .deb from Debian's archive)"
bash "$PEER/build-image.sh" > "$OUT/build-image.log" 2>&1 || { tail -20 "$OUT/build-image.log"; loud_skip "guest image build failed"; }
cleanup() { bash "$PEER/rxe-peer.sh" down > /dev/null 2>&1 || true; }
trap cleanup EXIT
# IPv6 on the guest's eth0: rxe's GID 0 is then its usable link-local address, as on a host.
EXTRA_APPEND=rxe_ipv6=1 bash "$PEER/rxe-peer.sh" up > "$OUT/up.log" 2>&1 ||
  { tail -20 "$OUT/up.log"; loud_skip "the guest did not boot"; }
say "$(grep -o 'ready.*' "$OUT/up.log" | tail -1)"

guest() { EXEC_TIMEOUT=180 bash "$PEER/rxe-peer.sh" exec "$1"; }

# The emulated guest has once stopped answering its command channel in CI, between two
# sections, after which every case failed. A case that fails with the guest gone is not the
# case's failure: the console is kept, the guest boots again in the same state (netem, the
# uploaded rdma-check, its IPv6 address), and the case runs once more. A guest that uroce's
# packets crash would crash again on the retry, and that failure stays.
guest_runs() { EXEC_TIMEOUT=20 bash "$PEER/rxe-peer.sh" exec "echo alive" 2> /dev/null | grep -q alive; }
restarts=()
restart_guest() {  # why
  local run=/tmp/rxe-peer/run-$NS n=$((${#restarts[@]} + 1))
  cp "$run/console.log" "$OUT/guest-console-$n.log" 2> /dev/null
  say "the guest stopped answering ($1); its console (last lines, whole in $OUT/guest-console-$n.log):"
  tail -15 "$OUT/guest-console-$n.log" 2> /dev/null | sed 's/^/[interop]   /'
  restarts+=("$1: console in $OUT/guest-console-$n.log")
  bash "$PEER/rxe-peer.sh" -g 1 down > /dev/null 2>&1
  EXTRA_APPEND=rxe_ipv6=1 bash "$PEER/rxe-peer.sh" up > "$OUT/up-$n.log" 2>&1 || { say "it did not boot again"; return 1; }
  wait_ipv6
  [ "${NETEM:-}" ] && guest "/usr/sbin/tc qdisc add dev eth0 root netem $NETEM" > /dev/null 2>&1
  [ "${uploaded:-}" = yes ] && { upload_rdma_check || uploaded=no; }
  return 0
}
wait_ipv6() {  # until the guest's link-local address is usable (duplicate address detection)
  guest "i=0; while [ \$i -lt 100 ] && ip -6 addr show dev eth0 | grep -q tentative; do sleep 0.1; i=\$((i+1)); done"
}
guarded() {  # case function and its arguments; each case records one result
  local before=$failed
  "$@"
  [ "$failed" = "$before" ] && return 0
  guest_runs && return 0
  restart_guest "during: ${results[-1]#FAIL  }" || return 0
  failed=$before
  unset 'results[-1]'
  say "the case runs again"
  "$@"
}
section() {  # start of a section: the guest must answer
  guest_runs || restart_guest "before the section [$MODE]"
}
# HOST_PREFIX is empty (the default: UDP receive, IP ID solved) or forces raw receive.
# GID indices: 0 is the IPv6 link-local GID on both sides, 1 the IPv4 one (rxe's order, and
# uroce's: its device at 10.99.0.1 also takes the bridge's link-local address).
UGID=1
GGID=1
HOST_PREFIX=()
MODE=""
host() { ip netns exec "$NS" "${HOST_PREFIX[@]}" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }  # the interface's device, by default
RAW=(env UROCE_RAW_RX=1)

record() {  # name ok detail
  local name="$1${MODE:+ [$MODE]}"
  if [ "$2" = 0 ]; then passed=$((passed + 1)); results+=("PASS  $name"); say "PASS  $name"
  else failed=$((failed + 1)); results+=("FAIL  $name  ($3)"); say "FAIL  $name  ($3)"; fi
}

# Readiness, not fixed sleeps: a server is ready once its TCP port listens (listen_wait, here or
# sent to the guest), and a guest program is done once no process of its name is left. Both
# wait at most 20 s; the case fails later if the other side never came.
guest_listening() { guest "$(cat "$ROOT/tests/common/listen.sh")
listen_wait $1 && echo up" | grep -q up; }
host_listening() { ip netns exec "$NS" sh -c ". '$ROOT/tests/common/listen.sh'; listen_wait $1"; }
guest_exited() {  # program name
  guest "i=0; while [ \$i -lt 200 ] && pidof $1 > /dev/null; do sleep 0.1; i=\$((i+1)); done; pidof $1 > /dev/null || echo gone" |
    grep -q gone
}

# tshark's RPC-over-RDMA heuristic takes perftest's small rdma_cm control SENDs (rxe's as much as
# ours) for RPC-over-RDMA and calls them malformed: it is off, the InfiniBand layers are checked.
check_capture() {  # pcap: every packet valid, tshark decodes all as InfiniBand with nothing malformed
  local pcap=$1
  "$BUILD/bin/uroce-pcap-check" "$pcap" > "$pcap.check" 2>&1 || return 1
  if command -v tshark > /dev/null; then
    local n bad
    n=$(tshark -r "$pcap" -Y infiniband 2>/dev/null | wc -l)
    bad=$(tshark --disable-protocol rpcordma -r "$pcap" -Y '_ws.malformed || _ws.expert.severity >= "error"' 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] && [ "$bad" = 0 ] || return 1
  fi
  return 0
}

# One case: a server on one side, its client on the other. Role "client": uroce is the
# requester (the host runs the client, the guest the server); role "server": the reverse.
#   run_pair ROLE TAG PORT "GUEST PROGRAM AND ARGS" HOST PROGRAM AND ARGS...
# The client gets the peer's address as its last argument. Leaves $OUT/TAG.{host,guest}.log
# and the host side's capture $OUT/TAG.pcap; returns the host program's exit status.
run_pair() {
  local role=$1 tag=$2 port=$3 gcmd=$4 rc
  shift 4
  if [ "$role" = client ]; then
    guest "timeout 120 $gcmd > /tmp/$tag.log 2>&1 &"
    guest_listening "$port"
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 120 "$@" 10.99.0.2 > "$OUT/$tag.host.log" 2>&1
    rc=$?
    local prog=${gcmd%% *}
    guest_exited "${prog##*/}"
    guest "cat /tmp/$tag.log" > "$OUT/$tag.guest.log" 2>&1
  else
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 120 "$@" > "$OUT/$tag.host.log" 2>&1 &
    local hp=$!
    host_listening "$port"
    guest "timeout 120 $gcmd 10.99.0.1" > "$OUT/$tag.guest.log" 2>&1
    wait $hp
    rc=$?
  fi
  return $rc
}

# Records a case: its own checks' status, then the capture's.
finish() {  # label role tag rc
  local rc=$4 dir="uroce requester -> rxe responder"
  [ "$2" = server ] && dir="rxe requester -> uroce responder"
  check_capture "$OUT/$3.pcap" || rc=1
  record "$1, $dir" $rc "see $OUT/$3.*"
}

# SEND ping-pong (ibv_rc_pingpong answers every message; ours checks every byte of the echo,
# rxe's --chk the page markers). TRANSPORT=uc/ud use ibv_uc/ud_pingpong and uroce-pingpong -T.
TRANSPORT=rc
send_case() {  # role size iters
  local role=$1 s=$2 n=$3 tag="$TRANSPORT-send-uroce-$1-$2-$3$SUFFIX" rc
  run_pair "$role" "$tag" 18515 "ibv_${TRANSPORT}_pingpong -d rxe0 -g $GGID -s $s -n $n -c" \
    "$BUILD/bin/uroce-pingpong" -T "$TRANSPORT" -g $UGID -s "$s" -n "$n"
  rc=$?
  grep -q "$n iters in" "$OUT/$tag.guest.log" || rc=1
  grep -q "all bytes equal" "$OUT/$tag.host.log" || rc=1
  finish "${TRANSPORT^^} SEND $s B x $n${NOTE:-}" "$role" "$tag" $rc
}
send_both() {  # size iters
  guarded send_case client "$1" "$2"
  guarded send_case server "$1" "$2"
}

# perftest, unmodified on both ends (ours through the drop-in, classic post path). perftest
# does not compare data; what is checked: both sides complete, and every packet is valid.
perftest_n=0
perftest_case() {  # label "program args" role
  perftest_n=$((perftest_n + 1))
  local t=$2 role=$3 tag="perftest-$perftest_n-${2%% *}-$3$SUFFIX" rc
  run_pair "$role" "$tag" 18515 "$t -d rxe0 -x $GGID -F -m 1024" \
    "$BUILD/bin/uroce-run" -- $t -x $UGID -F -m 1024 --use_old_post_send
  rc=$?
  grep -q '#bytes' "$OUT/$tag.host.log" || rc=1
  grep -q '#bytes' "$OUT/$tag.guest.log" || rc=1
  finish "$1" "$role" "$tag" $rc
}
# rdma-check (ours, plain libibverbs): the same binary runs in the guest on rxe and here on uroce;
# every byte of WRITE, WRITE with immediate, SEND with immediate, SEND, READ and both atomics is
# checked on both sides. The guest gets the binary in base64 pieces over its command channel.
upload() {  # program name: copies it to the guest's /tmp/name over the command channel, checked
  strip -o "$OUT/$2.bin" "$1" || return 1
  base64 -w0 "$OUT/$2.bin" > "$OUT/$2.b64"
  guest "rm -f /tmp/$2.b64" > /dev/null
  local size off=0 chunk
  size=$(wc -c < "$OUT/$2.b64")
  while [ "$off" -lt "$size" ]; do
    chunk=$(dd if="$OUT/$2.b64" bs=8192 skip=$((off / 8192)) count=1 2>/dev/null)
    guest "echo -n '$chunk' >> /tmp/$2.b64" > /dev/null
    off=$((off + 8192))
  done
  guest "base64 -d /tmp/$2.b64 > /tmp/$2 && chmod +x /tmp/$2 && md5sum /tmp/$2" |
    grep -q "$(md5sum < "$OUT/$2.bin" | cut -d' ' -f1)"
}
upload_rdma_check() { upload "$BUILD/bin/rdma-check" rdma-check; }
# With `mw`, a type 2 memory window follows (rdma-check -w): bound by the server, WRITE and READ
# through it, SEND_WITH_INV that must invalidate it, then a WRITE through it that must fail.
rdma_check_case() {  # role [mw]; the server prints server-ok, the client "all checks passed"
  local role=$1 tag="rdma-check-uroce-$1$SUFFIX" port=18601 rc w="" what=""
  [ "$role" = server ] && port=18602
  if [ "${2:-}" = mw ]; then
    w=-w tag="rdma-check-mw-uroce-$1$SUFFIX" port=$((port + 2))
    what=", then a type 2 memory window: BIND_MW, WRITE and READ through it, SEND_WITH_INV, a WRITE refused"
  fi
  run_pair "$role" "$tag" $port "/tmp/rdma-check -d rxe0 -g $GGID -p $port $w" \
    "$BUILD/bin/uroce-run" -- "$BUILD/bin/rdma-check" -g $UGID -p $port $w
  rc=$?
  local server_log=guest client_log=host
  [ "$role" = server ] && server_log=host client_log=guest
  grep -q "server-ok" "$OUT/$tag.$server_log.log" || rc=1
  grep -q "all checks passed" "$OUT/$tag.$client_log.log" || rc=1
  finish "RC WRITE (100000 B), WRITE_IMM, SEND_IMM, SEND, READ (64 KiB), FETCH_ADD, CMP_SWAP, all bytes checked$what" \
    "$role" "$tag" $rc
}
# The IB CM on QP1 against the kernel's rdma_cm: uroce-cm-connect connects to rping's listener
# in the guest (REQ, REP, RTU, DREQ, DREP), and accepts rping's connection from the guest and
# receives rping's first message on the connected QP (so both sides agree on QPNs and PSNs).
# A listener is ready once rdma_cm lists it (guest) or the tool says so (host).
cm_case() {  # role
  local role=$1 tag="cm-rping-uroce-$1$SUFFIX" rc=0 i
  if [ "$role" = client ]; then
    guest "timeout 60 rping -s -a 10.99.0.2 -C 1 > /tmp/$tag.log 2>&1 &"
    guest "i=0; while [ \$i -lt 200 ] && ! rdma resource show cm_id | grep -q 'LISTEN.*:7174'; do sleep 0.1; i=\$((i+1)); done"
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-cm-connect" 10.99.0.2 7174 > "$OUT/$tag.host.log" 2>&1 || rc=1
    guest_exited rping
    guest "cat /tmp/$tag.log" > "$OUT/$tag.guest.log" 2>&1
    grep -q "DISCONNECT EVENT" "$OUT/$tag.guest.log" || rc=1
    grep -q "connected and disconnected" "$OUT/$tag.host.log" || rc=1
  else
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-cm-connect" -l 7174 > "$OUT/$tag.host.log" 2>&1 &
    local hp=$!
    for i in $(seq 200); do grep -q listening "$OUT/$tag.host.log" 2>/dev/null && break; sleep 0.1; done
    guest "timeout 30 rping -c -a 10.99.0.1 -C 1 2>&1" > "$OUT/$tag.guest.log" 2>&1
    wait $hp || rc=1
    grep -q "accepted and disconnected" "$OUT/$tag.host.log" || rc=1
    grep -q "first message: 16 bytes" "$OUT/$tag.host.log" || rc=1  # rping's buffer address, over the QP
    grep -q "DISCONNECT EVENT" "$OUT/$tag.guest.log" || rc=1
  fi
  for m in ConnectRequest ConnectReply ReadyToUse DisconnectRequest DisconnectReply; do
    tshark -r "$OUT/$tag.pcap" 2>/dev/null | grep -q "CM: $m" || { rc=1; say "$tag: no $m in the capture"; }
  done
  finish "CM connect and disconnect with rdma_cm (rping)" "$role" "$tag" $rc
}

# rdma_cm programs unmodified on both sides: rdma-core's on uroce through uroce-run (its
# librdmacm.so.1) here, the same on the kernel's rdma_cm in the guest. The guest's listener is
# ready once rdma_cm lists it; a guest client that fails while uroce's server still waits (not
# yet listening) runs again, a bounded few times. perftest 4.5-0.17 closes its first (control)
# listener and opens the data listener after the control exchange; a client quicker than that
# gets REJ "invalid service ID" (8) from either stack, and that perftest's own retry then
# crashes (fixed upstream in perftest e2b3dcf): such a pair starts again, a bounded few times.
rdmacm_case() {  # role server[:client] port "server args" "client args" client-regex server-regex label [tag]
  local attempt tag="rdmacm-${9:-${2%%:*}}-uroce-$1$SUFFIX"
  for attempt in 1 2 3; do
    rdmacm_attempt "$@" && return
    grep -qs "REJECTED; error: 8" "$OUT/$tag.$RDMACM_CLIENT_LOG.log" || break
    say "perftest's listener race (REJ 8), attempt $attempt: the pair starts again"
  done
  finish "$8" "$1" "$tag" 1
}

rdmacm_attempt() {  # as rdmacm_case; returns 0 when the case passed (and records it)
  local role=$1 sprog=${2%%:*} cprog=${2##*:} port=$3 sargs=$4 cargs=$5 cre=$6 sre=$7 label=$8 rc=0 i hp
  local tag="rdmacm-${9:-$sprog}-uroce-$role$SUFFIX" client_log server_log
  if [ "$role" = client ]; then
    client_log=host server_log=guest
    guest "timeout 60 $sprog $sargs > /tmp/$tag.log 2>&1 &"
    guest "i=0; while [ \$i -lt 200 ] && ! rdma resource show cm_id | grep -q 'LISTEN.*:$port'; do sleep 0.1; i=\$((i+1)); done"
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-run" -- $cprog $cargs > "$OUT/$tag.host.log" 2>&1 || rc=1
    # A server whose client crashed in the race waits for a data connection that never comes.
    grep -qs "REJECTED; error: 8" "$OUT/$tag.host.log" && guest "killall $sprog" > /dev/null 2>&1
    guest_exited "$sprog" || rc=1
  else
    client_log=guest server_log=host
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-run" -- $sprog $sargs > "$OUT/$tag.host.log" 2>&1 &
    hp=$!
    # uroce's device is up once its UDP port 4791 is bound (0x12B7).
    ip netns exec "$NS" sh -c 'i=0; while [ $i -lt 200 ] && ! grep -qs ":12B7 " /proc/net/udp; do sleep 0.05; i=$((i+1)); done'
    for i in 1 2 3 4 5; do
      guest "timeout 30 $cprog $cargs > /tmp/$tag.log 2>&1; echo exit=\$?" | grep -q "exit=0" && break
      guest "grep -q 'REJECTED; error: 8' /tmp/$tag.log" > /dev/null 2>&1 && { pkill -x "$sprog"; break; }
      kill -0 $hp 2> /dev/null || break
      sleep 0.3
    done
    wait $hp || rc=1
  fi
  RDMACM_CLIENT_LOG=$client_log
  guest "cat /tmp/$tag.log" > "$OUT/$tag.guest.log" 2>&1
  grep -Eq "$cre" "$OUT/$tag.$client_log.log" || rc=1
  grep -Eq "$sre" "$OUT/$tag.$server_log.log" || rc=1
  [ $rc = 0 ] || return 1
  finish "$label" "$role" "$tag" 0
}

# (cmtime is not in the guest image: it runs between uroce processes, in clients_rdmacm.)
rdmacm_cases() {  # role: uroce is the rdma_cm client or server
  local role=$1 me=10.99.0.2
  [ "$role" = server ] && me=10.99.0.1
  guarded rdmacm_case "$role" rping 7174 "-s -v -C 10 -a $me" "-c -v -C 10 -a $me" "^ping data: rdma-ping-9: J" \
    "^server ping data: rdma-ping-9: J" "rping -v -C 10 over rdma_cm (REQ/REP/RTU, SEND, READ, WRITE, DREQ)"
  guarded rdmacm_case "$role" udaddy 7174 "-b $me -C 10" "-s $me -C 10" "return status 0" "return status 0" \
    "udaddy -C 10 over rdma_cm (SIDR, UD datagrams)"
  guarded rdmacm_case "$role" rdma_server:rdma_client 7471 "-s $me" "-s $me" "end 0" "end 0" \
    "rdma_server/rdma_client (synchronous endpoints)"
  guarded rdmacm_case "$role" ucmatose 7471 "-b $me -c 2 -C 10" "-s $me -c 2 -C 10" "return status 0" "return status 0" \
    "ucmatose -c 2 -C 10 (two RC connections, messages each way)"
  guarded rdmacm_case "$role" ib_send_bw 18515 "-z -s 8192 -n 100" "-z -s 8192 -n 100 $me" "^ 8192 +100 " "^ 8192 +100 " \
    "perftest ib_send_bw -z (rdma_cm connection for perftest's exchange, 8 KiB x 100)"
  # rsockets: librdmacm's in the guest, the drop-in's here, on the same wire format (private
  # data, WRITE WITH IMMEDIATE into the peer's ring, credits and ring halves coming back).
  guarded rdmacm_case "$role" rstream 7471 "-b $me -T v -S 65536 -C 100" "-s $me -T v -S 65536 -C 100" "^custom " \
    "^custom " "rstream -T v, 64 KiB x 100 each way (rsockets, every byte checked)"
  # rpoll-driven with uroce as the client only: librdmacm's rpoll reports POLLHUP beside unread
  # data, and rstream -T a takes POLLHUP for an error, so a client that sees the server's last
  # bytes and its close together (this emulated guest does) fails after a correct transfer.
  [ "$role" = client ] && guarded rdmacm_case "$role" rstream 7471 "-b $me -T a -S 1 -C 500" "-s $me -T a -S 1 -C 500" \
    "^custom " "^custom " "rstream -T a, 1 byte x 500 each way (rsockets through rpoll)" rstream-a
  # -R against rxe's server only: in this emulated guest its data listener comes up well after
  # a client on the host connects, and every pair meets perftest's listener race above.
  [ "$role" = server ] && guarded rdmacm_case "$role" ib_send_bw 18515 "-R -s 8192 -n 100" "-R -s 8192 -n 100 $me" \
    "^ 8192 +100 " "^ 8192 +100 " "perftest ib_send_bw -R (rdma_cm connections, 8 KiB x 100)" ib_send_bw-R
  guarded mckey_case "$role"
}

# mckey (UD multicast through rdma_cm: a join, then datagrams to the group) against the kernel's
# rdma_cm and rxe: Debian's mckey, which the guest image lacks, is copied to it. Role client:
# uroce sends to a group the guest joined; server: uroce is the member, rxe sends.
mckey_case() {  # role
  local role=$1 tag="rdmacm-mckey-uroce-$1$SUFFIX" rc=0 hp group hex
  group=239.99.0.$([ "$role" = client ] && echo 1 || echo 2)
  hex=$(printf '%02X0063EF' "${group##*.}")  # /proc/net/igmp's spelling of the group
  command -v mckey > /dev/null || { record "mckey (not installed here)" 1 "Debian: rdmacm-utils"; return; }
  guest "[ -x /tmp/mckey ] && echo present" | grep -q present || upload "$(command -v mckey)" mckey ||
    { record "mckey upload to the guest" 1 "see $OUT"; return; }
  if [ "$role" = client ]; then
    guest "timeout 60 /tmp/mckey -m $group -b 10.99.0.2 -C 10 > /tmp/$tag.log 2>&1 &"
    # A member once the guest's interface holds the group (the kernel's rdma_cm joined it).
    guest "i=0; while [ \$i -lt 200 ] && ! grep -q $hex /proc/net/igmp; do sleep 0.1; i=\$((i+1)); done"
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-run" -- mckey -m $group -b 10.99.0.1 -s -C 10 \
      > "$OUT/$tag.host.log" 2>&1 || rc=1
    guest_exited mckey || rc=1
    guest "cat /tmp/$tag.log" > "$OUT/$tag.guest.log" 2>&1
    grep -q "data transfers complete" "$OUT/$tag.guest.log" || rc=1
  else
    host env UROCE_PCAP="$OUT/$tag.pcap" timeout 60 "$BUILD/bin/uroce-run" -- mckey -m $group -b 10.99.0.1 -C 10 \
      > "$OUT/$tag.host.log" 2>&1 &
    hp=$!
    # A member once its device has the group's socket (made at the join).
    ip netns exec "$NS" sh -c "i=0; while [ \$i -lt 200 ] && ! ss -Hlun 'src $group:4791' | grep -q 4791; do sleep 0.05; i=\$((i+1)); done"
    guest "timeout 60 /tmp/mckey -m $group -b 10.99.0.2 -s -C 10 > /tmp/$tag.log 2>&1; echo exit=\$?" | grep -q "exit=0" || rc=1
    wait $hp || rc=1
    guest "cat /tmp/$tag.log" > "$OUT/$tag.guest.log" 2>&1
    grep -q "data transfers complete" "$OUT/$tag.host.log" || rc=1
  fi
  finish "mckey -C 10 (UD multicast: rdma_join_multicast, 10 datagrams to group $group)" "$role" "$tag" $rc
}

lossy_cases() {
  TRANSPORT=rc
  # Loss on the guest's egress: rxe retransmits after our PSN sequence NAKs, and we recover
  # from lost ACKs and responses by timeout and go-back-N.
  NETEM="loss 5%"
  guest "/usr/sbin/tc qdisc add dev eth0 root netem $NETEM" > /dev/null 2>&1
  send_both 4096 200
  # The same with uroce set to selective repeat: rxe ignores the announcement (a reserved BTH
  # bit) and NAKs as usual, and uroce goes back N with it, in both directions.
  export UROCE_RELIABILITY=sr
  local suffix=$SUFFIX
  SUFFIX="$suffix-sr"
  NOTE=" (UROCE_RELIABILITY=sr)"
  send_both 4096 200
  guarded perftest_case "RC RDMA WRITE 8 KiB x 100 (perftest)$NOTE" "ib_write_bw -s 8192 -n 100" client
  unset UROCE_RELIABILITY NOTE
  SUFFIX=$suffix
  guest "/usr/sbin/tc qdisc del dev eth0 root" > /dev/null 2>&1
  NETEM=""
}

all_cases() {
  TRANSPORT=rc
  for size in 64 1024 4096 10000; do send_both $size 20; done

  lossy_cases

  # UC (no loss: ibv_uc_pingpong waits forever for a message UC lost).
  TRANSPORT=uc
  for size in 64 4096 10000; do send_both $size 20; done

  # UD with the GRH, up to rxe's MTU of 1024.
  TRANSPORT=ud
  for size in 64 1024; do send_both $size 20; done

  for role in client server; do
    guarded perftest_case "RC RDMA WRITE 8 KiB x 100 (perftest)" "ib_write_bw -s 8192 -n 100" $role
    guarded perftest_case "RC RDMA READ 8 KiB x 100 (perftest)" "ib_read_bw -s 8192 -n 100" $role
    guarded perftest_case "RC FETCH_AND_ADD x 100 (perftest)" "ib_atomic_bw -A FETCH_AND_ADD -n 100" $role
    guarded perftest_case "RC CMP_AND_SWAP x 100 (perftest)" "ib_atomic_bw -A CMP_AND_SWAP -n 100" $role
    guarded perftest_case "RC SEND 8 KiB x 100 (perftest)" "ib_send_bw -s 8192 -n 100" $role
  done

  if [ "$uploaded" = yes ]; then
    guarded rdma_check_case client
    guarded rdma_check_case server
    guarded rdma_check_case client mw
    guarded rdma_check_case server mw
  fi

  guarded cm_case client
  guarded cm_case server
  rdmacm_cases client
  rdmacm_cases server
}

# The cases the IPv6 pass runs: SEND both ways (RC, UD), perftest WRITE and READ
# both ways, rdma-check's operations both ways.
subset_cases() {
  TRANSPORT=rc
  send_both 4096 20
  TRANSPORT=ud
  send_both 1024 20
  for role in client server; do
    guarded perftest_case "RC RDMA WRITE 8 KiB x 100 (perftest)" "ib_write_bw -s 8192 -n 100" $role
    guarded perftest_case "RC RDMA READ 8 KiB x 100 (perftest)" "ib_read_bw -s 8192 -n 100" $role
  done
  if [ "$uploaded" = yes ]; then
    guarded rdma_check_case client
    guarded rdma_check_case server
  fi
}

# Kernel bypass: every case again with uroce's frames through AF_XDP both ways (rxe's IP IDs
# seen, as in raw receive). A watcher samples the uroce command meanwhile: the frames must have
# gone by AF_XDP.
xdp_section() {
  HOST_PREFIX=(env UROCE_LINK=xdp)
  SUFFIX="-xdp"
  MODE="AF_XDP"
  section
  xdp_seen="$OUT/xdp-seen"
  echo 0 > "$xdp_seen"
  (
    for i in $(seq 1 6000); do  # at most 600 s, longer than the section
      n=$(ip netns exec "$NS" "$BUILD/bin/uroce" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys
print(max([p["counters"].get("xdp_rx_packets", 0) for d in json.load(sys.stdin)["devices"] for p in d["processes"]] + [0]))' 2>/dev/null)
      [ "${n:-0}" -gt "$(cat "$xdp_seen")" ] && echo "$n" > "$xdp_seen"
      sleep 0.1
    done
  ) &
  watcher=$!
  all_cases
  kill $watcher 2>/dev/null
  wait $watcher 2>/dev/null
  seen=$(cat "$xdp_seen")
  [ "$seen" -gt 0 ] && record "rxe's frames reached uroce through AF_XDP (a process counted $seen)" 0 "" ||
    record "rxe's frames reached uroce through AF_XDP" 1 "no uroce process counted xdp_rx_packets"
  HOST_PREFIX=()
}

if [ "${ONLY:-}" = xdp ]; then
  uploaded=no
  upload_rdma_check && uploaded=yes
  xdp_section
  printf '%s\n' "${results[@]}"
  echo "interop: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

if [ "${ONLY:-}" = mw ]; then
  MODE="default: UDP, GSO/GRO"
  SUFFIX=""
  uploaded=no
  upload_rdma_check && uploaded=yes || record "rdma-check upload to the guest" 1 "see $OUT"
  if [ "$uploaded" = yes ]; then
    guarded rdma_check_case client mw
    guarded rdma_check_case server mw
  fi
  printf '%s\n' "${results[@]}"
  echo "interop: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

if [ "${ONLY:-}" = lossy ]; then
  MODE="default: UDP, GSO/GRO"
  SUFFIX=""
  lossy_cases
  HOST_PREFIX=("${RAW[@]}")
  SUFFIX="-raw"
  MODE="raw receive: IP ID seen"
  lossy_cases
  printf '%s\n' "${results[@]}"
  echo "interop: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

if [ "${ONLY:-}" = rdmacm ]; then
  MODE="default: UDP, GSO/GRO"
  SUFFIX=""
  rdmacm_cases client
  rdmacm_cases server
  printf '%s\n' "${results[@]}"
  echo "interop: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

uploaded=no
upload_rdma_check && uploaded=yes || record "rdma-check upload to the guest" 1 "see $OUT"
SUFFIX=""
MODE="default: UDP, GSO/GRO"
section
all_cases
# The same through a raw socket, which shows the IP header: the ICRC checked over the real ID.
HOST_PREFIX=("${RAW[@]}")
SUFFIX="-raw"
MODE="raw receive: IP ID seen"
section
all_cases

xdp_section

# IPv6: both sides on their link-local GID 0, what rdma-core tools use by default.
HOST_PREFIX=()
UGID=0
GGID=0
SUFFIX="-v6"
MODE="IPv6 link-local GID 0"
section
wait_ipv6
subset_cases

{
  echo "# uroce <-> rxe interop run ($(date -u +%Y-%m-%dT%H:%MZ))"
  printf '%s\n' "${results[@]}"
  for r in "${restarts[@]}"; do echo "GUEST RESTARTED  $r"; done
} > "$OUT/summary.txt"
echo
cat "$OUT/summary.txt"
echo "interop: $passed passed, $failed failed"
[ "$failed" = 0 ]
