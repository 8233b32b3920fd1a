#!/bin/sh
# uroce-sim as scripts use it: two processes with the same arguments print the same JSON
# (trace digest included); another seed gives another digest; bad arguments exit 2.
set -u
bin=$1
args="--scenario loss --loss 0.005 --rate-gbps 100 --msg-bytes 65536 --duration-ms 2 --json"
a=$("$bin/uroce-sim" $args --seed 3) || { echo "FAIL: uroce-sim exited $?"; exit 1; }
b=$("$bin/uroce-sim" $args --seed 3)
c=$("$bin/uroce-sim" $args --seed 4)
[ "$a" = "$b" ] || { echo "FAIL: same seed, different output:"; echo "$a"; echo "$b"; exit 1; }
ha=$(echo "$a" | sed -n 's/.*"trace_sha256":"\([0-9a-f]*\)".*/\1/p')
hc=$(echo "$c" | sed -n 's/.*"trace_sha256":"\([0-9a-f]*\)".*/\1/p')
[ ${#ha} = 64 ] || { echo "FAIL: no trace digest in: $a"; exit 1; }
[ "$ha" != "$hc" ] || { echo "FAIL: seeds 3 and 4 gave the same trace"; exit 1; }
# The incast scenario too (a short one), and selective repeat in the loss scenario.
for more in "--scenario incast --senders 4 --cc dcqcn --duration-ms 1 --json" \
            "--scenario incast --senders 3 --pfc --duration-ms 1 --json" \
            "--scenario incast --senders 4 --cc swift --duration-ms 1 --json" \
            "--scenario loss --reliability sr --loss 0.01 --duration-ms 2 --json"; do
  x=$("$bin/uroce-sim" $more --seed 9) || { echo "FAIL: uroce-sim $more exited $?"; exit 1; }
  y=$("$bin/uroce-sim" $more --seed 9)
  [ "$x" = "$y" ] || { echo "FAIL: same seed, different output for $more:"; echo "$x"; echo "$y"; exit 1; }
  echo "$x" | grep -q '"trace_sha256":"[0-9a-f]\{64\}"' || { echo "FAIL: no digest: $x"; exit 1; }
done
for bad in "--scenario incast --cc bbr" "--scenario incast --senders 0" "--scenario loss --reliability xy" "--scenario loss --loss 2" "--scenario loss --mtu 1500"; do
  "$bin/uroce-sim" $bad > /dev/null 2>&1
  rc=$?
  [ $rc = 2 ] || { echo "FAIL: '$bad' exited $rc, not 2"; exit 1; }
done
echo "uroce-sim: deterministic ($ha)"
