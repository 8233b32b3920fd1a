#!/usr/bin/env python3
"""uroce beside what users would pick instead, on this machine, in one run.

Systems: uroce over shared memory (two processes, the default on one host), uroce over UDP
(UROCE_SHM=0), sockperf TCP and UDP ping-pong, iperf3, and UCX's ucx_perftest over tcp and over
shared memory (posix/cma). For every size the systems run one after the other in a round, and
the round is repeated (ABAB...): each ratio is the median of the per-round ratios, so a machine
that is busier in one minute than in the next does not favour anyone. Every uroce run checks
every byte it moves (uroce-perf fails otherwise).

Writes bench/results/latest.md (tables, ratios, targets) and latest.json; bench/plot.py then
draws latency.png and bandwidth.png from the JSON.

usage: bench/run.py BUILD_DIR [--rounds N] [--quick]
"""
import json, os, random, re, shutil, socket, statistics, subprocess, sys, time

# One host's measurements: uroce's loopback devices (the machine's own interfaces get none).
os.environ.setdefault('UROCE_DEVICES', 'lo')

args = sys.argv[1:]
build = args[0] if args and not args[0].startswith('-') else 'build'
rounds = int(args[args.index('--rounds') + 1]) if '--rounds' in args else 3
quick = '--quick' in args
if quick and '--rounds' not in args:
    rounds = 1
bindir = os.path.abspath(os.path.join(build, 'bin'))
here = os.path.dirname(os.path.abspath(__file__))
results = os.path.join(here, 'results')
os.makedirs(results, exist_ok=True)
rng = random.Random(4791)

LAT_SIZES = [64, 1024, 4096, 16384, 65536]
BW_SIZES = [4096, 65536, 1 << 20, 4 << 20]
SCALE_QPS = [1, 16, 256, 4096]


def free_port():
    return 20000 + rng.randrange(12000)  # below the ephemeral range


def run(cmd, env=None, timeout=180):
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def wait_listening(port, udp=False, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        ss = subprocess.run(['ss', '-lnu' if udp else '-lnt'], capture_output=True, text=True).stdout
        if re.search(rf':{port}\s', ss):
            return
        time.sleep(0.02)
    raise RuntimeError(f'nothing listens on port {port}')


def with_server(server_cmd, client_cmd, port, env=None, udp=False, oneshot=True):
    e = dict(os.environ)
    e.update(env or {})
    srv = subprocess.Popen(server_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e)
    try:
        wait_listening(port, udp)
        return run(client_cmd, env)
    finally:
        if not oneshot:  # a server that runs until told to stop
            srv.terminate()
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


# ---------------------------------------------------------------- the systems

def uroce(link, op, mode, size, qps=1, window=None, iters=None, memory='heap', buffers=None):
    if iters is None and mode == 'lat':
        iters = 20000 if size <= 4096 else 5000
    elif iters is None:
        # Over shared memory 8 GB (1-2 s), as the memcpy streams it is set beside: a shorter run
        # is mostly the ramp to steady state.
        iters = int(max(2000, min(400_000 if size <= 64 else 200_000, (8e9 if link == 'shm' else 2e9) / size)))
    if quick:
        iters = max(500, iters // 4)
    cmd = [f'{bindir}/uroce-perf', '--json', '--op', op, '--mode', mode, '--size', str(size), '--iters', str(iters),
           '--qps', str(qps), '--memory', memory] + (['--window', str(window)] if window else []) + \
          (['--buffers', str(buffers)] if buffers else [])
    j = json.loads(run(cmd, {'UROCE_SHM': '0' if link == 'udp' else '1'}).strip().splitlines()[-1])
    if not j['verified']:
        raise RuntimeError(f'uroce-perf {op} {mode} {size}: data not verified')
    return j


def uroce_lat(link):
    return lambda size: uroce(link, 'send', 'lat', size)['lat_p50_us']


def uroce_bw(link, memory='heap', buffers=None):
    # One buffer each side runs from the caches: 32 GB (about 1 s), not 8, past the ramp.
    return lambda size: uroce(link, 'write', 'bw', size, memory=memory, buffers=buffers,
                              iters=int(min(2_000_000, 32e9 / size)) if buffers == 1 else None)['bw_gbps']


def uroce_rate(link, qps, window=None, iters=None):
    return lambda size: uroce(link, 'write', 'bw', size, qps, window, iters)['msg_rate_mps']


def sockperf_lat(proto):
    def f(size):
        size = min(size, 65000)  # a UDP datagram holds at most 65507 bytes
        port = free_port()
        t = ['--tcp'] if proto == 'tcp' else []
        out = with_server(['sockperf', 'server', '-i', '127.0.0.1', '-p', str(port)] + t,
                          ['sockperf', 'ping-pong', '-i', '127.0.0.1', '-p', str(port), '-m', str(size),
                           '-t', '1' if quick else '2'] + t, port, udp=proto == 'udp', oneshot=False)
        m = re.search(r'percentile 50\.000 =\s*([\d.]+)', out)
        if not m:
            raise RuntimeError('sockperf: no median in\n' + out[-1500:])
        return float(m.group(1))  # sockperf reports half the round trip
    return f


def sockperf_cleanup():
    subprocess.run(['pkill', '-f', 'sockperf server'], capture_output=True)


def ucx(tls, test, size, n):
    port = free_port()
    env = {'UCX_TLS': tls}
    out = with_server(['ucx_perftest', '-p', str(port)], ['ucx_perftest', '127.0.0.1', '-p', str(port), '-t', test,
                                                          '-s', str(size), '-n', str(n)], port, env)
    final = [l for l in out.splitlines() if l.startswith('Final:')]
    if not final:
        raise RuntimeError('ucx_perftest: no result\n' + out[-1500:])
    return [float(x) for x in final[-1].split()[1:]]  # iters, lat50, lat avg, lat overall, MB/s avg, overall, msg/s...


def ucx_lat(tls):
    return lambda size: ucx(tls, 'tag_lat', size, 20000 if size <= 4096 else 5000)[1]  # one way, p50


def ucx_bw(tls):
    return lambda size: ucx(tls, 'ucp_put_bw', size, int(max(1000, min(200_000, 4e9 / size))))[5] * 8 * 1.048576 / 1000


def ucx_rate(tls):
    return lambda size: ucx(tls, 'ucp_put_bw', size, 400_000)[7] / 1e6


def memcpy_stream(size, mode=()):
    # The bound for the ring on this host: each message's bytes, just written on one core, copied
    # out on the other (bench/copy_stream). mode ('two',): the sender copies them in first, as
    # the ring's sender does: two copies pipelined with no protocol around them.
    total = '2e9' if quick else '8e9'
    return json.loads(run([f'{bindir}/copy_stream', str(size), total, *mode]).strip().splitlines()[-1])['gbps']


def iperf3(size):
    port = free_port()
    out = with_server(['iperf3', '-s', '-1', '-p', str(port)],
                      ['iperf3', '-c', '127.0.0.1', '-p', str(port), '-t', '1' if quick else '2', '-l', str(min(size, 1 << 20)), '-J'], port)
    return json.loads(out)['end']['sum_received']['bits_per_second'] / 1e9


# ---------------------------------------------------------------- interleaved rounds

def measure(systems, sizes, n_rounds=None):
    """{system: {size: [value per round]}}: each round runs every system once, in a rotating order."""
    vals = {s: {z: [] for z in sizes} for s in systems}
    for size in sizes:
        for r in range(n_rounds or rounds):
            names = list(systems)
            names = names[r % len(names):] + names[:r % len(names)]
            for name in names:
                try:
                    vals[name][size].append(systems[name](size))
                except Exception as e:  # a baseline that cannot run is reported, not fatal
                    # The command and the last lines it wrote: enough to tell why.
                    lines = str(e).splitlines()
                    print(f'  {name} {size}: ' + '\n    '.join(lines[:1] + lines[-4:] if len(lines) > 1 else lines),
                          file=sys.stderr)
                    vals[name][size].append(None)
            print(f'  size {size} round {r + 1}: ' + ', '.join(
                f'{n} {vals[n][size][-1]:.3g}' for n in systems if vals[n][size][-1] is not None), file=sys.stderr)
    return vals


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pair_ratio(a, b):
    """Median over rounds of a/b (rounds where either is missing are left out)."""
    rs = [x / y for x, y in zip(a, b) if x is not None and y]
    return statistics.median(rs) if rs else None


def fmt(v, d=2):
    return '—' if v is None else f'{v:.{d}f}'


t0 = time.time()
sockperf_cleanup()
print('latency ...', file=sys.stderr)
LAT = {'uroce shm': uroce_lat('shm'), 'uroce udp': uroce_lat('udp'), 'sockperf tcp': sockperf_lat('tcp'),
       'sockperf udp': sockperf_lat('udp'), 'ucx tcp': ucx_lat('tcp'), 'ucx posix': ucx_lat('posix,cma')}
lat = measure(LAT, LAT_SIZES)
print('bandwidth ...', file=sys.stderr)
BW = {'uroce shm': uroce_bw('shm'), 'uroce shm memfd': uroce_bw('shm', 'memfd'),
      'uroce shm memfd 1 buffer': uroce_bw('shm', 'memfd', 1), 'uroce udp': uroce_bw('udp'), 'iperf3': iperf3, 'ucx tcp': ucx_bw('tcp'),
      'ucx posix/cma': ucx_bw('posix,cma'), 'memcpy stream': memcpy_stream,
      'two-copy stream': lambda size: memcpy_stream(size, ('two',))}
bw = measure(BW, BW_SIZES)
print('message rate ...', file=sys.stderr)
RATE = {'uroce shm 1 QP': uroce_rate('shm', 1), 'uroce shm 16 QPs': uroce_rate('shm', 16),
        'uroce udp 1 QP': uroce_rate('udp', 1), 'uroce udp 16 QPs': uroce_rate('udp', 16),
        'ucx posix put': ucx_rate('posix,cma')}
rate = measure(RATE, [64])
print('QP scaling ...', file=sys.stderr)
# 2 M WRITEs whatever the QP count, about 500 on each of 4096 QPs (perftest's -n counts per QP):
# with fewer, the first burst over all the QPs and the ramp to steady state weigh on the rate.
SCALE_ITERS = 2_000_000
SCALE = {f'{q} QPs': uroce_rate('shm', q, iters=SCALE_ITERS) for q in SCALE_QPS}
# Two in flight on each of 4096 QPs (8192 in all, uroce-perf's limit before): the QPs' state is cold at every post.
SCALE['4096 QPs, 2 each'] = uroce_rate('shm', 4096, 2, SCALE_ITERS)
# Its runs are short and its ratio moves most from round to round (the machine's two modes): more rounds.
scale = measure(SCALE, [64], rounds + 2)
mem = json.loads(run([f'{bindir}/idle_qp_memory', '1000', '3']).strip().splitlines()[-1])
print('copy paths ...', file=sys.stderr)
copies = json.loads(run([f'{bindir}/copy_paths', '500' if quick else '2000']).strip().splitlines()[-1])

# ---------------------------------------------------------------- report

def verdict(v, op, limit):
    if v is None:
        return 'not measured'
    return 'met' if (v <= limit if op == '<=' else v >= limit) else 'NOT met'

targets = []
def target(what, v, op, limit, unit='x'):
    targets.append((what, v, f'{op} {limit}{unit}', verdict(v, op, limit)))

target('shared memory: 64 B half round trip / UCX posix', pair_ratio(lat['uroce shm'][64], lat['ucx posix'][64]), '<=', 2)
# Private memory goes through the ring (two copies on two cores): pipelined, the receiver's copy
# of what the sender just wrote bounds it, a cross-core memcpy stream.
target('shared memory: 64 KiB WRITE bandwidth / cross-core memcpy stream', pair_ratio(bw['uroce shm'][65536], bw['memcpy stream'][65536]), '>=', 0.8)
target('shared memory: 1 MiB WRITE bandwidth / cross-core memcpy stream', pair_ratio(bw['uroce shm'][1 << 20], bw['memcpy stream'][1 << 20]), '>=', 0.8)
# Regions in a shared file (a memfd): the receiver copies each payload once, straight out of the
# sender's file into its destination.
target('shared memory, regions in a memfd: 64 KiB WRITE bandwidth / cross-core memcpy stream', pair_ratio(bw['uroce shm memfd'][65536], bw['memcpy stream'][65536]), '>=', 0.8)
target('shared memory, regions in a memfd: 1 MiB WRITE bandwidth / cross-core memcpy stream', pair_ratio(bw['uroce shm memfd'][1 << 20], bw['memcpy stream'][1 << 20]), '>=', 0.8)
# ucx_perftest's put_bw puts every message from one buffer into one buffer, as perftest does;
# uroce-perf --buffers 1 does the same, so the two move the same bytes through the same caches.
target('shared memory, regions in a memfd, one buffer each side as ucx_perftest: 64 KiB WRITE bandwidth / UCX posix put',
       pair_ratio(bw['uroce shm memfd 1 buffer'][65536], bw['ucx posix/cma'][65536]), '>=', 0.5)
target('shared memory: 64 B WRITEs per second, one QP pair (millions)', med(rate['uroce shm 1 QP'][64]), '>=', 1, ' M/s')
target('UDP: 64 B half round trip / sockperf TCP', pair_ratio(lat['uroce udp'][64], lat['sockperf tcp'][64]), '<=', 1.0)
target('UDP: 64 KiB WRITE bandwidth / iperf3', pair_ratio(bw['uroce udp'][65536], bw['iperf3'][65536]), '>=', 1.0)
target('4096 QPs aggregate / 1 QP (64 B WRITEs, shared memory)', pair_ratio(scale['4096 QPs'][64], scale['1 QPs'][64]), '>=', 0.9)
target('idle engine CPU (% of a core)', mem['idle_cpu_percent'], '<', 1, ' %')
targets[-1] = (targets[-1][0], mem['idle_cpu_percent'], '< 1 %', 'met' if mem['idle_cpu_percent'] < 1 else 'NOT met')

cpu = subprocess.run(['sh', '-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
L = [f"# uroce beside the alternatives ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {cpu})", '',
     f'Command: `make bench` (bench/run.py {build}{" --quick" if quick else ""}); {rounds} interleaved round(s): every '
     'system runs once per round, in rotating order; values are medians over rounds, ratios the median of the '
     'per-round ratios. uroce runs are two processes through uroce-perf (every byte checked): "shm" is the '
     'same-host shared-memory link (the default between two devices on one host), "udp" is RoCEv2 over kernel '
     'UDP on loopback (UROCE_SHM=0).', '', '## Targets', '', '| measure | value | target | |', '|---|---:|---|---|']
for what, v, tgt, ok in targets:
    L.append(f'| {what} | {fmt(v)} | {tgt} | {ok} |')

def table(title, unit, data, sizes, ratios):
    names = list(data)
    out = ['', f'## {title}', '', '| size | ' + ' | '.join(names) + ' | ' + ' | '.join(r[0] for r in ratios) + ' |',
           '|---' * (1 + len(names) + len(ratios)) + '|']
    for z in sizes:
        row = [human(z)] + [fmt(med(data[n][z])) for n in names]
        row += [fmt(pair_ratio(data[a][z], data[b][z])) for _, a, b in ratios]
        out.append('| ' + ' | '.join(row) + ' |')
    out.append(f'\n({unit}; ratio columns: median of per-round ratios.)')
    return out

def human(z):
    return f'{z >> 20} MiB' if z >= 1 << 20 else f'{z >> 10} KiB' if z >= 1024 else f'{z} B'

L += table('Latency: half round trip, p50 (µs); uroce: RC SEND ping-pong', 'µs, lower is better', lat, LAT_SIZES,
           [('shm / ucx posix', 'uroce shm', 'ucx posix'), ('udp / sockperf tcp', 'uroce udp', 'sockperf tcp'),
            ('udp / ucx tcp', 'uroce udp', 'ucx tcp')])
L.append('sockperf UDP at 64 KiB sends 65000 bytes (the largest UDP datagram is 65507).')
L += table('Bandwidth (Gb/s); uroce: RDMA WRITE stream, 64 in flight; UCX: ucp_put_bw', 'Gb/s, higher is better',
           bw, BW_SIZES, [('shm / memcpy stream', 'uroce shm', 'memcpy stream'), ('shm memfd / memcpy stream', 'uroce shm memfd', 'memcpy stream'),
                          ('shm / two-copy stream', 'uroce shm', 'two-copy stream'), ('shm memfd / ucx posix/cma', 'uroce shm memfd', 'ucx posix/cma'),
                          ('shm memfd 1 buffer / ucx posix/cma', 'uroce shm memfd 1 buffer', 'ucx posix/cma'),
                          ('two-copy / memcpy stream', 'two-copy stream', 'memcpy stream'), ('shm / ucx posix/cma', 'uroce shm', 'ucx posix/cma'),
                          ('udp / iperf3', 'uroce udp', 'iperf3'),
                          ('udp / ucx tcp', 'uroce udp', 'ucx tcp')])
L.append('"memcpy stream": bench/copy_stream, two processes: one writes each message whole into the next of 64 '
         'shared buffers, the other, on the other core, copies it out into a buffer of its own (one memcpy of '
         'lines the other core just wrote, as the receiver\'s copy out of the ring). "two-copy stream": the same, '
         'but the writer copies each message in 4 KiB pieces from a private buffer of its own, as uroce\'s sender '
         'copies from its registered memory into the ring: the most two pipelined copies reach with no protocol. '
         'UCX posix/cma puts into memory it allocated shared, and the receiver never reads the bytes. "uroce shm '
         'memfd": uroce-perf --memory memfd, both sides\' messages in a memfd: the receiver reads each payload '
         'where it lies in the sender\'s file and copies it once; "uroce shm": messages on the heap, through the ring. '
         '"1 buffer": uroce-perf --buffers 1, every message from one buffer into one, as ucx_perftest\'s put_bw and '
         'perftest do (the others take 64 buffers in turn on each side, as many as are in flight, each checked).')
L += table('Message rate: 64 B WRITEs (millions per second)', 'M msg/s', rate, [64],
           [('shm 1 QP / ucx posix', 'uroce shm 1 QP', 'ucx posix put')])
L += table(f'QP scaling: aggregate 64 B WRITE rate over shared memory (millions per second, {rounds + 2} rounds); 2 M WRITEs, 64 in '
           'flight per QP, at most 32768 in all (8 per QP with 4096), or 2 per QP ("2 each")', 'M msg/s', scale, [64],
           [(f'{q} / 1', f'{q} QPs', '1 QPs') for q in SCALE_QPS[1:]] + [('4096, 2 each / 1', '4096 QPs, 2 each', '1 QPs')])
L += ['', '## Copy paths for large payloads on the same-host link', '',
      'The receiver\'s cost per message: reading it straight out of the sender\'s memory (process_vm_readv, one '
      'copy) or copying it out of the ring (one memcpy; the sender\'s copy into the ring runs in parallel on the '
      'other core). bench/copy_paths; the link carries payloads through the ring unless the single copy is faster. '
      'pread from a memfd: a copy out of a peer\'s shared file without mapping it (no SIGBUS if the file shrinks).',
      '', '| size | process_vm_readv (µs) | memcpy (µs) | pread from a memfd (µs) | faster |', '|---|---:|---:|---:|---|']
for r in copies['rows']:
    pvm = r['process_vm_readv_us']
    faster = 'not permitted' if pvm < 0 else 'process_vm_readv' if pvm < r['memcpy_us'] else 'ring (memcpy)'
    L.append(f"| {human(r['size'])} | {fmt(pvm) if pvm >= 0 else '-'} | {fmt(r['memcpy_us'])} | {fmt(r['pread_memfd_us'])} | {faster} |")
L += ['', '## Resources', '', f"- host memory per idle connected RC QP: {mem['bytes_per_qp'] / 1024:.1f} KiB "
      f"(RSS growth over {mem['qps']} QPs; target <= 64 KiB: {'met' if mem['bytes_per_qp'] <= 65536 else 'NOT met'})",
      f"- idle engine: {mem['idle_cpu_percent']:.3f} % of a core", '',
      '![latency](latency.png)', '', '![bandwidth](bandwidth.png)', '', f'Took {time.time() - t0:.0f} s.']
md = '\n'.join(L) + '\n'
open(os.path.join(results, 'latest.md'), 'w').write(md)
json.dump(dict(date=time.strftime('%Y-%m-%d'), rounds=rounds, quick=quick, latency_us=lat, bandwidth_gbps=bw, rate_mps=rate, qp_scaling_mps=scale,
               memory=mem, copy_paths=copies, targets=targets), open(os.path.join(results, 'latest.json'), 'w'), indent=1)

# ---------------------------------------------------------------- plots
subprocess.run([sys.executable, os.path.join(here, 'plot.py')], check=False)
sockperf_cleanup()
print(md)
