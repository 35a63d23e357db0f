package dev.tidegate.client;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaException;

/**
 * A Kafka {@link Partitioner} for lane topics: the record's key is the user ID, the user's zone
 * comes from the routing table ({@code tag}, the global rule: pin, then the default domain's
 * map), and the partition is the one the Rust {@code LaneProducer} gives ({@link LaneRing}).
 *
 * <pre>{@code
 * props.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, LanePartitioner.class.getName());
 * props.put(LanePartitioner.ROUTER_CONFIG, router);   // a dev.tidegate.client.Router
 * }</pre>
 *
 * A record without a key, with an invalid user ID, or produced before the Router holds a table
 * fails (a lane producer never sends a user to a partition drawn at random).
 */
public final class LanePartitioner implements Partitioner {
    /** The producer property holding the {@link Router} (or a {@code Supplier<RoutingTable>}). */
    public static final String ROUTER_CONFIG = "tidegate.router";

    private java.util.function.Supplier<RoutingTable> tables;
    private final Map<Long, LaneRing> rings = new ConcurrentHashMap<>();

    public LanePartitioner() {}

    /** A partitioner over a table source, for use outside a KafkaProducer (and in tests). */
    public LanePartitioner(java.util.function.Supplier<RoutingTable> tables) {
        this.tables = tables;
    }

    @Override
    @SuppressWarnings("unchecked")
    public void configure(Map<String, ?> configs) {
        Object source = configs.get(ROUTER_CONFIG);
        if (source instanceof Router router) {
            tables = router::table;
        } else if (source instanceof java.util.function.Supplier<?> supplier) {
            tables = (java.util.function.Supplier<RoutingTable>) supplier;
        } else {
            throw new IllegalArgumentException("LanePartitioner needs `" + ROUTER_CONFIG
                    + "` set to a dev.tidegate.client.Router in the producer's properties");
        }
    }

    /** The partition of {@code userId} on a lane topic of {@code partitions} partitions under {@code table}. */
    public int partitionOf(RoutingTable table, String userId, int partitions) throws TagException {
        int zones = table.zones().size();
        LaneRing ring = rings.computeIfAbsent(((long) partitions << 16) | zones, k -> new LaneRing(partitions, zones));
        Tag tag = table.tag(userId);
        int p = ring.partition(tag.zoneIndex(), userId);
        if (p < 0) {
            throw new TagException("zones_changed", "the lane topic was cut for " + ring.zones()
                    + " zones, and the user's zone is zone " + tag.zoneIndex());
        }
        return p;
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
        String userId = key instanceof String s ? s
                : keyBytes != null ? new String(keyBytes, StandardCharsets.UTF_8) : null;
        if (userId == null) {
            throw new KafkaException("a lane record needs the user ID as its key");
        }
        RoutingTable table = tables.get();
        if (table == null) {
            throw new KafkaException("no routing table yet: wait for the Router's first version");
        }
        Integer count = cluster.partitionCountForTopic(topic);
        if (count == null) {
            throw new KafkaException("topic " + topic + " has no known partitions");
        }
        try {
            return partitionOf(table, userId, count);
        } catch (TagException | IllegalArgumentException e) {
            throw new KafkaException("lane topic " + topic + ": " + e.getMessage());
        }
    }

    @Override
    public void close() {}
}
