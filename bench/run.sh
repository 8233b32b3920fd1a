#!/bin/sh
# make bench: builds are done by the Makefile; this runs the measurements.
set -e
exec python3 "$(dirname "$0")/run.py" "${1:-build}" ${BENCH_ARGS:-}
