"""Two hosts for benchmarks: network namespaces A and B joined by a veth pair (root only).
Each host runs commands with no uroce setting of its own; servers are waited for by their
listening TCP port (the out-of-band exchange), never by a fixed sleep."""
import json
import os
import subprocess


def sh(*cmd):
    subprocess.run(cmd, check=True)


class Hosts:
    def __init__(self, name, subnet):
        tag = os.getpid()
        self.ns = (f'{name}-a-{tag}', f'{name}-b-{tag}')
        self.devs = (f'{name[:4]}a{tag % 10000}', f'{name[:4]}b{tag % 10000}')
        self.net = f'{subnet}.{tag % 200 + 20}'
        self.port = 30000 + tag % 20000

    def next_port(self):
        """A TCP port for the next pair's out-of-band exchange, new each time."""
        self.port += 1
        return self.port

    def addr(self, host):
        """host 1 (A) or 2 (B)."""
        return f'{self.net}.{host}'

    def setup(self):
        a, b = self.ns
        sh('ip', 'netns', 'add', a)
        sh('ip', 'netns', 'add', b)
        sh('ip', 'link', 'add', self.devs[0], 'type', 'veth', 'peer', 'name', self.devs[1])
        for host, (ns, dev) in enumerate(zip(self.ns, self.devs), start=1):
            sh('ip', 'link', 'set', dev, 'netns', ns)
            sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', f'net.ipv6.conf.{dev}.accept_dad=0')
            sh('ip', '-n', ns, 'addr', 'add', f'{self.addr(host)}/24', 'dev', dev)
            sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
            sh('ip', '-n', ns, 'link', 'set', dev, 'up')

    def set_mtu(self, mtu):
        for ns, dev in zip(self.ns, self.devs):
            sh('ip', '-n', ns, 'link', 'set', dev, 'mtu', str(mtu))

    def on(self, host, *env):
        """The command prefix that runs on host 1 or 2, with env ('NAME=value', ...) set."""
        return ['ip', 'netns', 'exec', self.ns[host - 1], 'env', '-u', 'UROCE_DEVICES', *env]

    def kill(self, comm):
        """Ends every process of that name on both hosts (a daemon that lingers)."""
        for ns in self.ns:
            for pid in subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True).stdout.split():
                try:
                    if open(f'/proc/{pid}/comm').read().strip() == comm:
                        subprocess.run(['kill', pid])
                except OSError:
                    pass

    def cleanup(self):
        for ns in self.ns:
            for pid in subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True).stdout.split():
                subprocess.run(['kill', '-9', pid])
            subprocess.run(['ip', 'netns', 'del', ns])

    def listening(self, host, port, tries=200):
        """Returns once something listens on TCP port `port` on the host, at most ~20 s."""
        want = f':{port:04X} '
        for _ in range(tries):
            tcp = subprocess.run(['ip', 'netns', 'exec', self.ns[host - 1], 'cat', '/proc/net/tcp', '/proc/net/tcp6'],
                                 capture_output=True, text=True).stdout
            if any(want in l and l.split()[3] == '0A' for l in tcp.splitlines()[1:]):
                return
            subprocess.run(['sleep', '0.1'])
        raise SystemExit(f'nothing listens on port {port} on host {host}')

    def sockperf(self, mode, args, tcp=False):
        """sockperf MODE (pp, tp) from host 2 to a server on host 1, with `args` (-m, -t ...):
        the client's output, standard error included."""
        p = self.next_port()
        proto = ['--tcp'] if tcp else []
        srv = subprocess.Popen(self.on(1) + ['timeout', '60', 'sockperf', 'sr', *proto, '-i', self.addr(1), '-p', str(p)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if tcp:
            self.listening(1, p)
        else:
            subprocess.run(['sleep', '0.3'])  # a UDP server has nothing to wait for; sockperf retries its first message
        cli = subprocess.run(self.on(2) + ['timeout', '60', 'sockperf', mode, *proto, '-i', self.addr(1), '-p', str(p),
                                           *args], capture_output=True, text=True)
        srv.terminate()  # timeout passes it on to sockperf
        srv.wait()
        return cli.stdout + cli.stderr

    def perf_pair(self, perf, port, args, env=(), server_as=(), server_args=()):
        """uroce-perf: a server on host 1 (run through server_as, e.g. setpriv, with server_args),
        a client on host 2 with `args` (--op ... --json); its last JSON line, which must say
        verified, with the client's standard error under 'stderr'."""
        srv = subprocess.Popen(self.on(1, *env) + ['timeout', '120', *server_as, perf, '--server', '--port', str(port),
                                                   *server_args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.listening(1, port)
        cli = subprocess.run(self.on(2, *env) + ['timeout', '120', perf, '--connect', self.addr(1), '--port', str(port),
                                                 *args], capture_output=True, text=True)
        srv.wait()
        r = json.loads(cli.stdout.strip().splitlines()[-1]) if cli.stdout.strip() else {}
        if not r.get('verified'):
            raise SystemExit(f'uroce-perf failed or unverified: {cli.stdout} {cli.stderr}')
        r['stderr'] = cli.stderr
        return r


def uroce_perf(build):
    return os.path.join(os.path.abspath(build), 'bin', 'uroce-perf')


def bench_args(doc, pairs):
    """BUILD_DIR [--pairs N] [--out FILE] from the command line, as root: (build, pairs, out)."""
    argv, out, rest = __import__('sys').argv[1:], None, []
    while argv:
        a = argv.pop(0)
        if a == '--pairs':
            pairs = int(argv.pop(0))
        elif a == '--out':
            out = argv.pop(0)
        else:
            rest.append(a)
    if len(rest) != 1 or os.geteuid() != 0:
        raise SystemExit(doc)
    return rest[0], pairs, out
