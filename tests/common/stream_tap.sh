# Checks on a socket program run with libstream_tap.so (tests/compat/stream_tap.c) preloaded.

# tap_agree SENDER_LOG RECEIVER_LOG: prints how many checkpoints the receiver reached; fails if
# one differs from the sender's at the same point, or if the receiver reached none.
tap_agree() {
  awk '$1 == "stream_tap:" && $2 == "w" { w[$3] = $4 }
       $1 == "stream_tap:" && $2 == "r" { n++; if (w[$3] != $4 && !bad++) print "at " $3 " MiB: sent " w[$3] ", received " $4 > "/dev/stderr" }
       END { print n + 0; exit (bad || !n) }' "$1" "$2"
}

# iperf3_counts JSON: bytes sent, bytes received and Gbit/s received, from iperf3 -J's end.
iperf3_counts() {
  /usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]; print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"], "%.1f" % (e["sum_received"]["bits_per_second"] / 1e9))' "$1" 2>/dev/null
}

# iperf3_verdict NAME CRC SRC KERNEL_LISTENERS SENDER_TAP RECEIVER_TAP CLIENT_JSON: 0 if both
# ends exited 0, the listener was no kernel socket, the receiver counted what was sent but for
# what was in flight at the end (at most 1 MiB), and every 4 MiB checkpoint the receiver
# reached hashes as the sender's did: one for each 4 MiB it counted at least (it may read what
# came after its count stopped), none past what was sent. Prints a line.
iperf3_verdict() {
  set -- "$@" $(iperf3_counts "$7")
  name=$1 sent=$8 got=$9 rate=${10}
  checked=$(tap_agree "$5" "$6"); agree=$?
  if [ "$2" = 0 ] && [ "$3" = 0 ] && [ "$4" = 0 ] && [ -n "$got" ] && [ "$got" -le "$sent" ] &&
    [ $((sent - got)) -le 1048576 ] && [ $agree = 0 ] && [ "$checked" -ge $((got / 4194304)) ] && [ "$checked" -le $((sent / 4194304)) ]; then
    echo "ok - $name: $got of $sent bytes received, hashes agree at $checked points (every 4 MiB), $rate Gbit/s"
    return 0
  fi
  echo "FAIL: $name (client $2, server $3, kernel listeners $4, $got of $sent bytes, $checked hash points, agree $agree)"
  return 1
}
