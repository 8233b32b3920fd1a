#!/bin/sh
# Open MPI (Debian's openmpi-bin) with its UCX PML on uroce: two ranks, each under uroce-run,
# exchange messages of 1 B .. 4 MiB and check every byte. Only uroce's verbs transports are
# allowed, so the run fails rather than fall back to shared memory or TCP.
#   usage: mpi.sh BIN_DIR MPI_PINGPONG
export UROCE_DEVICES="${UROCE_DEVICES-lo}"  # uroce_lo, listed (run by hand too)
BIN=$1
PROG=$2
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed (Debian: openmpi-bin)"; exit 77; }
[ -x "$PROG" ] || { echo "SKIP: $PROG was not built (Debian: libopenmpi-dev)"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root="--allow-run-as-root"
out=$(timeout 300 mpirun $root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib,uct \
  -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=uroce_lo:1 "$BIN/uroce-run" -- "$PROG" 2>&1); rc=$?
echo "$out" | tail -20
[ $rc = 0 ] && echo "$out" | grep -q "all .* messages verified" || { echo "FAIL: mpirun exit $rc"; exit 1; }
echo "mpi: Open MPI pml ucx on uroce, every byte verified"
