#!/usr/bin/env python3
"""What sharing the host NIC costs between two hosts: two network namespaces joined by a veth
pair (MTU 1500), uroce-perf across it with each host's device private to the process
(UROCE_SHARED=0: it binds IP:4791 itself) and shared through the host NIC daemon
(UROCE_SHARED=1: a socket of the steering group) and, on the server's host, for a process of
another user than the daemon's (uid 65534: the daemon passes it every packet), interleaved in
rounds (A B C A B C ...), each row the median of the per-round ratios to private. Needs root
(ip netns).

usage: bench/host_nic_cost.py BUILD_DIR [--pairs N] [--out FILE]
"""
import os, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import Hosts, bench_args, uroce_perf  # noqa: E402

build, pairs, out = bench_args(__doc__, 5)
perf = uroce_perf(build)
hosts = Hosts('uroce-cost', '10.81')

ROWS = [  # (label, op, mode, size, iterations, key, better)
    ('64 B SEND latency p50 (us)', 'send', 'lat', '64', '20000', 'lat_p50_us', 'lower'),
    ('64 KiB WRITE bandwidth (Gb/s)', 'write', 'bw', '65536', '4000', 'bw_gbps', 'higher'),
]


def run(shared, row, other_user=False):
    _, op, mode, size, iters, key, _ = row
    as_other = ['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups'] if other_user else []
    # Each host at its own address, its device private (0) or shared through the daemon (1).
    env = [f'UROCE_SHARED={shared}']
    r = hosts.perf_pair(perf, hosts.next_port(), ['--op', op, '--mode', mode, '--size', size, '--iters', iters, '--json'], env, as_other)
    if shared:  # the daemons hold IP:4791 while they linger; the private runs need it
        hosts.kill('uroced')
        subprocess.run(['sleep', '0.2'])
    return r[key]


try:
    hosts.setup()
    lines = ['| across a veth pair, MTU 1500 | private | shared | another user, shared | shared/private | '
             'another user/private |',
             '|---|---:|---:|---:|---:|---:|']
    for row in ROWS:
        a, b, c, rb, rc = [], [], [], [], []
        for _ in range(pairs):
            x = run(0, row)
            y = run(1, row)
            z = run(1, row, other_user=True)
            a.append(x)
            b.append(y)
            c.append(z)
            rb.append(y / x)
            rc.append(z / x)
        med = statistics.median
        lines.append(f'| {row[0]} ({row[6]} is better) | {med(a):.2f} | {med(b):.2f} | {med(c):.2f} | '
                     f'{med(rb):.3f} ({min(rb):.2f}-{max(rb):.2f}) | {med(rc):.3f} ({min(rc):.2f}-{max(rc):.2f}) |')
    text = '\n'.join(lines)
    print(text)
    if out:
        with open(out, 'w') as f:
            f.write(f'`bench/host_nic_cost.py {build} --pairs {pairs}`\n\n{text}\n')
finally:
    hosts.cleanup()
