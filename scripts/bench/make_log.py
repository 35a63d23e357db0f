#!/usr/bin/env python3
"""Writes a tidegate command log of N entries (genesis + N-1 dial moves) for the start-up bench.

    scripts/bench/make_log.py DATA_DIR N

The lines are in the log's own format, `<crc32 of the JSON, 8 hex digits> <JSON>\n` (zlib's CRC-32
is the same IEEE polynomial as crc32fast), for 100 hash units, so `tidegate serve` replays them
through State::apply like any history.
"""
import json
import os
import sys
import zlib


def line(entry):
    text = json.dumps(entry, separators=(",", ":"))
    return "%08x %s\n" % (zlib.crc32(text.encode()), text)


def main():
    data_dir, count = sys.argv[1], int(sys.argv[2])
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "tidegate.log"), "w") as out:
        out.write(line({"kind": "genesis", "format": 1, "units": 100, "unit_mode": "hash",
                        "blue_units": 50, "at_ms": 1, "by": "bench", "reason": "bench genesis"}))
        blue = 50
        chunk = []
        for version in range(2, count + 1):
            new = 40 if blue == 60 else 60
            chunk.append(line({
                "kind": "change", "version": version, "expected_version": version - 1,
                "at_ms": 1000 + version, "by": "bench", "reason": "bench dial %d" % version,
                "command": {"type": "set_blue_units", "blue_units": new},
                "from": "%d%% blue (%d of 100 units)" % (blue, blue),
                "to": "%d%% blue (%d of 100 units)" % (new, new),
            }))
            blue = new
            if len(chunk) == 10000:
                out.write("".join(chunk))
                chunk = []
        out.write("".join(chunk))


if __name__ == "__main__":
    main()
