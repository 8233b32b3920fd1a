#!/usr/bin/env python3
"""Policy: the port's scheduler between two hosts (two network namespaces joined by a veth pair,
MTU 1500; root only). bench/policy_share streams 64 KiB RDMA WRITEs with every byte checked by
the receiver:
- ETS shares: two QPs in priorities of weights 3:1 (and 1:1), with the client's port at 1 Gb/s
  (the scheduler decides who sends), and without a port rate (the host's CPU decides);
- latency under bulk: 64 B SEND ping-pong in a strict priority while a bulk QP fills the port
  at 1 Gb/s, p99 against the same ping-pong alone; the same without any setting (no port rate:
  the bulk goes as fast as the CPU lets it); and, for what a user has without uroce, sockperf's
  UDP ping-pong p99 while one iperf3 TCP stream runs, against sockperf alone;
- between processes of one host: uroce-perf's 64 B SEND ping-pong p99 while another process
  of the host streams, against alone, with both processes on the host's one port at 1 Gb/s
  ("rate 1gbit": the host NIC's fair share between processes) and with no setting.
Rounds are interleaved (uroce, then the kernel's, per round); each figure is the median of the
rounds. Writes a table (--out) and a plot of one ETS run's goodput over time (.png beside it).

usage: bench/policy.py BUILD_DIR [--pairs N] [--out FILE]
"""
import json, os, re, shutil, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import Hosts, bench_args, uroce_perf  # noqa: E402

build, pairs, out = bench_args(__doc__, 3)
tool = os.path.join(os.path.abspath(build), 'bin', 'policy_share')
perf = uroce_perf(build)
hosts = Hosts('uroce-pol', '10.83')
PING_TC, BULK_TC = str(46 << 2), '0'  # DSCP 46 (priority 5 by default), DSCP 0 (priority 0)


def policy(args, qos):
    """policy_share: server on host 1, client on host 2 with $UROCE_QOS; its JSON lines."""
    p = hosts.next_port()
    srv = subprocess.Popen(hosts.on(1) + ['timeout', '120', tool, '--server', '--port', str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hosts.listening(1, p)
    cli = subprocess.run(hosts.on(2, 'UROCE_QOS=' + qos) + ['timeout', '120', tool, '--connect', hosts.addr(1),
                                                            '--port', str(p), *args], capture_output=True, text=True)
    srv.wait()
    rows = [json.loads(l) for l in cli.stdout.splitlines() if l.startswith('{')]
    if not rows or not rows[-1].get('verified'):
        raise SystemExit(f'policy_share failed or unverified: {cli.stdout[-600:]} {cli.stderr[-600:]}')
    return rows


def share(qos):
    rows = policy(['--test', 'share', '--tclass', '0,32', '--seconds', '4'], qos)
    total = rows[-1]
    return total['bytes'][0] / total['bytes'][1], sum(total['bytes']) * 8 / total['seconds'] / 1e9, rows[:-1]


def latency(qos):
    r = policy(['--test', 'latency', '--tclass', f'{PING_TC},{BULK_TC}', '--pings', '5000'], qos)[-1]
    return r['idle_p99_us'], r['bulk_p99_us'], r['bulk_gbps']


def ping_p99(qos, with_bulk):
    """uroce-perf 64 B SEND ping-pong's p99 (us) from host 2, alone or while another process
    there streams (policy_share), both with $UROCE_QOS=qos."""
    bulk = None
    if with_bulk:
        q = hosts.next_port()
        bsrv = subprocess.Popen(hosts.on(1) + ['timeout', '120', tool, '--server', '--port', str(q)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hosts.listening(1, q)
        bulk = subprocess.Popen(hosts.on(2, 'UROCE_QOS=' + qos) + ['timeout', '120', tool, '--connect', hosts.addr(1),
                                '--port', str(q), '--seconds', '8'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        time.sleep(1)  # the stream is under way (its own start; nothing to wait on)
    r = hosts.perf_pair(perf, hosts.next_port(), ['--op', 'send', '--mode', 'lat', '--size', '64', '--iters', '20000',
                                                  '--json'], env=('UROCE_QOS=' + qos,))
    if bulk:
        out = bulk.communicate()[0]
        bsrv.wait()
        rows = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
        if not rows or not rows[-1].get('verified'):
            raise SystemExit(f'policy_share bulk failed: {out[-400:]}')
    return r['lat_p99_us']


def sockperf_p99(with_iperf):
    """sockperf UDP ping-pong's p99 (us), alone or while one iperf3 TCP stream runs."""
    ip = None
    if with_iperf:
        q = hosts.next_port()
        isrv = subprocess.Popen(hosts.on(1) + ['timeout', '60', 'iperf3', '-s', '-1', '-B', hosts.addr(1), '-p', str(q)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hosts.listening(1, q)
        ip = subprocess.Popen(hosts.on(2) + ['timeout', '60', 'iperf3', '-c', hosts.addr(1), '-p', str(q), '-t', '6'],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)  # the stream is up to speed (iperf3's own ramp; nothing to wait on)
    text = hosts.sockperf('pp', ['-m', '64', '-t', '3'])
    if ip:
        ip.wait()
        isrv.wait()
    m = re.search(r'percentile 99\.000 =\s*([0-9.]+)', text)
    if not m:
        raise SystemExit(f'sockperf failed: {text[-600:]}')
    return float(m.group(1))


def plot_series(path, series):
    """Goodput of each QP over time, one 100 ms point each."""
    if not shutil.which('gnuplot'):
        print('gnuplot is not installed (make bench installs it): no plot')
        return
    dat = path + '.dat'
    with open(dat, 'w') as f:
        for r in series:
            f.write(f"{r['t']:.3f} " + ' '.join(f'{b * 8 / 0.1 / 1e6:.1f}' for b in r['bytes']) + '\n')
    script = (f"set terminal pngcairo size 900,480 font ',11'; set output '{path}';"
              "set title 'ETS 3:1, port at 1 Gb/s, between two hosts (veth): goodput per QP';"
              "set xlabel 'seconds'; set ylabel 'Mb/s (100 ms)'; set grid; set yrange [0:*];"
              f"plot '{dat}' using 1:2 with lines lw 2 title 'priority 0, weight 3',"
              f" '' using 1:3 with lines lw 2 title 'priority 1, weight 1'")
    subprocess.run(['gnuplot', '-e', script], check=False)
    os.remove(dat)


med = statistics.median
try:
    hosts.setup()
    hosts.set_mtu(1500)
    res = {k: [] for k in ('ets31', 'ets31_gbps', 'ets11', 'ets31_cpu', 'lat_idle', 'lat_bulk', 'lat_gbps',
                           'lat0_idle', 'lat0_bulk', 'lat0_gbps', 'k_idle', 'k_bulk', 'x_idle', 'x_bulk',
                           'x0_idle', 'x0_bulk')}
    series = None
    for _ in range(pairs):
        r, g, s = share('ets 0:3 1:1 rate 1gbit')
        res['ets31'].append(r)
        res['ets31_gbps'].append(g)
        series = series or s
        res['ets11'].append(share('rate 1gbit')[0])
        res['ets31_cpu'].append(share('ets 0:3 1:1')[0])
        i, b, g = latency('strict 5 rate 1gbit')
        res['lat_idle'].append(i)
        res['lat_bulk'].append(b)
        res['lat_gbps'].append(g)
        i, b, g = latency('')
        res['lat0_idle'].append(i)
        res['lat0_bulk'].append(b)
        res['lat0_gbps'].append(g)
        res['k_idle'].append(sockperf_p99(False))
        res['k_bulk'].append(sockperf_p99(True))
        res['x_idle'].append(ping_p99('rate 1gbit', False))
        res['x_bulk'].append(ping_p99('rate 1gbit', True))
        res['x0_idle'].append(ping_p99('', False))
        res['x0_bulk'].append(ping_p99('', True))
    rng = lambda k: f"{med(res[k]):.3f} ({min(res[k]):.2f}-{max(res[k]):.2f})"
    ratio = lambda a, b: [x / y for x, y in zip(res[a], res[b])]
    lines = [
        '| policy between two namespaces (veth, MTU 1500) | measured (range) | target |', '|---|---:|---:|',
        f"| ETS 3:1, port 1 Gb/s: goodput ratio of the two QPs | {rng('ets31')} | 3 +/- 5 % |",
        f"| ETS 3:1, port 1 Gb/s: both QPs together (Gb/s of payload) | {rng('ets31_gbps')} | |",
        f"| ETS 1:1, port 1 Gb/s: goodput ratio | {rng('ets11')} | 1 +/- 5 % |",
        f"| ETS 3:1, no port rate (the CPU is the bottleneck): goodput ratio | {rng('ets31_cpu')} | |",
    ]
    for name, a, b, g in (('strict priority, port 1 Gb/s', 'lat_bulk', 'lat_idle', 'lat_gbps'),
                          ('no setting', 'lat0_bulk', 'lat0_idle', 'lat0_gbps')):
        rs = ratio(a, b)
        lines.append(f"| 64 B ping-pong p99 under bulk / alone, {name} | {med(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}); "
                     f"{med(res[b]):.1f} -> {med(res[a]):.1f} us, bulk {med(res[g]):.2f} Gb/s | "
                     f"{'<= 2' if 'strict' in name else ''} |")
    for name, a, b in (('one port at 1 Gb/s for the host', 'x_bulk', 'x_idle'), ('no setting', 'x0_bulk', 'x0_idle')):
        rs = ratio(a, b)
        lines.append(f"| 64 B ping-pong p99 while another process of the host streams / alone, {name} | "
                     f"{med(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}); {med(res[b]):.1f} -> {med(res[a]):.1f} us | "
                     f"{'<= 2' if 'port' in name else ''} |")
    rs = ratio('k_bulk', 'k_idle')
    lines.append(f"| kernel: sockperf UDP ping-pong p99 under one iperf3 stream / alone | {med(rs):.2f} "
                 f"({min(rs):.2f}-{max(rs):.2f}); {med(res['k_idle']):.1f} -> {med(res['k_bulk']):.1f} us | |")
    text = '\n'.join(lines) + f'\n\n{pairs} rounds; `sudo python3 bench/policy.py build`.\n'
    print(text)
    if out:
        with open(out, 'w') as f:
            f.write(text)
        if series:
            plot_series(os.path.splitext(out)[0] + '.png', series)
finally:
    hosts.cleanup()
