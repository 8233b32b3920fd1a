#!/bin/bash
# Every directory under src/ includes only itself, the public headers and the layers below it:
# wire <- verbs <- transport <- cm/link/engine/sim <- api/nicd <- compat. cc (congestion control) sees
# nothing but itself; the transport and what is above it use it, the verbs objects do not (a
# QP's transport state is transport::Qp's). link/ sees no transport and no simulator, and the
# drop-in sees only the public API.
set -u
src="$(cd "$(dirname "$0")/../../src" && pwd)"
declare -A allowed=(
  [wire]="wire uroce"
  [cc]="cc uroce"
  [verbs]="verbs wire uroce"
  [transport]="transport cc verbs wire uroce"
  [cm]="cm transport cc verbs wire uroce"
  [link]="link wire uroce"
  [engine]="engine link transport cc verbs wire uroce"
  [sim]="sim engine link transport cc verbs wire uroce"
  [nicd]="nicd cm link transport wire uroce"
  [api]="api cm engine link transport cc verbs wire uroce"
  [compat]="compat uroce"
)
bad=0
for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [[ -z "${allowed[$layer]+x}" ]]; then
    echo "FAIL: src/$layer has no place in the layer list"
    bad=1
    continue
  fi
  while IFS=: read -r file line inc; do
    top=${inc#*\"}
    top=${top%%/*}
    if [[ " ${allowed[$layer]} " != *" $top "* ]]; then
      echo "FAIL: ${file#"$src"/}:$line includes $top/ (above or beside $layer/)"
      bad=1
    fi
  done < <(grep -rHn --include='*.cpp' --include='*.hpp' '^#include "[a-z_]*/' "$dir" | sed -E 's/^([^:]*):([0-9]*):(.*)$/\1:\2:\3/')
done
# Loss recovery has one seam: the roles reach it through transport/recovery/recovery.hpp only,
# never include selective repeat's own files, and never test its flags themselves.
roles="requester completer responder retransmit datagram packets schedule completion tables congestion post bringup"
for r in $roles; do
  f="$src/transport/$r.cpp"
  [[ -f $f ]] || continue
  if grep -n '#include "transport/recovery/\(selective\|go_back_n\)' "$f"; then
    echo "FAIL: transport/$r.cpp reaches into recovery/ past recovery.hpp"; bad=1
  fi
  if grep -nE 'req\.sr\b|peer_sr|peer_settled|bth\.(sr|place|resent)\b|resp\.sr\b|\bsr_[a-z_]+\(|sr_(send|hold|read)\b' "$f"; then
    echo "FAIL: transport/$r.cpp tests selective repeat's flags or calls it directly (use recovery.hpp)"; bad=1
  fi
done
# Size limits: no source file above 600 lines.
while read -r n f; do
  [[ $f == total ]] && continue
  if (( n > 600 )); then echo "FAIL: ${f#"$src"/} has $n lines (limit 600)"; bad=1; fi
done < <(find "$src" -name '*.cpp' -o -name '*.hpp' | xargs wc -l)
[[ $bad == 0 ]] && echo "layering: every include points down; recovery behind its seam; no file above 600 lines"
exit $bad
