#!/bin/sh
# Debian's perftest binaries, unmodified, on uroce (server and client on loopback, RoCE v2
# GID 0). They run with --use_old_post_send: the extended send API is not in the drop-in yet.
RUN=$1
. "$(dirname "$0")/../common/listen.sh"
for t in "ib_send_bw -s 65536 -n 1000" "ib_write_bw -s 65536 -n 1000" "ib_read_bw -s 65536 -n 500" \
         "ib_read_lat -s 64 -n 1000" "ib_atomic_bw -n 500"; do
  port=$((20000 + $$ % 12000))  # below the ephemeral range (32768-)
  timeout 120 "$RUN" -- $t -d uroce_lo -x 0 --use_old_post_send -p $port > /tmp/pt-srv-$$.log 2>&1 &
  srv=$!
  listen_wait $port
  timeout 120 "$RUN" -- $t -d uroce_lo -x 0 --use_old_post_send -p $port 127.0.0.1 > /tmp/pt-cli-$$.log 2>&1
  c=$?
  wait $srv
  s=$?
  name=${t%% *}
  echo "$name: $(grep -A1 '#bytes' /tmp/pt-cli-$$.log | tail -1 | tr -s ' ')"
  if [ $c != 0 ] || [ $s != 0 ] || ! grep -q '#bytes' /tmp/pt-cli-$$.log; then
    cat /tmp/pt-srv-$$.log /tmp/pt-cli-$$.log
    rm -f /tmp/pt-srv-$$.log /tmp/pt-cli-$$.log
    echo "$name failed (client $c, server $s)"
    exit 1
  fi
  rm -f /tmp/pt-srv-$$.log /tmp/pt-cli-$$.log
done
echo "perftest on uroce: all passed"
