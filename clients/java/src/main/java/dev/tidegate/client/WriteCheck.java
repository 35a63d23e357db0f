package dev.tidegate.client;

/**
 * The answers of the write check, in the order the check decides them. The table's own check
 * ({@link RoutingTable#checkWrite}) answers the first four; {@link #UNCONFIRMED} is the
 * {@link Router}'s, on top of it, when the coordinator's lease on the held table has lapsed.
 */
public enum WriteCheck {
    /** The caller routed at a newer version than the local table: 503 + Retry-After. */
    BEHIND,
    /** A move in progress froze the user's unit: 503 + Retry-After (reads go on). */
    FROZEN,
    /** Another zone owns the user at a table at least as new as the caller's: forward once or 421. */
    MISROUTED,
    /**
     * The table says this zone owns the user, but no coordinator has confirmed it current within
     * its lease (a zone cut off by a partition must not keep writing users another zone took
     * over): 503 + Retry-After, as frozen and behind (reads and tags go on from the table).
     */
    UNCONFIRMED,
    /** This zone owns the user: write. */
    OWNED;

    /** The answer's name as APIs and metrics show it. */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
