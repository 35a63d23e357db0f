package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The lane membership calls against a real coordinator (no Kafka needed for membership): one
 * member per zone gets its zone's range, a heartbeat with the wrong secret is refused as a gone
 * member, a member that stops heartbeating loses its range to the other zone within the session
 * timeout, and leaving hands the range on at once.
 */
class LaneMembershipTest {
    @Test
    void membersGetTheirZonesRangeAndADeadMembersRangeMoves(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("",
                "[lanes]\nsession_timeout = \"2s\"\nheartbeat_interval = \"200ms\"\n"))) {
            // Two URLs, the first dead: calls go on to the next coordinator.
            LaneMembership m = new LaneMembership("http://127.0.0.1:1," + server.url, TidegateServer.SERVICE_TOKEN,
                    Duration.ofSeconds(2));
            // The default table: blue (index 0, partitions 0-3) is az-b, green (4-7) is az-a.
            LaneMembership.Assigned a = m.register("java-orders", "java-a", "az-a", "orders", 8);
            LaneMembership.Assigned b = m.register("java-orders", "java-b", "az-b", "orders", 8);
            assertNotNull(a.memberSecret());
            String aSecret = a.memberSecret();
            String bSecret = b.memberSecret();
            long end = System.nanoTime() + 10_000_000_000L;
            while (System.nanoTime() < end) {
                a = m.heartbeat("java-orders", a.memberId(), aSecret, a.assignment(), "az-a", "orders", 8);
                b = m.heartbeat("java-orders", b.memberId(), bSecret, b.assignment(), "az-b", "orders", 8);
                if (a.assignment().equals(List.of(4, 5, 6, 7)) && b.assignment().equals(List.of(0, 1, 2, 3))) {
                    break;
                }
                Thread.sleep(100);
            }
            assertEquals(List.of(4, 5, 6, 7), a.assignment(), a.toString());
            assertEquals(List.of(0, 1, 2, 3), b.assignment(), b.toString());
            LaneMembership.Assigned first = a;
            assertThrows(LaneMembership.MemberGone.class,
                    () -> m.heartbeat("java-orders", first.memberId(), "not-the-secret", List.of(), "az-a", "orders", 8));

            // b stops heartbeating: after the session timeout its range goes to az-a's member.
            long stopped = System.nanoTime();
            LaneMembership.Assigned now = a;
            while (System.nanoTime() - stopped < 10_000_000_000L && now.assignment().size() < 8) {
                Thread.sleep(100);
                now = m.heartbeat("java-orders", a.memberId(), aSecret, now.assignment(), "az-a", "orders", 8);
            }
            double moved = (System.nanoTime() - stopped) / 1e9;
            assertEquals(8, now.assignment().size(), now.toString());
            JsonNode group = server.ok("GET", "/v1/lanes/java-orders", null);
            m.leave("java-orders", a.memberId(), aSecret);
            System.out.printf("[figures] lane membership: one member per zone gets its zone's range (az-a 4-7, az-b 0-3); a member "
                    + "that stopped heartbeating lost its range to the other zone after %.1f s (session timeout 2 s); group %s%n",
                    moved, group.path("generation"));
        }
    }

    private static List<Integer> concat(List<Integer> a, List<Integer> b) {
        java.util.TreeSet<Integer> s = new java.util.TreeSet<>(a);
        s.addAll(b);
        return List.copyOf(s);
    }
}
