#!/bin/sh
# Debian's own ibv_rc_pingpong binary, unmodified, on uroce: server and client on loopback with
# --chk, for a message that fits a packet and ones that need several (path MTU 1024).
RUN=$1
for size in 64 4096 10000; do
  port=$((20000 + ($$ + size) % 20000))
  "$RUN" -- ibv_rc_pingpong -g 0 -s $size -n 200 -c -p $port > /tmp/dropin-srv-$$.log 2>&1 &
  srv=$!
  sleep 0.3
  "$RUN" -- ibv_rc_pingpong -g 0 -s $size -n 200 -c -p $port 127.0.0.1 > /tmp/dropin-cli-$$.log 2>&1
  c=$?
  wait $srv
  s=$?
  cat /tmp/dropin-srv-$$.log /tmp/dropin-cli-$$.log
  rm -f /tmp/dropin-srv-$$.log /tmp/dropin-cli-$$.log
  if [ $c != 0 ] || [ $s != 0 ]; then echo "size $size failed (client $c, server $s)"; exit 1; fi
done
echo "ibv_rc_pingpong on uroce: all sizes passed"
