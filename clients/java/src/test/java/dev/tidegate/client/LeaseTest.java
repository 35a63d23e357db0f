package dev.tidegate.client;

import static dev.tidegate.client.FakeCoordinatorTest.event;
import static dev.tidegate.client.FakeCoordinatorTest.table;
import static dev.tidegate.client.FakeCoordinatorTest.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntPredicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The subscriber-side lease, against fake coordinators (as {@link FakeCoordinatorTest}): a
 * stream that announces {@code x-tidegate-lease-ms} keeps owned writes owned only while its
 * heartbeats confirm the table ({@code :heartbeat c=<ms>}); a confirmation renews at most what is
 * left of T since {@code c}; a coordinator that confirms nothing for T is left for one that does;
 * without the header nothing changes; and the lease never touches frozen, misrouted or behind.
 * The table is {@link FakeCoordinatorTest#table}: units 0-49 blue in az-a, 50-99 green in az-b.
 */
class LeaseTest {
    static final long T = 300;

    static String confirming(long c) {
        return ":heartbeat c=" + c + "\n\n";
    }

    static Router.Options fast() {
        Router.Options o = new Router.Options();
        o.backoffMin = Duration.ofMillis(10);
        o.backoffMax = Duration.ofMillis(50);
        return o;
    }

    static String userIn(RoutingTable t, IntPredicate unit) throws TagException {
        for (int i = 0; ; i++) {
            if (unit.test(t.unitOf("user-" + i))) {
                return "user-" + i;
            }
        }
    }

    static double ms(long nanos) {
        return nanos / 1e6;
    }

    @Test
    void confirmationsAndLeaseHeaderAreParsedStrictly() {
        assertEquals(1765000000123L, SseConnection.confirmation("heartbeat c=1765000000123"));
        // The fake (and any SSE writer) may put a space after the colon.
        assertEquals(5L, SseConnection.confirmation(" heartbeat c=5"));
        assertEquals(5L, SseConnection.confirmation("heartbeat  c=5  v=12 epoch=x"));
        assertEquals(5L, SseConnection.confirmation("heartbeat v=12 c=5"));
        assertEquals(5L, SseConnection.confirmation("heartbeat c=5 c=6"), "the first c counts");
        for (String none : new String[] {"heartbeat", "heartbeat ", "", "heartbeat c=", "heartbeat c=-5", "heartbeat c=+5",
                "heartbeat c=12a", "heartbeat c=99999999999999999999", "heartbeatc=5", "keepalive c=5", "heartbeat C=5",
                "heartbeat c=5x v=1", "heartbeat x=1"}) {
            assertNull(SseConnection.confirmation(none), "`" + none + "` confirms nothing");
        }
        assertEquals(300L, SseConnection.parseLease("300"));
        assertEquals(300L, SseConnection.parseLease(" 300 "));
        for (String none : new String[] {null, "", "0", "-300", "3e2", "300ms"}) {
            assertNull(SseConnection.parseLease(none), "`" + none + "` announces no lease");
        }
        long now = System.currentTimeMillis();
        assertEquals(T, Router.renewalMs(T, now, now));
        assertEquals(50, Router.renewalMs(T, now - 250, now));
        assertEquals(T, Router.renewalMs(T, now + 60_000, now), "a coordinator clock ahead never gives more than T");
        assertEquals(0, Router.renewalMs(T, now - T, now));
        assertTrue(Router.renewalMs(T, now - 10_000, now) < 0);
    }

    @Test
    void aConfirmedLeaseOwnsAndLapsesToUnconfirmedOnceConfirmationsStop() throws Exception {
        try (FakeCoordinatorTest.Fake fake = new FakeCoordinatorTest.Fake()) {
            fake.leaseMs = T;
            AtomicBoolean confirm = new AtomicBoolean(true);
            AtomicLong lastConfirmationSent = new AtomicLong();
            fake.heartbeat = () -> {
                if (!confirm.get()) {
                    return ":heartbeat\n\n";
                }
                lastConfirmationSent.set(System.nanoTime());
                // Unknown fields after c= are ignored.
                return ":heartbeat c=" + System.currentTimeMillis() + " v=3 future=yes\n\n";
            };
            fake.scripts.add(List.of(event(table(3, "log-a").toString()), confirming(System.currentTimeMillis())));
            try (Router router = Router.connect(fake.url, new Router.Identity("lease-1", "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                String user = userIn(router.table(), u -> u < 50);
                waitFor(() -> owned(router, user), Duration.ofSeconds(5), () -> "owned: " + router.status());
                // Heartbeats every 50 ms keep it owned over two leases.
                long end = System.nanoTime() + 2 * T * 1_000_000L;
                while (System.nanoTime() < end) {
                    assertEquals(WriteCheck.OWNED, router.checkWrite(user, "az-a", null).check(), router.status().toString());
                    Thread.sleep(5);
                }
                Router.Status s = router.status();
                assertEquals(T, s.leaseMs());
                assertTrue(s.leaseRemainingMs() > 0 && s.leaseRemainingMs() <= T, s.toString());
                assertTrue(s.leaseConfirmedAt() != null && !s.leaseExpired(), s.toString());
                assertEquals(0, s.reconnects());
                System.out.println("[figures] lease " + T + " ms, confirmed every 50 ms: " + s);

                confirm.set(false);
                // The lapse is bracketed by the clock read before the last owned answer and the
                // one after the first unconfirmed answer, so a test thread starved by the load
                // widens the bracket but cannot fail the bounds on it.
                RoutingTable.WriteAnswer answer;
                long lastOwned = System.nanoTime();
                long firstUnconfirmed;
                long deadline = lastOwned + 2_000_000_000L;
                while (true) {
                    long before = System.nanoTime();
                    answer = router.checkWrite(user, "az-a", null);
                    if (answer.check() != WriteCheck.OWNED) {
                        firstUnconfirmed = System.nanoTime();
                        break;
                    }
                    lastOwned = before;
                    assertTrue(before < deadline, "still owned 2 s after the confirmations stopped");
                    Thread.sleep(1);
                }
                double ownedFor = ms(lastOwned - lastConfirmationSent.get());
                double after = ms(firstUnconfirmed - lastConfirmationSent.get());
                assertEquals(WriteCheck.UNCONFIRMED, answer.check());
                assertEquals("unconfirmed", answer.check().wireName());
                assertTrue(after >= 200, "unconfirmed only " + after + " ms after the last confirmation");
                assertTrue(ownedFor <= T + 50, "still owned " + ownedFor + " ms after the last confirmation");
                assertEquals(503, answer.status());
                assertEquals(RoutingTable.WRITE_RETRY_AFTER_MS, answer.retryAfterMs());
                Headers.Refuse refuse = assertInstanceOf(Headers.Refuse.class, Headers.forwardOnce(answer, null));
                assertEquals(503, refuse.status());
                assertEquals(RoutingTable.WRITE_RETRY_AFTER_MS, refuse.retryAfterMs());
                assertTrue(router.status().leaseExpired(), router.status().toString());
                assertEquals(0L, router.status().leaseRemainingMs());
                // Tags go on from the held table.
                assertEquals("az-a", router.tag(user).zone());
                System.out.printf("[figures] bare heartbeats: owned %.0f ms, unconfirmed %.0f ms after the last confirmation (T = %d ms); %s%n",
                        ownedFor, after, T, router.status());
            }
        }
    }

    @Test
    void anOldConfirmationRenewsOnlyWhatIsLeftOfTheLease() throws Exception {
        try (FakeCoordinatorTest.Fake fake = new FakeCoordinatorTest.Fake()) {
            fake.leaseMs = T;
            AtomicLong sentAt = new AtomicLong();
            AtomicLong sentC = new AtomicLong();
            // The first heartbeat confirms at now - 250 ms; the others confirm nothing.
            fake.heartbeat = () -> {
                if (sentAt.get() != 0) {
                    return ":heartbeat\n\n";
                }
                long c = System.currentTimeMillis() - 250;
                sentC.set(c);
                sentAt.set(System.nanoTime());
                return confirming(c);
            };
            fake.scripts.add(List.of(event(table(3, "log-a").toString())));
            try (Router router = Router.connect(fake.url, new Router.Identity("lease-2", "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                String user = userIn(router.table(), u -> u < 50);
                // Not confirmed yet on a stream that announced a lease.
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWrite(user, "az-a", null).check());
                // The lapse lies between the clock read before the last owned answer and the one
                // after the first unconfirmed answer that follows (a starved test thread widens
                // that bracket, it cannot push it past the bounds).
                long ownedFrom = 0;
                long lastOwned = 0;
                long ownedUntil = 0;
                long deadline = System.nanoTime() + 3_000_000_000L;
                while (System.nanoTime() < deadline) {
                    long before = System.nanoTime();
                    boolean owned = owned(router, user);
                    if (owned) {
                        ownedFrom = ownedFrom == 0 ? before : ownedFrom;
                        lastOwned = before;
                    } else if (ownedFrom != 0) {
                        ownedUntil = System.nanoTime();
                        break;
                    }
                }
                assertTrue(ownedFrom != 0, "the old confirmation renewed nothing: " + router.status());
                assertTrue(ownedUntil != 0, "still owned 3 s later: " + router.status());
                double lastOwnedAfter = ms(lastOwned - sentAt.get());
                double fromSend = ms(ownedUntil - sentAt.get());
                assertTrue(lastOwnedAfter <= 100,
                        "owned " + lastOwnedAfter + " ms after a confirmation 250 ms old (T = 300): expected about 50 at most");
                assertTrue(fromSend >= 40, "unconfirmed " + fromSend + " ms after a confirmation 250 ms old: expected about 50");
                assertEquals(Instant.ofEpochMilli(sentC.get()), router.status().leaseConfirmedAt());
                System.out.printf("[figures] confirmation 250 ms old, T = %d ms: last owned %.1f ms, unconfirmed %.1f ms after it was sent%n",
                        T, lastOwnedAfter, fromSend);
            }
        }
    }

    @Test
    void withoutTheLeaseHeaderWritesAreOwnedAsBefore() throws Exception {
        try (FakeCoordinatorTest.Fake fake = new FakeCoordinatorTest.Fake()) {
            // Even confirmations, stale ones at that, mean nothing without the header.
            fake.heartbeat = () -> confirming(System.currentTimeMillis() - 10_000);
            fake.scripts.add(List.of(event(table(3, "log-a").toString())));
            try (Router router = Router.connect(fake.url, new Router.Identity("lease-3", "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                String user = userIn(router.table(), u -> u < 50);
                long end = System.nanoTime() + 3 * T * 1_000_000L;
                while (System.nanoTime() < end) {
                    assertEquals(WriteCheck.OWNED, router.checkWrite(user, "az-a", null).check(), router.status().toString());
                    Thread.sleep(5);
                }
                Router.Status s = router.status();
                assertNull(s.leaseMs());
                assertNull(s.leaseRemainingMs());
                assertTrue(!s.leaseExpired() && s.connected() && s.reconnects() == 0, s.toString());
            }
        }
    }

    @Test
    void aRouterStartedFromItsDiskCacheChecksWritesWithoutALease(@TempDir Path dir) throws Exception {
        // No stream yet: nothing says the coordinators confirm leases, so today's behaviour.
        Path cache = dir.resolve("cache.json");
        Files.writeString(cache, table(3, "log-a").toString());
        try (Router router = Router.connect("http://127.0.0.1:1", new Router.Identity("lease-4", "az-a", "service"),
                fast().cachePath(cache))) {
            String user = userIn(router.table(), u -> u < 50);
            assertEquals(WriteCheck.OWNED, router.checkWrite(user, "az-a", null).check());
            assertNull(router.status().leaseMs());
        }
    }

    @Test
    void aCoordinatorThatDoesNotConfirmIsLeftForOneThatDoes() throws Exception {
        try (FakeCoordinatorTest.Fake blind = new FakeCoordinatorTest.Fake();
             FakeCoordinatorTest.Fake healthy = new FakeCoordinatorTest.Fake()) {
            blind.leaseMs = T;
            healthy.leaseMs = T;
            // It cannot read its log: its heartbeats carry the last time it could, 10 s ago.
            long lost = System.currentTimeMillis() - 10_000;
            blind.heartbeat = () -> confirming(lost);
            healthy.heartbeat = () -> confirming(System.currentTimeMillis());
            blind.scripts.add(List.of(event(table(3, "log-a").toString())));
            String id = "";
            for (int i = 0; ; i++) {
                if (Router.firstChoice("lease-5-" + i, 2) == 0) {
                    id = "lease-5-" + i;
                    break;
                }
            }
            long start = System.nanoTime();
            try (Router router = Router.connect(blind.url + "," + healthy.url, new Router.Identity(id, "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                String user = userIn(router.table(), u -> u < 50);
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWrite(user, "az-a", null).check());
                // The healthy coordinator answers only once its script is queued, so the reason
                // for leaving stays readable until then.
                waitFor(() -> String.valueOf(router.status().lastError()).contains("has not confirmed its table for 300 ms"),
                        Duration.ofSeconds(5), () -> "leaving the blind coordinator: " + router.status());
                double left = ms(System.nanoTime() - start);
                Router.Status s = router.status();
                assertTrue(s.lastError().startsWith(blind.url) && s.lastError().contains("ms old by this client's clock")
                        && s.lastError().endsWith("moving to the next coordinator"), s.lastError());
                assertTrue(s.stalled() && !s.connected(), s.toString());
                assertEquals(Instant.ofEpochMilli(lost), s.leaseConfirmedAt());
                assertTrue(left >= T, "left after " + left + " ms, before a whole lease");
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWrite(user, "az-a", null).check());

                healthy.scripts.add(List.of(event(table(4, "log-a").toString()), confirming(System.currentTimeMillis())));
                assertTrue(router.waitForVersion(4, Duration.ofSeconds(10)), router.status().toString());
                waitFor(() -> owned(router, user), Duration.ofSeconds(5), () -> "owned again: " + router.status());
                double owned = ms(System.nanoTime() - start);
                assertEquals(healthy.url, router.status().coordinator());
                assertTrue(router.status().reconnects() >= 1);
                System.out.printf("[figures] lease %d ms: left a coordinator confirming nothing after %.0f ms (%s); owned again from the next at %.0f ms%n",
                        T, left, s.lastError(), owned);
            }
        }
    }

    @Test
    void frozenMisroutedAndBehindAreUnchangedUnderAnExpiredLease() throws Exception {
        try (FakeCoordinatorTest.Fake fake = new FakeCoordinatorTest.Fake()) {
            fake.leaseMs = T;
            // One confirmation, then silence (within the stall bound): the lease lapses.
            fake.heartbeats = false;
            ObjectNode t = table(3, "log-a");
            t.putObject("frozen").put("default", "0-9");
            fake.scripts.add(List.of(event(t.toString()), confirming(System.currentTimeMillis())));
            try (Router router = Router.connect(fake.url, new Router.Identity("lease-6", "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                RoutingTable table = router.table();
                String ownedUser = userIn(table, u -> u >= 10 && u < 50);
                String frozenUser = userIn(table, u -> u < 10);
                String elsewhere = userIn(table, u -> u >= 50);
                waitFor(() -> router.status().leaseConfirmedAt() != null, Duration.ofSeconds(5), "the confirmation");
                waitFor(() -> router.status().leaseExpired(), Duration.ofSeconds(5), () -> "the lease to lapse: " + router.status());

                // The table's own check is unchanged: it knows nothing of leases.
                assertEquals(WriteCheck.OWNED, table.checkWrite(null, ownedUser, "az-a", null).check());
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWrite(ownedUser, "az-a", null).check());
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWriteIn("default", ownedUser, "az-a", 3L).check());
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWriteFor(null, "orders", ownedUser, "az-a", null).check());

                RoutingTable.WriteAnswer frozen = router.checkWrite(frozenUser, "az-a", null);
                assertEquals(WriteCheck.FROZEN, frozen.check());
                assertEquals(503, frozen.status());
                RoutingTable.WriteAnswer misrouted = router.checkWrite(elsewhere, "az-a", 3L);
                assertEquals(WriteCheck.MISROUTED, misrouted.check());
                assertEquals("az-b", misrouted.ownerZone());
                assertEquals(421, misrouted.status());
                assertInstanceOf(Headers.Forward.class, Headers.forwardOnce(misrouted, null));
                RoutingTable.WriteAnswer behind = router.checkWrite(ownedUser, "az-a", 9L);
                assertEquals(WriteCheck.BEHIND, behind.check());
                assertEquals(503, behind.status());
                assertEquals(WriteCheck.MISROUTED, router.checkWriteFor(null, "orders", elsewhere, "az-a", null).check());
                // The other zone's owned answer lapses too (same Router, same lease).
                assertEquals(WriteCheck.UNCONFIRMED, router.checkWrite(elsewhere, "az-b", null).check());
            }
        }
    }

    @Test
    void anExpiredLeaseTurnsOnlyAnOwnedGlobalWriteUnconfirmed() throws Exception {
        try (FakeCoordinatorTest.Fake fake = new FakeCoordinatorTest.Fake()) {
            fake.leaseMs = T;
            fake.heartbeats = false;
            ObjectNode t = table(3, "log-a");
            t.putObject("global_writer").put("zone", "az-a").put("read_only", false);
            fake.scripts.add(List.of(event(t.toString()), confirming(System.currentTimeMillis())));
            try (Router router = Router.connect(fake.url, new Router.Identity("lease-7", "az-a", "service"), fast())) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                RoutingTable table = router.table();
                waitFor(() -> router.status().leaseConfirmedAt() != null, Duration.ofSeconds(5), "the confirmation");
                waitFor(() -> router.status().leaseExpired(), Duration.ofSeconds(5), () -> "the lease to lapse: " + router.status());

                assertEquals(GlobalWriteCheck.OWNED, table.checkGlobalWrite("az-a", null).check());
                RoutingTable.GlobalWriteAnswer unconfirmed = router.checkGlobalWrite("az-a", 3L);
                assertEquals(GlobalWriteCheck.UNCONFIRMED, unconfirmed.check());
                assertEquals("az-a", unconfirmed.ownerZone());
                assertEquals(503, unconfirmed.status());
                assertEquals(RoutingTable.WRITE_RETRY_AFTER_MS, unconfirmed.retryAfterMs());
                assertEquals(GlobalWriteCheck.MISROUTED, router.checkGlobalWrite("az-b", null).check());
                assertEquals(GlobalWriteCheck.BEHIND, router.checkGlobalWrite("az-a", 9L).check());
            }
        }
    }

    static boolean owned(Router router, String user) {
        try {
            return router.checkWrite(user, "az-a", null).check() == WriteCheck.OWNED;
        } catch (TagException e) {
            throw new AssertionError(e);
        }
    }
}
