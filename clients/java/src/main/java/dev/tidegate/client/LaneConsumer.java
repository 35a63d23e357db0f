package dev.tidegate.client;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A lane consumer (the Rust {@code LaneConsumer}): registers in the coordinator's lane group
 * with its zone, heartbeats on a thread of its own (reporting what it holds), and reads exactly
 * the partitions the coordinator assigns with a plain {@code assign()} (never group
 * subscription). Records returned by {@link #poll} count as processed at the next call of
 * {@code poll}, {@link #commit} or {@link #close}; processed offsets are committed every second
 * and always before a partition is released, so the next owner starts at the last commit. A
 * member that loses the coordinator for longer than its session timeout drops its partitions
 * without committing (they may already be someone else's). Switch markers (records with the
 * {@code tgs} header that the Rust lane producer writes at each routing version change) are
 * skipped: {@code poll} never returns them. Not thread-safe, like KafkaConsumer.
 */
public final class LaneConsumer<K, V> implements AutoCloseable {
    private final LaneMembership membership;
    private final KafkaConsumer<K, V> consumer;
    private final String group;
    private final String zone;
    private final String topic;
    private final int partitions;
    private final String name;
    private final Object lock = new Object();
    private final Thread heartbeats;
    private final Map<Integer, Long> processed = new HashMap<>();
    private final Map<Integer, Long> committed = new HashMap<>();
    private final Map<Integer, Long> delivered = new HashMap<>();
    private final TreeSet<Integer> held = new TreeSet<>();
    /** The last switch marker read in each held partition. */
    private final Map<Integer, RouteHeader.Route> switched = new HashMap<>();
    /** The route of each record of the last batch that carries no route header of its own. */
    private final Map<TopicPartition, Map<Long, RouteHeader.Route>> batchRoutes = new HashMap<>();
    private long lastCommit = System.nanoTime();
    private volatile boolean stop;
    // Under `lock`.
    private String memberId;
    private String secret;
    private LaneMembership.Assigned latest;
    private long lastOk;
    private long sessionTimeoutNs;
    private long heartbeatMs;
    private boolean gone;
    private Set<Integer> holding = new TreeSet<>();
    private String lastError;
    private volatile java.util.function.Consumer<Set<Integer>> observer = held -> { };

    /**
     * Registers and starts heartbeating. {@code kafka} holds the consumer's properties
     * (bootstrap servers, deserializers); {@code group.id} is set to {@code group} and auto
     * commit is turned off.
     */
    public LaneConsumer(String coordinators, String token, String group, String zone, String topic, int partitions,
                        String name, Properties kafka) throws IOException {
        this.membership = new LaneMembership(coordinators, token, Duration.ofSeconds(5));
        this.group = group;
        this.zone = zone;
        this.topic = topic;
        this.partitions = partitions;
        this.name = name;
        Properties p = new Properties();
        p.putAll(kafka);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        this.consumer = new KafkaConsumer<>(p);
        long requested = System.nanoTime();
        LaneMembership.Assigned a = membership.register(group, name, zone, topic, partitions);
        synchronized (lock) {
            adopt(a, requested);
        }
        heartbeats = new Thread(this::heartbeatLoop, "tidegate-lane-" + a.memberId());
        heartbeats.setDaemon(true);
        heartbeats.start();
    }

    private void adopt(LaneMembership.Assigned a, long requested) {
        memberId = a.memberId();
        if (a.memberSecret() != null) {
            secret = a.memberSecret();
        }
        latest = a;
        lastOk = Math.max(lastOk, requested);
        sessionTimeoutNs = a.sessionTimeoutMs() * 1_000_000L;
        heartbeatMs = Math.max(50, a.heartbeatIntervalMs());
        gone = false;
    }

    public String memberId() {
        synchronized (lock) {
            return memberId;
        }
    }

    /** The partitions this member reads now. */
    public Set<Integer> partitions() {
        return new TreeSet<>(held);
    }

    /**
     * Called with the partitions this member reads whenever they change: after a release (its
     * offsets committed, before the coordinator can hear of it) and after an acquisition.
     */
    public void observePartitions(java.util.function.Consumer<Set<Integer>> observer) {
        this.observer = observer;
    }

    public String lastError() {
        synchronized (lock) {
            return lastError;
        }
    }

    private void heartbeatLoop() {
        while (!stop) {
            long every;
            String member;
            String s;
            List<Integer> claims;
            synchronized (lock) {
                every = heartbeatMs;
                member = memberId;
                s = secret;
                TreeSet<Integer> c = new TreeSet<>(holding);
                if (latest != null) {
                    c.addAll(latest.assignment());
                }
                claims = new ArrayList<>(c);
                if (gone) {
                    member = null;
                }
            }
            try {
                Thread.sleep(every);
            } catch (InterruptedException e) {
                return;
            }
            if (member == null || stop) {
                continue;
            }
            long sent = System.nanoTime();
            try {
                LaneMembership.Assigned a = membership.heartbeat(group, member, s, claims, zone, topic, partitions);
                synchronized (lock) {
                    if (a.memberId().equals(memberId)) {
                        latest = a;
                        lastOk = Math.max(lastOk, sent);
                        lastError = null;
                    }
                }
            } catch (LaneMembership.MemberGone e) {
                synchronized (lock) {
                    gone = true;
                    latest = null;
                    lastError = e.getMessage();
                }
            } catch (IOException | RuntimeException e) {
                synchronized (lock) {
                    lastError = e.getMessage();
                }
            }
        }
    }

    /** Applies the latest answer, then polls the held partitions. */
    public ConsumerRecords<K, V> poll(Duration timeout) throws IOException {
        markProcessed();
        if (System.nanoTime() - lastCommit >= 1_000_000_000L) {
            commit();
        }
        syncAssignment();
        if (held.isEmpty()) {
            try {
                Thread.sleep(Math.min(timeout.toMillis(), 100));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return ConsumerRecords.empty();
        }
        // Never read past this member's own session deadline (measured from when its last
        // successful heartbeat left, so it ends before the coordinator's): records that arrive
        // after it may be from partitions already handed to another member, and are dropped.
        long deadline;
        synchronized (lock) {
            deadline = lastOk + sessionTimeoutNs;
        }
        long left = (deadline - System.nanoTime()) / 1_000_000L;
        if (left <= 0) {
            fence();
            return ConsumerRecords.empty();
        }
        ConsumerRecords<K, V> records = consumer.poll(Duration.ofMillis(Math.min(timeout.toMillis(), left)));
        synchronized (lock) {
            deadline = lastOk + sessionTimeoutNs;
        }
        if (System.nanoTime() > deadline) {
            fence();
            return ConsumerRecords.empty();
        }
        boolean markers = false;
        batchRoutes.clear();
        for (ConsumerRecord<K, V> r : records) {
            delivered.merge(r.partition(), r.offset() + 1, Math::max);
            org.apache.kafka.common.header.Header sw = r.headers().lastHeader(RouteHeader.SWITCH);
            if (sw != null) {
                markers = true;
                try {
                    switched.put(r.partition(), RouteHeader.decode(sw.value()));
                } catch (IllegalArgumentException e) {
                    // A marker that does not decode moves nothing (it is still skipped).
                }
            } else if (r.headers().lastHeader(RouteHeader.NAME) == null && switched.containsKey(r.partition())) {
                batchRoutes.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new HashMap<>())
                        .put(r.offset(), switched.get(r.partition()));
            }
        }
        return markers ? withoutSwitchMarkers(records) : records;
    }

    /**
     * The zone index and routing version a record of the last {@link #poll} was routed with: its
     * own {@code tg} header (a producer with {@code RouteMarks::Header}), else the last switch
     * marker this consumer read before it in its partition; {@code null} when neither is known
     * (a record before any marker since this consumer took the partition, or a producer that
     * writes neither, such as {@link LanePartitioner}'s).
     */
    public RouteHeader.Route routeOf(ConsumerRecord<?, ?> r) {
        org.apache.kafka.common.header.Header tg = r.headers().lastHeader(RouteHeader.NAME);
        if (tg != null) {
            try {
                return RouteHeader.decode(tg.value());
            } catch (IllegalArgumentException e) {
                return null;
            }
        }
        Map<Long, RouteHeader.Route> routes = batchRoutes.get(new TopicPartition(r.topic(), r.partition()));
        return routes == null ? null : routes.get(r.offset());
    }

    /**
     * Whether a record is a lane producer's switch marker: a record without key or value whose
     * {@code tgs} header names the colour and routing version the producer switched to (see
     * {@link RouteHeader#SWITCH}). Markers are never handed to the application; their offsets count
     * as processed with the records around them.
     */
    static boolean isSwitchMarker(ConsumerRecord<?, ?> r) {
        return r.headers().lastHeader(RouteHeader.SWITCH) != null;
    }

    private ConsumerRecords<K, V> withoutSwitchMarkers(ConsumerRecords<K, V> records) {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> kept = new HashMap<>();
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<K, V>> list = new ArrayList<>();
            for (ConsumerRecord<K, V> r : records.records(tp)) {
                if (!isSwitchMarker(r)) {
                    list.add(r);
                }
            }
            if (!list.isEmpty()) {
                kept.put(tp, list);
            }
        }
        return new ConsumerRecords<>(kept, records.nextOffsets());
    }

    private void markProcessed() {
        for (Map.Entry<Integer, Long> e : delivered.entrySet()) {
            if (held.contains(e.getKey())) {
                processed.merge(e.getKey(), e.getValue(), Math::max);
            }
        }
        delivered.clear();
    }

    /** Commits the processed offsets of every held partition. */
    public void commit() {
        markProcessed();
        commitPartitions(new ArrayList<>(held));
        lastCommit = System.nanoTime();
    }

    private void commitPartitions(List<Integer> which) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (int p : which) {
            Long off = processed.get(p);
            if (off != null && !off.equals(committed.get(p))) {
                offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(off));
            }
        }
        if (offsets.isEmpty()) {
            return;
        }
        consumer.commitSync(offsets, Duration.ofSeconds(10));
        offsets.forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
    }

    private void syncAssignment() throws IOException {
        boolean isGone;
        boolean stale;
        TreeSet<Integer> wanted = new TreeSet<>();
        synchronized (lock) {
            isGone = gone;
            stale = System.nanoTime() - lastOk > sessionTimeoutNs;
            if (latest != null) {
                wanted.addAll(latest.assignment());
            }
        }
        if (isGone || stale) {
            fence();
            synchronized (lock) {
                latest = null;
            }
            if (isGone) {
                long requested = System.nanoTime();
                LaneMembership.Assigned a = membership.register(group, name, zone, topic, partitions);
                synchronized (lock) {
                    adopt(a, requested);
                }
            }
            return;
        }
        if (held.equals(wanted)) {
            return;
        }
        List<Integer> revoked = new ArrayList<>(held);
        revoked.removeAll(wanted);
        List<Integer> added = new ArrayList<>(wanted);
        added.removeAll(held);
        if (!revoked.isEmpty()) {
            // Commit first: if it fails the partitions stay held and reported, so the next owner
            // cannot start before our last processed offset is in Kafka.
            commitPartitions(revoked);
            for (int p : revoked) {
                held.remove(p);
                switched.remove(p);
                processed.remove(p);
                committed.remove(p);
            }
            observer.accept(new TreeSet<>(held));
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (int p : held) {
            tps.add(new TopicPartition(topic, p));
        }
        for (int p : added) {
            tps.add(new TopicPartition(topic, p));
        }
        consumer.assign(tps);
        if (!added.isEmpty()) {
            Set<TopicPartition> newOnes = new java.util.HashSet<>();
            for (int p : added) {
                newOnes.add(new TopicPartition(topic, p));
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(newOnes, Duration.ofSeconds(10));
            for (TopicPartition tp : newOnes) {
                OffsetAndMetadata o = offsets.get(tp);
                if (o != null) {
                    consumer.seek(tp, o.offset());
                    committed.put(tp.partition(), o.offset());
                    processed.put(tp.partition(), o.offset());
                } else {
                    consumer.seekToBeginning(List.of(tp));
                }
                held.add(tp.partition());
            }
            observer.accept(new TreeSet<>(held));
        }
        synchronized (lock) {
            holding = new TreeSet<>(held);
        }
    }

    /**
     * Stops heartbeating and reading without committing or leaving: what a crash looks like to
     * the group (the partitions move on after the session timeout). For tests and drills.
     */
    public void abandon() {
        stop = true;
        heartbeats.interrupt();
        observer.accept(Set.of());
        consumer.close(Duration.ZERO);
    }

    /** Drops every partition without committing: they may be someone else's already. */
    private void fence() {
        if (!held.isEmpty()) {
            held.clear();
            processed.clear();
            committed.clear();
            delivered.clear();
            switched.clear();
            consumer.assign(List.of());
            observer.accept(Set.of());
            synchronized (lock) {
                holding = new TreeSet<>();
            }
        }
    }

    /** Commits, releases everything and leaves the group, so the partitions move on at once. */
    @Override
    public void close() throws IOException {
        try {
            commit();
        } finally {
            stop = true;
            heartbeats.interrupt();
            held.clear();
            observer.accept(Set.of());
            consumer.assign(List.of());
            consumer.close(Duration.ofSeconds(5));
            String m;
            String s;
            synchronized (lock) {
                m = memberId;
                s = secret;
            }
            membership.leave(group, m, s);
        }
    }
}
