#!/bin/sh
# Every public symbol that Debian's libibverbs.so.1 exports with a default version is exported
# by ours under the same version (provider-only and IBVERBS_PRIVATE symbols aside).
OURS=$1
REAL=$(ldconfig -p | awk '/libibverbs.so.1 .*x86-64/ {print $NF; exit}')
[ -n "$REAL" ] || { echo "Debian's libibverbs.so.1 is not installed"; exit 1; }
defaults() { objdump -T "$1" | awk 'NF >= 2 && $(NF-1) ~ /^IBVERBS_[0-9]/ {print $(NF-1), $NF}' | sort -u; }
defaults "$REAL" > /tmp/abi-real-$$
defaults "$OURS" > /tmp/abi-ours-$$
missing=$(comm -23 /tmp/abi-real-$$ /tmp/abi-ours-$$)
n=$(wc -l < /tmp/abi-real-$$)
rm -f /tmp/abi-real-$$ /tmp/abi-ours-$$
if [ -n "$missing" ]; then echo "missing or at another version:"; echo "$missing"; exit 1; fi
[ "$n" -ge 80 ] || { echo "only $n symbols read from $REAL: the check itself is broken"; exit 1; }
echo "abi: all $n public symbols at their rdma-core 44 versions"
