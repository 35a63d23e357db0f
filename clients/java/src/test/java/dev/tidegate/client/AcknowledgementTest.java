package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tidegate.client.FakeCoordinatorTest.Fake;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Acknowledgements and resumption against a fake coordinator (as the Rust router's
 * {@code an_open_write_scope_holds_back_the_acknowledgement_not_the_tables} and
 * {@code a_reconnect_resumes_from_the_acknowledged_version_of_its_log}): an open write scope holds
 * back the acknowledgement, never the reading of the stream, and a reconnect resumes from the
 * acknowledged version of the command log it names.
 */
class AcknowledgementTest {
    static Router.Options options() {
        Router.Options o = new Router.Options().token("t").readTimeout(Duration.ofSeconds(2));
        o.backoffMin = Duration.ofMillis(10);
        o.backoffMax = Duration.ofMillis(50);
        return o;
    }

    static String routing(long version, String log) {
        return FakeCoordinatorTest.event(FakeCoordinatorTest.table(version, log).toString());
    }

    static void waitAcked(Router router, long version) throws InterruptedException {
        FakeCoordinatorTest.waitFor(() -> router.ackedVersion() >= version, Duration.ofSeconds(5),
                () -> "the ack of v" + version + " (" + router.status() + ")");
    }

    @Test
    void anOpenWriteScopeHoldsBackTheAcknowledgementNotTheTables() throws Exception {
        try (Fake fake = new Fake()) {
            fake.scripts.add(List.of(routing(1, "log-1")));
            try (Router router = Router.connect(fake.url, new Router.Identity("writer-1", "az-a", "service"), options())) {
                assertTrue(router.waitForVersion(1, Duration.ofSeconds(5)), router.status().toString());
                waitAcked(router, 1);
                // A write in flight, judged with version 1, while versions 2 and 3 arrive: both are
                // applied (the stream is read on: a freeze among them takes effect at once),
                // neither is acknowledged.
                Router.WriteScope scope = router.writeScope();
                try {
                    fake.more.add(routing(2, "log-1"));
                    assertTrue(router.waitForVersion(2, Duration.ofSeconds(5)), router.status().toString());
                    assertEquals(2, router.tag("user-1").version(), "new checks use the new table");
                    fake.more.add(routing(3, "log-1"));
                    assertTrue(router.waitForVersion(3, Duration.ofSeconds(5)),
                            "version 3 was not read while a write scope was open: " + router.status());
                    Thread.sleep(200);
                    assertEquals(1, router.ackedVersion(), "acknowledged while a write was in flight");
                    assertEquals(List.of(1L), fake.acks);
                } finally {
                    scope.close();
                }
                waitAcked(router, 3);
                assertEquals(List.of(1L, 3L), fake.acks, "1, then 3 (covering 2)");
                System.out.println("[figures] write scope: v2 and v3 applied while it was open, one ack (v3) after it closed; acks "
                        + fake.acks);
            }
        }
    }

    @Test
    void aReconnectResumesFromTheAcknowledgedVersionOfItsLog() throws Exception {
        // A log id with characters to percent-encode.
        String log = "log 1/a+b";
        try (Fake fake = new Fake()) {
            fake.scripts.add(List.of(routing(1, log)));
            try (Router router = Router.connect(fake.url, new Router.Identity("writer-2", "az-a", "service"), options())) {
                waitAcked(router, 1);
                // Version 2 is applied while a write is in flight, then the stream breaks: the new
                // stream must not tell the server (which counts Last-Event-ID as applied) that 2 is.
                Router.WriteScope scope = router.writeScope();
                try {
                    fake.more.add(routing(2, log));
                    assertTrue(router.waitForVersion(2, Duration.ofSeconds(5)), router.status().toString());
                    fake.scripts.add(List.of());
                    fake.more.add(Fake.END);
                    FakeCoordinatorTest.waitFor(() -> fake.watches.size() >= 2, Duration.ofSeconds(5),
                            () -> "the reconnect (" + fake.watches + ", " + router.status() + ")");
                    String first = fake.watches.get(0);
                    String second = fake.watches.get(1);
                    assertEquals("/v1/routing/watch?subscriber_id=writer-2&zone=az-a&kind=service Last-Event-ID: null", first);
                    assertTrue(second.endsWith(" Last-Event-ID: 1"), "resumes from the acknowledged 1: " + second);
                    assertTrue(second.contains("&log_id=log%201%2Fa%2Bb"), "names its log: " + second);
                    assertEquals(1, router.ackedVersion());
                    assertEquals(2L, router.version());
                } finally {
                    scope.close();
                }
                // Once the scope is closed, version 2 is acknowledged to the coordinator that sent it.
                waitAcked(router, 2);
                assertEquals(List.of(1L, 2L), fake.acks);
                System.out.println("[figures] reconnect: " + fake.watches.get(1));
            }
        }
    }
}
