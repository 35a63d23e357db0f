#!/usr/bin/env python3
"""Start-up time to /readyz: a fresh data dir versus a log of N entries, alternating.

    scripts/bench/startup.py TIDEGATE_BINARY WORK_DIR ENTRIES RUNS

Writes a log of ENTRIES entries (make_log.py), starts tidegate on it once without a snapshot (a
full replay, which also writes the snapshot), then RUNS times alternately on a fresh data dir and
on the big log (which now starts from its snapshot). Each time is from spawning the process to the
first 200 from /readyz, polled every millisecond. Prints one `key=value` line per measure.
"""
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/readyz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def start_once(binary, data_dir, snapshot_every):
    port = free_port()
    config = os.path.join(os.path.dirname(data_dir), "bench.toml")
    with open(config, "w") as f:
        f.write("snapshot_every = %d\n" % snapshot_every)
    began = time.perf_counter()
    proc = subprocess.Popen(
        [binary, "serve", "--address", "127.0.0.1", "--port", str(port), "--config", config,
         "--data-dir", data_dir],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not ready(port):
            if proc.poll() is not None:
                raise SystemExit("tidegate exited: " + proc.stderr.read().decode())
            if time.perf_counter() - began > 600:
                raise SystemExit("tidegate not ready after 600 s")
            time.sleep(0.001)
        elapsed = time.perf_counter() - began
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    return elapsed


def main():
    binary, work, entries, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    big = os.path.join(work, "big", "data")
    subprocess.run([sys.executable, os.path.join(HERE, "make_log.py"), big, str(entries)],
                   check=True)
    full = start_once(binary, big, 1000)
    fresh_times, snap_times = [], []
    for i in range(runs):
        fresh = os.path.join(work, "fresh-%d" % i, "data")
        os.makedirs(os.path.dirname(fresh), exist_ok=True)
        fresh_times.append(start_once(binary, fresh, 1000))
        shutil.rmtree(os.path.dirname(fresh))
        snap_times.append(start_once(binary, big, 1000))
    ratios = sorted(s / f for s, f in zip(snap_times, fresh_times))
    ms = lambda xs: "/".join("%.0f" % (x * 1000) for x in (statistics.median(xs), min(xs), max(xs)))
    print("startup_entries=%d" % entries)
    print("startup_full_replay_ms=%.0f" % (full * 1000))
    print("startup_fresh_ms_p50_min_max=%s" % ms(fresh_times))
    print("startup_snapshot_ms_p50_min_max=%s" % ms(snap_times))
    print("startup_ratio_p50_min_max=%.2f/%.2f/%.2f"
          % (statistics.median(ratios), ratios[0], ratios[-1]))


if __name__ == "__main__":
    main()
