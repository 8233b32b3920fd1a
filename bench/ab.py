#!/usr/bin/env python3
"""Before/after: the same uroce-perf measurements from two builds, interleaved in pairs
(A B A B ...), each row reported as the median of the per-pair ratios B/A. Use it to show that
a change keeps (or improves) performance; absolute numbers on a shared machine drift, pairs
taken seconds apart do not.

usage: bench/ab.py BUILD_A BUILD_B [--pairs N] [--quick]
  e.g. git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build &&
       cmake --build /tmp/before/build --target uroce-perf && bench/ab.py /tmp/before/build build
"""
import json, statistics, subprocess, sys

argv = sys.argv[1:]
pairs, quick, args = 5, False, []
while argv:
    a = argv.pop(0)
    if a == '--pairs':
        pairs = int(argv.pop(0))
    elif a == '--quick':
        quick = True
    else:
        args.append(a)
if len(args) != 2:
    raise SystemExit(__doc__)
a_dir, b_dir = args
lat_iters, bw_iters, rate_iters = ('3000', '2000', '50000') if quick else ('20000', '10000', '400000')

# (label, op, mode, size, iterations, key, better[, QPs])
ROWS = [
    ('64 B SEND latency p50 (us)', 'send', 'lat', '64', lat_iters, 'lat_p50_us', 'lower'),
    ('64 B WRITE latency p50 (us)', 'write', 'lat', '64', lat_iters, 'lat_p50_us', 'lower'),
    ('64 B READ latency p50 (us)', 'read', 'lat', '64', lat_iters, 'lat_p50_us', 'lower'),
    ('8 B atomic latency p50 (us)', 'atomic', 'lat', '8', lat_iters, 'lat_p50_us', 'lower'),
    ('64 KiB SEND bandwidth (Gb/s)', 'send', 'bw', '65536', bw_iters, 'bw_gbps', 'higher'),
    ('64 KiB WRITE bandwidth (Gb/s)', 'write', 'bw', '65536', bw_iters, 'bw_gbps', 'higher'),
    ('64 KiB READ bandwidth (Gb/s)', 'read', 'bw', '65536', bw_iters, 'bw_gbps', 'higher'),
    ('1 MiB WRITE bandwidth (Gb/s)', 'write', 'bw', '1048576', str(int(bw_iters) // 4), 'bw_gbps', 'higher'),
    ('64 B WRITE rate, 1 QP (M/s)', 'write', 'bw', '64', rate_iters, 'msg_rate_mps', 'higher', 1),
    ('64 B WRITE rate, 16 QPs (M/s)', 'write', 'bw', '64', rate_iters, 'msg_rate_mps', 'higher', 16),
    ('64 B WRITE rate, 4096 QPs (M/s)', 'write', 'bw', '64', rate_iters, 'msg_rate_mps', 'higher', 4096),
]


def measure(build, op, mode, size, iters, key, qps=1):
    cmd = [f'{build}/bin/uroce-perf', '--json', '--op', op, '--mode', mode, '--size', size, '--iters', iters,
           '--qps', str(qps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    j = json.loads(out.stdout.strip().splitlines()[-1])
    if not j['verified']:
        raise SystemExit(f'{op} {mode}: data not verified ({build})')
    return j[key]


print(f'A = {a_dir}, B = {b_dir}, {pairs} pairs per row, ratio = B/A per pair, median')
print(f"| measure | A median | B median | B/A (median of pairs) | better |")
print('|---|---:|---:|---:|---|')
for label, op, mode, size, iters, key, better, *qps in ROWS:
    av, bv, ratios = [], [], []
    for _ in range(pairs):
        a = measure(a_dir, op, mode, size, iters, key, *qps)
        b = measure(b_dir, op, mode, size, iters, key, *qps)
        av.append(a)
        bv.append(b)
        ratios.append(b / a if a else float('nan'))
    print(f'| {label} | {statistics.median(av):.3f} | {statistics.median(bv):.3f} | '
          f'{statistics.median(ratios):.3f} | {better} |', flush=True)
