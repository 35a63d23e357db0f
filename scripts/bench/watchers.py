#!/usr/bin/env python3
"""Holds N routing watch streams (SSE) on one asyncio loop, then measures a dial change.

    scripts/bench/watchers.py URL OPERATOR_TOKEN TIDEGATE_PID N [ROUNDS [MODE [STREAM_URL]]]

STREAM_URL (default URL) is where the streams connect, e.g. the fast listener's port
(`[server] fast_port`); the dial changes and acknowledgements always go to URL.

Each stream is a subscriber (`subscriber_id=bench-<i>`) that acknowledges every routing version
it receives with `POST /v1/subscribers/<id>/ack`, as `tidegate::client::Router` does (over a few
kept-alive connections shared by all streams, as a service's HTTP client pool would). Prints:
the coordinator's resident memory idle and with N streams open (per stream), and for each round
the time from the dial request to each stream's receiving the new version ("applied": the event
is parsed) and to its acknowledgement being answered (p50/p99/max across streams).

MODE (for finding what a stream's memory is, by elimination; memory only, no rounds):
  subscribers  the above (default)
  anonymous    N watch streams without a subscriber ID (no registry entry, no acks)
  idle         N kept-alive connections that each answered one GET /healthz (Rocket and hyper's
               own cost of an open connection, with no stream)
"""
import asyncio
import json
import resource
import statistics
import sys
import time

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def request(host, port, method, path, body=None, token=None):
    reader, writer = await asyncio.open_connection(host, port)
    data = json.dumps(body).encode() if body is not None else b""
    head = "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n" % (
        method, path, host, len(data))
    if body is not None:
        head += "Content-Type: application/json\r\n"
    if token:
        head += "Authorization: Bearer %s\r\n" % token
    writer.write(head.encode() + b"\r\n" + data)
    await writer.drain()
    response = await reader.read()
    writer.close()
    status = int(response.split(b" ", 2)[1])
    payload = response.split(b"\r\n\r\n", 1)[1]
    return status, payload


class AckPool:
    """A few kept-alive connections for the acknowledgements, used in turn."""

    def __init__(self, host, port, token, size):
        self.host, self.port, self.token = host, port, token
        self.free = asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(None)

    async def ack(self, subscriber_id, version):
        conn = await self.free.get()
        try:
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
            reader, writer = conn
            data = json.dumps({"version": version}).encode()
            writer.write(("POST /v1/subscribers/%s/ack HTTP/1.1\r\nHost: %s\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n"
                          "Authorization: Bearer %s\r\n\r\n"
                          % (subscriber_id, self.host, len(data), self.token)).encode() + data)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            return status
        except Exception:
            conn = None
            raise
        finally:
            self.free.put_nowait(conn)


class Watcher:
    def __init__(self, host, port, index, token, acks):
        # Registering and acknowledging are writes: they carry the operator token.
        self.host, self.port, self.id, self.token = host, port, "bench-%d" % index, token
        self.acks = acks  # None: an anonymous stream that never acknowledges
        self.versions = {}  # version -> monotonic time acknowledged
        self.received = {}  # version -> monotonic time the event arrived
        self.connected = asyncio.Event()

    async def run(self):
        reader, writer = await asyncio.open_connection(self.host, self.port)
        if self.acks is None:
            path, auth = "/v1/routing/watch", ""
        else:
            path = "/v1/routing/watch?subscriber_id=%s&zone=az-a&kind=bench" % self.id
            auth = "Authorization: Bearer %s\r\n" % self.token
        writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n"
                      % (path, self.host, auth)).encode())
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        event_id = None
        while True:
            line = await reader.readline()
            if not line:
                return
            line = line.rstrip(b"\r\n")
            if line.startswith(b"id:"):
                event_id = int(line[3:].strip())
            elif line == b"" and event_id is not None:
                version, event_id = event_id, None
                self.received[version] = time.monotonic()
                if self.acks is None:
                    self.versions[version] = time.monotonic()
                    self.connected.set()
                    continue
                status = await self.acks.ack(self.id, version)
                if status != 200:
                    raise SystemExit("ack of %s answered %d" % (self.id, status))
                self.versions[version] = time.monotonic()
                self.connected.set()


async def main():
    url, token, pid, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    mode = sys.argv[6] if len(sys.argv) > 6 else "subscribers"
    stream_url = sys.argv[7] if len(sys.argv) > 7 else url
    host, port = url.split("//", 1)[1].split(":")
    port = int(port)
    stream_port = int(stream_url.rsplit(":", 1)[1])
    idle = rss_kb(pid)
    if mode == "idle":
        conns = []
        for i in range(count):
            reader, writer = await asyncio.open_connection(host, stream_port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")
            conns.append((reader, writer))
        await asyncio.sleep(1)
        held = rss_kb(pid)
        print("idle_connections=%d rss_idle_kb=%d rss_held_kb=%d per_connection_kb=%.1f"
              % (count, idle, held, (held - idle) / count))
        return
    acks = AckPool(host, port, token, 16) if mode == "subscribers" else None
    watchers = [Watcher(host, stream_port, i, token, acks) for i in range(count)]
    tasks = []
    for i, w in enumerate(watchers):
        tasks.append(asyncio.create_task(w.run()))
        if i % 200 == 199:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*(w.connected.wait() for w in watchers)), 300)
    await asyncio.sleep(1)
    held = rss_kb(pid)
    if mode != "subscribers":
        print("%s_streams=%d rss_idle_kb=%d rss_held_kb=%d per_stream_kb=%.1f"
              % (mode, count, idle, held, (held - idle) / count))
        return
    print("watch_streams=%d" % count)
    print("watch_rss_idle_kb=%d" % idle)
    print("watch_rss_streams_kb=%d" % held)
    print("watch_rss_per_stream_kb=%.1f" % ((held - idle) / count), flush=True)
    latencies = []
    applied_p99s = []
    for r in range(rounds):
        status, body = await request(host, port, "GET", "/v1/routing")
        table = json.loads(body)
        target = 40 if table["blue_units"] != 40 else 60
        began = time.monotonic()
        status, body = await request(host, port, "PUT", "/v1/dial", {
            "blue_units": target, "expected_version": table["version"],
            "reason": "watch bench round %d" % r}, token)
        if status != 200:
            raise SystemExit("dial answered %d: %s" % (status, body))
        version = json.loads(body)["version"]
        deadline = began + 60
        while any(version not in w.versions for w in watchers):
            if time.monotonic() > deadline:
                done = sum(1 for w in watchers if version in w.versions)
                raise SystemExit("%d of %d streams acknowledged version %d within 60 s"
                                 % (done, len(watchers), version))
            await asyncio.sleep(0.005)
        p99_at = max(int(len(watchers) * 0.99) - 1, 0)
        applied = sorted(w.received[version] - began for w in watchers)
        times = sorted(w.versions[version] - began for w in watchers)
        p99 = times[p99_at]
        latencies.append(p99)
        applied_p99s.append(applied[p99_at])
        print("watch_round_%d_applied_ms_p50_p99_max=%.0f/%.0f/%.0f"
              % (r, statistics.median(applied) * 1000, applied[p99_at] * 1000, applied[-1] * 1000))
        print("watch_round_%d_ms_p50_p99_max=%.0f/%.0f/%.0f"
              % (r, statistics.median(times) * 1000, p99 * 1000, times[-1] * 1000), flush=True)
    print("watch_applied_p99_ms_p50_min_max=%.0f/%.0f/%.0f" % (
        statistics.median(applied_p99s) * 1000, min(applied_p99s) * 1000, max(applied_p99s) * 1000))
    print("watch_ack_p99_ms_p50_min_max=%.0f/%.0f/%.0f" % (
        statistics.median(latencies) * 1000, min(latencies) * 1000, max(latencies) * 1000))
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
