#!/usr/bin/env python3
"""The reference tagger: tags users from a published routing table alone, with no tidegate code.

`GET /v1/routing` publishes everything a client needs (ARCHITECTURE.md, "publish the rule"): the
unit count and mode, the hash, the zones, the unit map as runs, the pins and the precedence. This
script evaluates it the way a client in any language must, and `tests/reference_tag.rs` checks
that it gives every user the tag the server gives. It reads the routing JSON on stdin and user IDs
one per line from the file named by its argument, and prints one JSON tag per line. With
`--service NAME` it tags calls of that service (its release channel, if the domain has one, decides
for the users it selects, and each tag says which rule decided as `reason`); with `--domain NAME`,
in that routing domain.

    curl -s http://127.0.0.1:8080/v1/routing | python3 scripts/reference_tag.py users.txt
    curl -s http://127.0.0.1:8080/v1/routing | python3 scripts/reference_tag.py users.txt --service orders

Needs Python's `xxhash` package (the C reference implementation of XXH3).
"""
import json
import sys

import xxhash


def unit_of(table, user_id):
    """The user's unit: XXH3-64 (seed 0) of the UTF-8 bytes modulo the unit count, or in digits
    mode the `log10(units)` decimal digits that end `digits_skip` characters before the end."""
    units = table["units"]
    if table["unit_mode"] == "hash":
        return xxhash.xxh3_64_intdigest(user_id.encode("utf-8"), seed=0) % units
    width = len(str(units)) - 1
    skip = table["digits_skip"] or 0
    if len(user_id) < width + skip or not user_id.isascii() or not user_id.isdigit():
        return None
    end = len(user_id) - skip
    return int(user_id[end - width:end])


def unit_set(text):
    """A unit set `0-9,17` as a Python set."""
    out = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def runs(table, unit_map):
    """The unit map as (first, last, zone, lane), checked to cover every unit exactly once."""
    out = []
    expected = 0
    for run in unit_map:
        first, last = (int(x) for x in run["units"].split("-"))
        assert first == expected and last >= first, f"unit map gap or overlap at {run}"
        out.append((first, last, run["zone"], run["lane"]))
        expected = last + 1
    assert expected == table["units"], "the unit map does not cover every unit"
    return out


def channel_for(table, domain, service):
    """The release channel of `service` in `domain` (at most one), with its units as a set."""
    if service is None:
        return None
    for channel in table.get("channels", []):
        if channel["domain"] == domain and service in channel["services"]:
            return dict(channel, unit_set=unit_set(channel["units"]), user_set=set(channel["users"]))
    return None


def tag(table, unit_map, lanes, user_id, channel=None, service=None):
    def answer(**fields):
        out = {"user_id": user_id, **fields}
        if service is not None and "error" not in out:
            out["reason"] = reason
        return out

    for rule in table["precedence"]:
        reason = rule
        if rule == "pin" and user_id in table["pins"]:
            lane = table["pins"][user_id]
            return answer(color=lane, zone=lanes[lane], pinned=True)
        if rule == "channel" and channel is not None:
            unit = unit_of(table, user_id)
            if unit is None:
                return {"user_id": user_id, "error": "invalid_user_id"}
            if unit in channel["unit_set"] or user_id in channel["user_set"]:
                if not channel["suspended"]:
                    reason = "channel:" + channel["name"]
                    return answer(color=channel["lane"], zone=channel["zone"], unit=unit,
                                  pinned=False)
                if channel["fallback"] == "reject":
                    return {"user_id": user_id, "error": "channel_unavailable"}
        if rule == "unit":
            unit = unit_of(table, user_id)
            if unit is None:
                return {"user_id": user_id, "error": "invalid_user_id"}
            for first, last, zone, lane in unit_map:
                if first <= unit <= last:
                    return answer(color=lane, zone=zone, unit=unit, pinned=False)
    raise AssertionError("no rule decided")


def main():
    args = sys.argv[1:]

    def option(name):
        if name in args:
            i = args.index(name)
            value = args[i + 1]
            del args[i:i + 2]
            return value
        return None

    service = option("--service")
    domain = option("--domain") or "default"
    table = json.load(sys.stdin)
    unit_map = runs(table, table["unit_map"] if domain == "default"
                    else table["domains"][domain]["unit_map"])
    lanes = {z["lane"]: z["name"] for z in table["zones"]}
    channel = channel_for(table, domain, service)
    with open(args[0], encoding="utf-8") as f:
        users = [line.rstrip("\n") for line in f if line.rstrip("\n")]
    out = sys.stdout
    for user_id in users:
        out.write(json.dumps(tag(table, unit_map, lanes, user_id, channel, service),
                             ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
