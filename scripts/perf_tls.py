#!/usr/bin/env python3
"""What TLS costs on the publish path, measured in one run on this machine.

Starts `cairnd standalone` on a fresh directory, without TLS and with TLS (mutual: client
certificates required, from scripts/make_test_certs.sh), alternating, RUNS times each, and
measures with `cairn perf produce`:

  1. throughput, async durability: 100-byte messages, batching on, through the proxy; medians
     and their ratio, TLS on over TLS off (target: >= 0.8);
  2. publish latency, sync durability, at a fixed rate (--rate, 200,000 messages/s; 0: half
     the median plaintext throughput of step 1, which a sync store may not keep up with) for
     --latency-seconds: p50/p99/p999 with and without TLS, each run on a fresh directory.

  scripts/perf_tls.py [--build-dir build] [--runs 3] [--messages 2000000] [--partitions 4]
                      [--linger-us 1000] [--latency-linger-us 100] [--latency-seconds 5]
                      [--rate 200000]

Every result line is printed as `cairn perf` wrote it, then a summary. The machine is shared:
quote the medians and the ratio, measured together, rather than one figure alone.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_shell import perf, start_daemon  # noqa: E402


class Standalone:
    """`cairnd standalone` on `data`, with TLS when `certs` (a directory) is given."""

    def __init__(self, cairnd, data, durability, certs=None):
        flags = ['standalone', '--data-dir', data, '--listen', '127.0.0.1:0',
                 '--durability', durability]
        self.client_flags = []
        if certs:
            flags += ['--tls-ca', f'{certs}/ca.crt', '--tls-cert', f'{certs}/server.crt',
                      '--tls-key', f'{certs}/server.key', '--tls-require-client-cert']
            self.client_flags = ['--tls-ca', f'{certs}/ca.crt', '--tls-cert',
                                 f'{certs}/perf.crt', '--tls-key', f'{certs}/perf.key']
        self.proc, self.address, _ = start_daemon(cairnd, flags, data + '.log',
                                                  r'proxy listening on (\S+)')

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--build-dir', default='build')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--messages', type=int, default=2000000)
    parser.add_argument('--partitions', type=int, default=4)
    parser.add_argument('--linger-us', type=int, default=1000)
    parser.add_argument('--latency-linger-us', type=int, default=100)
    parser.add_argument('--latency-seconds', type=float, default=5)
    parser.add_argument('--rate', type=int, default=200000,
                        help='messages/s of the latency step (0: half the plaintext median)')
    a = parser.parse_args()
    cairnd = os.path.join(a.build_dir, 'net', 'cairnd')
    cairn = os.path.join(a.build_dir, 'net', 'cli', 'cairn')
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix='cairn-perf-tls-')
    try:
        certs = os.path.join(work, 'certs')
        subprocess.run(['bash', os.path.join(root, 'scripts', 'make_test_certs.sh'), certs,
                        '--client', 'perf'], check=True, stdout=subprocess.DEVNULL)
        modes = [('plaintext', None), ('tls', certs)]

        def run(mode, certs_dir, durability, tag, args):
            data = os.path.join(work, f'{tag}-{mode}')
            server = Standalone(cairnd, data, durability, certs_dir)
            try:
                subprocess.run([cairn, 'topics', 'create', 'perf', '--partitions',
                                str(a.partitions), '--proxy', server.address] +
                               server.client_flags, check=True, stdout=subprocess.DEVNULL)
                return perf(cairn, ['perf', '--proxy', server.address] + server.client_flags +
                            args)
            finally:
                server.stop()

        rates = {mode: [] for mode, _ in modes}
        cpu = {mode: [] for mode, _ in modes}
        for i in range(a.runs):
            for mode, certs_dir in (modes if i % 2 == 0 else list(reversed(modes))):
                r = run(mode, certs_dir, 'async', f'async-{i}',
                        ['--linger-us', str(a.linger_us), '--size', '100', '--messages',
                         str(a.messages)])
                rates[mode].append(float(r['append_msgs_per_s']))
                cpu[mode].append(float(r['cpu_ns_per_msg']))
        plain = statistics.median(rates['plaintext'])
        secured = statistics.median(rates['tls'])
        rate = a.rate or int(plain / 2)
        latency = {}
        for mode, certs_dir in modes:
            latency[mode] = run(mode, certs_dir, 'sync', 'sync',
                                ['--linger-us', str(a.latency_linger_us), '--size', '100',
                                 '--rate', str(rate), '--duration', str(a.latency_seconds)])
        print()
        print(f'throughput, async, 100-byte messages, {a.runs} runs each, alternating:')
        for mode, _ in modes:
            print(f'  {mode}: median {statistics.median(rates[mode]):,.0f} msgs/s '
                  f'(runs: {", ".join(f"{x:,.0f}" for x in rates[mode])}); client CPU '
                  f'{statistics.median(cpu[mode]):.0f} ns/msg')
        ratio = secured / plain
        print(f'  TLS / plaintext: {ratio:.2f}; target >= 0.8: '
              f'{"met" if ratio >= 0.8 else "NOT met"}')
        print(f'publish latency, sync durability, at {rate:,} msgs/s for {a.latency_seconds:g} s:')
        for mode, _ in modes:
            r = latency[mode]
            print(f'  {mode}: achieved {float(r["append_msgs_per_s"]):,.0f} msgs/s, p50 '
                  f'{float(r["p50_us"]) / 1000:.2f} ms, p99 {float(r["p99_us"]) / 1000:.2f} ms, '
                  f'p999 {float(r["p999_us"]) / 1000:.2f} ms')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
