#!/usr/bin/env python3
"""Between two hosts: two network namespaces joined by a veth pair, at MTU 1500 and 9000, each
host on its interface's device with no setting, against what a user would pick instead over
the same link:
- 64 B SEND latency (p50, half round trip) against sockperf UDP and TCP ping-pong and
  ucx_perftest tag_lat over UCX's tcp transport;
- 64 B RDMA WRITEs per second on one QP against sockperf's UDP throughput test (64 B);
- 64 KiB and 1 MiB RDMA WRITE streams against one iperf3 TCP stream, with the CPU each costs
  (core-seconds per Gbit moved, both sides together: from the processes' rusage for uroce,
  iperf3's own report for TCP), and 64 KiB against ucx_perftest tag_bw over tcp;
- each link forced over the IPv4 GID (UROCE_LINK=udp, UROCE_LINK=xdp): 64 B latency against
  sockperf UDP and 64 KiB WRITE against iperf3, with how AF_XDP ran (zero copy or copy mode).
Interleaved rounds (uroce, other, uroce, other, ...); each ratio is the median of the per-round
ratios. uroce's bytes are verified by uroce-perf. Writes a table (--out) and a plot of the
ratios beside it (.png, with gnuplot). Needs root (ip netns).

usage: bench/between_hosts.py BUILD_DIR [--pairs N] [--out FILE]
"""
import json, os, re, resource, shutil, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import Hosts, bench_args, uroce_perf  # noqa: E402

build, pairs, out = bench_args(__doc__, 3)
perf = uroce_perf(build)
hosts = Hosts('uroce-bh', '10.82')


def ucx_env(host):
    return ('UCX_TLS=tcp,self', 'UCX_NET_DEVICES=' + hosts.devs[host - 1], 'UCX_WARN_UNUSED_ENV_VARS=n')



def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def uroce(op, mode, size, iters, key, link=None, extra=()):
    """link: None, the defaults (GID 0, the IPv6 link-local address); 'udp' or 'xdp', forced with
    UROCE_LINK over the IPv4 GID (1), where AF_XDP applies. extra: more client options."""
    args = ['--op', op, '--mode', mode, '--size', size, '--iters', iters, '--json', *extra]
    env, gid = (), ()
    if link:
        env, gid = ('UROCE_LINK=' + link, 'UROCE_PERF_COUNTERS=1'), ('--gid', '1')
    t0 = children_cpu()
    r = hosts.perf_pair(perf, hosts.next_port(), args + list(gid), env=env, server_args=gid)
    if link == 'xdp':
        xdp_modes.add(xdp_mode(r['stderr']))
    if key == 'cpu':  # core-seconds per Gbit, both processes from start to end
        return (children_cpu() - t0) / (int(size) * int(iters) * 8 / 1e9)
    return r[key] * (1e3 if key == 'msg_rate_mps' else 1)  # messages per second in thousands


xdp_modes = set()


def xdp_mode(err):
    """How AF_XDP ran, from the client's counters, or why it did not."""
    m = re.search(r'AF_XDP is not available \((.*)\): using UDP', err)
    if m:
        return 'declined: ' + m.group(1)
    if 'xdp_tx_packets=' not in err:
        return 'not used'
    return ('zero copy' if 'xdp_zero_copy=1' in err else 'copy mode') + \
        (', driver hook' if 'xdp_native=1' in err else ', generic hook') + \
        (', multi-buffer' if 'xdp_multi_buffer=1' in err else '')


def sockperf(mode, tcp):
    text = hosts.sockperf(mode, ['-m', '64', '-t', '3'], tcp)
    m = re.search(r'percentile 50\.000 =\s*([0-9.]+)' if mode == 'pp' else r'Message Rate is ([0-9]+)', text)
    if not m:
        raise SystemExit(f'sockperf {mode} failed: {text[-800:]}')
    return float(m.group(1)) / (1 if mode == 'pp' else 1e3)


def ucx_perftest(test, size, iters):
    """ucx_perftest over UCX's tcp transport: tag_lat's p50 (us) or tag_bw's MB/s as Gb/s."""
    p = hosts.next_port()
    srv = subprocess.Popen(hosts.on(1, *ucx_env(1)) + ['timeout', '60', 'ucx_perftest', '-p', str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hosts.listening(1, p)
    cli = subprocess.run(hosts.on(2, *ucx_env(2)) + ['timeout', '60', 'ucx_perftest', hosts.addr(1), '-p', str(p), '-t', test,
                                              '-s', str(size), '-n', str(iters)], capture_output=True, text=True)
    srv.wait()
    final = [l for l in cli.stdout.splitlines() if l.startswith('Final:')]
    if not final:
        raise SystemExit(f'ucx_perftest {test} failed: {cli.stdout[-800:]} {cli.stderr[-800:]}')
    cols = final[0].split()
    return float(cols[2]) if test == 'tag_lat' else float(cols[6]) * 8 * (1 << 20) / 1e9


def iperf3(key):
    p = hosts.next_port()
    srv = subprocess.Popen(hosts.on(1) + ['timeout', '60', 'iperf3', '-s', '-1', '-B', hosts.addr(1), '-p', str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hosts.listening(1, p)
    cli = subprocess.run(hosts.on(2) + ['timeout', '60', 'iperf3', '-c', hosts.addr(1), '-p', str(p), '-t', '3', '-J'],
                         capture_output=True, text=True)
    srv.wait()
    try:
        end = json.loads(cli.stdout)['end']
        gbps = end['sum_received']['bits_per_second'] / 1e9
        if key == 'cpu':  # both hosts' CPU, in core-seconds per Gbit
            cpu = end['cpu_utilization_percent']
            return (cpu['host_total'] + cpu['remote_total']) / 100 / gbps
        return gbps
    except (ValueError, KeyError):
        raise SystemExit(f'iperf3 failed: {cli.stdout[-500:]} {cli.stderr}')


# A stream against iperf3 moves 2 GiB (about 1 s here, iperf3 runs 3 s): each uroce-perf run
# starts cold (its 64 buffers of each size go through the kernel's copy for the first time,
# about 70 ms at 64 KiB and 140 ms at 1 MiB here), which a run of 300 MiB weighed at half.
K64, M1 = str(32768), str(2048)

ROWS = [  # label, uroce measure, other measure, what is better, short name for the plot
    ('64 B latency p50 (us): SEND vs sockperf UDP ping-pong', lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us'),
     lambda: sockperf('pp', False), 'lower', 'lat/sockperf UDP'),
    ('64 B latency p50 (us): SEND vs sockperf TCP ping-pong', lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us'),
     lambda: sockperf('pp', True), 'lower', 'lat/sockperf TCP'),
    ('64 B latency p50 (us): SEND vs ucx_perftest tag_lat, tcp', lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us'),
     lambda: ucx_perftest('tag_lat', 64, 20000), 'lower', 'lat/UCX tcp'),
    ('64 B messages (k/s): WRITE, one QP vs sockperf UDP throughput', lambda: uroce('write', 'bw', '64', '200000', 'msg_rate_mps'),
     lambda: sockperf('tp', False), 'higher', 'rate/sockperf UDP'),
    ('64 KiB stream (Gb/s): WRITE vs iperf3', lambda: uroce('write', 'bw', '65536', K64, 'bw_gbps'),
     lambda: iperf3('gbps'), 'higher', '64K/iperf3'),
    ('1 MiB stream (Gb/s): WRITE vs iperf3', lambda: uroce('write', 'bw', '1048576', M1, 'bw_gbps'),
     lambda: iperf3('gbps'), 'higher', '1M/iperf3'),
    # iperf3 sends from one buffer and receives into one; uroce-perf's streams above take 64
    # message slots in turn on each side (64 MiB at 1 MiB, out of the caches). Like for like:
    ('1 MiB stream (Gb/s): WRITE, one buffer each side as iperf3, vs iperf3',
     lambda: uroce('write', 'bw', '1048576', M1, 'bw_gbps', extra=('--buffers', '1')),
     lambda: iperf3('gbps'), 'higher', '1M 1 buffer/iperf3'),
    ('64 KiB stream (Gb/s): WRITE vs ucx_perftest tag_bw, tcp', lambda: uroce('write', 'bw', '65536', '4000', 'bw_gbps'),
     lambda: ucx_perftest('tag_bw', 65536, 4000), 'higher', '64K/UCX tcp'),
    ('64 B latency p50 (us): SEND over IPv4, UROCE_LINK=udp vs sockperf UDP ping-pong',
     lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us', 'udp'), lambda: sockperf('pp', False), 'lower',
     'lat IPv4 udp/sockperf UDP'),
    ('64 B latency p50 (us): SEND over IPv4, UROCE_LINK=xdp vs sockperf UDP ping-pong',
     lambda: uroce('send', 'lat', '64', '20000', 'lat_p50_us', 'xdp'), lambda: sockperf('pp', False), 'lower',
     'lat IPv4 xdp/sockperf UDP'),
    ('64 KiB stream (Gb/s): WRITE over IPv4, UROCE_LINK=udp vs iperf3',
     lambda: uroce('write', 'bw', '65536', K64, 'bw_gbps', 'udp'), lambda: iperf3('gbps'), 'higher',
     '64K IPv4 udp/iperf3'),
    ('64 KiB stream (Gb/s): WRITE over IPv4, UROCE_LINK=xdp vs iperf3',
     lambda: uroce('write', 'bw', '65536', K64, 'bw_gbps', 'xdp'), lambda: iperf3('gbps'), 'higher',
     '64K IPv4 xdp/iperf3'),
    ('CPU (core-s per Gbit, both hosts): 64 KiB WRITE vs iperf3', lambda: uroce('write', 'bw', '65536', K64, 'cpu'),
     lambda: iperf3('cpu'), 'lower', 'CPU/iperf3'),
]


def plot(path, ratios):
    """A clustered bar per row: uroce/other at each MTU, with the line of parity."""
    if not shutil.which('gnuplot'):
        print('gnuplot is not installed (make bench installs it): no plot')
        return
    dat = path + '.dat'
    with open(dat, 'w') as f:
        for name, by_mtu in ratios:
            f.write(f'"{name}" {by_mtu[1500]:.4f} {by_mtu[9000]:.4f}\n')
    script = (f"set terminal pngcairo size 1000,520 font ',10'; set output '{path}';"
              "set title 'Between two hosts (veth): uroce / what users pick instead (>1: uroce higher)';"
              "set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1;"
              "set ylabel 'ratio'; set logscale y 2; set grid ytics; set xtics rotate by -25 scale 0;"
              "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2;"
              f"plot '{dat}' using 2:xtic(1) title 'MTU 1500', '' using 3 title 'MTU 9000'")
    subprocess.run(['gnuplot', '-e', script], check=False)
    os.remove(dat)


try:
    hosts.setup()
    lines = ['| between two namespaces (veth) | MTU | uroce | other | uroce/other (range) |', '|---|---:|---:|---:|---:|']
    ratios = [(short, {}) for *_, short in ROWS]
    notes = []
    for mtu in (1500, 9000):
        hosts.set_mtu(mtu)
        hosts.kill('uroced')  # a new daemon takes the interface's new MTU
        xdp_modes.clear()
        for (label, ours, theirs, better, _), (_, by_mtu) in zip(ROWS, ratios):
            u, k, rs = [], [], []
            for _ in range(pairs):
                x, y = ours(), theirs()
                u.append(x)
                k.append(y)
                rs.append(x / y)
            med = statistics.median
            by_mtu[mtu] = med(rs)
            lines.append(f'| {label} ({better} is better) | {mtu} | {med(u):.2f} | {med(k):.2f} | '
                         f'{med(rs):.3f} ({min(rs):.2f}-{max(rs):.2f}) |')
            print(lines[-1], flush=True)
        notes.append(f'MTU {mtu}: AF_XDP ran in {", ".join(sorted(xdp_modes))}.')
    text = '\n'.join(lines)
    if out:
        with open(out, 'w') as f:
            when = time.strftime('%Y-%m-%d %H:%M')
            at = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
            f.write(f'`bench/between_hosts.py {build} --pairs {pairs}` ({when}, at {at}, {os.cpu_count()} cores)\n\n'
                    f'{text}\n\n' + '\n'.join(notes) + '\n\n![ratios](between_hosts.png)\n')
        plot(os.path.splitext(out)[0] + '.png', ratios)
finally:
    hosts.cleanup()
