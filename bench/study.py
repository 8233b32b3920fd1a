#!/usr/bin/env python3
"""The lossy-fabric study (make study): go-back-N against selective repeat over a loss grid,
incast with and without congestion control, lossy and lossless, in the simulator, and the same
loss grid on the real engine over UDP loopback. Writes docs/study.md, its plots
(docs/study/*.png, with gnuplot) and every run's JSON (docs/study/results.json).

usage: bench/study.py BUILD_DIR [--quick]   (--quick: fewer seeds and shorter runs, to try it)
       bench/study.py --doc-only              (docs/study.md again from docs/study/results.json)"""
import json, os, shutil, statistics, subprocess, sys, time

# One host's measurements: uroce's loopback devices (the machine's own interfaces get none).
os.environ.setdefault('UROCE_DEVICES', 'lo')

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
out_dir = os.path.join(root, 'docs', 'study')

LOSSES = [0, 1e-5, 1e-4, 1e-3, 1e-2, 5e-2]
RATES = [10, 100]
SENDERS = [8, 16, 32, 64, 128, 256]
CCS = ['none', 'dcqcn', 'timely', 'swift']
WINDOW = 256  # the requester's window in packets (CoreConfig::max_inflight_pkts)


def run_json(cmd, env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f'{" ".join(cmd)} exited {p.returncode}: {p.stderr.strip()}')
    return json.loads(p.stdout.strip().splitlines()[-1])


def sim(build, *args):
    return run_json([os.path.join(build, 'bin', 'uroce-sim'), '--json', *map(str, args)])


def perf(build, loss, rel, iters):
    return run_json([os.path.join(build, 'bin', 'uroce-perf'), '--json', '--op', 'write', '--mode', 'bw',
                     '--size', '65536', '--iters', str(iters), '--loss', str(loss), '--reliability', rel],
                    env={'UROCE_SHM': '0'})


def plot(name, title, xlabel, ylabel, series, logx=True, logy=False, xtics=None):
    """series: {label: [(x, y), ...]}; writes docs/study/NAME.png."""
    if not shutil.which('gnuplot'):
        return False
    dats, parts = [], []
    for i, (label, pts) in enumerate(series.items()):
        dat = os.path.join(out_dir, f'{name}.{i}.dat')
        with open(dat, 'w') as f:
            for x, y in pts:
                f.write(f'{x} {y}\n')
        dats.append(dat)
        style = 'lines dt 2 lw 2' if label.startswith('model') else 'linespoints lw 2'
        parts.append(f"'{dat}' using 1:2 with {style} title '{label}'")
    script = (f"set terminal pngcairo size 900,560 font ',11'; set output '{os.path.join(out_dir, name)}.png';"
              f"set title \"{title}\"; set xlabel '{xlabel}'; set ylabel '{ylabel}'; set grid; set key outside right;"
              + ("set logscale x 10; set format x '%g';" if logx else '') + ('set logscale y 10;' if logy else '')
              + (f'set xtics ({xtics});' if xtics else '') + 'plot ' + ', '.join(parts))
    subprocess.run(['gnuplot', '-e', script], check=False)
    for d in dats:
        os.remove(d)
    return True


def loss_grid(build, seeds):
    rows = []
    for rate in RATES:
        duration = 100 if rate == 10 else 20  # at 10 Gb/s a 1 MiB WRITE takes 0.84 ms
        for rel in ['gbn', 'sr']:
            for loss in LOSSES:
                runs = [sim(build, '--scenario', 'loss', '--reliability', rel, '--loss', loss, '--rate-gbps', rate,
                            '--duration-ms', duration, '--seed', s) for s in seeds]
                rows.append({'rate': rate, 'rel': rel, 'loss': loss, 'duration_ms': duration, 'runs': runs})
                print(f'loss grid: {rate} Gb/s {rel} loss {loss}: '
                      + ' '.join(f"{r['goodput_ratio']:.3f}" for r in runs), flush=True)
    return rows


def incast_grid(build, duration, seed):
    rows = []
    for pfc in [False, True]:
        for cc in CCS:
            for n in SENDERS:
                args = ['--scenario', 'incast', '--senders', n, '--cc', cc, '--msg-bytes', 262144, '--in-flight', 2,
                        '--duration-ms', duration, '--seed', seed] + (['--pfc'] if pfc else [])
                r = sim(build, *args)
                rows.append({'senders': n, 'cc': cc, 'pfc': pfc, 'run': r})
                print(f"incast {n}:1 {cc} {'pfc' if pfc else 'lossy'}: goodput {r['goodput_ratio']:.3f} drops "
                      f"{r['drops']} ({r['drops_second_half']} late) Jain {r['jain_fairness']:.3f}", flush=True)
    return rows


def engine_grid(build, pairs, quick):
    """Real engine, UDP loopback: each lossy run next to a lossless one of the same mode (ABAB)."""
    rows = []
    for rel in ['gbn', 'sr']:
        for loss in [1e-3, 1e-2, 5e-2]:
            slow = rel == 'gbn' and loss >= 1e-2
            iters = (300 if loss >= 5e-2 else 2000) if slow else 20000
            if quick:
                iters = max(200, iters // 10)
            ratios, clean, lossy = [], [], []
            for _ in range(pairs):
                a = perf(build, 0, rel, iters)
                b = perf(build, loss, rel, iters)
                clean.append(a)
                lossy.append(b)
                ratios.append(b['goodput_gbps'] / a['goodput_gbps'])
            rows.append({'rel': rel, 'loss': loss, 'iters': iters, 'clean': clean, 'lossy': lossy,
                         'ratio_median': statistics.median(ratios)})
            print(f'engine: {rel} loss {loss}: ratios ' + ' '.join(f'{x:.3f}' for x in ratios), flush=True)
    return rows


def draw(lg, ig, eg, meta):
    seeds, incast_ms, pairs = meta['seeds'], meta['incast_ms'], meta['pairs']
    series = {}
    for rate in RATES:
        for rel in ['gbn', 'sr']:
            rows = [r for r in lg if r['rate'] == rate and r['rel'] == rel and r['loss'] > 0]
            series[f'{rel} {rate} Gb/s'] = [(r['loss'], statistics.mean(x['goodput_ratio'] for x in r['runs'])) for r in rows]
    series['model 1/(1+2pW)'] = [(p, 1 / (1 + 2 * p * WINDOW)) for p in LOSSES if p > 0]
    series['model 1/(1+pW)'] = [(p, 1 / (1 + p * WINDOW)) for p in LOSSES if p > 0]
    plot('loss_goodput', f"Goodput / line rate, one flow, 1 MiB WRITEs (uroce-sim, seeds {seeds})", 'loss probability',
         'goodput / line rate', series)
    for key, name, label, logy in [('jain_fairness', 'incast_jain', 'Jain index (2nd half)', False),
                                   ('queue_p99_bytes', 'incast_queue', 'queue p99, bytes (2nd half)', True),
                                   ('short_fct_p99_us', 'incast_short_fct', 'short WRITE p99, us', True)]:
        s = {}
        for pfc in [False, True]:
            for cc in CCS:
                # on a log scale a flow that failed (0: no completion) is left out, not drawn at 0
                s[f"{cc} {'PFC' if pfc else 'lossy'}"] = [(r['senders'], r['run'][key]) for r in ig
                                                          if r['cc'] == cc and r['pfc'] == pfc and (r['run'][key] > 0 or not logy)]
        plot(name, f"Incast N:1, 100 Gb/s, {incast_ms} ms (uroce-sim, seed 1)", 'senders', label, s, logx=True,
             logy=logy, xtics=', '.join(str(n) for n in SENDERS))
    s = {}
    for rel in ['gbn', 'sr']:
        s[rel] = [(r['loss'], r['ratio_median']) for r in eg if r['rel'] == rel]
    plot('engine_goodput', f'Real engine, UDP loopback, 64 KiB WRITEs: lossy / lossless ({pairs} pairs)',
         'loss probability', 'goodput / lossless goodput', s)


def med(xs):
    return statistics.median(xs)


def fmt_loss(x):
    return '0' if x == 0 else f'{x:g}'


def write_doc(lg, ig, eg, meta):
    L = []
    w = L.append
    w('# Lossy fabrics: a study')
    w('')
    w(f"Regenerated by `make study` ({meta['date']}, {meta['seconds']:.0f} s on this machine; "
      f"`bench/study.py build{' --quick' if meta['quick'] else ''}`). Every number comes from "
      '`build/bin/uroce-sim` (the protocol core on virtual time: exact, repeatable, seeds given) or '
      '`build/bin/uroce-perf` (the real engine over UDP loopback, with the device losing packets on '
      'purpose). Raw JSON of every run: `docs/study/results.json`.')
    w('')
    w('## 1. Go-back-N against selective repeat, one flow')
    w('')
    w(f"`uroce-sim --scenario loss --reliability gbn|sr --loss P --rate-gbps R --duration-ms D --seed S`: one "
      f"RC QP pair streams 1 MiB RDMA WRITEs (4 outstanding, MTU 4096) over a link of R Gb/s with 2 us of "
      f"delay that drops each packet (data and ACKs) with probability P; D = 100 ms at 10 Gb/s, 20 ms at "
      f"100 Gb/s. Seeds {', '.join(map(str, meta['seeds']))}: goodput over the line rate is their mean, "
      f"completion times their median.")
    w('')
    w('| loss | R | gbn goodput/line | sr goodput/line | sr / lossless sr | gbn p50 / p99 us | sr p50 / p99 us | gbn resent | sr resent | gbn / sr queue p99 KiB | model 1/(1+2pW) | 1/(1+pW) |')
    w('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    by = {(r['rate'], r['rel'], r['loss']): r for r in lg}
    for rate in RATES:
        base = statistics.mean(x['goodput_ratio'] for x in by[(rate, 'sr', 0)]['runs'])
        for loss in LOSSES:
            g, s = by[(rate, 'gbn', loss)]['runs'], by[(rate, 'sr', loss)]['runs']
            gm, sm = statistics.mean(x['goodput_ratio'] for x in g), statistics.mean(x['goodput_ratio'] for x in s)
            w(f"| {fmt_loss(loss)} | {rate} | {gm:.3f} | {sm:.3f} | {sm / base:.3f} | "
              f"{med([x['fct_p50_us'] for x in g]):.0f} / {med([x['fct_p99_us'] for x in g]):.0f} | "
              f"{med([x['fct_p50_us'] for x in s]):.0f} / {med([x['fct_p99_us'] for x in s]):.0f} | "
              f"{med([x['retransmitted_pkts'] for x in g]):.0f} | {med([x['retransmitted_pkts'] for x in s]):.0f} | "
              f"{med([x['queue_p99_bytes'] for x in g]) / 1024:.0f} / {med([x['queue_p99_bytes'] for x in s]) / 1024:.0f} | "
              f"{1 / (1 + 2 * loss * WINDOW):.3f} | {1 / (1 + loss * WINDOW):.3f} |")
    w('')
    if meta['plots']:
        w('![goodput against loss](study/loss_goodput.png)')
        w('')
    srw = {rate: by[(rate, 'sr', 0)]['runs'][0]['window_pkts'] for rate in RATES}
    sr5 = statistics.mean(x['goodput_ratio'] for x in by[(100, 'sr', 5e-2)]['runs'])
    sr1 = [x['goodput_ratio'] for x in by[(100, 'sr', 1e-2)]['runs']]
    sr0 = [x['goodput_ratio'] for x in by[(100, 'sr', 0)]['runs']]
    worst = min(a / b for a, b in zip(sr1, sr0))
    w(f"**Target: selective repeat at 1 % loss keeps >= 0.90x of its lossless goodput (100 Gb/s, 1 MiB).** "
      f"Per seed: {', '.join(f'{a / b:.3f}' for a, b in zip(sr1, sr0))}; worst {worst:.3f}: "
      f"{'met' if worst >= 0.90 else 'NOT met'}.")
    w('')
    w('What the model says and what happens. W, go-back-N\'s packets in flight, is the requester\'s window of '
      f'{WINDOW} packets here: the sender\'s own queue holds the window, so it is always full. With '
      'go-back-N each loss is reported by a sequence NAK one round trip later, and the requester '
      'resends everything from the lost packet on: about W packets. The simple model '
      'goodput ~ 1/(1 + 2pW) charges two windows per loss (the window resent, and one more for the '
      'pipe idling while the NAK travels back); here the pipe never idles (the sender keeps sending '
      'until the NAK arrives, and those packets are the ones resent), so the measurements follow '
      '1/(1 + pW), half the model\'s cost: the same collapse, one loss rate later. Where pW passes 1 '
      '(p > 4e-3) go-back-N spends most of the line on resends. Selective repeat resends about one '
      'packet per loss (the "resent" columns: fewer than the losses, because lost ACKs need no '
      f"resend). It keeps at most two bandwidth-delay products in the network ({srw[100]} packets at "
      f"100 Gb/s, {srw[10]} at 10; packets the responder reports held have left it), so the sender's "
      'queue stays small where go-back-N\'s holds its whole window (the queue column), and its '
      'completion times stay near the lossless ones up to 1 %. A window of one bandwidth-delay '
      'product would idle the line whenever a hole holds the oldest unacknowledged packet back '
      '(0.74 of the line at 1 %); 256 packets out would keep 0.97 at 1 % with a megabyte queued. '
      'At 5 % one resend '
      'in twenty is lost again: most such losses show as soon as a packet sent after the resend is '
      'reported held, the rest wait for the probe (three measured round trips), and the window '
      f"stalls on that hole meanwhile: at 100 Gb/s it keeps {sr5:.2f} of the line there.")
    w('')
    w('## 2. Incast: none, DCQCN, TIMELY and Swift, lossy and PFC')
    w('')
    w(f"`uroce-sim --scenario incast --senders N --cc none|dcqcn|timely|swift [--pfc] --msg-bytes 262144 --in-flight 2 "
      f"--duration-ms {meta['incast_ms']} --seed {meta['seed']}`: N senders stream 256 KiB WRITEs (2 "
      f"outstanding each) to one receiver through a switch; every link and port runs at 100 Gb/s; the port to "
      f"the receiver has a 2 MiB buffer (tail drop past it; with PFC, XOFF at 1 MiB and XON at 512 KiB); "
      f"DCQCN marks with the paper's RED (Kmin/Kmax 12.5/500 KB, Pmax 1 % at 100 Gb/s); TIMELY takes the "
      f"round trips the completer measures (one per round trip per QP) with the paper's values. One more sender "
      f"writes 8 KiB every 100 us: the short flow. Drops, queue and Jain's index are measured in the "
      f"second half (after convergence); go-back-N throughout.")
    w('')
    w('| N | mode | cc | goodput/port | drops (2nd half) | failed flows | pauses | CNPs | queue p99 (2nd half) | Jain (2nd half) | WRITE p99 us | short WRITE p99 us |')
    w('|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in ig:
        x = r['run']
        w(f"| {r['senders']} | {'PFC' if r['pfc'] else 'lossy'} | {r['cc']} | {x['goodput_ratio']:.3f} | "
          f"{x['drops']} ({x['drops_second_half']}) | {x['failed_flows']} | {x['pauses']} | {x['cnps']} | {x['queue_p99_bytes'] / 1024:.0f} KiB | "
          f"{x['jain_fairness']:.3f} | {x['fct_p99_us']:.0f} | {x['short_fct_p99_us']:.0f}{' (failed)' if x['short_fct_p99_us'] == 0 else ''} |")
    w('')
    if meta['plots']:
        w('![Jain fairness](study/incast_jain.png)')
        w('![queue p99](study/incast_queue.png)')
        w('![short flow](study/incast_short_fct.png)')
        w('')
    t = next(r['run'] for r in ig if r['senders'] == 16 and r['cc'] == 'dcqcn' and not r['pfc'])
    ok = t['drops_second_half'] == 0 and t['jain_fairness'] >= 0.95
    w(f"**Target: DCQCN, incast 16:1, lossy with ECN: no drops after convergence, Jain >= 0.95.** "
      f"Drops in the second half {t['drops_second_half']}, Jain {t['jain_fairness']:.3f}: {'met' if ok else 'NOT met'}.")
    w('')
    w('Reading the table. Without congestion control on a lossy fabric the port\'s buffer overflows '
      'for as long as the senders run: the drops never stop, go-back-N resends a window for each, and '
      'flows that lose a resend wait out the 1 ms transport timeout while others take the port. From '
      '16 senders on some flows exhaust their seven retries and fail (RETRY_EXC_ERR: the "failed '
      'flows" column), and fairness collapses as N grows. DCQCN cuts every sender at its first CNPs '
      'and brings them back to a share the port carries: after the first burst nothing is dropped up '
      'to 128 senders, the queue stays within RED\'s marking range (a few hundred KiB to 1 MiB '
      'against a 2 MiB buffer), and the short flow\'s 8 KiB WRITE waits 45 to 150 us at p99 instead '
      'of milliseconds. At 256 senders the first burst (256 x 512 KiB) is more than DCQCN\'s rate '
      'cuts can absorb before the timeouts start, and a third of the flows fail. PFC never drops: '
      'alone it keeps the port full and fair up to 128 senders, with the queue standing near XOFF '
      '(1.1 to 3.5 MiB) and the short flow behind it (100 to 250 us). At 256 senders every flow '
      'fails although nothing is lost: each waits behind 255 others for longer than its 1 ms '
      'timeout, resends, and exhausts its retries (a lossless fabric needs timeouts longer than the '
      'queueing it allows). DCQCN with PFC keeps all but one flow going even at 256:1. Under PFC '
      'each sender\'s frames wait in its own queue and a pause holds them there; the frame on the '
      'wire and those on the way still arrive, which is what XOFF\'s headroom is for.')
    w('')
    x = {(r['senders'], r['cc'], r['pfc']): r['run'] for r in ig}

    def span(cc, pfc, key, ns, f='{:.2f}', scale=1):
        v = [x[(n, cc, pfc)][key] * scale for n in ns]
        return f.format(min(v)) + ' to ' + f.format(max(v))
    late = max(x[(n, 'swift', False)]['drops_second_half'] for n in SENDERS)
    few = [n for n in SENDERS if x[(n, 'swift', False)]['drops'] == 0]
    w('TIMELY, with the paper\'s values (set for 10 Gb/s), fails here: a round trip that grows by '
      '25 us between two samples is a normalised gradient of 1.25 (minimum RTT 20 us), which cuts '
      'the rate by beta x 1.25 = all of it, to the 10 Mb/s floor; the way back is 10 Mb/s per '
      'sample, and a QP times one request per round trip, so a slowed QP samples rarely. Under '
      'PFC, where pauses add tens of microseconds to round trips at once, the long flows sit at '
      f"the floor at 8 and 16 senders (goodput {x[(8, 'timely', True)]['goodput_ratio']:.2f} and "
      f"{x[(16, 'timely', True)]['goodput_ratio']:.2f}); lossy, a few flows keep the port and the rest "
      f"starve (Jain {span('timely', False, 'jain_fairness', SENDERS)}). Scaling its additive step with "
      'the line rate and sampling per completed segment, as the paper does, are the next steps; '
      'these rows are what the paper\'s constants do at 100 Gb/s, untuned.')
    w('')
    w('Swift (a window of packets from the round trip\'s level against a target, not its slope: the '
      'fabric\'s empty-queue round trip, 4.7 us here, which the simulator knows from its '
      'topology, plus 10 us of queueing, plus up to 40 us more as the window shrinks) does what '
      'the others do not: lossy, nothing is dropped at all up to '
      f"{max(few)} senders and "
      + ('nothing in the second half at any N' if late == 0 else f'at most {late} in the second half')
      + f"; the port stays full ({span('swift', False, 'goodput_ratio', SENDERS[:5])} of it up to "
      f"128 senders), the queue's p99 stays at {span('swift', False, 'queue_p99_bytes', SENDERS[:5], '{:.0f}', 1 / 1024)} KiB "
      f"(DCQCN: {span('dcqcn', False, 'queue_p99_bytes', SENDERS[:5], '{:.0f}', 1 / 1024)} KiB) and "
      f"the short flow's p99 at {span('swift', False, 'short_fct_p99_us', SENDERS[:4], '{:.0f}')} us up to 64 "
      'senders. Its window is what bounds each sender, so no sender can put more than its window '
      'into the queue, and a cut is at most half, once per round trip. The port carries 14 packets '
      'per empty round trip and 168 at Swift\'s largest target (55 us): at 128 and 256 senders a '
      'sender\'s share is a packet or two per round trip, or less (then paced a packet at a time), '
      'and one sample more or less moves a window by a whole packet; Jain\'s index there is '
      f"{x[(128, 'swift', False)]['jain_fairness']:.2f} and {x[(256, 'swift', False)]['jain_fairness']:.2f} "
      '(lossy). At 256 every sender starts with a window of one bandwidth-delay '
      'product: the first burst, 256 x 14 packets (14 MiB against a 2 MiB buffer), overflows '
      f"the port and {x[(256, 'swift', False)]['failed_flows']} flows exhaust their retries before "
      'the windows come down. With PFC Swift rarely pauses (pauses '
      f"{x[(32, 'swift', True)]['pauses']} at 32 senders against DCQCN's {x[(32, 'dcqcn', True)]['pauses']}), "
      f"and at 256 its Jain is {x[(256, 'swift', True)]['jain_fairness']:.2f}; there the one failed flow is "
      'the short one, whose QP waits behind 256 paced senders and the pauses for longer than its '
      'retries last.')
    w('')
    w('## 3. The real engine over UDP loopback')
    w('')
    w(f"`UROCE_SHM=0 uroce-perf --op write --mode bw --size 65536 --iters I --loss P --reliability gbn|sr`: "
      f"64 KiB WRITEs, 64 outstanding, both devices losing a share P of the packets they receive "
      f"(`DeviceOptions::rx_loss`). Each lossy run is paired with a lossless run of the same mode just "
      f"before it ({meta['pairs']} pairs, ABAB); the ratio is the median of the pairs' ratios. Goodput in Gb/s "
      f"(medians).")
    w('')
    w('| mode | loss | lossless Gb/s | lossy Gb/s | lossy / lossless | resent packets (median) |')
    w('|---|---:|---:|---:|---:|---:|')
    for r in eg:
        w(f"| {r['rel']} | {fmt_loss(r['loss'])} | {med([x['goodput_gbps'] for x in r['clean']]):.2f} | "
          f"{med([x['goodput_gbps'] for x in r['lossy']]):.2f} | {r['ratio_median']:.3f} | "
          f"{med([x['retransmitted_pkts'] for x in r['lossy']]):.0f} |")
    w('')
    if meta['plots']:
        w('![engine](study/engine_goodput.png)')
        w('')
    e1 = next(r for r in eg if r['rel'] == 'sr' and r['loss'] == 1e-2)
    w(f"**Target: the real engine, 1 % injected loss, selective repeat keeps >= 0.8x of its lossless WRITE "
      f"goodput.** {e1['ratio_median']:.3f}: {'met' if e1['ratio_median'] >= 0.8 else 'NOT met'}.")
    w('')
    e5 = next(r for r in eg if r['rel'] == 'sr' and r['loss'] == 5e-2)
    r5 = [b['goodput_gbps'] / a['goodput_gbps'] for a, b in zip(e5['clean'], e5['lossy'])]
    w('The engine and the simulator agree in shape: go-back-N loses most of its goodput between 1e-3 '
      f"and 1e-2, selective repeat keeps most of it to 1 %, and at 5 % its median ratio is {e5['ratio_median']:.2f} "
      f"(pairs {min(r5):.2f} to {max(r5):.2f}: a loopback run on a shared machine moves "
      'by tens of percent from one run to the next, which is why each lossy run has its own lossless one). The engine\'s '
      'go-back-N falls further than the simulator\'s: there a lost NAK or resend costs the QP\'s full '
      'transport timeout (uroce-perf sets 14: 67 ms), long against a loopback round trip of tens of '
      'microseconds; in the simulator it is 1 ms.')
    w('')
    return '\n'.join(L)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if sys.argv[1] == '--doc-only':
        j = json.load(open(os.path.join(out_dir, 'results.json')))
        if j['meta']['plots'] and shutil.which('gnuplot'):
            draw(j['loss_grid'], j['incast'], j['engine'], j['meta'])
        with open(os.path.join(root, 'docs', 'study.md'), 'w') as f:
            f.write(write_doc(j['loss_grid'], j['incast'], j['engine'], j['meta']) + '\n')
        return
    build = sys.argv[1]
    quick = '--quick' in sys.argv
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.time()
    seeds = [1] if quick else [1, 2, 3]
    incast_ms = 10 if quick else 40
    pairs = 1 if quick else 3
    lg = loss_grid(build, seeds)
    ig = incast_grid(build, incast_ms, 1)
    eg = engine_grid(build, pairs, quick)
    meta = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'seconds': time.time() - t0, 'quick': quick,
            'seeds': seeds, 'incast_ms': incast_ms, 'seed': 1, 'pairs': pairs, 'plots': bool(shutil.which('gnuplot'))}
    with open(os.path.join(out_dir, 'results.json'), 'w') as f:
        json.dump({'meta': meta, 'loss_grid': lg, 'incast': ig, 'engine': eg}, f, indent=1)
    if meta['plots']:
        draw(lg, ig, eg, meta)
    meta['seconds'] = time.time() - t0
    with open(os.path.join(out_dir, 'results.json'), 'w') as f:
        json.dump({'meta': meta, 'loss_grid': lg, 'incast': ig, 'engine': eg}, f, indent=1)
    with open(os.path.join(root, 'docs', 'study.md'), 'w') as f:
        f.write(write_doc(lg, ig, eg, meta) + '\n')
    print(f'wrote docs/study.md ({meta["seconds"]:.0f} s)')


if __name__ == '__main__':
    main()
