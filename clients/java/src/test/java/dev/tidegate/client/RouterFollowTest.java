package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Router follows dial moves of a real coordinator and acknowledges each version; a client
 * that stops acknowledging holds the version's convergence.
 */
class RouterFollowTest {
    static JsonNode dial(TidegateServer server, int percent) throws Exception {
        return server.ok("PUT", "/v1/dial", TagAgreementTest.obj().put("blue_percent", percent)
                .put("expected_version", server.version()).put("reason", "java follow test"));
    }

    static double percentile(List<Double> sorted, double p) {
        int i = (int) Math.ceil(p / 100.0 * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, i)));
    }

    @Test
    void followsTwentyDialMovesAndAcknowledgesEach(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("", ""))) {
            Router.Options options = new Router.Options().token(TidegateServer.SERVICE_TOKEN);
            try (Router router = Router.connect(server.url, new Router.Identity("java-follower", "az-a", "service"), options)) {
                assertTrue(router.waitForVersion(server.version(), Duration.ofSeconds(20)), router.status().toString());
                List<Double> applied = new ArrayList<>();
                List<Double> ackedMs = new ArrayList<>();
                List<Double> put = new ArrayList<>();
                List<Double> appliedFromSend = new ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    int percent = (i * 37 + 11) % 101;
                    long version = server.version() + 1;
                    long sent = System.nanoTime();
                    server.ok("PUT", "/v1/dial", TagAgreementTest.obj().put("blue_percent", percent == 50 ? 51 : percent)
                            .put("expected_version", version - 1).put("reason", "java follow test"));
                    long t0 = System.nanoTime();
                    put.add((t0 - sent) / 1e6);
                    while (router.version() == null || router.version() < version) {
                        if (System.nanoTime() - t0 > 10_000_000_000L) {
                            throw new AssertionError("did not apply v" + version + ": " + router.status());
                        }
                        Thread.onSpinWait();
                    }
                    applied.add((System.nanoTime() - t0) / 1e6);
                    appliedFromSend.add((System.nanoTime() - sent) / 1e6);
                    while (router.ackedVersion() < version) {
                        if (System.nanoTime() - t0 > 10_000_000_000L) {
                            throw new AssertionError("did not acknowledge v" + version + ": " + router.status());
                        }
                        Thread.onSpinWait();
                    }
                    ackedMs.add((System.nanoTime() - t0) / 1e6);
                }
                long last = server.version();
                JsonNode convergence = server.ok("GET", "/v1/routing/convergence?version=" + last, null);
                assertEquals(1, convergence.get("converged").asInt(), convergence.toString());
                JsonNode subs = server.ok("GET", "/v1/subscribers", null);
                assertTrue(subs.toString().contains("java-follower"), subs.toString());
                Collections.sort(applied);
                Collections.sort(ackedMs);
                Collections.sort(put);
                Collections.sort(appliedFromSend);
                System.out.printf("[figures] follow: 20 dial moves; from the PUT /v1/dial answer: applied p50 %.1f ms / p99 %.1f ms, "
                        + "acknowledged p50 %.1f ms / p99 %.1f ms; from sending the PUT: applied p50 %.1f ms / p99 %.1f ms "
                        + "(the PUT itself p50 %.1f ms / p99 %.1f ms)%n",
                        percentile(applied, 50), percentile(applied, 99),
                        percentile(ackedMs, 50), percentile(ackedMs, 99),
                        percentile(appliedFromSend, 50), percentile(appliedFromSend, 99),
                        percentile(put, 50), percentile(put, 99));
            }
        }
    }

    @Test
    void aClientThatStopsAcknowledgingHoldsConvergence(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("", ""))) {
            Router.Options ok = new Router.Options().token(TidegateServer.SERVICE_TOKEN);
            Router.Options stuckOptions = new Router.Options().token(TidegateServer.SERVICE_TOKEN).acknowledge(false);
            try (Router healthy = Router.connect(server.url, new Router.Identity("java-healthy", "az-a", "service"), ok);
                 Router stuck = Router.connect(server.url, new Router.Identity("java-stuck", "az-b", "service"), stuckOptions)) {
                long v0 = server.version();
                assertTrue(healthy.waitForVersion(v0, Duration.ofSeconds(20)) && stuck.waitForVersion(v0, Duration.ofSeconds(20)));
                dial(server, 70);
                long v = server.version();
                assertTrue(healthy.waitForVersion(v, Duration.ofSeconds(10)) && stuck.waitForVersion(v, Duration.ofSeconds(10)));
                long end = System.nanoTime() + 10_000_000_000L;
                while (healthy.ackedVersion() < v && System.nanoTime() < end) {
                    Thread.sleep(5);
                }
                Thread.sleep(1500);
                JsonNode c = server.ok("GET", "/v1/routing/convergence?version=" + v, null);
                assertEquals(2, c.get("live").asInt(), c.toString());
                assertEquals(1, c.get("converged").asInt(), c.toString());
                assertEquals(false, c.get("complete").asBoolean(), c.toString());
                assertEquals("java-stuck", c.get("behind").get(0).get("subscriber_id").asText(), c.toString());
                assertEquals(0, stuck.ackedVersion());
                System.out.println("[figures] non-acking client holds convergence of v" + v + ": live " + c.get("live")
                        + ", converged " + c.get("converged") + ", behind " + c.get("behind").get(0).get("subscriber_id")
                        + " for " + c.get("behind").get(0).path("behind_for_ms") + " ms");
            }
        }
    }
}
