package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java partitioner against the Rust LaneProducer itself: {@code tidegate demo} runs the real
 * Rust producer into librdkafka's mock Kafka cluster (5 000 users, 8 partitions, two zones); an
 * independent reader (confluent-kafka, src/test/python/kafka_dump.py) reads every record back, and
 * for each one the partition the Rust producer
 * chose must be the one {@link LaneRing} gives for the record's key (the user) and the zone in
 * its {@code tg} route header, and, for records routed at the table the Java Router holds, the
 * one {@link LanePartitioner} gives from the table alone. The dial is moved to 0 % and 100 % blue
 * so every user is seen in both zones' ranges.
 */
class PartitionerTest {
    @Test
    void routeHeaderVectors() {
        assertArrayEquals(new byte[] {0x62, 0x0c}, RouteHeader.encode(0, 12));
        assertArrayEquals(new byte[] {0x67, (byte) 0xac, 0x02}, RouteHeader.encode(1, 300));
        assertEquals(new RouteHeader.Route(1, 300), RouteHeader.decode(new byte[] {0x67, (byte) 0xac, 0x02}));
    }

    @Test
    void theJavaPartitionerPutsEveryUserWhereTheRustLaneProducerDoes(@TempDir Path dir) throws Exception {
        Path bin = TidegateServer.binary();
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        ProcessBuilder pb = new ProcessBuilder(bin.toString(), "demo", "--port", Integer.toString(port),
                "--rate", "8000", "--status-every", "0", "--data-dir", dir.resolve("demo").toString());
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("RUST_LOG", "warn");
        pb.redirectErrorStream(true);
        Process demo = pb.start();
        StringBuffer output = new StringBuffer();
        CompletableFuture<String> bootstrap = new CompletableFuture<>();
        CompletableFuture<String> token = new CompletableFuture<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(demo.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (output.length() < 20_000) {
                        output.append(line).append('\n');
                    }
                    int at = line.indexOf("mock Kafka cluster at ");
                    if (at >= 0) {
                        bootstrap.complete(line.substring(at + "mock Kafka cluster at ".length()).trim());
                    }
                    if (line.trim().startsWith("export TIDEGATE_TOKEN=")) {
                        token.complete(line.trim().substring("export TIDEGATE_TOKEN=".length()));
                    }
                }
            } catch (Exception ignored) {
                // The demo ended.
            }
        });
        reader.setDaemon(true);
        reader.start();
        try {
            String kafka;
            String operator;
            try {
                kafka = bootstrap.get(60, TimeUnit.SECONDS);
                operator = token.get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new AssertionError("tidegate demo did not announce its mock Kafka and token:\n" + output, e);
            }
            String url = "http://127.0.0.1:" + port;
            Demo api = new Demo(url, operator);
            Router router = Router.connect(url, new Router.Identity("java-partitioner", "az-a", "service"), new Router.Options());
            LanePartitioner partitioner = new LanePartitioner(router::table);
            LaneRing ring = new LaneRing(8, 2);
            Map<Long, RoutingTable> tables = new HashMap<>();
            try {
                assertTrue(router.waitForVersion(1, Duration.ofSeconds(20)), router.status().toString());
                tables.put(router.version(), router.table());
                Thread.sleep(2500);
                // Every user through both zones' ranges: all blue, all green, back to half.
                for (int percent : new int[] {100, 0, 50}) {
                    long v = api.dial(percent);
                    assertTrue(router.waitForVersion(v, Duration.ofSeconds(10)), router.status().toString());
                    tables.put(v, router.table());
                    Thread.sleep(2500);
                }
                // The Rust producer's records, read back by an independent reader (librdkafka).
                Process dump = new ProcessBuilder(kafkaPython(), Path.of(System.getProperty("user.dir"))
                        .resolve("src/test/python/kafka_dump.py").toString(), kafka, "demo-orders", "8")
                        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
                Map<String, int[]> seen = new HashMap<>();
                Set<Long> versions = new HashSet<>();
                long records = 0;
                long viaTable = 0;
                long mismatched = 0;
                List<String> mismatches = new ArrayList<>();
                try (BufferedReader r = new BufferedReader(new InputStreamReader(dump.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        String[] f = line.split("\t", -1);
                        int partition = Integer.parseInt(f[0]);
                        String user = f[1];
                        RouteHeader.Route route = RouteHeader.decode(java.util.HexFormat.of().parseHex(f[2]));
                        records++;
                        versions.add(route.version());
                        int expected = ring.partition(route.zone(), user);
                        if (expected != partition) {
                            mismatched++;
                            if (mismatches.size() < 10) {
                                mismatches.add(user + " zone " + route.zone() + ": rust " + partition + ", java " + expected);
                            }
                        }
                        seen.computeIfAbsent(user, k -> new int[] {-1, -1})[route.zone()] = partition;
                        RoutingTable t = tables.get(route.version());
                        if (t != null) {
                            assertEquals(partition, partitioner.partitionOf(t, user, 8), user + " at v" + route.version());
                            viaTable++;
                        }
                    }
                }
                assertEquals(0, dump.waitFor(), "kafka_dump.py failed");
                long both = seen.values().stream().filter(z -> z[0] >= 0 && z[1] >= 0).count();
                long pairs = seen.values().stream().mapToLong(z -> (z[0] >= 0 ? 1 : 0) + (z[1] >= 0 ? 1 : 0)).sum();
                assertEquals(0, mismatched, "records on another partition than the Java rule gives: " + mismatches);
                assertEquals(5000, seen.size(), "every demo user was produced");
                assertEquals(5000, both, "every demo user was seen in both zones' ranges");
                assertTrue(viaTable > 0);
                System.out.printf("[figures] partitioner vs the Rust LaneProducer (tidegate demo into mock Kafka, 8 partitions, read back "
                        + "with librdkafka): %d records, %d users x both zones = %d user-zone pairs, 0 mismatches; %d records also "
                        + "checked through LanePartitioner with the table of their routing version (versions %s)%n",
                        records, seen.size(), pairs, viaTable, versions);

                // 100 000 users: the partitioner's zone range is the zone the coordinator tags the
                // user with (POST /v1/tag); within the range the ring was checked record by record above.
                RoutingTable t = router.table();
                int inRange = 0;
                for (int from = 0; from < 100_000; from += 10_000) {
                    StringBuilder ids = new StringBuilder("{\"user_ids\": [");
                    for (int i = from; i < from + 10_000; i++) {
                        ids.append(i == from ? "" : ",").append("\"u").append(i).append('"');
                    }
                    ids.append("]}");
                    var tags = api.post("/v1/tag", ids.toString()).get("tags");
                    for (int i = 0; i < 10_000; i++) {
                        String user = "u" + (from + i);
                        int zone = t.zoneIndex(tags.get(i).get("color").asText());
                        int[] range = ring.range(zone);
                        int part = partitioner.partitionOf(t, user, 8);
                        assertTrue(part >= range[0] && part < range[1], user + " zone " + zone + " partition " + part);
                        inRange++;
                    }
                }
                System.out.println("[figures] partitioner: " + inRange + " users on a partition of the range of the zone POST /v1/tag gives (v" + t.version() + ")");
            } finally {
                router.close();
            }
        } finally {
            demo.destroy();
            if (!demo.waitFor(5, TimeUnit.SECONDS)) {
                demo.destroyForcibly();
            }
        }
    }

    /** The Python with confluent-kafka that reads the mock cluster (scripts/client-java.sh installs it). */
    static String kafkaPython() {
        String py = System.getenv("TIDEGATE_KAFKA_PYTHON");
        if (py == null || py.isBlank()) {
            py = System.getProperty("user.home") + "/.cache/tidegate-client-java/venv/bin/python";
        }
        if (!java.nio.file.Files.isExecutable(Path.of(py))) {
            throw new IllegalStateException(py + " is missing: run scripts/client-java.sh (it installs confluent-kafka "
                    + "in a venv), or set TIDEGATE_KAFKA_PYTHON to a Python with confluent-kafka");
        }
        return py;
    }

    /** The demo's operator API. */
    record Demo(String url, String token) {
        com.fasterxml.jackson.databind.JsonNode post(String path, String body) throws Exception {
            java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
            var req = java.net.http.HttpRequest.newBuilder(java.net.URI.create(url + path))
                    .header("Authorization", "Bearer " + token).header("Content-Type", "application/json")
                    .POST(java.net.http.HttpRequest.BodyPublishers.ofString(body)).build();
            var r = http.send(req, java.net.http.HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new AssertionError(path + ": " + r.statusCode() + " " + r.body());
            }
            return TidegateServer.JSON.readTree(r.body());
        }

        long dial(int percent) throws Exception {
            java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
            var get = java.net.http.HttpRequest.newBuilder(java.net.URI.create(url + "/v1/routing")).build();
            long v = TidegateServer.JSON.readTree(http.send(get, java.net.http.HttpResponse.BodyHandlers.ofString()).body())
                    .get("version").asLong();
            String body = "{\"blue_percent\": " + percent + ", \"expected_version\": " + v + ", \"reason\": \"java partitioner test\"}";
            var put = java.net.http.HttpRequest.newBuilder(java.net.URI.create(url + "/v1/dial"))
                    .header("Authorization", "Bearer " + token).header("Content-Type", "application/json")
                    .PUT(java.net.http.HttpRequest.BodyPublishers.ofString(body)).build();
            var r = http.send(put, java.net.http.HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new AssertionError("dial " + percent + ": " + r.statusCode() + " " + r.body());
            }
            return v + 1;
        }
    }
}
