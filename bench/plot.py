#!/usr/bin/env python3
"""Draws bench/results/latency.png and bandwidth.png (every system on each) from latest.json,
with gnuplot if it is installed (make bench installs it). bench/run.py runs it at the end."""
import json, os, shutil, statistics, subprocess

here = os.path.dirname(os.path.abspath(__file__))
results = os.path.join(here, 'results')


def human(z):
    return f'{z >> 20} MiB' if z >= 1 << 20 else f'{z >> 10} KiB' if z >= 1024 else f'{z} B'


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def plot(name, title, ylabel, data):
    names = list(data)
    sizes = sorted({int(z) for n in names for z in data[n]})
    dat = os.path.join(results, f'{name}.dat')
    with open(dat, 'w') as f:
        for z in sizes:
            vals = [med(data[n].get(str(z), [])) for n in names]
            f.write(f'{z} ' + ' '.join('NaN' if v is None else f'{v:.4f}' for v in vals) + '\n')
    plots = ', '.join(f"'{dat}' using 1:{i + 2} with linespoints lw 2 title '{n}'" for i, n in enumerate(names))
    xtics = ', '.join(f'"{human(z)}" {z}' for z in sizes)
    script = (f"set terminal pngcairo size 900,560 font ',11'; set output '{os.path.join(results, name)}.png';"
              f"set title '{title}'; set xlabel 'message size'; set ylabel '{ylabel}'; set logscale x 2;"
              f"set xtics ({xtics}); set logscale y 10; set grid; set key outside right;"
              f"set datafile missing 'NaN'; plot {plots}")
    subprocess.run(['gnuplot', '-e', script], check=False)
    os.remove(dat)


if __name__ == '__main__':
    if not shutil.which('gnuplot'):
        raise SystemExit('gnuplot is not installed (make bench installs it): no plots')
    j = json.load(open(os.path.join(results, 'latest.json')))
    when = j.get('date', '')
    plot('latency', f"Half round trip, p50 ({when}{', ' if when else ''}{j['rounds']} rounds)", 'µs (log)', j['latency_us'])
    plot('bandwidth', f"Bandwidth ({when}{', ' if when else ''}{j['rounds']} rounds)", 'Gb/s (log)', j['bandwidth_gbps'])
