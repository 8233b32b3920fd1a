#!/bin/sh
# Debian's own ibv_{rc,uc,ud,srq}_pingpong binaries, unmodified, on uroce: server and client on
# loopback with --chk, single- and multi-packet messages (UD: up to one MTU).
RUN=$1
. "$(dirname "$0")/../common/listen.sh"
run() {  # program size
  port=$((20000 + ($$ * 7 + $2) % 12000))  # below the ephemeral range (32768-)
  timeout 60 "$RUN" -- "$1" -g 0 -s "$2" -n 200 -c -p $port > /tmp/dropin-srv-$$.log 2>&1 &
  srv=$!
  listen_wait $port
  timeout 60 "$RUN" -- "$1" -g 0 -s "$2" -n 200 -c -p $port 127.0.0.1 > /tmp/dropin-cli-$$.log 2>&1
  c=$?
  wait $srv
  s=$?
  grep -h iters /tmp/dropin-srv-$$.log /tmp/dropin-cli-$$.log | sed "s/^/$1 $2 B: /"
  rm -f /tmp/dropin-srv-$$.log /tmp/dropin-cli-$$.log
  if [ $c != 0 ] || [ $s != 0 ]; then echo "$1 size $2 failed (client $c, server $s)"; exit 1; fi
}
for size in 64 4096 10000; do run ibv_rc_pingpong $size; done
for size in 64 10000; do run ibv_uc_pingpong $size; done
for size in 64 4096; do run ibv_ud_pingpong $size; done
for size in 64 10000; do run ibv_srq_pingpong $size; done
echo "rdma-core pingpong programs on uroce: all passed"
