# Shared by the tests that run mckey across hosts (sourced; POSIX sh).
# mckey_joined GROUP RUNNER...: waits (at most 10 s) until each host holds a socket bound to
# GROUP:4791, its member's; a RUNNER is the command prefix that runs on one host ("on 2", inA).
mckey_joined() {
  g=$1
  shift
  case $g in *:*) a="[$g]:4791" ;; *) a="$g:4791" ;; esac
  for i in $(seq 1 200); do
    all=yes
    for r in "$@"; do
      [ "$($r ss -Hlun "src $a" | wc -l)" -ge 1 ] || { all=no; break; }
    done
    [ $all = yes ] && return 0
    sleep 0.05
  done
  echo "## mckey: the members did not all join $g in 10 s; the sender starts anyway"
  return 1
}
