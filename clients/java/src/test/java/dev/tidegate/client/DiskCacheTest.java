package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** With the coordinator killed, a new Router starts from its disk cache and keeps tagging. */
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
}
