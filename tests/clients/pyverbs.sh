#!/bin/sh
# rdma-core's own test suite (Debian's python3-pyverbs ships it in /usr/share/doc/rdma-core/tests),
# run unmodified on uroce through uroce-run. Prints the counts and why tests were skipped: the
# skips are vendors' features (mlx5/EFA direct verbs) or what this host lacks (a GPU for dmabuf,
# CUDA, a PCI device). Run as root with no 2 MiB huge pages, it allocates 16 for the run (the
# huge-page ODP and parent domain tests need them) and gives them back. Its rdma_cm tests
# must run: they find the device's address through its sysfs directory, which uroce-run shows
# them. More skips than kMaxSkipped fail: a feature that ran before no longer does.
#   usage: pyverbs.sh BIN_DIR
export UROCE_DEVICES="${UROCE_DEVICES-lo}"  # uroce_lo, listed (run by hand too)
BIN=$(cd "$1" && pwd) || exit 1
PY=/usr/bin/python3  # Debian's, which has pyverbs; another python3 may come first on PATH
SRC=/usr/share/doc/rdma-core/tests
[ -e "$SRC/run_tests.py" ] && $PY -c "import pyverbs" 2>/dev/null ||
  { echo "SKIP: pyverbs or its tests are not installed (Debian: python3-pyverbs)"; exit 77; }
dir=$(mktemp -d)
huge=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
huge_was=$(cat "$huge" 2>/dev/null)
[ "$huge_was" = 0 ] && [ -w "$huge" ] && echo 16 > "$huge" 2>/dev/null
trap 'rm -rf "$dir"; [ "$huge_was" = 0 ] && [ -w "$huge" ] && echo 0 > "$huge"' EXIT
huge_now=$(cat "$huge" 2>/dev/null)
mkdir "$dir/tests"
cp -r "$SRC"/* "$dir/tests/"
gunzip -f "$dir"/tests/*.gz
cd "$dir/tests" || exit 1
timeout 1200 "$BIN/uroce-run" -- $PY run_tests.py --dev uroce_lo -v > "$dir/log" 2>&1
rc=$?
grep -E "^(FAIL|ERROR):|^Player |Error: " "$dir/log"
echo "skipped, by reason:"
grep -oE "skipped .*" "$dir/log" | sort | uniq -c | sort -rn
tail -3 "$dir/log"
ran=$(awk '/^Ran [0-9]+ tests/ {print $2}' "$dir/log")
kMaxSkipped=114  # 190 before windows, ODP, device memory, rereg, resize, timestamps, parent domains, multicast, atomic write, XRC, imports, raw packet QPs, tag matching, a GID table with free entries
[ "${huge_now:-0}" -gt 0 ] && kMaxSkipped=111  # the 3 huge-page tests ran
skipped=$(grep -oE 'skipped=[0-9]+' "$dir/log" | cut -d= -f2)
cm_ok=$(grep -cE "^test_rdmacm_(sync|async)_.* \.\.\. ok$" "$dir/log")
echo "rdma_cm tests passed: $cm_ok"
if [ "${skipped:-0}" -gt $kMaxSkipped ]; then
  echo "FAIL: $skipped tests skipped, more than the $kMaxSkipped this suite skips on uroce"
  exit 1
fi
if [ $rc = 0 ] && grep -q "^OK" "$dir/log" && [ "${ran:-0}" -ge 200 ] && [ "$cm_ok" -ge 10 ]; then
  echo "pyverbs: rdma-core's suite passed on uroce ($ran tests, $(grep -oE 'skipped=[0-9]+' "$dir/log"))"
else
  echo "FAIL: rdma-core's suite (exit $rc)"
  exit 1
fi
