package dev.tidegate.client;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Which partition of a lane topic a user's messages go to, exactly as the Rust
 * {@code LaneProducer} (its {@code HalfRings}) puts them: a topic of P partitions over N zones
 * gives zone z the range [z*P/N, (z+1)*P/N); inside a range a consistent-hash ring keyed by user
 * ID picks the partition. The ring is the {@code hashring} crate's: SipHash-2-4 with keys (0, 0)
 * over Rust's {@code Hash} encoding (a virtual node is its partition and replica as two
 * little-endian u32; a user ID its UTF-8 bytes and a 0xff byte), 16 384 virtual nodes per range
 * (at least 160 per partition), a key goes to the first node at or after it, else the first.
 */
public final class LaneRing {
    static final int RING_VNODES = 16_384;
    static final int MIN_VNODES = 160;
    public static final int MAX_LANE_PARTITIONS = 10_000;

    private final int partitions;
    private final int zones;
    private final long[][] keys;
    private final int[][] owners;

    /** The rings of a topic of {@code partitions} partitions cut for {@code zones} zones (at least 2). */
    public LaneRing(int partitions, int zones) {
        int n = Math.max(2, zones);
        if (partitions < 2) {
            throw new IllegalArgumentException("a lane topic needs at least 2 partitions (one per colour), got " + partitions);
        }
        if (partitions > MAX_LANE_PARTITIONS) {
            throw new IllegalArgumentException("a lane topic may have at most " + MAX_LANE_PARTITIONS + " partitions, got " + partitions);
        }
        if (partitions % n != 0) {
            throw new IllegalArgumentException("a lane topic of " + n + " zones needs a multiple of " + n
                    + " partitions (one equal range per zone), got " + partitions);
        }
        this.partitions = partitions;
        this.zones = n;
        this.keys = new long[n][];
        this.owners = new int[n][];
        int size = partitions / n;
        int vnodes = Math.max(RING_VNODES / size, MIN_VNODES);
        for (int z = 0; z < n; z++) {
            int count = size * vnodes;
            long[] hashed = new long[count];
            int[] part = new int[count];
            Integer[] order = new Integer[count];
            int i = 0;
            for (int p = z * size; p < (z + 1) * size; p++) {
                for (int r = 0; r < vnodes; r++) {
                    hashed[i] = vnodeHash(p, r);
                    part[i] = p;
                    order[i] = i;
                    i++;
                }
            }
            // Stable sort by unsigned hash, as Rust's sort_by_key on u64.
            Arrays.sort(order, (a, b) -> Long.compareUnsigned(hashed[a], hashed[b]));
            keys[z] = new long[count];
            owners[z] = new int[count];
            for (int k = 0; k < count; k++) {
                keys[z][k] = hashed[order[k]];
                owners[z][k] = part[order[k]];
            }
        }
    }

    public int partitions() {
        return partitions;
    }

    public int zones() {
        return zones;
    }

    /** The first partition of zone {@code zone}'s range (inclusive) and the end (exclusive). */
    public int[] range(int zone) {
        int size = partitions / zones;
        return zone >= zones ? new int[] {0, 0} : new int[] {zone * size, (zone + 1) * size};
    }

    /** The zone whose range holds {@code partition}. */
    public int zoneOf(int partition) {
        return partition / (partitions / zones);
    }

    /** The partition of {@code userId} in zone {@code zone}'s range, or -1 for a zone the topic was not cut for. */
    public int partition(int zone, String userId) {
        if (zone < 0 || zone >= zones) {
            return -1;
        }
        long key = userHash(userId);
        long[] k = keys[zone];
        int lo = 0;
        int hi = k.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(k[mid], key) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return owners[zone][lo == k.length ? 0 : lo];
    }

    static long vnodeHash(int partition, int replica) {
        byte[] m = new byte[8];
        for (int i = 0; i < 4; i++) {
            m[i] = (byte) (partition >>> (8 * i));
            m[4 + i] = (byte) (replica >>> (8 * i));
        }
        return sipHash24(0, 0, m);
    }

    static long userHash(String userId) {
        byte[] s = userId.getBytes(StandardCharsets.UTF_8);
        byte[] m = Arrays.copyOf(s, s.length + 1);
        m[s.length] = (byte) 0xff;
        return sipHash24(0, 0, m);
    }

    /** SipHash-2-4 of {@code m} with keys {@code k0}, {@code k1} (the reference algorithm). */
    static long sipHash24(long k0, long k1, byte[] m) {
        long v0 = 0x736f6d6570736575L ^ k0;
        long v1 = 0x646f72616e646f6dL ^ k1;
        long v2 = 0x6c7967656e657261L ^ k0;
        long v3 = 0x7465646279746573L ^ k1;
        int len = m.length;
        int end = len - (len % 8);
        for (int i = 0; i < end; i += 8) {
            long mi = le64(m, i, 8);
            v3 ^= mi;
            for (int r = 0; r < 2; r++) {
                v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
                v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
                v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
                v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
            }
            v0 ^= mi;
        }
        long b = ((long) len & 0xff) << 56 | le64(m, end, len - end);
        v3 ^= b;
        for (int r = 0; r < 2; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        v0 ^= b;
        v2 ^= 0xff;
        for (int r = 0; r < 4; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        return v0 ^ v1 ^ v2 ^ v3;
    }

    private static long le64(byte[] m, int at, int n) {
        long out = 0;
        for (int i = 0; i < n; i++) {
            out |= (m[at + i] & 0xffL) << (8 * i);
        }
        return out;
    }
}
