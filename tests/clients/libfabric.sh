#!/bin/sh
# libfabric (Debian's libfabric-bin) on uroce through uroce-run, its verbs provider on both of
# uroce's drop-ins (libibverbs for data, librdmacm for connections):
#  - fi_info -p verbs lists uroce_lo;
#  - fi_pingpong -e rdm (verbs;ofi_rxd over UD) between two processes on loopback, every message
#    size it tries (1 B .. 6 MiB), 20 round trips each, data checked (-c);
#  - fi_pingpong -e msg (RC connected through rdma_cm), the same, as root in a network namespace
#    this script makes. The verbs provider offers MSG endpoints only on a non-loopback interface
#    whose addresses rdma_cm binds, and Debian's fi_pingpong binds its server to "localhost", so
#    the namespace has a veth holding a 127.0.0.0/8 address besides lo.
# Each process places uroce_lo with UROCE_ADDR: the provider binds every interface address it
# finds, and on a host with a network the first one it could bind would otherwise hold the device.
#   usage: libfabric.sh BIN_DIR
BIN=$1
command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong is not installed (Debian: libfabric-bin)"; exit 77; }
tmp=$(mktemp -d /tmp/uroce-fi.XXXXXX)
ns=""
cleanup() {
  [ -n "$ns" ] && { ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null; ip netns del "$ns" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
fail=0
net="127.0.$(( 50 + $$ % 50 ))"
SADDR="$net.$(( 2 + $$ % 100 ))" CADDR="$net.$(( 150 + $$ % 100 ))"

if UROCE_ADDR=$SADDR timeout 30 "$BIN/uroce-run" -- fi_info -p verbs 2>&1 | grep -q "domain: uroce_lo"; then
  echo "ok - fi_info -p verbs lists uroce_lo"
else
  echo "FAIL: fi_info -p verbs does not list uroce_lo"; fail=1
fi

# attempt EP [WRAP...]: a server and a client of fi_pingpong -e EP, run through WRAP; 0 when
# both exit 0 and the client saw every size.
attempt() {
  ep=$1; shift
  port=$(( 20000 + ($$ + tries) % 12000 ))  # below the ephemeral range (32768-)
  "$@" env UROCE_ADDR=$SADDR timeout 60 "$BIN/uroce-run" -- fi_pingpong -p verbs -e "$ep" -B $port -I 20 -S all -c \
    > "$tmp/server" 2>&1 &
  srv=$!
  sleep 1
  "$@" env UROCE_ADDR=$CADDR timeout 60 "$BIN/uroce-run" -- fi_pingpong -p verbs -e "$ep" -P $port -I 20 -S all -c \
    "$SADDR" > "$tmp/client" 2>&1; crc=$?
  wait $srv; src=$?
  sizes=$(grep -c " =20 " "$tmp/client")
  [ $crc = 0 ] && [ $src = 0 ] && [ "$sizes" -ge 20 ]
}

# ofi_rxd (rdm over UD) acknowledges lazily: now and then a client still waits for the ack of its
# last message when the server has already gone, and hangs in teardown. Such a pair runs again,
# at most three times in all, and says so.
pingpong() {
  tries=0
  while tries=$((tries + 1)); ! attempt "$@"; do
    echo "## fi_pingpong -e $1: attempt $tries failed (client $crc, server $src, $sizes sizes)"
    [ $tries -ge 3 ] && break
  done
  if [ $crc = 0 ] && [ $src = 0 ] && [ "$sizes" -ge 20 ]; then
    echo "ok - fi_pingpong -e $1 -c, $sizes sizes up to $(awk '/ =20 / {s = $1; r = $6} END {print s ": " r " MB/s"}' "$tmp/client")"
  else
    echo "FAIL: fi_pingpong -e $1"; tail -5 "$tmp/client"; tail -5 "$tmp/server"; fail=1
  fi
}

pingpong rdm

if [ "$(id -u)" != 0 ]; then
  echo "## fi_pingpong -e msg NOT RUN: needs root for ip netns"
elif ns="uroce-fi-$$" && ip netns add "$ns" && ip -n "$ns" link set lo up &&
     ip -n "$ns" link add "fia$$" type veth peer name "fib$$" &&
     ip -n "$ns" addr add "$net.1/32" dev "fia$$" && ip -n "$ns" link set "fia$$" up; then
  SADDR=127.0.0.1  # where fi_pingpong's msg server listens
  pingpong msg ip netns exec "$ns"
else
  echo "FAIL: cannot make the network namespace for fi_pingpong -e msg"; fail=1
fi
[ $fail = 0 ] && echo "libfabric: verbs provider runs on uroce"
exit $fail
