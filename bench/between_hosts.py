#!/usr/bin/env python3
"""Between two hosts: two network namespaces joined by a veth pair, at MTU 1500 and 9000, each
host on its interface's device with no setting, against what a user would pick instead over
the same link: 64 B SEND latency (p50, half round trip) against sockperf TCP ping-pong (p50,
half round trip), and a 64 KiB RDMA WRITE stream against one iperf3 TCP stream. Interleaved
rounds (uroce, kernel, uroce, kernel, ...); each ratio is the median of the per-round ratios.
uroce's bytes are verified by uroce-perf. Needs root (ip netns).

usage: bench/between_hosts.py BUILD_DIR [--pairs N] [--out FILE]
"""
import json, os, re, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import Hosts, bench_args  # noqa: E402

build, pairs, out = bench_args(__doc__, 3)
perf = os.path.join(os.path.abspath(build), 'bin', 'uroce-perf')
hosts = Hosts('uroce-bh', '10.82')
port = 30000 + os.getpid() % 20000


def next_port():
    global port
    port += 1
    return port


def uroce(op, mode, size, iters, key):
    args = ['--op', op, '--mode', mode, '--size', size, '--iters', iters, '--json']
    return hosts.perf_pair(perf, next_port(), args)[key]


def sockperf_p50():
    p = next_port()
    srv = subprocess.Popen(hosts.on(1) + ['timeout', '60', 'sockperf', 'sr', '--tcp', '-i', hosts.addr(1), '-p', str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hosts.listening(1, p)
    cli = subprocess.run(hosts.on(2) + ['timeout', '60', 'sockperf', 'pp', '--tcp', '-i', hosts.addr(1), '-p', str(p),
                                        '-m', '64', '-t', '3'], capture_output=True, text=True)
    srv.kill()
    srv.wait()
    m = re.search(r'percentile 50\.000 =\s*([0-9.]+)', cli.stdout + cli.stderr)
    if not m:
        raise SystemExit(f'sockperf failed: {cli.stdout} {cli.stderr}')
    return float(m.group(1))


def iperf3_gbps():
    p = next_port()
    srv = subprocess.Popen(hosts.on(1) + ['timeout', '60', 'iperf3', '-s', '-1', '-B', hosts.addr(1), '-p', str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hosts.listening(1, p)
    cli = subprocess.run(hosts.on(2) + ['timeout', '60', 'iperf3', '-c', hosts.addr(1), '-p', str(p), '-t', '3', '-J'],
                         capture_output=True, text=True)
    srv.wait()
    try:
        return json.loads(cli.stdout)['end']['sum_received']['bits_per_second'] / 1e9
    except (ValueError, KeyError):
        raise SystemExit(f'iperf3 failed: {cli.stdout[-500:]} {cli.stderr}')


ROWS = [  # label, uroce measure, kernel measure, better
    ('64 B latency p50 (us): SEND vs sockperf TCP', lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us'),
     sockperf_p50, 'lower'),
    ('64 KiB stream (Gb/s): WRITE vs iperf3', lambda: uroce('write', 'bw', '65536', '4000', 'bw_gbps'),
     iperf3_gbps, 'higher'),
]

try:
    hosts.setup()
    lines = ['| between two namespaces (veth) | MTU | uroce | kernel | uroce/kernel (range) |', '|---|---:|---:|---:|---:|']
    for mtu in (1500, 9000):
        hosts.set_mtu(mtu)
        hosts.kill('uroced')  # a new daemon takes the interface's new MTU
        for label, ours, theirs, better in ROWS:
            u, k, ratios = [], [], []
            for _ in range(pairs):
                x, y = ours(), theirs()
                u.append(x)
                k.append(y)
                ratios.append(x / y)
            med = statistics.median
            lines.append(f'| {label} ({better} is better) | {mtu} | {med(u):.2f} | {med(k):.2f} | '
                         f'{med(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |')
    text = '\n'.join(lines)
    print(text)
    if out:
        with open(out, 'w') as f:
            when = time.strftime('%Y-%m-%d %H:%M')
            at = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
            f.write(f'`bench/between_hosts.py {build} --pairs {pairs}` ({when}, at {at}, 2 cores)\n\n{text}\n')
finally:
    hosts.cleanup()
