#!/bin/sh
# rsockets between two uroce processes, with programs written by others: librdmacm's rstream
# (blocking, non-blocking, poll-driven, and verifying every byte) and riostream (riomap and
# riowrite), then TCP programs run unmodified through Debian's librspreload.so: tcp_stream, a
# select() loop whose every byte is checked, and iperf3 each way, whose receiver must count what
# was sent (but for what was in flight at its end) and read the bytes that were sent (hashed at
# both ends); neither listener may be a kernel socket: their bytes really go over rsockets.
#   usage: rsockets.sh BIN_DIR
BIN=$1
command -v rstream >/dev/null || { echo "SKIP: rstream is not installed (Debian: rdmacm-utils)"; exit 77; }
RUN="$BIN/uroce-run --"
PRELOAD=$(ls /usr/lib/*/rsocket/librspreload.so 2>/dev/null | head -1)
. "$(dirname "$0")/../common/listen.sh"
# The server's device takes an address of its own, so that parallel tests do not meet it.
SADDR=127.0.$(( 100 + $$ % 100 )).$(( 2 + $$ % 200 ))
CADDR=127.0.$(( 100 + $$ % 100 )).$(( 3 + $$ % 200 ))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# Runs a server and a client; crc and src are their exit codes. Extra environment for both in
# PAIR_ENV (the preload).
pair() {  # name "server command" "client command"
  name=$1
  env $PAIR_ENV UROCE_ADDR=$SADDR timeout 60 $RUN $2 > "$TMP/$name.server" 2>&1 &
  spid=$!
  cm_listen_wait 7471 $SADDR  # the clients connect once
  env $PAIR_ENV UROCE_ADDR=$CADDR timeout 60 $RUN $3 > "$TMP/$name.client" 2>&1; crc=$?
  wait $spid; src=$?
}
report() {  # name ok description
  if [ "$2" = 0 ]; then echo "ok - $3"; else
    echo "FAIL: $3 (client $crc, server $src)"
    echo "## client:"; tail -6 "$TMP/$1.client"; echo "## server:"; tail -6 "$TMP/$1.server"; fail=1; fi
}

# rstream: the same options on both sides; -T v checks every byte it receives.
for mode in b n a v; do
  pair "rstream-$mode" "rstream -b $SADDR -T $mode -S 65536 -C 200" "rstream -s $SADDR -T $mode -S 65536 -C 200"
  ok=1; [ $crc = 0 ] && [ $src = 0 ] && grep -q "^custom" "$TMP/rstream-$mode.client" && ok=0
  report "rstream-$mode" $ok "rstream -T $mode, 200 transfers of 64 KiB each way: $(awk '/^custom/ {print $7 " Gb/s"}' "$TMP/rstream-$mode.client")"
done
pair rstream-small "rstream -b $SADDR -T v -S 1 -C 2000" "rstream -s $SADDR -T v -S 1 -C 2000"
ok=1; [ $crc = 0 ] && [ $src = 0 ] && ok=0
report rstream-small $ok "rstream -T v, 2000 one-byte transfers each way: $(awk '/^custom/ {print $8 " us per transfer"}' "$TMP/rstream-small.client")"

# riostream: the receiver maps its buffer; the sender riowrites into it.
pair riostream "riostream -b $SADDR -T v -S 65536 -C 50 -I 4" "riostream -s $SADDR -T v -S 65536 -C 50 -I 4"
ok=1; [ $crc = 0 ] && [ $src = 0 ] && grep -q "^custom" "$TMP/riostream.client" && ok=0
report riostream $ok "riostream -T v, riowrite of 64 KiB into the peer's riomap, 50 x 4: $(awk '/^custom/ {print $7 " Gb/s"}' "$TMP/riostream.client")"

if [ -n "$PRELOAD" ]; then
  PAIR_ENV="LD_PRELOAD=$PRELOAD"
  seed=$$
  pair tcp_stream "$BIN/tcp_stream server $SADDR 7471 40000000 $seed" "$BIN/tcp_stream client $SADDR 7471 40000000 $seed"
  ok=1; [ $crc = 0 ] && [ $src = 0 ] && grep -q "read 40000037 of 40000037 bytes, 0 wrong" "$TMP/tcp_stream.server" &&
    grep -q "kernel listeners on port 7471: 0" "$TMP/tcp_stream.server" && ok=0
  report tcp_stream $ok "a TCP program through librspreload, its listener no kernel socket: 40 MB, every byte checked (seed $seed)"
  # iperf3 (select(), non-blocking sockets, a control and a data connection), each way: what
  # the receiver counts is what was sent, the bytes hash alike at both ends (libstream_tap.so
  # between iperf3 and the preload), and its listener is no kernel socket.
  if command -v iperf3 >/dev/null; then
    . "$(dirname "$0")/../common/stream_tap.sh"
    for dir in "" -R; do
      name=iperf3$dir
      env LD_PRELOAD="$BIN/libstream_tap.so $PRELOAD" UROCE_ADDR=$SADDR timeout 60 $RUN \
        iperf3 -s -1 -B $SADDR -p 7472 > "$TMP/$name.server" 2> "$TMP/$name.server-tap" &
      spid=$!
      cm_listen_wait 7472 $SADDR
      kernel=$(ss -Htln "sport = :7472" 2>/dev/null | wc -l)
      env LD_PRELOAD="$BIN/libstream_tap.so $PRELOAD" UROCE_ADDR=$CADDR timeout 60 $RUN \
        iperf3 -c $SADDR -p 7472 -n 128M $dir -J > "$TMP/$name.client" 2> "$TMP/$name.client-tap"; crc=$?
      wait $spid; src=$?
      if [ -z "$dir" ]; then tx=client rx=server; else tx=server rx=client; fi
      iperf3_verdict "iperf3 ${dir:+$dir }through librspreload, 128 MiB $tx to $rx" $crc $src "$kernel" \
        "$TMP/$name.$tx-tap" "$TMP/$name.$rx-tap" "$TMP/$name.client" ||
        { fail=1; tail -n 4 "$TMP/$name.client" "$TMP/$name.server" "$TMP/$name.client-tap" "$TMP/$name.server-tap"; }
    done
  fi
fi

[ $fail = 0 ] && echo "rsockets: rstream, riostream and preloaded TCP programs run on uroce"
exit $fail
