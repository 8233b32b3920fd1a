#!/bin/sh
# UCX (Debian's ucx-utils) on uroce through uroce-run: ucx_perftest between two processes over
# loopback, with only uroce's verbs transports allowed (UCX fails rather than falling back).
#   usage: ucx.sh BIN_DIR
export UROCE_DEVICES="${UROCE_DEVICES-lo}"  # uroce_lo, listed (run by hand too)
BIN=$1
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest is not installed (Debian: ucx-utils)"; exit 77; }
export UCX_NET_DEVICES=uroce_lo:1
fail=0
runs=0
run() {  # TLS TEST SIZE ITERS
  export UCX_TLS=$1
  # A port of its own per run (the last one may be in TIME_WAIT), below the ephemeral range.
  runs=$((runs + 1))
  port=$(( 20000 + ($$ * 8 + runs) % 12000 ))
  timeout 120 "$BIN/uroce-run" -- ucx_perftest -p $port > /tmp/ucx-server-$$ 2>&1 &
  srv=$!
  out=""
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.5
    out=$(timeout 120 "$BIN/uroce-run" -- ucx_perftest 127.0.0.1 -p $port -t $2 -s $3 -n $4 2>&1) && break
    echo "$out" | grep -q "connect\|refused" || break
  done
  wait $srv; src=$?
  if echo "$out" | grep -q "^Final:" && [ $src = 0 ]; then
    echo "ok - UCX_TLS=$1 $2 $3 B: $(echo "$out" | awk '/^Final:/ {print "p50", $3, "us,", $6, "MB/s"}')"
  else
    echo "FAIL: UCX_TLS=$1 $2 $3 B"; echo "$out" | tail -5; tail -5 /tmp/ucx-server-$$; fail=1
  fi
  rm -f /tmp/ucx-server-$$
}
run ud_verbs,self tag_lat 8 2000
run ud_verbs,self tag_bw 1048576 100
run rc_verbs,ud_verbs,self tag_lat 8 2000
run rc_verbs,ud_verbs,self tag_bw 1048576 100
run rc_verbs,ud_verbs,self ucp_put_bw 65536 500
run rc_verbs,ud_verbs,self ucp_get 65536 500
[ $fail = 0 ] && echo "ucx: every ucx_perftest run completed on uroce"
exit $fail
