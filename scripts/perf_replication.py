#!/usr/bin/env python3
"""Replicated ledgers' speed, measured side by side with a proxy over one store node, in one run.

Starts, on loopback and free ports, a metadata node (`cairnd store` hosting the metadata
service), three `cairnd store` nodes and two proxies: one over a single store node
(`cairnd proxy --store`, the baseline) and one replicating every ledger on the three (`cairnd
proxy --stores`, E=Qw=3, Qa=2). Every store node has its own data directory on this machine's
one disk. Then, with `cairn perf produce` (100-byte messages):

  1. throughput, async durability: the two proxies alternately, RUNS times each; medians and
     their ratio (target: replicated >= 0.4x the single node);
  2. publish latency, sync durability: both proxies' maximum rates, then both at half the lower
     of the two (a rate both sustain) for --latency-seconds each, alternately; p50/p99/p999 and
     the ratio of the p99s (target: replicated <= 1.25x the single node);
  3. ensemble change under load: four store nodes (so that a replacement exists), sync, at a
     quarter of the rate of step 2; one store node of the current ensemble is SIGKILLed after a
     third of the run; the longest publish latency and p999 of the run, against the same run
     without a kill;
     and the disk alone at that rate (`cairn-bench --case raw_steady_rounds`), one writer and
     three side by side: the three replicas here share one device, which the target assumes
     they do not;
  4. recovery of an open ledger whose writer died (`cairn-replication-bench recover`): for
     each MIB:TAIL of --recover, a ledger of MIB MiB whose writer sends TAIL more batches
     without waiting and dies: the time from the start of the recovery to the closed record, and
     how many batches it found past the last-add-confirmed (those that reached the nodes).

  scripts/perf_replication.py [--build-dir build] [--runs 3] [--messages 2000000]
                              [--latency-seconds 10] [--recover 64:8,1024:8,1024:256]

On this machine the client, the proxies and four store nodes share two cores and one disk: the
replicated proxy writes every byte three times to the same device, so the disk and the cores,
not the protocol, bound the first ratio; the script says how much CPU each side spent.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# The helpers the single-node script uses: result lines, daemon logs, CPU time, cairn perf.
from perf_shell import cpu_seconds, fields, perf, wait_log

LISTEN = r'listening on (\S+)'


def start(cairnd, args, log):
    proc = subprocess.Popen([cairnd] + args + ['--metrics-listen', 'none'],
                            stdout=subprocess.DEVNULL, stderr=open(log, 'w'))
    address = wait_log(log, LISTEN, proc)
    if address is None:
        sys.exit(f'daemon did not start: see {log}')
    return proc, address


class Cluster:
    """A metadata node, three store nodes for the replicated proxy and one for the baseline."""

    def __init__(self, cairnd, work, durability, replicas=3):
        self.cairnd, self.work = cairnd, work
        os.makedirs(work, exist_ok=True)
        self.procs = []
        flags = ['--durability', durability]

        def store(name, extra=()):
            proc, address = start(cairnd, ['store', '--data-dir', os.path.join(work, name),
                                           '--listen', '127.0.0.1:0'] + flags + list(extra),
                                  os.path.join(work, name + '.log'))
            self.procs.append(proc)
            return proc, address

        _, self.metadata = store('meta')
        self.replicas = [store(f'replica-{i}', ['--metadata-dir', 'none'])
                         for i in range(replicas)]
        self.single_store = store('single')
        proc, self.single = start(cairnd, ['proxy', '--store', self.single_store[1], '--listen',
                                           '127.0.0.1:0'], os.path.join(work, 'proxy-single.log'))
        self.single_proxy = proc
        self.procs.append(proc)
        proc, self.replicated = start(
            cairnd, ['proxy', '--stores', ','.join(a for _, a in self.replicas), '--metadata',
                     self.metadata, '--ensemble', '3', '--write-quorum', '3', '--ack-quorum', '2',
                     '--replica-timeout-ms', '1000', '--listen', '127.0.0.1:0'],
            os.path.join(work, 'proxy-replicated.log'))
        self.replicated_proxy = proc
        self.procs.append(proc)

    def cpu(self, which):
        """CPU seconds so far of (the proxy, its store nodes together)."""
        if which == 'single':
            proxy, stores = self.single_proxy, [self.single_store[0]]
        else:
            proxy, stores = self.replicated_proxy, [p for p, _ in self.replicas]
        return (cpu_seconds(proxy.pid),
                sum(cpu_seconds(p.pid) for p in stores if p.poll() is None))

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


def create_topic(cairn, proxy, name):
    subprocess.run([cairn, 'topics', 'create', name, '--partitions', '1', '--proxy', proxy],
                   check=True, stdout=subprocess.DEVNULL)


def ensemble_of_newest(cairn, metadata):
    out = subprocess.run([cairn, 'replicated-ledgers', '--metadata', metadata, '--json'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        return []
    ledgers = json.loads(out.stdout).get('replicated_ledgers', [])
    return ledgers[-1]['ensemble'] if ledgers else []


def raw_rounds(cairn_bench, directories, rate, seconds):
    """`cairn-bench --case raw_steady_rounds` at `rate` 110-byte messages/s (100 bytes and the
    batch's share of framing), one process per directory, side by side: their result fields."""
    procs = []
    for d in directories:
        os.makedirs(d, exist_ok=True)
        procs.append(subprocess.Popen(
            [cairn_bench, '--dir', d, '--noraw', '--case', 'raw_steady_rounds',
             f'--raw_rounds_messages_per_s={rate}', '--raw_rounds_message_bytes=110',
             f'--raw_rounds_seconds={seconds}'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit('cairn-bench raw_steady_rounds failed: ' + err)
        line = out.strip().splitlines()[-1]
        print(line, flush=True)
        results.append(fields(line))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--build-dir', default='build')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--messages', type=int, default=2000000)
    parser.add_argument('--latency-seconds', type=float, default=10)
    parser.add_argument('--recover', default='64:8,1024:8,1024:256',
                        help='MIB:TAIL,...: ledger sizes and batches in flight when the writer dies')
    a = parser.parse_args()
    cairnd = os.path.join(a.build_dir, 'net', 'cairnd')
    cairn = os.path.join(a.build_dir, 'net', 'cli', 'cairn')
    bench = os.path.join(a.build_dir, 'bench', 'cairn-replication-bench')
    cairn_bench = os.path.join(a.build_dir, 'bench', 'cairn-bench')
    work = tempfile.mkdtemp(prefix='cairn-perf-replication-')
    common = ['--size', '100']
    try:
        # 1. Throughput, async.
        rates = {'single': [], 'replicated': []}
        cpu_ns = {'single': [], 'replicated': []}  # (client, proxy, store nodes) per message
        cluster = Cluster(cairnd, os.path.join(work, 'async'), 'async')
        try:
            for run in range(a.runs):
                for which in ('single', 'replicated'):
                    proxy = getattr(cluster, which)
                    topic = f'async-{run}'
                    create_topic(cairn, proxy, topic)
                    before = cluster.cpu(which)
                    r = perf(cairn, [topic, '--proxy', proxy, '--messages', str(a.messages)] + common)
                    acked = max(1, int(r['case'].split('x')[0]))
                    after = cluster.cpu(which)
                    rates[which].append(float(r['append_msgs_per_s']))
                    cpu_ns[which].append((float(r['cpu_ns_per_msg']),
                                          (after[0] - before[0]) * 1e9 / acked,
                                          (after[1] - before[1]) * 1e9 / acked))
        finally:
            cluster.stop()
        # 2. Latency, sync: both maximum rates first; then both proxies at half the lower one,
        # a rate both sustain, so that the comparison is of latency, not of queueing.
        cluster = Cluster(cairnd, os.path.join(work, 'sync'), 'sync')
        latency = {'single': [], 'replicated': []}
        maxima = {}
        try:
            for which in ('single', 'replicated'):
                proxy = getattr(cluster, which)
                create_topic(cairn, proxy, 'max')
                r = perf(cairn, ['max', '--proxy', proxy, '--linger-us', '100',
                                 '--messages', str(a.messages // 2)] + common)
                maxima[which] = float(r['append_msgs_per_s'])
            half = int(min(maxima.values()) / 2)
            for run in range(2):
                for which in ('single', 'replicated'):
                    proxy = getattr(cluster, which)
                    topic = f'sync-{run}'
                    create_topic(cairn, proxy, topic)
                    latency[which].append(perf(cairn, [topic, '--proxy', proxy, '--rate', str(half),
                                                       '--duration', str(a.latency_seconds),
                                                       '--linger-us', '100'] + common))
        finally:
            cluster.stop()
        # The disk alone at that rate (cairn-bench raw_steady_rounds: rounds of one O_DIRECT write
        # and fdatasync, no CPU, network or store in the way): one writer, as the single node
        # has, then three side by side, as the three replicas have on this one device.
        raw = {}
        if os.path.exists(cairn_bench):
            raw_dir = os.path.join(work, 'raw')
            raw['one'] = raw_rounds(cairn_bench, [os.path.join(raw_dir, 'a')], half,
                                    a.latency_seconds)
            raw['three'] = raw_rounds(cairn_bench, [os.path.join(raw_dir, x) for x in 'bcd'],
                                      half, a.latency_seconds)
        # 3. Ensemble change under load: four store nodes, so that a replacement exists.
        cluster = Cluster(cairnd, os.path.join(work, 'kill'), 'sync', replicas=4)
        try:
            quarter = max(1000, half // 2)
            create_topic(cairn, cluster.replicated, 'calm')
            calm = perf(cairn, ['calm', '--proxy', cluster.replicated, '--rate', str(quarter),
                                '--duration', str(a.latency_seconds), '--linger-us', '100'] + common)
            create_topic(cairn, cluster.replicated, 'kill')
            run = subprocess.Popen([cairn, 'perf', 'produce', 'kill', '--proxy', cluster.replicated,
                                    '--rate', str(quarter), '--duration', str(a.latency_seconds),
                                    '--linger-us', '100'] + common,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(a.latency_seconds / 3)
            ensemble = ensemble_of_newest(cairn, cluster.metadata)
            killed = None
            for proc, address in cluster.replicas:
                if address in ensemble:
                    proc.kill()
                    killed = address
                    break
            out, err = run.communicate()
            line = out.strip().splitlines()[-1] if out.strip() else ''
            print(line, flush=True)
            if run.returncode != 0:
                sys.exit('cairn perf produce (kill run) failed: ' + err)
            kill = fields(line)
        finally:
            cluster.stop()
        # 4. Recovery.
        recoveries = []
        if os.path.exists(bench):
            for mib, tail in [tuple(int(y) for y in x.split(':')) for x in a.recover.split(',') if x]:
                cluster = Cluster(cairnd, os.path.join(work, f'recover-{mib}-{tail}'), 'sync')
                try:
                    out = subprocess.run([bench, 'recover', '--metadata', cluster.metadata,
                                          '--stores', ','.join(x for _, x in cluster.replicas),
                                          '--mib', str(mib), '--tail_batches', str(tail)],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    print(out.stdout.strip(), flush=True)
                    if out.returncode != 0:
                        sys.exit('cairn-replication-bench recover failed: ' + out.stderr)
                    recoveries.append((tail, fields(out.stdout.strip().splitlines()[-1])))
                finally:
                    cluster.stop()

        print()
        single, replicated = statistics.median(rates['single']), statistics.median(rates['replicated'])
        print(f'async produce, 100 B, one partition, medians of {a.runs}:')
        print(f'  one store node     {single:,.0f} msgs/s (runs: ' +
              ', '.join(f'{x:,.0f}' for x in rates['single']) + ')')
        print(f'  replicated (3, Qa 2) {replicated:,.0f} msgs/s (runs: ' +
              ', '.join(f'{x:,.0f}' for x in rates['replicated']) + ')')
        print(f'  ratio {replicated / single:.2f} (target >= 0.4: '
              f'{"met" if replicated >= 0.4 * single else "NOT met"})')
        med = {w: [statistics.median(x[i] for x in cpu_ns[w]) for i in range(3)] for w in cpu_ns}
        for w in ('single', 'replicated'):
            c, p, n = med[w]
            print(f'  CPU per message, {w:10}: {c + p + n:,.0f} ns = client {c:,.0f} + proxy '
                  f'{p:,.0f} + store node(s) {n:,.0f}')
        c, p, n = med['single']
        # Were replication free for the proxy and every node as cheap as the single one, the
        # replicated setup would still spend the store node's CPU three times: with every core
        # busy, the best ratio this machine allows is then this.
        bound = (c + p + n) / (c + p + 3 * n)
        print(f'  CPU bound on {os.cpu_count()} cores (client and proxy as with one node, each of '
              f'three nodes as the one): ratio <= {bound:.2f}; measured {replicated / single:.2f}')
        p99 = {w: statistics.median(float(r['p99_us']) for r in latency[w]) for w in latency}
        print(f'sync produce: maximum rates: one store node {maxima["single"]:,.0f} msgs/s, '
              f'replicated {maxima["replicated"]:,.0f} msgs/s; at {half:,} msgs/s (half the lower '
              f'one), two runs each:')
        for w in ('single', 'replicated'):
            print(f'  {w:10} p99 ' + ', '.join(f'{float(r["p99_us"]) / 1000:.2f}' for r in latency[w]) +
                  ' ms; p50 ' + ', '.join(f'{float(r["p50_us"]) / 1000:.2f}' for r in latency[w]) +
                  ' ms; p999 ' + ', '.join(f'{float(r["p999_us"]) / 1000:.2f}' for r in latency[w]) +
                  ' ms')
        print(f'  ratio of the median p99s {p99["replicated"] / p99["single"]:.2f} (target <= 1.25: '
              f'{"met" if p99["replicated"] <= 1.25 * p99["single"] else "NOT met"})')
        if raw:
            one = float(raw['one'][0]['p99_us']) / 1000
            three = [float(r['p99_us']) / 1000 for r in raw['three']]
            print(f'  the disk alone at that rate: one writer p99 {one:.2f} ms; three side by side '
                  f'(as three replicas on this one device) p99 ' +
                  ', '.join(f'{x:.2f}' for x in three) + f' ms: {max(three) / one:.1f}x the one')
        print(f'ensemble change under load ({quarter:,} msgs/s, sync): store node {killed} killed '
              f'a third into the run: max {float(kill["max_us"]) / 1000:.1f} ms, p999 '
              f'{float(kill["p999_us"]) / 1000:.1f} ms, p99 {float(kill["p99_us"]) / 1000:.2f} ms; '
              f'the same run without a kill: max {float(calm["max_us"]) / 1000:.1f} ms, p999 '
              f'{float(calm["p999_us"]) / 1000:.1f} ms')
        for tail, r in recoveries:
            print(f'recovery of an open ledger of {r["ledger_mib"]} MiB whose writer died with '
                  f'{tail} batches sent unconfirmed: {float(r["recover_ms"]):.1f} ms '
                  f'({r["recovered_batches"]} of them had reached the nodes: read and written back)')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
