package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Java lane consumers in two zones on a real Kafka broker ({@code TIDEGATE_TEST_KAFKA}, which
 * scripts/client-java.sh starts with scripts/kafka.sh) and a real coordinator: each zone's
 * consumer reads its zone's range; a dial move to 0 % blue drains az-b, and once its range is
 * read empty it moves to az-a's consumer; a consumer that crashes (stops heartbeating without
 * leaving) loses its partitions to the other within two session timeouts. Throughout, no
 * partition has two readers (each consumer reports its partitions after a release, before the
 * coordinator can hear of it, and after an acquisition), and every record the Java producer
 * (with LanePartitioner) wrote is read.
 */
class LaneConsumerTest {
    static void waitFor(BooleanSupplier cond, long ms, String what) throws InterruptedException {
        long end = System.nanoTime() + ms * 1_000_000L;
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    @Test
    void consumersInTwoZonesFollowADrainAndACrashWithoutTwoReaders(@TempDir Path dir) throws Exception {
        String kafka = System.getenv("TIDEGATE_TEST_KAFKA");
        if (kafka == null || kafka.isBlank()) {
            throw new IllegalStateException("TIDEGATE_TEST_KAFKA is not set: the bootstrap address of a Kafka broker "
                    + "(scripts/client-java.sh starts one with scripts/kafka.sh)");
        }
        String topic = "java-lanes-" + Long.toHexString(System.nanoTime());
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", kafka))) {
            admin.createTopics(List.of(new NewTopic(topic, 8, (short) 1))).all().get();
        }
        String lanes = "[lanes]\nkafka_bootstrap = \"" + kafka + "\"\nsession_timeout = \"3s\"\n"
                + "heartbeat_interval = \"300ms\"\nlag_interval = \"300ms\"\n";
        try (TidegateServer server = TidegateServer.start(dir, TidegateServer.config("", lanes))) {
            Router router = Router.connect(server.url, new Router.Identity("java-lane-producer", "az-a", "service"),
                    new Router.Options().token(TidegateServer.SERVICE_TOKEN));
            assertTrue(router.waitForVersion(1, Duration.ofSeconds(20)));
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, LanePartitioner.class.getName());
            pp.put(LanePartitioner.ROUTER_CONFIG, router);
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            Set<String> produced = ConcurrentHashMap.newKeySet();
            Set<String> consumed = ConcurrentHashMap.newKeySet();
            // Switch markers, as a Rust lane producer writes them at a version change: never read.
            Set<String> markers = ConcurrentHashMap.newKeySet();
            // partition -> marker offset -> version, and each read record's version from routeOf.
            Map<Integer, java.util.NavigableMap<Long, Long>> markerVersions = new ConcurrentHashMap<>();
            Map<String, Long> readVersions = new ConcurrentHashMap<>();
            // Who read each partition, in the order of reads (a global sequence at poll return).
            java.util.concurrent.atomic.AtomicLong sequence = new java.util.concurrent.atomic.AtomicLong();
            Map<Integer, List<long[]>> reads = new ConcurrentHashMap<>();
            Map<Integer, String> owner = new ConcurrentHashMap<>();
            List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
            // Overlaps of what the two consumers said they hold (a consumer stuck in a slow commit
            // still "holds" without reading, so these are reported, and reads decide).
            List<String> holdingOverlaps = java.util.Collections.synchronizedList(new ArrayList<>());
            AtomicBoolean producing = new AtomicBoolean(true);
                        Thread producer = new Thread(() -> {
                try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
                    for (long n = 0; producing.get(); n++) {
                        String user = "user-" + (n % 2000);
                        p.send(new ProducerRecord<>(topic, user, "order " + n), (md, e) -> {
                            if (e == null) {
                                produced.add(md.partition() + "/" + md.offset());
                            }
                        });
                        if (n % 50 == 0) {
                            Thread.sleep(5);
                        }
                        if (n % 20_000 == 0 && n <= 40_000) {
                            for (int partition = 0; partition < 8; partition++) {
                                ProducerRecord<String, String> marker = new ProducerRecord<>(topic, partition, (String) null, (String) null,
                                        List.<org.apache.kafka.common.header.Header>of(new org.apache.kafka.common.header.internals.RecordHeader(RouteHeader.SWITCH,
                                                RouteHeader.encode(partition < 4 ? 0 : 1, 1 + n / 20_000))));
                                long version = 1 + n / 20_000;
                                p.send(marker, (md, e) -> {
                                    if (e == null) {
                                        markers.add(md.partition() + "/" + md.offset());
                                        markerVersions.computeIfAbsent(md.partition(), k -> new java.util.concurrent.ConcurrentSkipListMap<>())
                                                .put(md.offset(), version);
                                    }
                                });
                            }
                        }
                    }
                    p.flush();
                } catch (Exception e) {
                    violations.add("producer: " + e);
                }
            });
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka);
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            LaneConsumer<String, String> ca = new LaneConsumer<>(server.url, TidegateServer.SERVICE_TOKEN, "java-group", "az-a",
                    topic, 8, "java-a", cp);
            LaneConsumer<String, String> cb = new LaneConsumer<>(server.url, TidegateServer.SERVICE_TOKEN, "java-group", "az-b",
                    topic, 8, "java-b", cp);
            Map<String, Set<Integer>> holds = new ConcurrentHashMap<>();
            @SuppressWarnings("unchecked")
            LaneConsumer<String, String>[] ca0 = new LaneConsumer[] {ca};
            @SuppressWarnings("unchecked")
            LaneConsumer<String, String>[] cb0 = new LaneConsumer[] {cb};
            for (var entry : Map.of("a", ca, "b", cb).entrySet()) {
                String me = entry.getKey();
                holds.put(me, Set.of());
                entry.getValue().observePartitions(now -> {
                    synchronized (owner) {
                        owner.entrySet().removeIf(e -> e.getValue().equals(me) && !now.contains(e.getKey()));
                        for (int p : now) {
                            String prev = owner.putIfAbsent(p, me);
                            if (prev != null && !prev.equals(me)) {
                                holdingOverlaps.add("partition " + p + " held by " + prev + " when " + me + " took it (errors: a "
                                        + ca0[0].lastError() + ", b " + cb0[0].lastError() + ")");
                            }
                        }
                        holds.put(me, new TreeSet<>(now));
                    }
                });
            }
            AtomicBoolean aAlive = new AtomicBoolean(true);
            AtomicBoolean running = new AtomicBoolean(true);
            List<Thread> readers = new ArrayList<>();
            Map<String, Thread> readerOf = new ConcurrentHashMap<>();
            for (var entry : Map.of("a", ca, "b", cb).entrySet()) {
                LaneConsumer<String, String> c = entry.getValue();
                boolean isA = entry.getKey().equals("a");
                Thread t = new Thread(() -> {
                    try {
                        while (running.get() && (!isA || aAlive.get())) {
                            var batch = c.poll(Duration.ofMillis(100));
                            long seq = sequence.incrementAndGet();
                            for (ConsumerRecord<String, String> r : batch) {
                                consumed.add(r.partition() + "/" + r.offset());
                                RouteHeader.Route route = c.routeOf(r);
                                if (route != null) {
                                    readVersions.put(r.partition() + "/" + r.offset(), route.version());
                                    if (route.zone() != (r.partition() < 4 ? 0 : 1)) {
                                        violations.add("record " + r.partition() + "/" + r.offset() + " routed to zone " + route.zone());
                                    }
                                }
                                reads.computeIfAbsent(r.partition(), k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                                        .add(new long[] {seq, isA ? 0 : 1});
                                if (!c.partitions().contains(r.partition())) {
                                    violations.add(entry.getKey() + " read partition " + r.partition() + " it does not hold");
                                }
                            }
                        }
                        if (isA && running.get()) {
                            // The crash, on the consumer's own thread (a KafkaConsumer is single-threaded).
                            c.abandon();
                        }
                    } catch (Exception e) {
                        if (running.get() && (!isA || aAlive.get())) {
                            violations.add(entry.getKey() + ": " + e);
                        }
                    }
                });
                t.setDaemon(true);
                readers.add(t);
                readerOf.put(entry.getKey(), t);
                t.start();
            }
            producer.setDaemon(true);
            producer.start();
            try {
                waitFor(() -> holds.get("a").equals(Set.of(4, 5, 6, 7)) && holds.get("b").equals(Set.of(0, 1, 2, 3)),
                        15_000, "each zone's consumer on its zone's range: " + holds);
                Thread.sleep(1000);
                // Drain az-b (blue): every user moves to green, and blue's range, once read empty, too.
                long t0 = System.nanoTime();
                RouterFollowTest.dial(server, 0);
                waitFor(() -> holds.get("a").size() == 8 && holds.get("b").isEmpty(), 30_000,
                        "az-b's range to move to az-a after the drain: " + holds);
                double drained = (System.nanoTime() - t0) / 1e9;
                Thread.sleep(1000);
                // Crash az-a's consumer: no commit, no leave. Its partitions go to az-b within two session timeouts.
                long t1 = System.nanoTime();
                aAlive.set(false);
                readerOf.get("a").join(10_000);
                waitFor(() -> holds.get("b").size() == 8, 6_000 + 2_000, "az-a's partitions to move to az-b: " + holds);
                double moved = (System.nanoTime() - t1) / 1e9;
                producing.set(false);
                producer.join(10_000);
                waitFor(() -> consumed.containsAll(produced), 20_000, "every produced record to be read ("
                        + produced.size() + " produced, " + consumed.size() + " read)");
                assertTrue(markers.size() >= 8, "switch markers written: " + markers.size());
                for (String marker : markers) {
                    assertTrue(!consumed.contains(marker), "switch marker " + marker + " was handed out");
                }
                // A record's route is the last marker before it in its partition (unknown only
                // where its reader took the partition after that marker).
                for (var e : readVersions.entrySet()) {
                    String[] at = e.getKey().split("/");
                    var before = markerVersions.getOrDefault(Integer.parseInt(at[0]), new java.util.TreeMap<>())
                            .lowerEntry(Long.parseLong(at[1]));
                    assertEquals(before == null ? null : before.getValue(), e.getValue(), "version of record " + e.getKey());
                }
                assertTrue(readVersions.size() > produced.size() / 2,
                        "routes known for " + readVersions.size() + " of " + produced.size() + " records");
                // No two readers, from what was read: per partition, the reader changes only at the
                // handovers (0-3: b, then a after the drain, then b after the crash; 4-7: a, then b).
                int switches = 0;
                for (var e : reads.entrySet()) {
                    List<long[]> rs = new ArrayList<>(e.getValue());
                    rs.sort((x, y) -> Long.compare(x[0], y[0]));
                    int changes = 0;
                    for (int i = 1; i < rs.size(); i++) {
                        if (rs.get(i)[1] != rs.get(i - 1)[1]) {
                            changes++;
                        }
                    }
                    int allowed = e.getKey() < 4 ? 2 : 1;
                    if (changes > allowed) {
                        violations.add("partition " + e.getKey() + ": the reader changed " + changes + " times (handovers: " + allowed + ")");
                    }
                    switches += changes;
                }
                assertEquals(List.of(), violations);
                System.out.printf("[figures] lane consumers (real Kafka, 8 partitions): az-b's range moved to az-a %.1f s after the "
                        + "dial to 0%% blue; a crashed consumer's 8 partitions moved in %.1f s (session timeout 3 s); %d records "
                        + "produced through LanePartitioner, all read; two readers on a partition: never (%d reader changes over 8 partitions, "
                        + "all at handovers); overlapping holdings reported: %s%n",
                        drained, moved, produced.size(), switches, holdingOverlaps.isEmpty() ? "none" : holdingOverlaps);
            } finally {
                running.set(false);
                producing.set(false);
                for (Thread t : readers) {
                    t.join(3000);
                }
                cb.close();
                router.close();
            }
        }
    }
}
