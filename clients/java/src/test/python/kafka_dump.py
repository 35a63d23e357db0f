#!/usr/bin/env python3
"""Dumps every message of a topic up to its current end, for PartitionerTest: one line per
message, `partition<TAB>key<TAB>route as hex`, where the route is the message's own `tg` header,
else the value of the last switch marker (`tgs` header, no key) read before it in its partition;
markers themselves are not printed. It reads with confluent-kafka (librdkafka), because the
Java Kafka client cannot talk to librdkafka's mock cluster (the mock answers ApiVersions v4 with a
v0 error body that the Java client reads as a 20-minute throttle).

    kafka_dump.py BOOTSTRAP TOPIC PARTITIONS
"""
import sys

from confluent_kafka import Consumer, TopicPartition


def main():
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tidegate-java-oracle",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    ends = {}
    for p in range(partitions):
        low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if high > low:
            ends[p] = high
    c.assign([TopicPartition(topic, p, 0) for p in ends])
    left = dict(ends)
    switched = {}
    out = sys.stdout
    while left:
        m = c.poll(5)
        if m is None:
            raise SystemExit(f"no record within 5 s; still to read: {left}")
        if m.error():
            continue
        p = m.partition()
        if p in left and m.offset() < ends[p]:
            headers = dict(m.headers() or [])
            if "tgs" in headers:
                switched[p] = headers["tgs"]
            else:
                tg = headers.get("tg") or switched.get(p, b"")
                out.write(f"{p}\t{m.key().decode('utf-8')}\t{tg.hex()}\n")
            if m.offset() + 1 >= ends[p]:
                del left[p]
    c.close()


if __name__ == "__main__":
    main()
