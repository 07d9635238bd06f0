#!/usr/bin/env python3
"""The network shell's speed targets, measured in one run on this machine.

Starts `cairnd standalone` on a fresh directory (loopback, free ports; or `cairnd store` and
`cairnd proxy` with --split) and measures with
`cairn perf produce`:

  1. throughput, async durability: 100-byte messages, batching on, through the proxy, and the
     same workload appended through the library in-process (`--embedded`), alternating, RUNS
     times each; medians and their ratio (target: >= 1M messages/s and >= 0.5x embedded);
  2. publish latency, sync durability: the maximum rate first, then half of it and a low rate
     (--low-rate, 10,000 messages/s) for --latency-seconds each; p50/p99/p999, and where the
     time went: the proxy's stage histograms (client batch wait, network to the proxy, queue in
     the proxy, store, answer; docs/network.md) and the store's round writes and syncs, scraped
     before and after;
  3. the disk alone at each of those rates, just before and just after its run: `cairn-bench
     --case raw_steady_rounds` in the same directory, with the same messages per second and
     stored bytes per message (the store's cairn_store_bytes_acknowledged_total over the
     maximum-rate run), group-committed by rounds of one O_DIRECT write + fdatasync of one file,
     with no CPU, network or store in the way. Its p99 is what this disk allows a store at that
     rate; the target is a publish p99 of at most 1.3x it (against the better of the two runs).

Every result line is printed as `cairn perf` wrote it, then a summary.

  scripts/perf_shell.py [--build-dir build] [--runs 3] [--messages 2000000] [--partitions 4]
                        [--linger-us 1000] [--latency-linger-us 100] [--latency-seconds 10]
                        [--journal] [--split]

--journal gives the sync step's store a journal (`cairnd standalone --journal-dir`), in a
directory beside its data on the same device here. --split runs `cairnd store` and
`cairnd proxy` as two processes instead of `cairnd standalone` (one more loopback hop).

The throughput step also reports the CPU time spent per message: the client's (from
`cairn perf produce`), the daemons' (from /proc), and the embedded run's (its whole process).
On a machine with few cores, the client, the daemons and their kernel work share them, so the
proxy's messages/s is bounded by their sum per message.
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

METRICS_LINE = r'serving metrics on http://127\.0\.0\.1:([0-9]+)/metrics'


def fields(line):
    return dict(re.findall(r'(\S+)=(\S+)', line))


def wait_log(log, pattern, proc):
    """Waits up to 20 s for `pattern` in the log of daemon `proc`; returns its first group, or
    None if the daemon ended or the time ran out."""
    deadline = time.time() + 20
    while time.time() < deadline:
        m = re.search(pattern, open(log).read())
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return None


def start_daemon(cairnd, args, log, pattern):
    """Starts `cairnd args` with its metrics on a free loopback port, waits for `pattern` in its
    log; returns (process, pattern's first group, metrics port)."""
    proc = subprocess.Popen([cairnd] + args + ['--metrics-listen', '127.0.0.1:0'],
                            stderr=open(log, 'w'))
    found = [wait_log(log, pattern, proc)]
    if found[0] is not None:
        found.append(wait_log(log, METRICS_LINE, proc))
    if None in found:
        proc.kill()
        sys.exit(f'cairnd {args[0]} did not start:\n' + open(log).read())
    return (proc, *found)


def histogram(scrape, name):
    """The buckets of histogram `name` in a scrape: [(bound in s, cumulative count)]."""
    buckets = []
    for m in re.finditer(r'^' + name + r'_bucket\{le="([^"]+)"\} (\d+)$', scrape, re.MULTILINE):
        buckets.append((float('inf') if m.group(1) == '+Inf' else float(m.group(1)),
                        int(m.group(2))))
    return buckets


def describe(name, before, after, seconds, slow=None):
    """What histogram `name` counted between two scrapes: quantiles as bucket bounds, and with
    `slow` (a bucket bound, in seconds) the observations past it and the least time they took."""
    b, a = histogram(before, name), histogram(after, name)
    if not a or len(a) != len(b):
        return f'no {name} in the scrape'
    delta = [(bound, n - m) for (bound, n), (_, m) in zip(a, b)]
    count = delta[-1][1]
    if count == 0:
        return 'none'

    def quantile(q):
        for bound, cumulative in delta:
            if cumulative >= q * count:
                return bound
        return float('inf')

    def ms(bound):
        return f'over {delta[-2][0] * 1e3:,.0f} ms' if bound == float('inf') \
            else f'<= {bound * 1e3:.3g} ms'

    text = f'{count:,}, p50 {ms(quantile(0.5))}, p99 {ms(quantile(0.99))}, max {ms(quantile(1.0))}'
    if slow is not None:
        # Each observation past `slow` took at least its bucket's lower bound.
        over, least_seconds, previous = 0, 0.0, (0.0, 0)
        for bound, cumulative in delta:
            if previous[0] >= slow:
                over += cumulative - previous[1]
                least_seconds += (cumulative - previous[1]) * previous[0]
            previous = (bound, cumulative)
        text += (f'; {over:,} over {slow * 1e3:.2f} ms, together at least '
                 f'{100 * least_seconds / seconds:.1f}% of the {seconds:.0f} s')
    return text


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (all its threads)."""
    with open(f'/proc/{pid}/stat') as f:
        stat = f.read()
    after_name = stat[stat.rindex(')') + 2:].split()
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf('SC_CLK_TCK')


class Server:
    """`cairnd standalone`, or with split=True `cairnd store` and `cairnd proxy`."""

    def __init__(self, cairnd, data, durability, journal=False, split=False):
        store_flags = ['--durability', durability]
        if journal:
            store_flags += ['--journal-dir', os.path.join(data, 'journal')]
        if split:
            store, store_address, store_metrics = start_daemon(
                cairnd, ['store', '--data-dir', os.path.join(data, 'store'), '--listen',
                         '127.0.0.1:0'] + store_flags,
                os.path.join(data, 'store.log'), r'store node listening on (\S+)')
            proxy, self.address, proxy_metrics = start_daemon(
                cairnd, ['proxy', '--store', store_address, '--listen', '127.0.0.1:0'],
                os.path.join(data, 'proxy.log'), r'proxy listening on (\S+)')
            self.procs = [proxy, store]  # the proxy stopped first
            self.metrics_ports = [store_metrics, proxy_metrics]
        else:
            standalone, self.address, metrics = start_daemon(
                cairnd, ['standalone', '--data-dir', os.path.join(data, 'store'), '--listen',
                         '127.0.0.1:0'] + store_flags,
                os.path.join(data, 'standalone.log'), r'proxy listening on (\S+)')
            self.procs = [standalone]
            self.metrics_ports = [metrics]

    def scrape(self):
        """The daemons' /metrics, one after the other."""
        text = ''
        for port in self.metrics_ports:
            url = f'http://127.0.0.1:{port}/metrics'
            with urllib.request.urlopen(url, timeout=10) as reply:
                text += reply.read().decode()
        return text

    def cpu_seconds(self):
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def stop(self):
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)


def counter(scrape, name):
    """The value of counter `name` in a scrape (0 if absent)."""
    m = re.search(r'^' + name + r' (\S+)$', scrape, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def raw_rounds(bench, directory, rate, message_bytes, seconds):
    """`cairn-bench --case raw_steady_rounds` at `rate` messages/s of `message_bytes`: prints its
    line and returns its fields."""
    out = subprocess.run([bench, '--dir', directory, '--noraw', '--case', 'raw_steady_rounds',
                          f'--raw_rounds_messages_per_s={rate}',
                          f'--raw_rounds_message_bytes={message_bytes}',
                          f'--raw_rounds_seconds={seconds}'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ''
    print(line, flush=True)
    if out.returncode != 0:
        sys.exit('cairn-bench raw_steady_rounds failed: ' + out.stderr)
    return fields(line)


def perf(cairn, args):
    out = subprocess.run([cairn, 'perf', 'produce'] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ''
    print(line, flush=True)
    if out.returncode != 0:
        sys.exit('cairn perf produce failed: ' + out.stderr)
    return fields(line)


STAGES = [('batch wait in the client', 'cairn_proxy_send_batch_wait_seconds'),
          ('network to the proxy', 'cairn_proxy_send_network_seconds'),
          ('queue in the proxy', 'cairn_proxy_send_queue_seconds'),
          ('store (append to acknowledgement)', 'cairn_proxy_send_store_seconds'),
          ('acknowledgement to the answer', 'cairn_proxy_send_answer_seconds'),
          ('arrival to the answer', 'cairn_proxy_send_latency_seconds'),
          ('(over a store node) arrival on the node to its store\'s acknowledgement',
           'cairn_store_node_append_latency_seconds'),
          ("the store's round writes", 'cairn_store_write_seconds'),
          ("the store's round syncs", 'cairn_store_sync_seconds')]


def wake_floor(bench, directory):
    """One-way hand-off latencies between two threads on this machine (cairn-bench
    raw_thread_wake, raw_loopback_wake): what each change of thread on the publish path costs at
    least. Returns {name: fields}."""
    out = subprocess.run([bench, '--dir', directory, '--noraw', '--case',
                          'raw_thread_wake,raw_loopback_wake'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit('cairn-bench raw_*_wake failed: ' + out.stderr)
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith('system='):
            print(line, flush=True)
            f = fields(line)
            found[f['name']] = f
    return found


def latency_step(server, cairn, bench, raw_dir, rate, message_bytes, a):
    """Publishes at `rate` messages/s with sync durability for --latency-seconds, with the disk
    alone at the same rate just before and just after (its stalls come and go); returns what
    report_latency_step prints."""
    disk = [raw_rounds(bench, raw_dir, rate, message_bytes, a.latency_seconds)]
    before = server.scrape()
    r = perf(cairn, ['perf', '--proxy', server.address, '--linger-us',
                     str(a.latency_linger_us), '--size', '100', '--rate', str(rate),
                     '--duration', str(a.latency_seconds)])
    after = server.scrape()
    disk.append(raw_rounds(bench, raw_dir, rate, message_bytes, a.latency_seconds))
    seconds = float(r['seconds'])
    stages = [(label, describe(name, before, after, seconds,
                               slow=0.002048 if name.startswith('cairn_store_') and
                               not name.startswith('cairn_store_node') else None))
              for label, name in STAGES if histogram(after, name)]
    return {'rate': rate, 'publish': r, 'disk': disk, 'stages': stages}


def report_latency_step(step):
    r, disk = step['publish'], step['disk']
    p99_ms = float(r['p99_us']) / 1000
    print(f'  at {step["rate"]:,} msgs/s: achieved {float(r["append_msgs_per_s"]):,.0f} msgs/s, '
          f'publish p50 {float(r["p50_us"]) / 1000:.2f} ms, p99 {p99_ms:.2f} ms, '
          f'p999 {float(r["p999_us"]) / 1000:.2f} ms')
    print('    the disk alone at that rate (raw_steady_rounds: rounds of one write + fdatasync, '
          'nothing else in the way), just before and just after:')
    for when, d in zip(('before', 'after'), disk):
        print(f'      {when}: p50 {float(d["p50_us"]) / 1000:.2f} ms, '
              f'p99 {float(d["p99_us"]) / 1000:.2f} ms, max {float(d["max_us"]) / 1000:.2f} '
              f'ms; {int(d["rounds"]):,} rounds, {100 * float(d["slow_round_share"]):.1f}% '
              f'of the time in rounds over 2 ms')
    best_ms = min(float(d['p99_us']) for d in disk) / 1000
    worst_ms = max(float(d['p99_us']) for d in disk) / 1000
    ratio = p99_ms / best_ms
    print(f'    publish p99 / disk-alone p99: {ratio:.2f} against the better disk run '
          f'({p99_ms / worst_ms:.2f} against the worse); target <= 1.3: '
          f'{"met" if ratio <= 1.3 else "NOT met"}')
    print('    where the time went (the proxy\'s histograms, bucket bounds):')
    for label, text in step['stages']:
        print(f'      {label}: {text}')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--build-dir', default='build')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--messages', type=int, default=2000000)
    parser.add_argument('--partitions', type=int, default=4)
    parser.add_argument('--linger-us', type=int, default=1000)
    parser.add_argument('--latency-linger-us', type=int, default=100)
    parser.add_argument('--latency-seconds', type=float, default=10)
    parser.add_argument('--low-rate', type=int, default=10000,
                        help='the low rate of the latency step, messages/s')
    parser.add_argument('--journal', action='store_true',
                        help="give the sync step's store a journal")
    parser.add_argument('--split', action='store_true',
                        help='cairnd store and cairnd proxy as two processes')
    a = parser.parse_args()
    cairnd = os.path.join(a.build_dir, 'net', 'cairnd')
    cairn = os.path.join(a.build_dir, 'net', 'cli', 'cairn')
    bench = os.path.join(a.build_dir, 'bench', 'cairn-bench')
    work = tempfile.mkdtemp(prefix='cairn-perf-')
    try:
        common = ['--size', '100', '--messages', str(a.messages)]
        # 1. Throughput, async.
        proxy_rates, embedded_rates = [], []
        client_ns, server_ns, embedded_ns = [], [], []  # CPU per message, per run
        for run in range(a.runs):
            data = os.path.join(work, f'async-{run}')
            os.makedirs(data)
            server = Server(cairnd, data, 'async', split=a.split)
            try:
                subprocess.run([cairn, 'topics', 'create', 'perf', '--partitions',
                                str(a.partitions), '--proxy', server.address], check=True,
                               stdout=subprocess.DEVNULL)
                server_before = server.cpu_seconds()
                r = perf(cairn, ['perf', '--proxy', server.address, '--linger-us',
                                 str(a.linger_us)] + common)
                server_cpu = server.cpu_seconds() - server_before
                proxy_rates.append(float(r['append_msgs_per_s']))
                acked = int(r['case'].split('x')[0])
                client_ns.append(float(r['cpu_ns_per_msg']))
                server_ns.append(server_cpu * 1e9 / acked if acked else 0)
            finally:
                server.stop()
            r = perf(cairn, ['perf', '--embedded', os.path.join(data, 'embedded'),
                             '--partitions', str(a.partitions), '--durability', 'async'] + common)
            embedded_rates.append(float(r['append_msgs_per_s']))
            embedded_ns.append(float(r['cpu_ns_per_msg']))
        # 2. Latency, sync: the maximum rate, then half of it, then a low rate.
        data = os.path.join(work, 'sync')
        os.makedirs(data)
        server = Server(cairnd, data, 'sync', a.journal, a.split)
        try:
            subprocess.run([cairn, 'topics', 'create', 'perf', '--partitions', str(a.partitions),
                            '--proxy', server.address], check=True, stdout=subprocess.DEVNULL)
            r = perf(cairn, ['perf', '--proxy', server.address, '--linger-us',
                             str(a.latency_linger_us), '--size', '100', '--messages',
                             str(a.messages // 2)])
            max_rate = float(r['append_msgs_per_s'])
            scrape = server.scrape()
            # The disk alone is measured with the stored bytes per message of the maximum-rate
            # run.
            stored = counter(scrape, 'cairn_store_bytes_acknowledged_total')
            acked = int(r['case'].split('x')[0])
            message_bytes = max(1, round(stored / acked)) if acked and stored > 0 else 110
            steps = [latency_step(server, cairn, bench, os.path.join(data, 'raw'), rate,
                                  message_bytes, a)
                     for rate in (int(max_rate / 2), a.low_rate)]
            wakes = wake_floor(bench, os.path.join(data, 'raw'))
        finally:
            server.stop()
        proxy = statistics.median(proxy_rates)
        embedded = statistics.median(embedded_rates)
        print()
        print(f'async produce, 100 B, {a.partitions} partitions, batches <= 1000 messages / '
              f'128 KiB, linger {a.linger_us} us, medians of {a.runs}:')
        print(f'  proxy    {proxy:,.0f} msgs/s   (runs: ' +
              ', '.join(f'{x:,.0f}' for x in proxy_rates) + ')')
        print(f'  embedded {embedded:,.0f} msgs/s   (runs: ' +
              ', '.join(f'{x:,.0f}' for x in embedded_rates) + ')')
        print(f'  ratio proxy/embedded {proxy / embedded:.2f} (per run: ' +
              ', '.join(f'{p / e:.2f}' for p, e in zip(proxy_rates, embedded_rates)) + ')')
        print(f'  target >= 1,000,000 msgs/s: {"met" if proxy >= 1e6 else "NOT met"}; '
              f'target >= 0.5x embedded: {"met" if proxy >= 0.5 * embedded else "NOT met"}')
        client, daemons = statistics.median(client_ns), statistics.median(server_ns)
        alone = statistics.median(embedded_ns)
        print(f'  CPU per message (medians): through the proxy {client + daemons:,.0f} ns '
              f'(client {client:,.0f} + {"daemons" if a.split else "daemon"} {daemons:,.0f}); '
              f'embedded {alone:,.0f} ns; {(client + daemons) / alone:.1f}x on '
              f'{os.cpu_count()} cores')
        print(f'sync produce{" (journal on the same device)" if a.journal else ""}'
              f'{" (proxy over a store node)" if a.split else ""}: maximum {max_rate:,.0f} msgs/s; '
              f'linger {a.latency_linger_us} us, {message_bytes} stored bytes a message')
        for step in steps:
            report_latency_step(step)
        thread, tcp = wakes['raw_thread_wake'], wakes['raw_loopback_wake']
        # The client's sending thread to its network thread, the loop to the store's worker and
        # back (a store node adds its own loop and worker); the socket both ways (twice more over
        # a store node).
        threads, sockets = (5, 4) if a.split else (3, 2)
        print(f'  hand-offs on the path: {threads} between threads (this machine: p50 '
              f'{float(thread["p50_us"]):.1f} us, p99 {float(thread["p99_us"]):.1f} us each) and '
              f'{sockets} over loopback TCP (p50 {float(tcp["p50_us"]):.1f} us, p99 '
              f'{float(tcp["p99_us"]):.1f} us each): together at least '
              f'{(threads * float(thread["p50_us"]) + sockets * float(tcp["p50_us"])) / 1000:.3f}'
              f' ms at the p50 of each')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
