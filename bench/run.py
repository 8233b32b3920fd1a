#!/usr/bin/env python3
"""uroce benchmarks: every uroce number beside kernel TCP over loopback measured in the same run
on the same machine, as ratios (the machine is shared and noisy; ratios travel, absolute numbers
do not). Each measurement is the median of REPEAT runs. Writes bench/results/latest.md and .json.

usage: bench/run.py BUILD_DIR [--repeat N] [--quick]
"""
import json, os, statistics, subprocess, sys, time

build = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith('-') else 'build'
repeat = 3
if '--repeat' in sys.argv:
    repeat = int(sys.argv[sys.argv.index('--repeat') + 1])
quick = '--quick' in sys.argv
bindir = os.path.join(build, 'bin')
here = os.path.dirname(os.path.abspath(__file__))
results = os.path.join(here, 'results')
os.makedirs(results, exist_ok=True)

def run_json(args):
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])

def median_of(args, key):
    vals, last = [], None
    for _ in range(repeat):
        last = run_json(args)
        vals.append(last[key])
    return statistics.median(vals), last

lat_iters = '3000' if quick else '20000'
bw_iters = '2000' if quick else '10000'

rows = []
# One row: uroce-perf on an operation beside tcp_baseline in the same mode and size.
MODES = {'lat': ('64', lat_iters, 'lat_p50_us', 'us (p50)', 'lower'),
         'bw': ('65536', bw_iters, 'bw_gbps', 'Gb/s', 'higher')}
def row(name, op, mode, target):
    size, iters, key, unit, better = MODES[mode]
    u, j = median_of([f'{bindir}/uroce-perf', '--json', '--op', op, '--mode', mode, '--size', size, '--iters', iters], key)
    if not j['verified']:
        raise SystemExit(f'{op} {mode}: data not verified')
    t, _ = median_of([f'{bindir}/tcp_baseline', mode, size, iters], key)
    rows.append(dict(metric=name, uroce=u, tcp=t, unit=unit, ratio=u / t, target=target, better=better))

t0 = time.time()
row('64 B RC SEND latency (half round trip)', 'send', 'lat', '<= 1.5')
row('64 B RDMA WRITE latency (half round trip)', 'write', 'lat', None)
row('64 B RDMA READ latency (whole operation)', 'read', 'lat', None)
row('64 KiB RC SEND bandwidth', 'send', 'bw', None)
row('64 KiB RDMA WRITE bandwidth', 'write', 'bw', '>= 0.5')
row('64 KiB RDMA READ bandwidth', 'read', 'bw', None)
mem = run_json([f'{bindir}/idle_qp_memory', '1000', '3'])

# Debian's perftest, unmodified, through the libibverbs drop-in, beside uroce-perf (C++ API)
# doing the same test in the same run.
def perftest(prog, args, col):
    import random
    vals = []
    for _ in range(repeat):
        port = str(20000 + random.randrange(20000))
        base = [f'{bindir}/uroce-run', '--', prog, '-d', 'uroce0', '-x', '0', '-p', port] + args
        srv = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = subprocess.run(base + ['127.0.0.1'], capture_output=True, text=True, timeout=300)
        srv.wait(timeout=60)
        lines = out.stdout.splitlines()
        for i, l in enumerate(lines):
            if l.strip().startswith('#bytes') and i + 1 < len(lines):
                vals.append(float(lines[i + 1].split()[col]))
                break
        else:
            raise SystemExit(f'{prog}: no result table\n{out.stdout}{out.stderr}')
    return statistics.median(vals)

pt_rows = []
if os.path.exists(f'{bindir}/uroce-run'):
    def cxx(op, mode, size, key):
        v, _ = median_of([f'{bindir}/uroce-perf', '--json', '--op', op, '--mode', mode, '--size', size,
                          '--iters', bw_iters if mode == 'bw' else lat_iters], key)
        return v
    pt_rows.append(('64 KiB SEND bandwidth (Gb/s)', perftest('ib_send_bw', ['-s', '65536', '-n', bw_iters, '--report_gbits'], 3),
                    cxx('send', 'bw', '65536', 'bw_gbps')))
    pt_rows.append(('64 KiB RDMA WRITE bandwidth (Gb/s)', perftest('ib_write_bw', ['-s', '65536', '-n', bw_iters, '--report_gbits'], 3),
                    cxx('write', 'bw', '65536', 'bw_gbps')))
    pt_rows.append(('64 B RDMA READ latency, typical / p50 (us)', perftest('ib_read_lat', ['-s', '64', '-n', lat_iters], 4),
                    cxx('read', 'lat', '64', 'lat_p50_us')))

def verdict(r):
    if not r['target']:
        return ''
    op, v = r['target'].split()
    ok = r['ratio'] <= float(v) if op == '<=' else r['ratio'] >= float(v)
    return f"{r['target']} {'met' if ok else 'NOT met'}"

cpu = subprocess.run(['sh', '-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
lines = [
    f"# uroce benchmark ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {cpu})",
    '',
    f'Command: `make bench` (bench/run.py {build}); median of {repeat} runs each; TCP = kernel TCP over loopback, same run.',
    '',
    '| metric | uroce | kernel TCP | unit | ratio uroce/TCP | target |',
    '|---|---:|---:|---|---:|---|',
]
for r in rows:
    lines.append(f"| {r['metric']} | {r['uroce']:.2f} | {r['tcp']:.2f} | {r['unit']} | {r['ratio']:.2f} | {verdict(r)} |")
per_qp = mem['bytes_per_qp'] / 1024
lines += [
    '',
    '| resource | measured | target |',
    '|---|---:|---|',
    f"| host memory per idle connected RC QP (RSS growth over {mem['qps']} QPs, 128/128 depths) | {per_qp:.1f} KiB | <= 64 KiB {'met' if per_qp <= 64 else 'NOT met'} |",
    f"| idle engine CPU | {mem['idle_cpu_percent']:.3f} % of a core | < 1 % {'met' if mem['idle_cpu_percent'] < 1 else 'NOT met'} |",
    '',
]
if pt_rows:
    lines += [
        'Unmodified perftest through the libibverbs drop-in (`uroce-run`) beside uroce-perf on the C++ API:',
        '',
        '| test | perftest on uroce | uroce-perf (C++ API) |',
        '|---|---:|---:|',
    ] + [f'| {name} | {a:.2f} | {b:.2f} |' for name, a, b in pt_rows] + ['']
lines += [f'Took {time.time() - t0:.0f} s.']
md = '\n'.join(lines) + '\n'
open(os.path.join(results, 'latest.md'), 'w').write(md)
json.dump(dict(rows=rows, memory=mem, repeat=repeat), open(os.path.join(results, 'latest.json'), 'w'), indent=1)
print(md)
