package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The lane ring's pure parts: SipHash-2-4 against the reference vectors, ranges, even shares. */
class LaneRingTest {
    @Test
    void sipHash24MatchesTheReferenceVectors() {
        // The SipHash paper's test vectors: key 00..0f, messages 00..(n-1).
        long k0 = 0x0706050403020100L;
        long k1 = 0x0f0e0d0c0b0a0908L;
        long[] expected = {0x726fdb47dd0e0e31L, 0x74f839c593dc67fdL, 0x0d6c8009d9a94f5aL, 0x85676696d7fb7e2dL};
        for (int n = 0; n < expected.length; n++) {
            byte[] m = new byte[n];
            for (int i = 0; i < n; i++) {
                m[i] = (byte) i;
            }
            assertEquals(expected[n], LaneRing.sipHash24(k0, k1, m), "vector " + n);
        }
        byte[] m15 = new byte[15];
        for (int i = 0; i < 15; i++) {
            m15[i] = (byte) i;
        }
        assertEquals(0xa129ca6149be45e5L, LaneRing.sipHash24(k0, k1, m15));
    }

    @Test
    void rangesAndShares() {
        LaneRing ring = new LaneRing(12, 3);
        assertEquals(8, ring.range(2)[0]);
        assertEquals(12, ring.range(2)[1]);
        assertEquals(1, ring.zoneOf(7));
        assertThrows(IllegalArgumentException.class, () -> new LaneRing(7, 2));
        assertThrows(IllegalArgumentException.class, () -> new LaneRing(8, 3));
        LaneRing eight = new LaneRing(8, 2);
        int[] counts = new int[8];
        for (int i = 0; i < 100_000; i++) {
            int p = eight.partition(0, "user-" + i);
            assertTrue(p >= 0 && p < 4);
            counts[p]++;
        }
        for (int p = 0; p < 4; p++) {
            double share = counts[p] / 1000.0;
            assertTrue(Math.abs(share - 25.0) <= 1.0, "partition " + p + ": " + share + " %");
        }
        assertEquals(-1, eight.partition(2, "user-1"));
    }
}
