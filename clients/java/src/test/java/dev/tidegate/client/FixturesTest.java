package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The repository's golden vectors: unit hash, digits mode and the write check's answers. */
class FixturesTest {
    static final ObjectMapper JSON = new ObjectMapper();

    static JsonNode fixture(String name) throws Exception {
        Path path = Path.of(System.getProperty("user.dir")).resolve("../../tests/fixtures").resolve(name);
        return JSON.readTree(Files.readString(path));
    }

    /** A two-zone dial-form table of {@code units} units, the first {@code blue} blue. */
    static ObjectNode dialTable(long version, int units, int blue, String mode) {
        ObjectNode t = JSON.createObjectNode();
        t.put("version", version).put("units", units).put("blue_units", blue).put("unit_mode", mode);
        t.putObject("colors").put("blue", "az-a").put("green", "az-b");
        t.putObject("pins");
        t.put("hash", RoutingTable.HASH_ALGORITHM);
        return t;
    }

    @Test
    void unitHashVectors() throws Exception {
        int checked = 0;
        for (JsonNode v : fixture("unit_hash_vectors.json").get("vectors")) {
            String user = v.get("user_id").asText();
            assertEquals(v.get("xxh3_64").asText(), Long.toUnsignedString(RoutingTable.hash(user)), user);
            for (Iterator<Map.Entry<String, JsonNode>> it = v.get("units").fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                int units = Integer.parseInt(e.getKey());
                if (units < RoutingTable.MIN_UNITS) {
                    continue;
                }
                RoutingTable table = RoutingTable.decode(dialTable(1, units, 0, "hash"));
                assertEquals(e.getValue().asInt(), table.unitOf(user), user + " @ " + units);
                checked++;
            }
        }
        System.out.println("[figures] unit hash vectors: " + checked + " (user, units) pairs agree");
    }

    @Test
    void digitsCases() throws Exception {
        for (JsonNode c : fixture("digits_cases.json").get("cases")) {
            ObjectNode t = dialTable(1, c.get("units").asInt(), 0, "digits");
            t.put("digits_skip", c.get("skip").asInt());
            RoutingTable table = RoutingTable.decode(t);
            String user = c.get("user_id").asText();
            if (c.has("unit")) {
                assertEquals(c.get("unit").asInt(), table.unitOf(user), c.toString());
            } else {
                TagException e = assertThrows(TagException.class, () -> table.unitOf(user), c.toString());
                assertEquals("invalid_user_id", e.code());
            }
        }
    }

    /** A user whose unit (of 100) satisfies {@code want}. */
    static String userIn(RoutingTable t, java.util.function.IntPredicate want) throws Exception {
        for (int i = 0; ; i++) {
            String u = "user-" + i;
            if (want.test(t.unitOf(u))) {
                return u;
            }
        }
    }

    @Test
    void writeChecks() throws Exception {
        int n = 0;
        for (JsonNode c : fixture("write_checks.json").get("cases")) {
            int blue = c.get("blue_units").asInt();
            ObjectNode t = dialTable(c.get("table_version").asLong(), 100, blue, "hash");
            String frozenText = c.get("frozen").isNull() ? null : c.get("frozen").asText();
            RoutingTable plain = RoutingTable.decode(t);
            UnitSet frozen = frozenText == null ? UnitSet.EMPTY : UnitSet.parse(frozenText, 100);
            String user = switch (c.get("user").asText()) {
                case "blue" -> userIn(plain, u -> u < blue && !frozen.contains(u));
                case "green" -> userIn(plain, u -> u >= blue && !frozen.contains(u));
                default -> userIn(plain, frozen::contains);
            };
            if (frozenText != null) {
                t.putObject("frozen").put("default", frozenText);
            }
            if (!c.get("pin").isNull()) {
                ((ObjectNode) t.get("pins")).put(user, c.get("pin").asText());
            }
            RoutingTable table = RoutingTable.decode(t);
            Long incoming = c.get("incoming").isNull() ? null : c.get("incoming").asLong();
            RoutingTable.WriteAnswer a = table.checkWrite(null, user, c.get("local").asText(), incoming);
            assertEquals(c.get("expect").asText(), a.check().wireName(), c.get("name").asText());
            if (!c.get("owner").isNull()) {
                assertEquals(c.get("owner").asText(), a.ownerLane(), c.get("name").asText());
            }
            n++;
        }
        assertTrue(n >= 14);
        System.out.println("[figures] write check fixtures: " + n + " cases agree");
    }

    /**
     * tests/fixtures/global_write_checks.json: every row against tests/fixtures/routing_base.json
     * with {@code global_writer} replaced by the row's and {@code version} set to its
     * table_version; the answer and the global writer it names (null where it names none).
     */
    @Test
    void globalWriteChecks() throws Exception {
        int n = 0;
        Map<String, Integer> seen = new java.util.TreeMap<>();
        for (JsonNode c : fixture("global_write_checks.json").get("cases")) {
            String name = c.get("name").asText();
            ObjectNode raw = (ObjectNode) fixture("routing_base.json");
            raw.put("version", c.get("table_version").asLong());
            ObjectNode gw = raw.putObject("global_writer");
            if (c.get("writer").isNull()) {
                gw.putNull("zone").putNull("lane");
            } else {
                String writer = c.get("writer").asText();
                gw.put("zone", writer);
                for (JsonNode z : raw.get("zones")) {
                    if (z.get("name").asText().equals(writer)) {
                        gw.put("lane", z.get("lane").asText());
                    }
                }
            }
            gw.put("read_only", c.get("read_only").asBoolean()).put("frozen", c.get("frozen").asBoolean());
            RoutingTable table = RoutingTable.decode(raw);
            assertEquals(c.get("frozen").asBoolean(), table.globalFrozen(), name);
            assertEquals(c.get("read_only").asBoolean(), table.globalReadOnly(), name);
            Long incoming = c.get("incoming").isNull() ? null : c.get("incoming").asLong();
            RoutingTable.GlobalWriteAnswer a = table.checkGlobalWrite(c.get("local").asText(), incoming);
            assertEquals(c.get("expect").asText(), a.check().wireName(), name);
            assertEquals(c.get("owner").isNull() ? null : c.get("owner").asText(), a.ownerZone(), name);
            assertEquals(c.get("table_version").asLong(), a.version(), name);
            assertEquals(incoming == null ? -1 : incoming, a.incoming(), name);
            seen.merge(a.check().wireName(), 1, Integer::sum);
            n++;
        }
        assertTrue(n >= 16, "only " + n + " cases");
        assertEquals(5, seen.size(), seen.toString());
        System.out.println("[figures] global write check fixtures: " + n + " cases agree " + seen);
    }

    /** The global write check's edges: an unknown zone, an absent {@code frozen}, a lane, the statuses. */
    @Test
    void globalWriteCheckEdges() throws Exception {
        ObjectNode raw = (ObjectNode) fixture("routing_base.json");
        raw.putObject("global_writer").put("zone", "az-c").put("read_only", false);
        RoutingTable table = RoutingTable.decode(raw);
        assertEquals(false, table.globalFrozen());
        TagException e = assertThrows(TagException.class, () -> table.checkGlobalWrite("az-q", null));
        assertEquals("unknown_zone", e.code());
        RoutingTable.GlobalWriteAnswer owned = table.checkGlobalWrite("red", null);
        assertTrue(owned.isOwned());
        assertEquals("az-c", owned.ownerZone());
        assertEquals("red", owned.ownerLane());
        assertEquals(0, owned.status());
        RoutingTable.GlobalWriteAnswer misrouted = table.checkGlobalWrite("blue", 8L);
        assertEquals(GlobalWriteCheck.MISROUTED, misrouted.check());
        assertEquals(421, misrouted.status());
        assertEquals(0, misrouted.retryAfterMs());
        raw.putObject("global_writer").put("zone", "az-c").put("read_only", true);
        RoutingTable.GlobalWriteAnswer ro = RoutingTable.decode(raw).checkGlobalWrite("az-c", null);
        assertEquals(GlobalWriteCheck.READ_ONLY, ro.check());
        assertEquals(503, ro.status());
        assertEquals(0, ro.retryAfterMs());
        raw.putObject("global_writer").put("zone", "az-c").put("read_only", true).put("frozen", true);
        RoutingTable.GlobalWriteAnswer frozen = RoutingTable.decode(raw).checkGlobalWrite("az-a", null);
        assertEquals(GlobalWriteCheck.FROZEN, frozen.check());
        assertEquals(503, frozen.status());
        assertEquals(RoutingTable.WRITE_RETRY_AFTER_MS, frozen.retryAfterMs());
    }

    /**
     * The golden vectors of the whole published rule (tests/fixtures/routing_vectors.json, from
     * scripts/reference_tag.py): three zones, a non-dial map, pins, a second domain and release
     * channels, as published and suspended. The Rust core and the Go client check the same rows.
     */
    @Test
    void routingVectors() throws Exception {
        Map<String, Integer> checked = new java.util.TreeMap<>();
        for (JsonNode f : fixture("routing_vectors.json").get("tables")) {
            String name = f.get("name").asText();
            RoutingTable table = RoutingTable.decode(f.get("table"));
            for (JsonNode row : f.get("rows")) {
                String user = row.get(0).asText();
                String domain = row.get(1).isNull() ? null : row.get(1).asText();
                String service = row.get(2).isNull() ? null : row.get(2).asText();
                String what = name + ": user " + user + ", domain " + domain + ", service " + service;
                if (!row.get(8).isNull()) {
                    TagException e = assertThrows(TagException.class, () -> table.tag(user, service, domain), what);
                    assertEquals(row.get(8).asText(), e.code(), what);
                    checked.merge(e.code(), 1, Integer::sum);
                    continue;
                }
                Tag tag = table.tag(user, service, domain);
                assertEquals(row.get(3).asText(), tag.lane(), what);
                assertEquals(row.get(4).asText(), tag.zone(), what);
                if (!row.get(5).isNull()) {
                    assertEquals(row.get(5).asInt(), tag.unit(), what);
                }
                assertEquals(row.get(6).asBoolean(), tag.pinned(), what);
                assertEquals(row.get(7).asText(), tag.reason(), what);
                checked.merge(tag.reason(), 1, Integer::sum);
            }
        }
        int total = checked.values().stream().mapToInt(Integer::intValue).sum();
        assertEquals(2080, total);
        for (String reason : new String[] {"pin", "unit", "channel:orders-v2", "channel:billing-v3", "channel_unavailable"}) {
            assertTrue(checked.getOrDefault(reason, 0) > 0, "no row decided by " + reason + ": " + checked);
        }
        System.out.println("[figures] routing vectors: " + total + " rows agree " + checked);
    }

    /**
     * The write check of a write by a service on the routing vectors' tables, as published and
     * with units 0-49 frozen in both domains: a release channel that selects the user owns their
     * writes of that service (owned in its zone, misrouted elsewhere), a suspended {@code reject}
     * channel leaves them without an owner, a newer caller is behind, and every other write is the
     * map's check; a freeze (the map's units 0-49, or a channel change's) makes the writes it
     * covers frozen, whichever rule routes them (pin, channel or map). The same rule as tests/routing_vectors.rs and the Go
     * client.
     */
    @Test
    void serviceWriteChecks() throws Exception {
        Map<String, Integer> seen = new java.util.TreeMap<>();
        for (JsonNode f : fixture("routing_vectors.json").get("tables")) {
            for (String variant : new String[] {"published", "frozen", "channel freeze"}) {
                boolean frozen = variant.equals("frozen");
                ObjectNode raw = ((ObjectNode) f.get("table")).deepCopy();
                if (frozen) {
                    raw.putObject("frozen").put("default", "0-49").put("search", "0-49");
                }
                if (variant.equals("channel freeze")) {
                    // As tests/routing_vectors.rs: orders and billing writes in the default domain
                    // of units 0-49 and of alice; the map freeze every write of units 0-49 in both
                    // domains; either whichever rule routes the user.
                    ObjectNode cf = raw.putObject("channel_freeze");
                    cf.put("channel", "orders-v2").put("domain", "default").put("units", "0-49");
                    cf.putArray("services").add("billing").add("orders");
                    cf.putArray("users").add("alice");
                }
                RoutingTable table = RoutingTable.decode(raw);
                for (JsonNode row : f.get("rows")) {
                    if (row.get(2).isNull()) {
                        continue;
                    }
                    String user = row.get(0).asText();
                    String domain = row.get(1).isNull() ? null : row.get(1).asText();
                    String service = row.get(2).asText();
                    String what = f.get("name").asText() + " (" + variant + "): user " + user + ", domain "
                            + domain + ", service " + service;
                    String reason = row.get(7).asText();
                    boolean covered = (variant.equals("channel freeze") && domain == null
                            && (service.equals("orders") || service.equals("billing"))
                            && (table.unitOf(user) < 50 || user.equals("alice")))
                            || (frozen && table.unitOf(user) < 50
                                && (domain == null || domain.equals("default") || domain.equals("search")));
                    for (int z = 0; z < 3; z++) {
                        String zone = raw.get("zones").get(z).get("name").asText();
                        String in = what + " in " + zone;
                        if (!row.get(8).isNull()) {
                            TagException e = assertThrows(TagException.class,
                                    () -> table.checkWriteFor(domain, service, user, zone, table.version()), in);
                            assertEquals("channel_unavailable", e.code(), in);
                            seen.merge("channel_unavailable", 1, Integer::sum);
                            continue;
                        }
                        RoutingTable.WriteAnswer got = table.checkWriteFor(domain, service, user, zone, table.version());
                        if (covered) {
                            assertEquals(WriteCheck.FROZEN, got.check(), in);
                            assertEquals(row.get(4).asText(), got.ownerZone(), in);
                            String rule = reason.startsWith("channel:") ? "channel" : reason.equals("pin") ? "pin" : "map";
                            seen.merge(variant + "/" + rule, 1, Integer::sum);
                        } else if (reason.startsWith("channel:")) {
                            WriteCheck want = zone.equals(row.get(4).asText()) ? WriteCheck.OWNED : WriteCheck.MISROUTED;
                            assertEquals(want, got.check(), in);
                            assertEquals(row.get(4).asText(), got.ownerZone(), in);
                            seen.merge("channel/" + got.check().wireName(), 1, Integer::sum);
                        } else {
                            assertEquals(table.checkWrite(domain, user, zone, table.version()), got, in);
                            assertTrue(got.check() != WriteCheck.FROZEN, in);
                            seen.merge("map/" + got.check().wireName(), 1, Integer::sum);
                        }
                    }
                    if (row.get(8).isNull()) {
                        assertEquals(WriteCheck.BEHIND,
                                table.checkWriteFor(domain, service, user, "az-a", table.version() + 1).check(), what);
                    }
                }
            }
        }
        for (String k : new String[] {"channel/owned", "channel/misrouted", "map/owned", "map/misrouted",
                "channel_unavailable", "frozen/map", "frozen/channel", "channel freeze/channel",
                "channel freeze/map", "channel freeze/pin"}) {
            assertTrue(seen.getOrDefault(k, 0) > 0, "no check answered " + k + ": " + seen);
        }
        System.out.println("[figures] service write checks: " + seen);
    }
}
