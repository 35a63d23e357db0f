package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * With the coordinator killed, a new Router starts from its disk cache and keeps tagging; a disk
 * cache of another command log is refused at once, even at the coordinator's current version.
 */
class DiskCacheTest {
    @Test
    void aRestartedRouterTagsFromItsCacheWhileTheCoordinatorIsDown(@TempDir Path dir) throws Exception {
        Path cache = dir.resolve("tidegate-cache.json");
        List<Tag> before = new ArrayList<>();
        String url;
        long version;
        String log;
        TidegateServer server = TidegateServer.start(dir.resolve("server"), TidegateServer.config("", ""));
        try {
            url = server.url;
            RouterFollowTest.dial(server, 30);
            server.ok("PUT", "/v1/pins/user-7", TagAgreementTest.obj().put("color", "green")
                    .put("expected_version", server.version()).put("reason", "t"));
            version = server.version();
            log = server.routing().path("log_id").asText(null);
            Router.Options o = new Router.Options().token(TidegateServer.SERVICE_TOKEN).cachePath(cache);
            try (Router router = Router.connect(url, new Router.Identity("java-cached", "az-a", "service"), o)) {
                assertTrue(router.waitForVersion(version, Duration.ofSeconds(20)), router.status().toString());
                // The table is stored before it is saved: wait for the file.
                FakeCoordinatorTest.waitFor(() -> Files.exists(cache), Duration.ofSeconds(5), "the disk cache");
                server.kill();
                for (int i = 0; i < 10_000; i++) {
                    before.add(router.tag("user-" + i));
                }
            }
        } finally {
            server.close();
        }
        Router.Options o = new Router.Options().token(TidegateServer.SERVICE_TOKEN).cachePath(cache);
        o.backoffMax = Duration.ofMillis(200);
        try (Router restarted = Router.connect(url, new Router.Identity("java-cached", "az-a", "service"), o)) {
            assertEquals(version, restarted.version());
            assertEquals(Router.Origin.DISK_CACHE, restarted.status().origin());
            assertNotNull(log);
            assertEquals(log, restarted.logId(), "the cache keeps the command log");
            for (int i = 0; i < 10_000; i++) {
                assertEquals(before.get(i), restarted.tag("user-" + i));
            }
            assertTrue(restarted.tag("user-7").pinned());
            Thread.sleep(300);
            assertFalse(restarted.status().connected());
            System.out.println("[figures] disk cache: coordinator killed, restarted client serves v" + version
                    + " (log " + log + ") and gives the same 10 000 tags; status: " + restarted.status());
        }
    }

    /**
     * The coordinator's log was replaced (a new data directory) and has reached the version of the
     * client's cached table. Resuming with Last-Event-ID of that version alone, the client would be
     * sent nothing (not newer) and serve the old log's table without a word; with {@code log_id}
     * the coordinator sends its current table, which the client refuses, and says so.
     */
    @Test
    void aCacheOfAnotherLogAtTheServersVersionIsRefusedPromptly(@TempDir Path dir) throws Exception {
        Path cache = dir.resolve("tidegate-cache.json");
        // No service tokens: reads (a plain watcher's stream) are open to anonymous callers; the
        // registered subscriber uses the operator token (a writer).
        String open = TidegateServer.config("", "").replaceFirst("service_tokens_sha256 = .*\n", "");
        long version;
        String oldLog;
        try (TidegateServer old = TidegateServer.start(dir.resolve("old"), open)) {
            RouterFollowTest.dial(old, 30);
            RouterFollowTest.dial(old, 60);
            version = old.version();
            oldLog = old.routing().path("log_id").asText(null);
            Router.Options o = new Router.Options().cachePath(cache);
            try (Router router = Router.connect(old.url, new Router.Identity("java-old-log", "az-a", "service"), o)) {
                assertTrue(router.waitForVersion(version, Duration.ofSeconds(20)), router.status().toString());
                // The table is stored before it is saved: wait for the file.
                FakeCoordinatorTest.waitFor(() -> {
                    RoutingTable saved = Router.loadCache(cache);
                    return saved != null && saved.version() == version;
                }, Duration.ofSeconds(5), "the disk cache at v" + version);
            }
        }
        String cached = Files.readString(cache);
        try (TidegateServer server = TidegateServer.start(dir.resolve("new"), open)) {
            for (int i = 0; server.version() < version; i++) {
                RouterFollowTest.dial(server, 10 + 7 * i);
            }
            assertEquals(version, server.version(), "the new log is at the cached version");
            String newLog = server.routing().path("log_id").asText(null);
            assertNotNull(oldLog);
            assertNotEquals(oldLog, newLog);
            // A plain watcher resumes from the version it holds (the cached one); a registered
            // subscriber from the version it acknowledged (none yet, in this process).
            for (String token : new String[] {null, TidegateServer.OPERATOR_TOKEN}) {
                Path copy = dir.resolve(token == null ? "watcher.json" : "subscriber.json");
                Files.writeString(copy, cached);
                Router.Options o = new Router.Options().token(token).cachePath(copy);
                String id = token == null ? "java-watcher" : "java-subscriber";
                long start = System.nanoTime();
                try (Router router = Router.connect(server.url, new Router.Identity(id, "az-a", "service"), o)) {
                    assertEquals(version, router.version());
                    assertEquals(oldLog, router.logId());
                    FakeCoordinatorTest.waitFor(() -> router.status().refused() != null, Duration.ofSeconds(4),
                            () -> id + "'s refusal of the new log's table (" + router.status() + ")");
                    double took = (System.nanoTime() - start) / 1e6;
                    Router.Status status = router.status();
                    assertTrue(status.refused().contains("version " + version + " of command log " + newLog), status.refused());
                    assertTrue(status.refused().contains(copy.toString()), "names the cache: " + status.refused());
                    assertTrue(status.toString().contains("refused the table"), status.toString());
                    assertEquals(version, router.version());
                    assertEquals(oldLog, router.logId());
                    assertEquals(cached, Files.readString(copy), "the cache is not overwritten");
                    if (token != null) {
                        Thread.sleep(300);
                        assertEquals(0, router.ackedVersion(), "a refused table is not acknowledged");
                        JsonNode c = server.ok("GET", "/v1/routing/convergence?version=" + version, null);
                        assertEquals(0, c.get("converged").asInt(), "not counted as applied: " + c);
                        assertEquals(id, c.get("behind").get(0).get("subscriber_id").asText(), c.toString());
                    }
                    System.out.printf("[figures] %s with a cache of another log at v%d: refused after %.0f ms: %s%n",
                            id, version, took, status);
                }
            }
        }
    }
}
