package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java Router's local tags agree with the server's {@code POST /v1/tag} on 100 000 users,
 * on a three-zone map with a pin to the third lane, a named domain and release channels (the
 * setup of tests/reference_tag.rs), for the global rule, a service with a channel, and a service
 * with a channel in the named domain.
 */
class TagAgreementTest {
    static final ObjectNode JSON_OBJ = TidegateServer.JSON.createObjectNode();

    static ObjectNode obj() {
        return TidegateServer.JSON.createObjectNode();
    }

    @Test
    void agreesWithTheServerOn100000UsersOnAThreeZoneMapWithDomainsAndChannels(@TempDir Path dir) throws Exception {
        try (TidegateServer server = TidegateServer.start(dir,
                TidegateServer.config("", "[zones.az-c]\nlane = \"red\"\nclass = \"gzone\"\n"))) {
            ObjectNode move = obj();
            ArrayNode moves = move.putArray("moves");
            moves.addObject().put("units", "10-29,60").put("zone", "az-c");
            moves.addObject().put("units", "0-4").put("zone", "red");
            move.put("expected_version", server.version()).put("reason", "java client test");
            server.ok("PUT", "/v1/units", move);
            server.ok("PUT", "/v1/pins/u1", obj().put("color", "red").put("expected_version", server.version()).put("reason", "t"));
            server.ok("PUT", "/v1/pins/u-green", obj().put("color", "green").put("expected_version", server.version()).put("reason", "t"));
            server.ok("POST", "/v1/domains", obj().put("name", "search").put("expected_version", server.version()).put("reason", "t"));
            ObjectNode orders = obj();
            orders.putArray("services").add("orders");
            orders.put("zone", "green").put("percent", 10).putArray("users").add("u7");
            orders.put("expected_version", server.version()).put("reason", "t");
            server.ok("PUT", "/v1/channels/orders-v2", orders);
            ObjectNode ranker = obj();
            ranker.putArray("services").add("ranker");
            ranker.put("zone", "red").put("units", "60-79").put("domain", "search");
            ranker.put("expected_version", server.version()).put("reason", "t");
            server.ok("PUT", "/v1/channels/ranker-v3", ranker);
            ObjectNode searchMove = obj();
            searchMove.putArray("moves").addObject().put("units", "80-99").put("zone", "az-c").put("domain", "search");
            searchMove.put("expected_version", server.version()).put("reason", "t");
            server.ok("PUT", "/v1/units", searchMove);
            long version = server.version();

            Router.Options options = new Router.Options().token(TidegateServer.SERVICE_TOKEN);
            try (Router router = Router.connect(server.url, new Router.Identity("java-tagger", "az-a", "service"), options)) {
                assertTrue(router.waitForVersion(version, Duration.ofSeconds(20)), router.status().toString());
                List<String> users = new ArrayList<>();
                for (int i = 0; i < 100_000; i++) {
                    users.add("u" + i);
                }
                users.addAll(List.of("u-green", "ユーザー", "müller", "a/b?c=d", "😀"));
                Map<String, Integer> lanes = new TreeMap<>();
                Map<String, Integer> writeChecks = new TreeMap<>();
                long started = System.nanoTime();
                int checked = 0;
                String[][] variants = {{null, null}, {"orders", null}, {"ranker", "search"}, {"orders", "search"}};
                for (String[] v : variants) {
                    String service = v[0];
                    String domain = v[1];
                    for (int from = 0; from < users.size(); from += 10_000) {
                        List<String> chunk = users.subList(from, Math.min(users.size(), from + 10_000));
                        ObjectNode req = obj();
                        ArrayNode ids = req.putArray("user_ids");
                        chunk.forEach(ids::add);
                        if (service != null) {
                            req.put("service", service);
                        }
                        if (domain != null) {
                            req.put("domain", domain);
                        }
                        JsonNode tags = server.ok("POST", "/v1/tag", req).get("tags");
                        assertEquals(chunk.size(), tags.size());
                        for (int i = 0; i < chunk.size(); i++) {
                            JsonNode theirs = tags.get(i);
                            String user = chunk.get(i);
                            Tag ours = router.tagInDomain(user, domain, service);
                            String what = user + " service=" + service + " domain=" + domain + ": server " + theirs + " vs " + ours;
                            assertEquals(theirs.get("color").asText(), ours.lane(), what);
                            assertEquals(theirs.get("zone").asText(), ours.zone(), what);
                            assertEquals(theirs.get("pinned").asBoolean(), ours.pinned(), what);
                            if (theirs.has("unit") && !theirs.get("unit").isNull()) {
                                assertEquals(theirs.get("unit").asInt(), ours.unit(), what);
                            }
                            if (theirs.has("reason") && service != null) {
                                assertEquals(theirs.get("reason").asText(), ours.reason(), what);
                            }
                            if (from == 0 && i < 2_000) {
                                // The write check of this call's write owns exactly where the
                                // server routes the call (the service's channel, a pin or the map).
                                for (String zone : new String[] {"az-a", "az-b", "az-c"}) {
                                    RoutingTable.WriteAnswer answer = router.checkWriteFor(domain, service, user, zone, version);
                                    boolean owner = zone.equals(theirs.get("zone").asText());
                                    assertEquals(owner ? WriteCheck.OWNED : WriteCheck.MISROUTED, answer.check(), what + " in " + zone);
                                    assertEquals(theirs.get("zone").asText(), answer.ownerZone(), what + " in " + zone);
                                    writeChecks.merge(answer.check().wireName(), 1, Integer::sum);
                                }
                            }
                            lanes.merge(v[0] + "/" + v[1] + ":" + ours.lane(), 1, Integer::sum);
                            checked++;
                        }
                    }
                }
                double perTagNs = 0;
                long t0 = System.nanoTime();
                for (String u : users) {
                    router.tag(u);
                }
                perTagNs = (System.nanoTime() - t0) / (double) users.size();
                assertTrue(lanes.keySet().stream().anyMatch(k -> k.endsWith(":red")), lanes.toString());
                assertEquals(4 * 2_000 * 3, writeChecks.values().stream().mapToInt(Integer::intValue).sum(), writeChecks.toString());
                System.out.printf("[figures] write checks of a service's writes: %s (2 000 users x 4 variants x 3 zones) own where "
                        + "POST /v1/tag routes the call%n", writeChecks);
                System.out.printf("[figures] tag agreement: %d tags agree with POST /v1/tag (100 005 users x 4 rule variants: global, "
                        + "channel orders-v2, domain search + channel ranker-v3, domain search without channel) on a 3-zone table at v%d; "
                        + "lanes %s; local tag %.0f ns/user (%.1f s total)%n",
                        checked, version, lanes, perTagNs, (System.nanoTime() - started) / 1e9);
            }
        }
    }
}
