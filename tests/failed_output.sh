#!/bin/sh
# What each failed test of a ctest run printed last, for the end of `make test`'s log (where a
# reader of a long CI log looks first). Lines of passed checks ("ok ...") are left out.
#   usage: failed_output.sh BUILD_DIR [LINES]
dir=$1/Testing/Temporary
lines=${2:-25}
[ -s "$dir/LastTestsFailed.log" ] || exit 0
while IFS=: read -r _ name; do
  echo "== what $name printed last ($1)"
  awk -v t="$name" '
    /^[0-9]+\/[0-9]+ Testing: / && substr($0, index($0, "Testing: ") + 9) == t { want = 1; next }
    want && /^Output:/ { body = 1; getline; next }
    body && /^<end of output>/ { exit }
    body && !/^ok / { print }' "$dir/LastTest.log" | tail -n "$lines"
done < "$dir/LastTestsFailed.log"
