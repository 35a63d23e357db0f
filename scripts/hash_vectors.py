#!/usr/bin/env python3
"""Golden vectors for tidegate's unit hash, from the reference XXH3 implementation.

tidegate maps a user to a unit as `xxh3_64(utf8(user_id), seed=0) % units`. This script computes
the vectors with Python's `xxhash` package (the C reference implementation), *not* with
tidegate's own code, so `crates/tidegate-core/tests/hash_vectors.rs` checks the Rust side against
an independent implementation. Clients in other languages should check themselves against the same file.

    pip install xxhash
    python3 scripts/hash_vectors.py > tests/fixtures/unit_hash_vectors.json
    python3 scripts/hash_vectors.py --check tests/fixtures/unit_hash_vectors.json
"""
import json
import sys

import xxhash

UNIT_COUNTS = [2, 7, 10, 100, 1000, 10000]

USER_IDS = [
    "a", "alice", "bob", "user-1", "user-2", "user-42", "0", "1", "42", "2088102122524333",
    "2088102122524334", "10000000000000000000000000", "ID with spaces", "tab\u00a0nbsp",
    "müller", "ユーザー", "用户12345", "😀", "emoji-👍🏽-id", "x" * 16, "y" * 64, "z" * 129,
    "w" * 256, "é" * 128, "UPPER", "upper", "a/b?c=d&e", "%20", "'quoted'", "\"dq\"",
]


def vectors():
    out = []
    for user_id in USER_IDS:
        data = user_id.encode("utf-8")
        assert 1 <= len(data) <= 256, user_id
        h = xxhash.xxh3_64_intdigest(data, seed=0)
        out.append({
            "user_id": user_id,
            "utf8_len": len(data),
            "xxh3_64": str(h),
            "units": {str(n): h % n for n in UNIT_COUNTS},
        })
    return {
        "algorithm": "xxh3_64, seed 0, over the UTF-8 bytes of the user ID; unit = hash % units",
        "generator": "scripts/hash_vectors.py (python xxhash %s)" % xxhash.VERSION,
        "vectors": out,
    }


if __name__ == "__main__":
    generated = vectors()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2], encoding="utf-8") as f:
            stored = json.load(f)
        if stored["vectors"] != generated["vectors"]:
            sys.exit("unit hash vectors differ from the reference implementation")
        print("%d vectors match" % len(generated["vectors"]))
    else:
        json.dump(generated, sys.stdout, ensure_ascii=False, indent=1)
        print()
