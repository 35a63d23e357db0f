package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Bad input from the coordinator side, from a fake coordinator (com.sun.net.httpserver): a
 * malformed event, an unknown wire form (unit mode, hash), a table of another command log, and
 * a coordinator that goes silent. Each is refused with a clear error and the last good table is
 * kept; the silent one is left for the next coordinator within the stall bound.
 */
class FakeCoordinatorTest {
    /**
     * A fake coordinator: each watch connection sends the next script of the queue, then holds,
     * sending what is put in {@code more} as it comes ({@link #END} ends the stream) and heartbeats.
     * It records each watch request (path and query, then its Last-Event-ID) and answers acks
     * ({@code POST /v1/subscribers/{id}/ack}) with 200, recording their versions. With
     * {@code leaseMs} set it announces that lease ({@code x-tidegate-lease-ms}); {@code heartbeat}
     * gives each heartbeat frame (a confirming one, for the lease tests).
     */
    static final class Fake implements AutoCloseable {
        /** Put in {@code more}: the open watch stream ends there. */
        static final String END = "\0end";
        final HttpServer server;
        final BlockingQueue<List<String>> scripts = new LinkedBlockingQueue<>();
        final BlockingQueue<String> more = new LinkedBlockingQueue<>();
        final List<String> watches = new CopyOnWriteArrayList<>();
        final List<Long> acks = new CopyOnWriteArrayList<>();
        final String url;
        volatile boolean heartbeats = true;
        volatile Long leaseMs;
        volatile Supplier<String> heartbeat = () -> ": heartbeat\n\n";

        Fake() throws Exception {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r);
                t.setDaemon(true);
                return t;
            }));
            server.createContext("/v1/routing/watch", exchange -> {
                watches.add(exchange.getRequestURI() + " Last-Event-ID: "
                        + exchange.getRequestHeaders().getFirst("Last-Event-ID"));
                try {
                    // Answer only once the test has queued what this connection sends, so the
                    // client's error from the previous connection stays readable until then.
                    List<String> script = scripts.poll(30, TimeUnit.SECONDS);
                    if (script == null) {
                        exchange.close();
                        return;
                    }
                    exchange.getResponseHeaders().add("content-type", "text/event-stream");
                    Long lease = leaseMs;
                    if (lease != null) {
                        exchange.getResponseHeaders().add(SseConnection.LEASE_HEADER, lease.toString());
                    }
                    exchange.sendResponseHeaders(200, 0);
                    try (OutputStream out = exchange.getResponseBody()) {
                    for (String frame : script) {
                        out.write(frame.getBytes(StandardCharsets.UTF_8));
                        out.flush();
                    }
                    for (int i = 0; i < 600; i++) {
                        String frame = more.poll(50, TimeUnit.MILLISECONDS);
                        if (END.equals(frame)) {
                            return;
                        }
                        if (frame != null) {
                            out.write(frame.getBytes(StandardCharsets.UTF_8));
                            out.flush();
                        }
                        if (heartbeats) {
                            out.write(heartbeat.get().getBytes(StandardCharsets.UTF_8));
                            out.flush();
                        }
                    }
                    }
                } catch (Exception ignored) {
                    // The client went away.
                }
            });
            server.createContext("/v1/subscribers/", exchange -> {
                try (exchange) {
                    byte[] body = exchange.getRequestBody().readAllBytes();
                    if (exchange.getRequestMethod().equals("POST") && exchange.getRequestURI().getPath().endsWith("/ack")) {
                        acks.add(RoutingTable.JSON.readTree(body).get("version").asLong());
                    }
                    byte[] answer = "{}".getBytes(StandardCharsets.UTF_8);
                    exchange.getResponseHeaders().add("content-type", "application/json");
                    exchange.sendResponseHeaders(200, answer.length);
                    exchange.getResponseBody().write(answer);
                }
            });
            server.start();
            url = "http://127.0.0.1:" + server.getAddress().getPort();
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    static ObjectNode table(long version, String log) {
        ObjectNode t = FixturesTest.dialTable(version, 100, 50, "hash");
        t.put("log_id", log);
        return t;
    }

    static String event(String data) {
        return "id: 1\nevent: routing\ndata: " + data + "\n\n";
    }

    static void waitFor(BooleanSupplier cond, Duration timeout, String what) throws InterruptedException {
        waitFor(cond, timeout, () -> what);
    }

    /** As above, with {@code what} told when the wait times out (a status as it is then). */
    static void waitFor(BooleanSupplier cond, Duration timeout, Supplier<String> what) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting for " + what.get());
            }
            Thread.sleep(5);
        }
    }

    @Test
    void malformedAndUnknownTablesAreRefusedAndTheLastGoodOneKept() throws Exception {
        try (Fake fake = new Fake()) {
            Router.Options o = new Router.Options();
            o.backoffMin = Duration.ofMillis(10);
            o.backoffMax = Duration.ofMillis(50);
            fake.scripts.add(List.of(event(table(3, "log-a").toString()), event("{\"version\": 4, \"units\": ")));
            try (Router router = Router.connect(fake.url, new Router.Identity("fake-1", "az-a", "service"), o)) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(10)));
                Tag before = router.tag("user-42");
                waitFor(() -> router.status().lastError() != null && router.status().lastError().contains("bad routing event"),
                        Duration.ofSeconds(10), "the malformed event's error");
                System.out.println("[figures] malformed event refused: " + router.status().lastError());
                assertEquals(3L, router.version());

                ObjectNode unknownMode = table(5, "log-a");
                unknownMode.put("unit_mode", "base32");
                fake.scripts.add(List.of(event(unknownMode.toString())));
                waitFor(() -> String.valueOf(router.status().lastError()).contains("unknown unit_mode `base32`"),
                        Duration.ofSeconds(10), "the unknown unit mode's error");
                ObjectNode unknownHash = table(6, "log-a");
                unknownHash.put("hash", "xxh4_128(seed=7) mod units");
                fake.scripts.add(List.of(event(unknownHash.toString())));
                waitFor(() -> String.valueOf(router.status().lastError()).contains("unknown hash"),
                        Duration.ofSeconds(10), "the unknown hash's error");
                System.out.println("[figures] unknown wire form refused: " + router.status().lastError());
                ObjectNode badVersion = table(7, "log-a");
                badVersion.put("version", "seven");
                fake.scripts.add(List.of(event(badVersion.toString())));
                waitFor(() -> String.valueOf(router.status().lastError()).contains("`version` is not a whole number"),
                        Duration.ofSeconds(10), "the bad version's error");
                ObjectNode gap = table(8, "log-a");
                gap.putArray("zones").addObject().put("index", 0).put("name", "az-a").put("lane", "blue").put("class", "rzone");
                ((com.fasterxml.jackson.databind.node.ArrayNode) gap.get("zones")).addObject()
                        .put("index", 1).put("name", "az-b").put("lane", "green").put("class", "rzone");
                gap.putArray("unit_map").addObject().put("units", "0-49").put("zone", "az-a").put("lane", "blue");
                fake.scripts.add(List.of(event(gap.toString())));
                waitFor(() -> String.valueOf(router.status().lastError()).contains("gap or overlap"),
                        Duration.ofSeconds(10), "the unit map gap's error");
                assertEquals(3L, router.version(), "the last good table is kept");
                assertEquals(before, router.tag("user-42"));

                // Another command log's table: refused whatever its version, not acknowledged.
                fake.scripts.add(List.of(event(table(9, "log-b").toString())));
                waitFor(() -> router.status().refused() != null, Duration.ofSeconds(10), "the other log's refusal");
                assertTrue(router.status().refused().contains("of command log log-b"), router.status().refused());
                assertEquals(3L, router.version());
                assertEquals("log-a", router.logId());
                System.out.println("[figures] other-log table refused: " + router.status());
            }
        }
    }

    @Test
    void decoderErrorsAreClear() {
        DecodeException e = assertThrows(DecodeException.class, () -> RoutingTable.decode("[1,2]"));
        assertTrue(e.getMessage().contains("not a JSON object"), e.getMessage());
        ObjectNode t = table(1, "x");
        t.remove("units");
        e = assertThrows(DecodeException.class, () -> RoutingTable.decode(t.toString()));
        assertTrue(e.getMessage().contains("missing `units`"), e.getMessage());
        ObjectNode pin = table(1, "x");
        ((ObjectNode) pin.get("pins")).put("u1", "purple");
        e = assertThrows(DecodeException.class, () -> RoutingTable.decode(pin.toString()));
        assertTrue(e.getMessage().contains("unknown lane `purple`"), e.getMessage());
    }

    @Test
    void aSilentCoordinatorIsLeftWithinTheStallBoundForTheNextOne() throws Exception {
        try (Fake hung = new Fake(); Fake healthy = new Fake()) {
            hung.heartbeats = false;
            hung.scripts.add(List.of(event(table(3, "log-a").toString())));
            healthy.scripts.add(List.of(event(table(4, "log-a").toString())));
            Router.Options o = new Router.Options().readTimeout(Duration.ofSeconds(1));
            o.backoffMin = Duration.ofMillis(10);
            // Pick a subscriber ID whose first choice is the hung coordinator.
            String id = "";
            for (int i = 0; ; i++) {
                if (Router.firstChoice("stall-" + i, 2) == 0) {
                    id = "stall-" + i;
                    break;
                }
            }
            long start = System.nanoTime();
            try (Router router = Router.connect(hung.url + "," + healthy.url, new Router.Identity(id, "az-a", "service"), o)) {
                assertTrue(router.waitForVersion(3, Duration.ofSeconds(5)));
                assertTrue(router.waitForVersion(4, Duration.ofSeconds(5)), router.status().toString());
                double took = (System.nanoTime() - start) / 1e9;
                assertTrue(router.status().reconnects() >= 1);
                assertNotNull(router.status().coordinator());
                assertEquals(healthy.url, router.status().coordinator());
                System.out.printf("[figures] stall bound 1 s: left the silent coordinator for the next one after %.2f s%n", took);
            }
        }
    }
}
