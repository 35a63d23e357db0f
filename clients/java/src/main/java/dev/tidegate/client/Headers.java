package dev.tidegate.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Propagating a tag across RPC hops (the Rust {@code headers.rs}): the edge decides once and
 * every later hop forwards {@code x-tidegate-color} and {@code x-tidegate-version} instead of
 * deciding again, so a dial move in the middle of a request cannot split it over two lanes.
 */
public final class Headers {
    public static final String COLOR_HEADER = "x-tidegate-color";
    public static final String VERSION_HEADER = "x-tidegate-version";
    /** The header a forwarded write carries: how many hops it took ({@code 1}). */
    public static final String HOP_HEADER = "x-tidegate-hop";

    private Headers() {}

    /** The headers to forward for {@code tag}. */
    public static Map<String, String> headersFor(Tag tag) {
        Map<String, String> out = new LinkedHashMap<>();
        out.put(COLOR_HEADER, tag.lane());
        out.put(VERSION_HEADER, Long.toString(tag.version()));
        return out;
    }

    /** How a request's lane was found. */
    public enum Source { PROPAGATED, RECOMPUTED }

    /** A request's lane, the version it was decided at (null: unknown) and how it was found. */
    public record Resolved(String lane, Long version, Source source) {
        public Map<String, String> headers() {
            Map<String, String> out = new LinkedHashMap<>();
            out.put(COLOR_HEADER, lane);
            if (version != null) {
                out.put(VERSION_HEADER, Long.toString(version));
            }
            return out;
        }
    }

    /**
     * An incoming request's lane: the propagated header when it names a lane of the table (unless
     * it was decided at an older version than the local table and the user is known: then it is
     * recomputed), else the user's tag from the local table. {@code header} looks a header up by
     * lowercase name. Trusts whoever set the header: use behind a gateway that overwrites them.
     */
    public static Resolved resolve(Router router, Function<String, String> header, String userId) throws TagException {
        String lane = header.apply(COLOR_HEADER);
        RoutingTable table = router.table();
        if (lane != null && table != null && table.zoneIndex(lane.trim()) != null
                && table.zones().get(table.zoneIndex(lane.trim())).lane().equals(lane.trim())) {
            Long version = null;
            String v = header.apply(VERSION_HEADER);
            try {
                version = v == null ? null : Long.parseLong(v.trim());
            } catch (NumberFormatException ignored) {
                version = null;
            }
            boolean stale = version != null && version < table.version();
            if (!(stale && userId != null)) {
                return new Resolved(lane.trim(), version, Source.PROPAGATED);
            }
        }
        if (userId == null) {
            throw new TagException("untagged", "the request carries no tag and no user ID");
        }
        Tag tag = router.tag(userId);
        return new Resolved(tag.lane(), tag.version(), Source.RECOMPUTED);
    }

    /** What a write handler does with a request ({@link #forwardOnce}). */
    public sealed interface WriteRoute permits Write, Forward, Refuse {}

    /** Write here. */
    public record Write() implements WriteRoute {}

    /** Send the request once to {@code zone} (lane {@code lane}) with these headers added. */
    public record Forward(String zone, String lane, Map<String, String> headers) implements WriteRoute {}

    /** Answer {@code status} (421 or 503) without writing; {@code retryAfterMs} for 503. */
    public record Refuse(int status, long retryAfterMs, String detail) implements WriteRoute {}

    /**
     * The route of a write from its check and the request's {@link #HOP_HEADER}: a misrouted
     * write is forwarded to the owner once ({@code x-tidegate-hop: 1}); one that already took its
     * hop is refused with 421, so two stale services never bounce a write between them.
     */
    public static WriteRoute forwardOnce(RoutingTable.WriteAnswer answer, String hop) {
        boolean hopped = hop != null && !hop.trim().isEmpty() && !hop.trim().equals("0");
        return switch (answer.check()) {
            case OWNED -> new Write();
            case MISROUTED -> {
                if (!hopped) {
                    Map<String, String> h = new LinkedHashMap<>();
                    h.put(HOP_HEADER, "1");
                    h.put(COLOR_HEADER, answer.ownerLane());
                    h.put(VERSION_HEADER, Long.toString(answer.version()));
                    yield new Forward(answer.ownerZone(), answer.ownerLane(), h);
                }
                yield new Refuse(421, 0, "the user belongs to " + answer.ownerZone() + " (" + answer.ownerLane()
                        + ") at routing version " + answer.version() + ", and the write was already forwarded once");
            }
            case BEHIND -> new Refuse(503, answer.retryAfterMs(), "the caller routed at version " + answer.incoming()
                    + ", this service's table is at " + answer.version() + "; retry once it catches up");
            case FROZEN -> new Refuse(503, answer.retryAfterMs(), "unit " + answer.unit()
                    + " is frozen by a move in progress; retry shortly");
            case UNCONFIRMED -> new Refuse(503, answer.retryAfterMs(), "no coordinator has confirmed this service's "
                    + "routing table (version " + answer.version() + ") within its lease; retry shortly");
        };
    }

    static List<String> names() {
        return new ArrayList<>(List.of(COLOR_HEADER, VERSION_HEADER, HOP_HEADER));
    }
}
