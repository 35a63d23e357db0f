package dev.tidegate.client;

/**
 * A user's tag: the lane ("colour") and zone that serve them, their unit, the routing version it
 * was decided at, whether a pin decided, and which rule decided ({@code pin}, {@code unit} or
 * {@code channel:NAME}).
 */
public record Tag(String userId, String lane, String zone, int zoneIndex, int unit, long version,
                  boolean pinned, String reason) {
    /** The lane, as the {@code x-tidegate-color} header carries it. */
    public String color() {
        return lane;
    }
}
