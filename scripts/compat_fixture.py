#!/usr/bin/env python3
"""Makes the compatibility fixture of one tidegate release: a file log and a snapshot written by
that release's binary, and the tags it gave 100 000 users (tests/compat_fixtures.rs replays them
with today's binary and wants the same tags).

    python3 scripts/compat_fixture.py target/debug/tidegate tests/fixtures/compat/v0.1

It starts the binary on a fresh data directory, makes changes of every kind that moves users
(dial moves, pins and unpins, a drain that completes, a plan and the automation switch), with
`snapshot_every = 8` so a snapshot covers part of the log, then kills it with SIGKILL (no
shutdown snapshot: the snapshot stays behind the log's end, so a start from it replays the rest).
Users are `user-0` ... `user-99999` plus the pinned ones; tags.txt has one character per user
(`b` blue, `g` green), pins.json the pinned users' colours.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "tg_compat_operator"
USERS = 100_000


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + TOKEN)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def version(base):
    return call(base, "GET", "/v1/routing")["version"]


def main():
    binary, out = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp()
    data = os.path.join(work, "data")
    config = os.path.join(work, "tidegate.toml")
    with open(config, "w") as f:
        f.write(
            'snapshot_every = 8\n[drain]\ntick = "20ms"\n'
            '[[operators]]\nname = "compat"\nrole = "operator"\n'
            f'token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"\n'
        )
    proc = subprocess.Popen(
        [binary, "serve", "--address", "127.0.0.1", "--port", "0", "--config", config,
         "--data-dir", data],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = None
    for line in proc.stdout:
        if line.startswith("tidegate listening on "):
            base = line.split()[-1]
            break
    assert base, "the binary did not start"
    try:
        for percent in (30, 70, 45):
            call(base, "PUT", "/v1/dial", {"blue_percent": percent, "expected_version": version(base),
                                           "reason": f"compat: dial to {percent}"})
        for i in range(20):
            color = "blue" if i % 2 else "green"
            call(base, "PUT", f"/v1/pins/pinned-{i}", {"color": color, "expected_version": version(base),
                                                       "reason": "compat: pin"})
        for i in range(0, 20, 4):
            call(base, "DELETE", f"/v1/pins/pinned-{i}", {"expected_version": version(base),
                                                          "reason": "compat: unpin"})
        batch = [{"zone": "az-a", "color": "green", "ok": 500, "error": 0},
                 {"zone": "az-b", "color": "blue", "ok": 500, "error": 0}]
        call(base, "POST", "/v1/outcomes", batch)
        drain = call(base, "POST", "/v1/drains", {
            "zone": "az-b", "target_percent": 10, "step_percent": 5, "interval": "100ms",
            "guard": {"max_error_rate": 0.5, "min_requests": 1, "breaches": 3, "on_breach": "pause"},
            "reason": "compat: a drain that completes"})
        deadline = time.time() + 30
        while call(base, "GET", f"/v1/drains/{drain['id']}")["state"] != "completed":
            call(base, "POST", "/v1/outcomes", batch)
            assert time.time() < deadline, "the drain did not complete"
            time.sleep(0.05)
        call(base, "PUT", "/v1/plans/evacuate-az-b", {
            "expected_version": version(base), "reason": "compat: a plan", "rto": "5m",
            "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]})
        call(base, "PUT", "/v1/automation", {"stopped": True, "expected_version": version(base),
                                             "reason": "compat: automation stopped"})
        call(base, "PUT", "/v1/dial", {"blue_units": 37, "expected_version": version(base),
                                       "reason": "compat: last dial move"})
        users = [f"user-{i}" for i in range(USERS)]
        colors = []
        final = version(base)
        for start in range(0, USERS, 10_000):
            answer = call(base, "POST", "/v1/tag", {"user_ids": users[start:start + 10_000]})
            assert answer["version"] == final
            colors.extend("b" if t["color"] == "blue" else "g" for t in answer["tags"])
        pins = call(base, "POST", "/v1/tag", {"user_ids": [f"pinned-{i}" for i in range(20)]})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(data, "tidegate.log"), os.path.join(out, "tidegate.log"))
    shutil.copy(os.path.join(data, "tidegate.snapshot"), os.path.join(out, "tidegate.snapshot"))
    with open(os.path.join(out, "tags.txt"), "w") as f:
        f.write("".join(colors) + "\n")
    with open(os.path.join(out, "pins.json"), "w") as f:
        json.dump({t["user_id"]: t["color"] for t in pins["tags"]}, f, indent=0, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "version"), "w") as f:
        f.write(f"{final}\n")
    shutil.rmtree(work)
    print(f"compat fixture at version {final}: {colors.count('b')} blue, {colors.count('g')} green")


if __name__ == "__main__":
    main()
