package dev.tidegate.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.openhft.hashing.LongHashFunction;

/**
 * One version of the routing table, decoded from its wire form ({@code GET /v1/routing}, a
 * {@code routing} event of the watch stream) as strictly as the Rust client's {@code wire.rs}, and
 * evaluated locally with the published rule (pin, then the service's release channel, then the
 * domain's unit map; a unit is XXH3-64 with seed 0 of the UTF-8 bytes modulo the unit count, or a
 * slice of the digits in digits mode). Immutable.
 */
public final class RoutingTable {
    /** The hash the client implements; a table that names another one is refused. */
    public static final String HASH_ALGORITHM = "xxh3_64(seed=0) mod units";
    /** The name of the domain every table has. */
    public static final String DEFAULT_DOMAIN = "default";
    public static final int MIN_UNITS = 2;
    public static final int MAX_UNITS = 10_000;
    public static final int MAX_USER_ID_BYTES = 256;
    /** How long a frozen or behind write is told to wait (the server's WRITE_RETRY_AFTER_MS). */
    public static final long WRITE_RETRY_AFTER_MS = 250;

    static final ObjectMapper JSON = new ObjectMapper();
    private static final LongHashFunction XXH3 = LongHashFunction.xx3();

    /** A zone of the table, in index order (blue at 0, green at 1). */
    public record Zone(int index, String name, String lane, String zoneClass, boolean retired) {}

    /** A release channel: one service's users (a unit set and IDs) sent to a lane. */
    public record Channel(String name, String domain, List<String> services, int zone, UnitSet units,
                          Set<String> users, String fallback, Long expiresAtMs, boolean suspended) {
        boolean selects(String userId, int unit) {
            return units.contains(unit) || users.contains(userId);
        }
    }

    private final long version;
    private final String logId;
    /**
     * The freeze of a loss-less channel change in progress: writes of {@code services} in
     * {@code domain} by users of {@code units} or listed in {@code users} are frozen, whichever rule
     * routes them (pin, channel or map).
     */
    public record ChannelFreeze(String channel, String domain, List<String> services, UnitSet units,
                                Set<String> users) {
        boolean covers(String inDomain, String service, String userId, int unit) {
            String d = inDomain == null ? DEFAULT_DOMAIN : inDomain;
            return d.equals(domain) && services.contains(service)
                    && (units.contains(unit) || users.contains(userId));
        }
    }

    private final int units;
    private final boolean digits;
    private final int digitsSkip;
    private final int digitsWidth;
    private final List<Zone> zones;
    private final Map<String, Integer> byLane;
    private final int[] map;
    private final Map<String, int[]> domains;
    private final Map<String, Integer> pins;
    private final Map<String, UnitSet> frozen;
    private final List<Channel> channels;
    private final ChannelFreeze channelFreeze;
    private final Integer globalWriterZone;
    private final boolean globalReadOnly;
    private final boolean globalFrozen;
    private final String raw;

    private RoutingTable(Builder b) {
        this.version = b.version;
        this.logId = b.logId;
        this.units = b.units;
        this.digits = b.digits;
        this.digitsSkip = b.digitsSkip;
        this.digitsWidth = Integer.toString(b.units).length() - 1;
        this.zones = List.copyOf(b.zones);
        this.byLane = Map.copyOf(b.byLane);
        this.map = b.map;
        this.domains = Collections.unmodifiableMap(b.domains);
        this.pins = Map.copyOf(b.pins);
        this.frozen = Map.copyOf(b.frozen);
        this.channels = List.copyOf(b.channels);
        this.channelFreeze = b.channelFreeze;
        this.globalWriterZone = b.globalWriterZone;
        this.globalReadOnly = b.globalReadOnly;
        this.globalFrozen = b.globalFrozen;
        this.raw = b.raw;
    }

    private static final class Builder {
        long version;
        String logId;
        int units;
        boolean digits;
        int digitsSkip;
        List<Zone> zones = new ArrayList<>();
        Map<String, Integer> byLane = new HashMap<>();
        int[] map;
        Map<String, int[]> domains = new LinkedHashMap<>();
        Map<String, Integer> pins = new HashMap<>();
        Map<String, UnitSet> frozen = new HashMap<>();
        List<Channel> channels = new ArrayList<>();
        ChannelFreeze channelFreeze;
        Integer globalWriterZone;
        boolean globalReadOnly;
        boolean globalFrozen;
        String raw;
    }

    // ----------------------------------------------------------------------------------------
    // Decoding

    /** Decodes the wire form from its JSON text. */
    public static RoutingTable decode(String json) throws DecodeException {
        JsonNode value;
        try {
            value = JSON.readTree(json);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new DecodeException("not JSON: " + e.getOriginalMessage());
        }
        if (value == null || !value.isObject()) {
            throw new DecodeException("not a JSON object");
        }
        return decode(value, json);
    }

    /** Decodes the wire form produced by the server's {@code routing_body}. */
    public static RoutingTable decode(JsonNode value) throws DecodeException {
        return decode(value, value.toString());
    }

    private static JsonNode field(JsonNode v, String key) throws DecodeException {
        JsonNode f = v.get(key);
        if (f == null) {
            throw new DecodeException("missing `" + key + "`");
        }
        return f;
    }

    private static long number(JsonNode v, String key) throws DecodeException {
        JsonNode f = field(v, key);
        if (!f.isIntegralNumber() || f.asLong() < 0 || !f.canConvertToLong()) {
            throw new DecodeException("`" + key + "` is not a whole number");
        }
        return f.asLong();
    }

    private static String text(JsonNode v, String key) throws DecodeException {
        JsonNode f = field(v, key);
        if (!f.isTextual()) {
            throw new DecodeException("`" + key + "` is not a string");
        }
        return f.asText();
    }

    private static RoutingTable decode(JsonNode value, String raw) throws DecodeException {
        Builder b = new Builder();
        b.raw = raw;
        // The hash: a table published with another unit hash would tag every user differently
        // from the coordinator, so it is refused rather than evaluated with the wrong rule.
        JsonNode hash = value.get("hash");
        if (hash != null && !hash.isNull() && !HASH_ALGORITHM.equals(hash.asText(null))) {
            throw new DecodeException("unknown hash `" + hash + "` (this client implements `"
                    + HASH_ALGORITHM + "`)");
        }
        long units = number(value, "units");
        if (units > Integer.MAX_VALUE) {
            throw new DecodeException("`units` too large");
        }
        b.units = (int) units;
        String mode = text(value, "unit_mode");
        switch (mode) {
            case "hash" -> b.digits = false;
            case "digits" -> {
                b.digits = true;
                JsonNode skip = value.get("digits_skip");
                b.digitsSkip = skip != null && skip.canConvertToLong() && skip.isIntegralNumber()
                        ? (int) Math.min(skip.asLong(), 255) : 0;
            }
            default -> throw new DecodeException("unknown unit_mode `" + mode + "`");
        }
        if (b.units < MIN_UNITS || b.units > MAX_UNITS) {
            throw new DecodeException("units must be between " + MIN_UNITS + " and " + MAX_UNITS
                    + ", got " + b.units);
        }
        if (b.digits && !(b.units == 10 || b.units == 100 || b.units == 1000 || b.units == 10000)) {
            throw new DecodeException("digits mode needs a power of ten as the unit count, got " + b.units);
        }
        b.version = number(value, "version");
        JsonNode logId = value.get("log_id");
        b.logId = logId != null && logId.isTextual() && !logId.asText().isEmpty() ? logId.asText() : null;

        JsonNode zonesNode = value.get("zones");
        JsonNode mapNode = value.get("unit_map");
        if (zonesNode != null && mapNode != null) {
            decodeZones(zonesNode, b);
            b.map = decodeMap(mapNode, b, "unit_map");
        } else {
            // The first releases sent only `colors` and `blue_units` (a two-zone dial table).
            long blue = number(value, "blue_units");
            if (blue > b.units) {
                throw new DecodeException("`blue_units` " + blue + " exceeds " + b.units + " units");
            }
            JsonNode colors = field(value, "colors");
            addZone(b, new Zone(0, text(colors, "blue"), "blue", "rzone", false));
            addZone(b, new Zone(1, text(colors, "green"), "green", "rzone", false));
            b.map = new int[b.units];
            for (int u = 0; u < b.units; u++) {
                b.map[u] = u < blue ? 0 : 1;
            }
        }
        JsonNode pins = value.get("pins");
        if (pins != null && pins.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = pins.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if (!e.getValue().isTextual()) {
                    throw new DecodeException("pin of `" + e.getKey() + "` is not a string");
                }
                Integer zone = b.byLane.get(e.getValue().asText());
                if (zone == null) {
                    throw new DecodeException("pin of `" + e.getKey() + "` names unknown lane `"
                            + e.getValue().asText() + "`");
                }
                if (validationError(e.getKey()) != null) {
                    throw new DecodeException("pinned user id is invalid: `" + e.getKey() + "`");
                }
                b.pins.put(e.getKey(), zone);
            }
        }
        JsonNode global = value.get("global_writer");
        if (global != null && global.isObject()) {
            JsonNode zone = global.get("zone");
            if (zone != null && zone.isTextual()) {
                Integer z = zoneByName(b, zone.asText());
                if (z == null) {
                    throw new DecodeException("`global_writer.zone` names unknown zone `" + zone.asText() + "`");
                }
                b.globalWriterZone = z;
            }
            JsonNode ro = global.get("read_only");
            b.globalReadOnly = ro != null && ro.isBoolean() && ro.asBoolean();
            JsonNode frozenNode = global.get("frozen");
            b.globalFrozen = frozenNode != null && frozenNode.isBoolean() && frozenNode.asBoolean();
        }
        JsonNode domains = value.get("domains");
        if (domains != null && domains.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = domains.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                try {
                    b.domains.put(e.getKey(), decodeMap(field(e.getValue(), "unit_map"), b, "unit_map"));
                } catch (DecodeException ex) {
                    throw new DecodeException("domain `" + e.getKey() + "`: " + strip(ex));
                }
            }
        }
        JsonNode frozen = value.get("frozen");
        if (frozen != null && frozen.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = frozen.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if (!e.getValue().isTextual()) {
                    throw new DecodeException("`frozen." + e.getKey() + "` is not a string");
                }
                if (!DEFAULT_DOMAIN.equals(e.getKey()) && !b.domains.containsKey(e.getKey())) {
                    throw new DecodeException("frozen units name domain `" + e.getKey()
                            + "`, which the table does not have");
                }
                try {
                    b.frozen.put(e.getKey(), UnitSet.parse(e.getValue().asText(), b.units));
                } catch (DecodeException ex) {
                    throw new DecodeException("`frozen." + e.getKey() + "`: " + strip(ex));
                }
            }
        }
        JsonNode channels = value.get("channels");
        if (channels != null && channels.isArray()) {
            for (int i = 0; i < channels.size(); i++) {
                try {
                    b.channels.add(decodeChannel(channels.get(i), b));
                } catch (DecodeException ex) {
                    throw new DecodeException("`channels[" + i + "]`: " + strip(ex));
                }
            }
        }
        for (Channel c : b.channels) {
            if (!DEFAULT_DOMAIN.equals(c.domain()) && !b.domains.containsKey(c.domain())) {
                throw new DecodeException("channel `" + c.name() + "` names unknown domain `" + c.domain() + "`");
            }
        }
        JsonNode freeze = value.get("channel_freeze");
        if (freeze != null && !freeze.isNull()) {
            try {
                b.channelFreeze = decodeChannelFreeze(freeze, b);
            } catch (DecodeException ex) {
                throw new DecodeException("`channel_freeze`: " + strip(ex));
            }
        }
        return new RoutingTable(b);
    }

    private static String strip(DecodeException e) {
        return e.getMessage().replaceFirst("^routing table JSON: ", "");
    }

    private static Integer zoneByName(Builder b, String name) {
        for (Zone z : b.zones) {
            if (z.name().equals(name)) {
                return z.index();
            }
        }
        return null;
    }

    private static void addZone(Builder b, Zone z) throws DecodeException {
        for (Zone other : b.zones) {
            for (String name : new String[] {z.name(), z.lane()}) {
                if (name.equals(other.name()) || name.equals(other.lane())) {
                    throw new DecodeException("`zones`: `" + name + "` is used twice");
                }
            }
        }
        b.zones.add(z);
        b.byLane.put(z.lane(), z.index());
    }

    private static void decodeZones(JsonNode list, Builder b) throws DecodeException {
        if (!list.isArray()) {
            throw new DecodeException("`zones` is not a list");
        }
        for (int i = 0; i < list.size(); i++) {
            JsonNode z = list.get(i);
            if (number(z, "index") != i) {
                throw new DecodeException("`zones[" + i + "].index` is not " + i);
            }
            String cls = text(z, "class");
            if (!cls.equals("rzone") && !cls.equals("gzone") && !cls.equals("czone")) {
                throw new DecodeException("unknown zone class `" + cls + "`");
            }
            JsonNode retired = z.get("retired");
            addZone(b, new Zone(i, text(z, "name"), text(z, "lane"), cls,
                    retired != null && retired.isBoolean() && retired.asBoolean()));
        }
        if (b.zones.size() < 2 || !b.zones.get(0).lane().equals("blue") || !b.zones.get(1).lane().equals("green")) {
            throw new DecodeException("`zones`: the first two zones must have the lanes blue and green");
        }
    }

    private static int[] decodeMap(JsonNode list, Builder b, String what) throws DecodeException {
        if (!list.isArray()) {
            throw new DecodeException("`" + what + "` is not a list");
        }
        int[] owners = new int[b.units];
        int next = 0;
        for (int i = 0; i < list.size(); i++) {
            JsonNode run = list.get(i);
            String range = text(run, "units");
            int dash = range.indexOf('-');
            long first;
            long last;
            try {
                if (dash < 0) {
                    throw new NumberFormatException();
                }
                first = parseU32(range.substring(0, dash));
                last = parseU32(range.substring(dash + 1));
            } catch (NumberFormatException e) {
                throw new DecodeException("`" + what + "[" + i + "].units` is not `from-to`: `" + range + "`");
            }
            String lane = text(run, "lane");
            Integer zone = b.byLane.get(lane);
            if (zone == null) {
                throw new DecodeException("`" + what + "[" + i + "].lane` `" + lane + "` is not a zone's lane");
            }
            if (first != next || last < first || last >= b.units) {
                throw new DecodeException("`" + what + "`: gap or overlap at unit " + next + " of " + b.units);
            }
            for (long u = first; u <= last; u++) {
                owners[(int) u] = zone;
            }
            next = (int) last + 1;
        }
        if (next != b.units) {
            throw new DecodeException("`" + what + "`: gap or overlap at unit " + next + " of " + b.units);
        }
        return owners;
    }

    private static long parseU32(String s) {
        if (s.isEmpty() || s.length() > 10 || !s.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new NumberFormatException(s);
        }
        long v = Long.parseLong(s);
        if (v > 0xFFFF_FFFFL) {
            throw new NumberFormatException(s);
        }
        return v;
    }

    private static Channel decodeChannel(JsonNode c, Builder b) throws DecodeException {
        String lane = text(c, "lane");
        String set = text(c, "units");
        String fallback = text(c, "fallback");
        String name = text(c, "name");
        JsonNode domain = c.get("domain");
        String domainName = domain != null && domain.isTextual() ? domain.asText() : DEFAULT_DOMAIN;
        Integer zone = b.byLane.get(lane);
        if (zone == null) {
            throw new DecodeException("`lane` names unknown lane `" + lane + "`");
        }
        UnitSet units;
        try {
            units = set.isEmpty() ? UnitSet.EMPTY : UnitSet.parse(set, b.units);
        } catch (DecodeException e) {
            throw new DecodeException("`units`: " + strip(e));
        }
        if (!fallback.equals("global") && !fallback.equals("reject")) {
            throw new DecodeException("unknown `fallback` `" + fallback + "`");
        }
        JsonNode expires = c.get("expires_at_ms");
        JsonNode suspended = c.get("suspended");
        return new Channel(name, domainName, strings(c, "services"), zone, units,
                new HashSet<>(strings(c, "users")), fallback,
                expires != null && expires.canConvertToLong() && expires.isIntegralNumber() ? expires.asLong() : null,
                suspended != null && suspended.isBoolean() && suspended.asBoolean());
    }

    private static ChannelFreeze decodeChannelFreeze(JsonNode f, Builder b) throws DecodeException {
        if (!f.isObject()) {
            throw new DecodeException("not an object");
        }
        String domain = text(f, "domain");
        if (!DEFAULT_DOMAIN.equals(domain) && !b.domains.containsKey(domain)) {
            throw new DecodeException("the table has no domain `" + domain + "`");
        }
        String set = text(f, "units");
        UnitSet units;
        try {
            units = set.isEmpty() ? UnitSet.EMPTY : UnitSet.parse(set, b.units);
        } catch (DecodeException e) {
            throw new DecodeException("`units`: " + strip(e));
        }
        return new ChannelFreeze(text(f, "channel"), domain, List.copyOf(strings(f, "services")), units,
                Set.copyOf(strings(f, "users")));
    }

    private static List<String> strings(JsonNode c, String key) throws DecodeException {
        JsonNode v = c.get(key);
        List<String> out = new ArrayList<>();
        if (v == null || v.isNull()) {
            return out;
        }
        if (!v.isArray()) {
            throw new DecodeException("`" + key + "` is not a list");
        }
        for (JsonNode s : v) {
            if (!s.isTextual()) {
                throw new DecodeException("`" + key + "` holds a non-string");
            }
            out.add(s.asText());
        }
        return out;
    }

    // ----------------------------------------------------------------------------------------
    // The rule

    /** Why {@code userId} is not a valid user ID (1 to 256 UTF-8 bytes, no control characters), or null. */
    public static String validationError(String userId) {
        if (userId == null || userId.isEmpty()) {
            return "user id is empty";
        }
        byte[] bytes = userId.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_USER_ID_BYTES) {
            return "user id is " + bytes.length + " bytes long, more than " + MAX_USER_ID_BYTES;
        }
        for (int i = 0; i < userId.length(); i++) {
            char ch = userId.charAt(i);
            if (ch < 0x20 || (ch >= 0x7f && ch <= 0x9f)) {
                return "user id holds a control character";
            }
        }
        return null;
    }

    /** XXH3-64 with seed 0 of the UTF-8 bytes of {@code userId}, as an unsigned value in a long. */
    public static long hash(String userId) {
        return XXH3.hashBytes(userId.getBytes(StandardCharsets.UTF_8));
    }

    /** The unit of {@code userId}: the hash modulo the unit count, or the digit slice. */
    public int unitOf(String userId) throws TagException {
        String invalid = validationError(userId);
        if (invalid != null) {
            throw new TagException("invalid_user_id", invalid);
        }
        if (!digits) {
            return (int) Long.remainderUnsigned(hash(userId), units);
        }
        int len = userId.length();
        boolean ascii = userId.chars().allMatch(c -> c >= '0' && c <= '9');
        if (!ascii || len < digitsWidth + digitsSkip) {
            throw new TagException("invalid_user_id",
                    "digits mode: user id `" + userId + "` is not numeric or too short");
        }
        int end = len - digitsSkip;
        return Integer.parseInt(userId.substring(end - digitsWidth, end));
    }

    /** The tag of {@code userId} with the global rule (pin, then the default domain's map). */
    public Tag tag(String userId) throws TagException {
        return tag(userId, null, null);
    }

    /**
     * The tag of {@code userId} for a call of {@code service} (null: no service) in {@code domain}
     * (null: the default domain): a pin wins, then the service's release channel if it selects the
     * user (a suspended one gives its fallback: the map, or {@code channel_unavailable}), then the
     * domain's unit map.
     */
    public Tag tag(String userId, String service, String domain) throws TagException {
        int[] m = mapOf(domain);
        if (m == null) {
            throw new TagException("unknown_domain", "the table has no routing domain `" + domain + "`");
        }
        int unit = unitOf(userId);
        Integer pin = pins.isEmpty() ? null : pins.get(userId);
        if (pin != null) {
            return make(userId, pin, unit, true, "pin");
        }
        if (service != null) {
            Channel c = channelFor(domain, service);
            if (c != null && c.selects(userId, unit)) {
                if (!c.suspended()) {
                    return make(userId, c.zone(), unit, false, "channel:" + c.name());
                }
                if (c.fallback().equals("reject")) {
                    throw new TagException("channel_unavailable", "release channel `" + c.name()
                            + "` is suspended and its fallback is `reject`");
                }
            }
        }
        return make(userId, m[unit], unit, false, "unit");
    }

    private Tag make(String userId, int zone, int unit, boolean pinned, String reason) {
        Zone z = zones.get(zone);
        return new Tag(userId, z.lane(), z.name(), zone, unit, version, pinned, reason);
    }

    /** The release channel of {@code service} in {@code domain} (null: default), if any. */
    public Channel channelFor(String domain, String service) {
        String d = domain == null ? DEFAULT_DOMAIN : domain;
        for (Channel c : channels) {
            if (c.domain().equals(d) && c.services().contains(service)) {
                return c;
            }
        }
        return null;
    }

    private int[] mapOf(String domain) {
        if (domain == null || domain.equals(DEFAULT_DOMAIN)) {
            return map;
        }
        return domains.get(domain);
    }

    /** The outcome of {@link #checkWrite}: the answer, the judging version and the owner. */
    public record WriteAnswer(WriteCheck check, long version, String ownerZone, String ownerLane,
                              long incoming, int unit) {
        public boolean isOwned() {
            return check == WriteCheck.OWNED;
        }

        /** 421 for misrouted, 503 for behind, frozen and unconfirmed, 0 for owned. */
        public int status() {
            return switch (check) {
                case OWNED -> 0;
                case MISROUTED -> 421;
                case BEHIND, FROZEN, UNCONFIRMED -> 503;
            };
        }

        /** Milliseconds a behind, frozen or unconfirmed write should wait before retrying, else 0. */
        public long retryAfterMs() {
            return status() == 503 ? WRITE_RETRY_AFTER_MS : 0;
        }

        /** This answer with {@code to} as its check (the Router's lease turns owned into unconfirmed). */
        WriteAnswer as(WriteCheck to) {
            return new WriteAnswer(to, version, ownerZone, ownerLane, incoming, unit);
        }
    }

    /**
     * The write check: may a service in zone {@code local} (a zone name or its lane) commit a
     * write for {@code userId} that its caller routed here at {@code incomingVersion} (the
     * propagated {@code x-tidegate-version}, null when none)? In order: behind (the caller is
     * newer than this table), frozen (a move froze the unit: every user of it, pinned or not), misrouted
     * (another zone owns the user), owned. The same order as {@code RoutingTable::check_write}.
     */
    public WriteAnswer checkWrite(String domain, String userId, String local, Long incomingVersion)
            throws TagException {
        int[] m = mapOf(domain);
        if (m == null) {
            throw new TagException("unknown_domain", "the table has no routing domain `" + domain + "`");
        }
        Integer localZone = zoneIndex(local);
        if (localZone == null) {
            throw new TagException("unknown_zone", "`" + local + "` is neither a zone nor a lane of the table");
        }
        Tag tag = tag(userId, null, domain);
        if (incomingVersion != null && incomingVersion > version) {
            return new WriteAnswer(WriteCheck.BEHIND, version, zones.get(0).name(), zones.get(0).lane(),
                    incomingVersion, tag.unit());
        }
        UnitSet set = frozen.get(domain == null ? DEFAULT_DOMAIN : domain);
        long incoming = incomingVersion == null ? -1 : incomingVersion;
        if (set != null && set.contains(tag.unit())) {
            return new WriteAnswer(WriteCheck.FROZEN, version, tag.zone(), tag.lane(), incoming, tag.unit());
        }
        if (tag.zoneIndex() != localZone) {
            return new WriteAnswer(WriteCheck.MISROUTED, version, tag.zone(), tag.lane(), incoming, tag.unit());
        }
        return new WriteAnswer(WriteCheck.OWNED, version, tag.zone(), tag.lane(), incoming, tag.unit());
    }

    /**
     * {@link #checkWrite} of a write by {@code service} (null: as checkWrite): a release channel of
     * that service that selects the user owns their writes of it, as it routes their calls (pin &gt;
     * channel &gt; map). One freeze rule: a freeze covers every write of the users it names,
     * whichever rule routes them: a map move's frozen units and the freeze of a channel change in
     * progress ({@link #channelFreeze}) make those writes frozen, after behind. A channel suspended with the {@code reject} fallback throws
     * {@code channel_unavailable}: its users' writes have no owner. The same function as
     * {@code RoutingTable::check_write_for} and the edge's {@code GET /v1/write-check?service=}.
     */
    public WriteAnswer checkWriteFor(String domain, String service, String userId, String local, Long incomingVersion)
            throws TagException {
        if (service == null) {
            return checkWrite(domain, userId, local, incomingVersion);
        }
        if (mapOf(domain) == null) {
            throw new TagException("unknown_domain", "the table has no routing domain `" + domain + "`");
        }
        Integer localZone = zoneIndex(local);
        if (localZone == null) {
            throw new TagException("unknown_zone", "`" + local + "` is neither a zone nor a lane of the table");
        }
        Tag tag = tag(userId, service, domain);
        boolean byChannel = tag.reason().startsWith("channel:");
        UnitSet mapFrozen = frozen.get(domain == null ? DEFAULT_DOMAIN : domain);
        boolean frozenByChange = (channelFreeze != null && channelFreeze.covers(domain, service, userId, tag.unit()))
                || (mapFrozen != null && mapFrozen.contains(tag.unit()));
        if (!byChannel && !frozenByChange) {
            return checkWrite(domain, userId, local, incomingVersion);
        }
        if (incomingVersion != null && incomingVersion > version) {
            return new WriteAnswer(WriteCheck.BEHIND, version, zones.get(0).name(), zones.get(0).lane(),
                    incomingVersion, tag.unit());
        }
        long incoming = incomingVersion == null ? -1 : incomingVersion;
        if (frozenByChange) {
            return new WriteAnswer(WriteCheck.FROZEN, version, tag.zone(), tag.lane(), incoming, tag.unit());
        }
        WriteCheck check = tag.zoneIndex() == localZone ? WriteCheck.OWNED : WriteCheck.MISROUTED;
        return new WriteAnswer(check, version, tag.zone(), tag.lane(), incoming, tag.unit());
    }

    /**
     * The outcome of {@link #checkGlobalWrite}: the answer, the judging version, the global writer
     * ({@code ownerZone} and {@code ownerLane}: null for behind, where the local table cannot
     * judge, and when there is no global writer) and the caller's version ({@code incoming}, -1
     * when none).
     *
     * @param check the answer
     * @param version the version of the table that judged
     * @param ownerZone the global writer's zone name, or null
     * @param ownerLane the global writer's lane, or null
     * @param incoming the caller's propagated version, or -1 when none
     */
    public record GlobalWriteAnswer(GlobalWriteCheck check, long version, String ownerZone, String ownerLane,
                                    long incoming) {
        /** Whether the global write may go ahead here. */
        public boolean isOwned() {
            return check == GlobalWriteCheck.OWNED;
        }

        /** 421 for misrouted, 503 for behind, frozen, read-only and unconfirmed, 0 for owned. */
        public int status() {
            return switch (check) {
                case OWNED -> 0;
                case MISROUTED -> 421;
                case BEHIND, FROZEN, READ_ONLY, UNCONFIRMED -> 503;
            };
        }

        /**
         * Milliseconds a behind, frozen or unconfirmed global write should wait before retrying,
         * else 0 (read-only lasts until an operator lifts it).
         */
        public long retryAfterMs() {
            return switch (check) {
                case BEHIND, FROZEN, UNCONFIRMED -> WRITE_RETRY_AFTER_MS;
                default -> 0;
            };
        }

        /** This answer with {@code to} as its check (the Router's lease turns owned into unconfirmed). */
        GlobalWriteAnswer as(GlobalWriteCheck to) {
            return new GlobalWriteAnswer(to, version, ownerZone, ownerLane, incoming);
        }
    }

    /**
     * The global write check: may a service in zone {@code local} (a zone name or its lane) commit
     * a write of global data (no user) that its caller routed here at {@code incomingVersion} (the
     * propagated {@code x-tidegate-version}, null when none)? In order: behind (the caller is
     * newer than this table), frozen (a move of the global writer is in progress), read-only (an
     * operator stopped global writes: no zone may write), misrouted (another zone is the global
     * writer, or none is), owned. The same order as {@code RoutingTable::check_global_write} and
     * {@code tests/fixtures/global_write_checks.json}.
     *
     * @param local this service's zone, by name or lane
     * @param incomingVersion the caller's propagated version, or null when none
     * @return the answer, naming the global writer where there is one (except for behind)
     * @throws TagException {@code unknown_zone} when {@code local} is neither a zone nor a lane
     */
    public GlobalWriteAnswer checkGlobalWrite(String local, Long incomingVersion) throws TagException {
        Integer localZone = zoneIndex(local);
        if (localZone == null) {
            throw new TagException("unknown_zone", "`" + local + "` is neither a zone nor a lane of the table");
        }
        if (incomingVersion != null && incomingVersion > version) {
            return new GlobalWriteAnswer(GlobalWriteCheck.BEHIND, version, null, null, incomingVersion);
        }
        long incoming = incomingVersion == null ? -1 : incomingVersion;
        Zone writer = globalWriterZone == null ? null : zones.get(globalWriterZone);
        String ownerZone = writer == null ? null : writer.name();
        String ownerLane = writer == null ? null : writer.lane();
        GlobalWriteCheck check;
        if (globalFrozen) {
            check = GlobalWriteCheck.FROZEN;
        } else if (globalReadOnly) {
            check = GlobalWriteCheck.READ_ONLY;
        } else if (!localZone.equals(globalWriterZone)) {
            check = GlobalWriteCheck.MISROUTED;
        } else {
            check = GlobalWriteCheck.OWNED;
        }
        return new GlobalWriteAnswer(check, version, ownerZone, ownerLane, incoming);
    }

    /** The index of the zone named {@code nameOrLane} (its name or its lane), or null. */
    public Integer zoneIndex(String nameOrLane) {
        Integer byL = byLane.get(nameOrLane);
        if (byL != null) {
            return byL;
        }
        for (Zone z : zones) {
            if (z.name().equals(nameOrLane)) {
                return z.index();
            }
        }
        return null;
    }

    // ----------------------------------------------------------------------------------------
    // Accessors

    public long version() {
        return version;
    }

    /** The command log the table came from ({@code log_id}), or null when it names none. */
    public String logId() {
        return logId;
    }

    public int units() {
        return units;
    }

    public List<Zone> zones() {
        return zones;
    }

    /** Units owned by each zone in the default domain, by zone index. */
    public int[] unitsOwned() {
        int[] out = new int[zones.size()];
        for (int z : map) {
            out[z]++;
        }
        return out;
    }

    public Map<String, Integer> pins() {
        return pins;
    }

    public Set<String> domains() {
        return domains.keySet();
    }

    public List<Channel> channels() {
        return channels;
    }

    /** The freeze of the loss-less channel change in progress, or null between changes. */
    public ChannelFreeze channelFreeze() {
        return channelFreeze;
    }

    public Map<String, UnitSet> frozen() {
        return frozen;
    }

    /** The zone taking global writes (null: none) and whether global data is read-only. */
    public String globalWriterZone() {
        return globalWriterZone == null ? null : zones.get(globalWriterZone).name();
    }

    public boolean globalReadOnly() {
        return globalReadOnly;
    }

    /**
     * Whether a move of the global writer is in progress ({@code global_writer.frozen}, false
     * when absent): global writes answer frozen until it ends.
     */
    public boolean globalFrozen() {
        return globalFrozen;
    }

    /** The JSON text this table was decoded from (what the disk cache keeps). */
    public String raw() {
        return raw;
    }
}
