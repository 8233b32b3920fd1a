# Sourced by the test scripts (POSIX sh; also sent to the rxe guest's busybox sh).
# listen_wait PORT: returns 0 once something listens on TCP PORT here (IPv4 or IPv6), 1 after 20 s.
# Clients such as ibv_rc_pingpong and perftest try to connect once, so they start after this.
listen_wait() {
  _hex=$(printf '%04X' "$1")
  _i=0
  while [ $_i -lt 200 ]; do
    grep -qs ":$_hex [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6 && return 0
    sleep 0.1
    _i=$((_i + 1))
  done
  return 1
}
# cm_listen_wait PORT [ADDR]: returns 0 once a uroce rdma_cm listener of the TCP port space (an
# rdma_cm or rsocket server) holds PORT, bound to ADDR if given, on this host's loopback
# (where listeners are named by abstract unix sockets, not kernel TCP ones); 1 after 20 s.
cm_listen_wait() {
  _i=0
  while [ $_i -lt 200 ]; do
    grep -qs "@uroce-cm/262/$1/${2:+$2/}" /proc/net/unix && return 0
    sleep 0.1
    _i=$((_i + 1))
  done
  return 1
}
