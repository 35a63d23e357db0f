package dev.tidegate.client;

/** The four answers of the write check, in the order the check decides them. */
public enum WriteCheck {
    /** The caller routed at a newer version than the local table: 503 + Retry-After. */
    BEHIND,
    /** A move in progress froze the user's unit: 503 + Retry-After (reads go on). */
    FROZEN,
    /** Another zone owns the user at a table at least as new as the caller's: forward once or 421. */
    MISROUTED,
    /** This zone owns the user: write. */
    OWNED;

    /** The answer's name as APIs and metrics show it. */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
