#!/bin/sh
# uroce-pingpong against itself on loopback, both roles; each side checks every byte.
BIN=$1
. "$(dirname "$0")/../common/listen.sh"
PORT=$((20000 + $$ % 12000))  # below the ephemeral range (32768-)
"$BIN/uroce-pingpong" -p $PORT -s 10000 -n 50 > /tmp/pp-server-$$.log 2>&1 &
listen_wait $PORT
"$BIN/uroce-pingpong" -p $PORT -s 10000 -n 50 127.0.0.1 > /tmp/pp-client-$$.log 2>&1
c=$?
wait $!
s=$?
cat /tmp/pp-server-$$.log /tmp/pp-client-$$.log
rm -f /tmp/pp-server-$$.log /tmp/pp-client-$$.log
[ $c = 0 ] && [ $s = 0 ] && echo "pingpong: both sides verified"
