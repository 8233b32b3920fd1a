#!/bin/sh
# libfabric (Debian's libfabric-bin) on uroce through uroce-run: the verbs provider lists uroce0,
# and fi_pingpong runs its reliable-datagram endpoint (verbs;ofi_rxd over UD) between two
# processes, every message size it tries (1 B .. 6 MiB), 100 round trips each.
#   usage: libfabric.sh BIN_DIR
BIN=$1
command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong is not installed (Debian: libfabric-bin)"; exit 77; }
fail=0
if timeout 30 "$BIN/uroce-run" -- fi_info -p verbs 2>&1 | grep -q "domain: uroce0"; then
  echo "ok - fi_info -p verbs lists uroce0"
else
  echo "FAIL: fi_info -p verbs does not list uroce0"; fail=1
fi
port=$(( 20000 + $$ % 20000 ))
timeout 120 "$BIN/uroce-run" -- fi_pingpong -p verbs -e rdm -B $port -I 100 -S all > /tmp/fi-server-$$ 2>&1 &
srv=$!
sleep 1
out=$(timeout 120 "$BIN/uroce-run" -- fi_pingpong -p verbs -e rdm -P $port -I 100 -S all 127.0.0.1 2>&1); crc=$?
wait $srv; src=$?
sizes=$(echo "$out" | grep -c " =100 ")
if [ $crc = 0 ] && [ $src = 0 ] && [ "$sizes" -ge 20 ]; then
  echo "ok - fi_pingpong -e rdm, $sizes sizes up to $(echo "$out" | awk '/ =100 / {s = $1; r = $6} END {print s ": " r " MB/s"}')"
else
  echo "FAIL: fi_pingpong -e rdm (client $crc, server $src)"; echo "$out" | tail -5; tail -5 /tmp/fi-server-$$; fail=1
fi
rm -f /tmp/fi-server-$$
[ $fail = 0 ] && echo "libfabric: verbs provider runs on uroce"
exit $fail
