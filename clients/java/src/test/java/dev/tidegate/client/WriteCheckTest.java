package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The write contract against a real coordinator: a stale callee answers behind (never
 * misrouted), a fresh non-owner forwards once and refuses the second hop, the owner writes, and
 * a loss-less drain's frozen units answer frozen while a stuck subscriber holds the freeze.
 */
class WriteCheckTest {
    static final String CONFIG = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n";

    static String userInUnits(RoutingTable t, int from, int to) throws TagException {
        for (int i = 0; ; i++) {
            int u = t.unitOf("user-" + i);
            if (u >= from && u <= to) {
                return "user-" + i;
            }
        }
    }

    @Test
    void aStaleCalleeIsBehindAndAMisroutedWriteIsForwardedOnce(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir.resolve("server"), TidegateServer.config("", CONFIG))) {
            Path freshCache = dir.resolve("fresh.json");
            Path staleCache = dir.resolve("stale.json");
            Router.Options o = new Router.Options().token(TidegateServer.SERVICE_TOKEN).cachePath(freshCache);
            try (Router fresh = Router.connect(server.url, new Router.Identity("java-writer-fresh", "az-a", "service"), o)) {
                long v0 = server.version();
                assertTrue(fresh.waitForVersion(v0, Duration.ofSeconds(20)));
                FakeCoordinatorTest.waitFor(() -> Files.exists(freshCache), Duration.ofSeconds(5), "the disk cache");
                // A callee that missed the next version: it runs from a copy of the table at v0.
                Files.copy(freshCache, staleCache);
                Router.Options so = new Router.Options().token(TidegateServer.SERVICE_TOKEN).cachePath(staleCache);
                try (Router stale = Router.connect("http://127.0.0.1:1", new Router.Identity("java-writer-stale", "az-a", "service"), so)) {
                    RoutingTable t0 = fresh.table();
                    int blue0 = t0.unitsOwned()[0];
                    // Move blue from its share down to 20 units: units 20..blue0-1 go from blue to green.
                    RouterFollowTest.dial(server, 20);
                    long v1 = server.version();
                    assertTrue(fresh.waitForVersion(v1, Duration.ofSeconds(10)));
                    String user = userInUnits(t0, 20, blue0 - 1);
                    Tag old = t0.tag(user);
                    Tag now = fresh.tag(user);
                    String oldZone = old.zone();
                    String newZone = now.zone();
                    assertTrue(!oldZone.equals(newZone), old + " vs " + now);

                    // The caller routed at v1 to the new owner, whose table is still v0: behind.
                    RoutingTable.WriteAnswer behind = stale.checkWrite(user, newZone, v1);
                    assertEquals(WriteCheck.BEHIND, behind.check());
                    assertEquals(503, behind.status());
                    assertEquals(250, behind.retryAfterMs());
                    Headers.WriteRoute r = Headers.forwardOnce(behind, null);
                    assertInstanceOf(Headers.Refuse.class, r);
                    assertEquals(503, ((Headers.Refuse) r).status());
                    // Even when the stale table says it owns the user, a newer caller is behind.
                    assertEquals(WriteCheck.BEHIND, stale.checkWrite(user, oldZone, v1).check());
                    // A caller on v0 reaching the old owner that is current: misrouted, forwarded once.
                    RoutingTable.WriteAnswer mis = fresh.checkWrite(user, oldZone, v0);
                    assertEquals(WriteCheck.MISROUTED, mis.check());
                    assertEquals(newZone, mis.ownerZone());
                    Headers.WriteRoute fwd = Headers.forwardOnce(mis, null);
                    Headers.Forward forward = assertInstanceOf(Headers.Forward.class, fwd);
                    assertEquals(newZone, forward.zone());
                    assertEquals("1", forward.headers().get(Headers.HOP_HEADER));
                    assertEquals(Long.toString(v1), forward.headers().get(Headers.VERSION_HEADER));
                    assertEquals(now.lane(), forward.headers().get(Headers.COLOR_HEADER));
                    // The forwarded write at the owner, with the forwarded version: owned.
                    long forwardedVersion = Long.parseLong(forward.headers().get(Headers.VERSION_HEADER));
                    try (Router.WriteScope scope = fresh.writeScope()) {
                        RoutingTable.WriteAnswer owned = fresh.checkWrite(user, newZone, forwardedVersion);
                        assertEquals(WriteCheck.OWNED, owned.check());
                        assertInstanceOf(Headers.Write.class, Headers.forwardOnce(owned, "1"));
                    }
                    // A write that already took its hop and is misrouted again: 421, never a second hop.
                    Headers.WriteRoute second = Headers.forwardOnce(fresh.checkWrite(user, oldZone, v1), "1");
                    assertEquals(421, assertInstanceOf(Headers.Refuse.class, second).status());
                    // Propagation: a stale propagated colour is recomputed from the user ID.
                    Headers.Resolved resolved = Headers.resolve(fresh,
                            h -> h.equals(Headers.COLOR_HEADER) ? old.lane() : h.equals(Headers.VERSION_HEADER) ? Long.toString(v0) : null, user);
                    assertEquals(Headers.Source.RECOMPUTED, resolved.source());
                    assertEquals(now.lane(), resolved.lane());
                    Headers.Resolved kept = Headers.resolve(fresh,
                            h -> h.equals(Headers.COLOR_HEADER) ? now.lane() : h.equals(Headers.VERSION_HEADER) ? Long.toString(v1) : null, user);
                    assertEquals(Headers.Source.PROPAGATED, kept.source());
                    assertEquals(Headers.headersFor(now), kept.headers());
                    System.out.println("[figures] stale callee (v" + v0 + ", caller at v" + v1 + "): behind/503/retry 250 ms; "
                            + "current old owner " + oldZone + ": misrouted -> forwarded once to " + newZone + " (hop 1), owned there; "
                            + "second hop refused 421");
                }
                // The stale callee restarted against the coordinator catches up from its cache and owns the write.
                Router.Options co = new Router.Options().token(TidegateServer.SERVICE_TOKEN).cachePath(staleCache);
                try (Router caught = Router.connect(server.url, new Router.Identity("java-writer-stale", "az-a", "service"), co)) {
                    long v1 = server.version();
                    assertTrue(caught.waitForVersion(v1, Duration.ofSeconds(10)));
                    String user = userInUnits(fresh.table(), 20, 20);
                    // Owned once the coordinator's first confirmation reached the restarted Router
                    // (its table came from the cache; the stream's lease holds from that heartbeat on).
                    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
                    WriteCheck answer = caught.checkWrite(user, fresh.tag(user).zone(), v1).check();
                    while (answer == WriteCheck.UNCONFIRMED && System.nanoTime() < deadline) {
                        Thread.sleep(10);
                        answer = caught.checkWrite(user, fresh.tag(user).zone(), v1).check();
                    }
                    assertEquals(WriteCheck.OWNED, answer);
                }
            }
        }
    }

    @Test
    void aLossLessDrainsFrozenUnitsAnswerFrozen(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("", CONFIG))) {
            AtomicBoolean stop = new AtomicBoolean();
            Thread feeder = new Thread(() -> {
                while (!stop.get()) {
                    try {
                        ArrayNode batch = TidegateServer.JSON.createArrayNode();
                        batch.addObject().put("zone", "az-b").put("color", "blue").put("ok", 100).put("error", 0);
                        batch.addObject().put("zone", "az-a").put("color", "green").put("ok", 100).put("error", 0);
                        server.call("POST", "/v1/outcomes", TidegateServer.OPERATOR_TOKEN, batch);
                        Thread.sleep(50);
                    } catch (Exception e) {
                        return;
                    }
                }
            });
            feeder.setDaemon(true);
            feeder.start();
            Router.Options ok = new Router.Options().token(TidegateServer.SERVICE_TOKEN);
            Router.Options stuckO = new Router.Options().token(TidegateServer.SERVICE_TOKEN).acknowledge(false);
            try (Router writer = Router.connect(server.url, new Router.Identity("java-writer", "az-b", "service"), ok);
                 Router stuck = Router.connect(server.url, new Router.Identity("java-stuck-writer", "az-b", "service"), stuckO)) {
                assertTrue(writer.waitForVersion(1, Duration.ofSeconds(20)) && stuck.waitForVersion(1, Duration.ofSeconds(20)));
                Thread.sleep(1200);
                ObjectNode req = TagAgreementTest.obj().put("zone", "az-b").put("target_percent", 0).put("step_percent", 10)
                        .put("interval", "200ms").put("freeze", true).put("freeze_window", "3s").put("reason", "java freeze test");
                req.putObject("guard").put("max_error_rate", 0.02).put("min_requests", 10).put("breaches", 2).put("on_breach", "pause");
                server.ok("POST", "/v1/drains", req);
                JsonNode freeze = null;
                long end = System.nanoTime() + 10_000_000_000L;
                while (System.nanoTime() < end) {
                    JsonNode d = server.ok("GET", "/v1/drains/1", null);
                    if ("freezing".equals(d.path("freeze").path("current").path("phase").asText())) {
                        freeze = d.get("freeze").get("current");
                        break;
                    }
                    Thread.sleep(20);
                }
                assertTrue(freeze != null, "the drain never froze: " + server.ok("GET", "/v1/drains/1", null));
                String units = freeze.get("units").asText();
                long frozenVersion = freeze.get("frozen_version").asLong();
                assertTrue(writer.waitForVersion(frozenVersion, Duration.ofSeconds(10)));
                UnitSet set = UnitSet.parse(units, 100);
                RoutingTable t = writer.table();
                String inside = null;
                String outside = null;
                for (int i = 0; inside == null || outside == null; i++) {
                    String u = "user-" + i;
                    if (set.contains(t.unitOf(u))) {
                        inside = inside == null ? u : inside;
                    } else {
                        outside = outside == null ? u : outside;
                    }
                }
                RoutingTable.WriteAnswer frozen = writer.checkWrite(inside, writer.tag(inside).zone(), frozenVersion);
                assertEquals(WriteCheck.FROZEN, frozen.check());
                assertEquals(503, frozen.status());
                assertEquals(WriteCheck.FROZEN, writer.checkWrite(inside, "az-a", null).check(), "frozen before misrouted");
                assertEquals(WriteCheck.BEHIND, writer.checkWrite(inside, "az-b", frozenVersion + 5).check(), "behind before frozen");
                assertEquals(WriteCheck.OWNED, writer.checkWrite(outside, writer.tag(outside).zone(), frozenVersion).check());
                System.out.println("[figures] loss-less drain: units " + units + " frozen at v" + frozenVersion
                        + " (held by a non-acking subscriber): frozen/503 for " + inside + ", owned for " + outside);
            } finally {
                stop.set(true);
            }
        }
    }
}
