# Sourced by the namespace tests (POSIX sh): a packet capture known to be listening before the
# traffic it must see, so that an empty capture means no packets, never a late tcpdump.
# capture_start NS IFACE FILE FILTER...: tcpdump in network namespace NS; sets capture_pid.
# Returns 1, saying why, if tcpdump is not listening within 10 s.
capture_start() {
  _ns=$1 _if=$2 _file=$3
  shift 3
  ip netns exec "$_ns" tcpdump -i "$_if" -U -w "$_file" "$@" > /dev/null 2> "$_file.err" &
  capture_pid=$!
  _i=0
  while [ $_i -lt 200 ]; do
    grep -qs "listening on" "$_file.err" && return 0
    kill -0 "$capture_pid" 2> /dev/null || break
    sleep 0.05
    _i=$((_i + 1))
  done
  echo "tcpdump on $_if is not listening: $(cat "$_file.err" 2> /dev/null)" >&2
  return 1
}
# capture_stop: stops the capture; what was sent before has had 0.3 s to reach it.
capture_stop() {
  sleep 0.3
  kill -INT "$capture_pid" 2> /dev/null
  wait "$capture_pid" 2> /dev/null
}
