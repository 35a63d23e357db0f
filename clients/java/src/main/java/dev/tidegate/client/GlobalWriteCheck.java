package dev.tidegate.client;

/**
 * The answers of the global write check (a write of global data, which no user owns), in the
 * order the check decides them. The table's own check ({@link RoutingTable#checkGlobalWrite})
 * answers all but {@link #UNCONFIRMED}, which is the {@link Router}'s, on top of it, when the
 * coordinator's lease on the held table has lapsed. The same order as
 * {@code RoutingTable::check_global_write} and {@code tests/fixtures/global_write_checks.json}.
 */
public enum GlobalWriteCheck {
    /** The caller routed at a newer version than the local table: 503 + Retry-After. */
    BEHIND,
    /** A move of the global writer is in progress ({@code global_writer.frozen}): 503 + Retry-After. */
    FROZEN,
    /**
     * An operator made global data read-only ({@code global_writer.read_only}): no zone may write
     * it, until an operator lifts it: 503, without a retry delay.
     */
    READ_ONLY,
    /** Another zone is the global writer, or none is: forward to the writer once, or 421. */
    MISROUTED,
    /**
     * The table says this zone is the global writer, but no coordinator has confirmed it current
     * within its lease (a zone cut off by a partition may no longer be the writer): 503 +
     * Retry-After, as frozen and behind.
     */
    UNCONFIRMED,
    /** This zone is the global writer: write. */
    OWNED;

    /** The answer's name as APIs, metrics and the fixtures show it ({@code read_only}, ...). */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
