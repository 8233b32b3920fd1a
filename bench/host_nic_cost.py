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
import json, os, statistics, subprocess, sys

argv = sys.argv[1:]
pairs, out, args = 5, None, []
while argv:
    a = argv.pop(0)
    if a == '--pairs':
        pairs = int(argv.pop(0))
    elif a == '--out':
        out = argv.pop(0)
    else:
        args.append(a)
if len(args) != 1 or os.geteuid() != 0:
    raise SystemExit(__doc__)
perf = os.path.join(os.path.abspath(args[0]), 'bin', 'uroce-perf')
tag = os.getpid()
A, B, net = f'uroce-cost-a-{tag}', f'uroce-cost-b-{tag}', f'10.81.{tag % 200 + 20}'

ROWS = [  # (label, op, mode, size, iterations, key, better)
    ('64 B SEND latency p50 (us)', 'send', 'lat', '64', '20000', 'lat_p50_us', 'lower'),
    ('64 KiB WRITE bandwidth (Gb/s)', 'write', 'bw', '65536', '4000', 'bw_gbps', 'higher'),
]


def sh(*cmd):
    subprocess.run(cmd, check=True)


def setup():
    sh('ip', 'netns', 'add', A)
    sh('ip', 'netns', 'add', B)
    sh('ip', 'link', 'add', f'uca{tag % 10000}', 'type', 'veth', 'peer', 'name', f'ucb{tag % 10000}')
    for ns, dev, host in ((A, f'uca{tag % 10000}', 1), (B, f'ucb{tag % 10000}', 2)):
        sh('ip', 'link', 'set', dev, 'netns', ns)
        sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', f'net.ipv6.conf.{dev}.accept_dad=0')
        sh('ip', '-n', ns, 'addr', 'add', f'{net}.{host}/24', 'dev', dev)
        sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
        sh('ip', '-n', ns, 'link', 'set', dev, 'up')


def cleanup():
    for ns in (A, B):
        pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True).stdout.split()
        for p in pids:
            subprocess.run(['kill', p])
        subprocess.run(['ip', 'netns', 'del', ns])


port = 30000 + tag % 20000


def listening(ns, p, tries=200):
    """Returns once something listens on TCP port p in ns (the out-of-band exchange), at most ~20 s."""
    want = f':{p:04X} '
    for _ in range(tries):
        tcp = subprocess.run(['ip', 'netns', 'exec', ns, 'cat', '/proc/net/tcp', '/proc/net/tcp6'],
                             capture_output=True, text=True).stdout
        if any(want in l and l.split()[3] == '0A' for l in tcp.splitlines()[1:]):
            return
        subprocess.run(['sleep', '0.1'])
    raise SystemExit(f'nothing listens on port {p} in {ns}')


def run(shared, row, other_user=False):
    global port
    port += 1
    _, op, mode, size, iters, key, _ = row
    env = lambda h: ['ip', 'netns', 'exec', A if h == 1 else B, 'env', f'UROCE_ADDR={net}.{h}', f'UROCE_SHARED={shared}']
    as_other = ['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups'] if other_user else []
    srv = subprocess.Popen(env(1) + ['timeout', '120'] + as_other + [perf, '--server', '--port', str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listening(A, port)
    cli = subprocess.run(env(2) + ['timeout', '120', perf, '--connect', f'{net}.1', '--port', str(port), '--op', op,
                                   '--mode', mode, '--size', size, '--iters', iters, '--json'],
                         capture_output=True, text=True)
    srv.wait()
    if shared:  # the daemons hold IP:4791 while they linger; the private runs need it
        for ns in (A, B):
            for pid in subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True).stdout.split():
                if open(f'/proc/{pid}/comm').read().strip() == 'uroced':
                    subprocess.run(['kill', pid])
        subprocess.run(['sleep', '0.2'])
    if not cli.stdout.strip():
        raise SystemExit(f"uroce-perf failed: {cli.stderr}")
    r = json.loads(cli.stdout.strip().splitlines()[-1])
    if not r.get('verified'):
        raise SystemExit(f'not verified: {cli.stdout} {cli.stderr}')
    return r[key]


try:
    setup()
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
            f.write(f'`bench/host_nic_cost.py {args[0]} --pairs {pairs}`\n\n{text}\n')
finally:
    cleanup()
