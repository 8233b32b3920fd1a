# Sourced by the namespace tests (POSIX sh). two_hosts NAME NET VA VB IPV6: two hosts, network
# namespaces $A and $B joined by a veth pair ($VA in A at NET.1/24, $VB in B at NET.2/24), lo
# up in each, a temporary directory $tmp, all removed at exit (kept with KEEP=1), and inA/inB
# to run a command on a host without uroce settings. IPV6 "ll": link-local GIDs usable at once
# (no duplicate address detection); "off": IPv4 alone, so GID 0 is the IPv4 address.
# Calls the caller's skip() if the host cannot make them (root and iproute2 are needed).
# Also the scripts' counted checks: ok and bad, totals in $passed and $failed.
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "NOT OK - $*"; }
two_hosts() {
  [ "$(id -u)" = 0 ] || skip "needs root for ip netns"
  command -v ip >/dev/null || skip "no ip (iproute2)"
  A="uroce-$1-a-$$" B="uroce-$1-b-$$" net=$2 VA=$3 VB=$4
  tmp=$(mktemp -d "/tmp/uroce-$1.XXXXXX")
  trap two_hosts_cleanup EXIT INT TERM
  ip netns add "$A" && ip netns add "$B" || skip "cannot create network namespaces"
  ip link add "$VA" type veth peer name "$VB" || skip "cannot create a veth pair"
  ip link set "$VA" netns "$A"
  ip link set "$VB" netns "$B"
  if [ "$5" = off ]; then
    for n in "$A" "$B"; do ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
  else
    ip netns exec "$A" sysctl -qw "net.ipv6.conf.$VA.accept_dad=0"
    ip netns exec "$B" sysctl -qw "net.ipv6.conf.$VB.accept_dad=0"
  fi
  ip -n "$A" addr add "$net.1/24" dev "$VA"
  ip -n "$B" addr add "$net.2/24" dev "$VB"
  for n in "$A" "$B"; do ip -n "$n" link set lo up; done
  ip -n "$A" link set "$VA" up
  ip -n "$B" link set "$VB" up
}
two_hosts_cleanup() {
  ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  if [ -n "$KEEP" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
inA() { ip netns exec "$A" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }
inB() { ip netns exec "$B" env -u UROCE_DEVICES -u UROCE_ADDR "$@"; }
