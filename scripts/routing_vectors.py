#!/usr/bin/env python3
"""Writes tests/fixtures/routing_vectors.json: golden vectors of the whole published rule.

Each table is a `GET /v1/routing` body as a coordinator published it (three zones, a unit map that
is not a dial, pins to three lanes, a second domain, release channels with `global` and `reject`
fallbacks), once as published and once with both channels suspended. Every case is tagged by
`scripts/reference_tag.py`, which knows nothing of tidegate's code; the Rust core, the Go client
and the Java client must give the same answers (tests/routing_vectors.rs,
clients/go/table_test.go, clients/java FixturesTest).

    python3 scripts/routing_vectors.py tests/fixtures/routing_base.json > tests/fixtures/routing_vectors.json

A row is `[user_id, domain, service, lane, zone, unit, pinned, reason, error]`: `domain` and
`service` are null for the default domain and for no service; `reason` is `pin`, `unit` or
`channel:<name>`; `error` is `channel_unavailable` (a suspended channel with the `reject`
fallback) with the other answer fields null.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_tag  # noqa: E402


def users():
    named = ["alice", "bob", "carol", "dave"]
    numbered = [f"user-{i}" for i in range(120)]
    other = ["é", "用户-7", "😀x", "a b", "Q.0@z", "x" * 128]
    return named + numbered + other


def rows(table):
    lanes = {z["lane"]: z["name"] for z in table["zones"]}
    out = []
    for domain in [None, "search"]:
        unit_map = reference_tag.runs(
            table, table["unit_map"] if domain is None else table["domains"][domain]["unit_map"])
        for service in [None, "orders", "billing", "search"]:
            channel = reference_tag.channel_for(table, domain or "default", service)
            for user in users():
                # A service name makes the reference say which rule decided; the rule is the same
                # without one (no channel can decide), so every row carries its reason.
                got = reference_tag.tag(table, unit_map, lanes, user, channel, service or "-")
                if "error" in got:
                    out.append([user, domain, service, None, None, None, None, None, got["error"]])
                else:
                    reason = got["reason"]
                    if reason == "channel":
                        reason = "unit"  # the channel rule did not select the user
                    out.append([user, domain, service, got["color"], got["zone"], got.get("unit"),
                                got["pinned"], reason, None])
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        base = json.load(f)
    suspended = copy.deepcopy(base)
    for channel in suspended["channels"]:
        channel["suspended"] = True
    tables = []
    for name, table in [("published", base), ("channels suspended", suspended)]:
        tables.append({"name": name, "table": table, "rows": rows(table)})
    doc = {
        "generator": "scripts/routing_vectors.py over scripts/reference_tag.py (python xxhash)",
        "row": ["user_id", "domain", "service", "lane", "zone", "unit", "pinned", "reason", "error"],
        "tables": tables,
    }
    # One row per line: reviewable diffs.
    sys.stdout.write("{\n")
    sys.stdout.write(f' "generator": {json.dumps(doc["generator"])},\n')
    sys.stdout.write(f' "row": {json.dumps(doc["row"])},\n')
    sys.stdout.write(' "tables": [\n')
    for i, t in enumerate(tables):
        sys.stdout.write(f'  {{"name": {json.dumps(t["name"])},\n   "table": {json.dumps(t["table"], ensure_ascii=False)},\n   "rows": [\n')
        sys.stdout.write(",\n".join("    " + json.dumps(r, ensure_ascii=False) for r in t["rows"]))
        sys.stdout.write("\n   ]}" + ("," if i + 1 < len(tables) else "") + "\n")
    sys.stdout.write(" ]\n}\n")


if __name__ == "__main__":
    main()
