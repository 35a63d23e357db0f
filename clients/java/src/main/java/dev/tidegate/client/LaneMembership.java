package dev.tidegate.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The lane membership calls (the Rust {@code lanes.rs}): register, heartbeat and leave over
 * {@code /v1/lanes/{group}/members}, with the service token on every call and the member secret
 * the registration answered on heartbeats and leave ({@code X-Tidegate-Member-Secret}). With
 * several coordinators a call goes to the one that answered last, and on a connection error or
 * a {@code not_lane_authority} answer to the named authority (if listed), else the next URL.
 */
public final class LaneMembership {
    static final String SECRET_HEADER = "X-Tidegate-Member-Secret";

    /** What a registration or heartbeat answers. */
    public record Assigned(String memberId, String memberSecret, long generation, List<Integer> assignment,
                           List<Integer> pending, long heartbeatIntervalMs, long sessionTimeoutMs) {}

    /** The coordinator does not know the member or its secret: register again. */
    public static final class MemberGone extends IOException {
        MemberGone(String m) {
            super(m);
        }
    }

    /** An error answer: HTTP status, error code, detail and the lane authority when named. */
    public static final class ApiError extends IOException {
        final int status;
        final String code;
        final String authority;

        ApiError(int status, String code, String detail, String authority) {
            super("HTTP " + status + " " + code + ": " + detail);
            this.status = status;
            this.code = code;
            this.authority = authority;
        }
    }

    private final List<String> bases = new ArrayList<>();
    private final AtomicInteger current = new AtomicInteger();
    private final String token;
    private final int timeoutMs;

    private final EnvProxy proxies;

    /**
     * Calls to {@code coordinators} (one URL or several, comma-separated) with the service
     * {@code token}, each call given {@code timeout} to connect and to answer. Proxies come from
     * the environment ({@code HTTPS_PROXY}, {@code HTTP_PROXY}, {@code NO_PROXY}), as in Go.
     */
    public LaneMembership(String coordinators, String token, Duration timeout) {
        this(coordinators, token, timeout, EnvProxy.environment());
    }

    LaneMembership(String coordinators, String token, Duration timeout, EnvProxy proxies) {
        this.proxies = proxies;
        for (String b : coordinators.split(",")) {
            String t = b.trim().replaceAll("/+$", "");
            if (!t.isEmpty()) {
                bases.add(t);
            }
        }
        if (bases.isEmpty()) {
            throw new IllegalArgumentException("no coordinator URL in `" + coordinators + "`");
        }
        this.token = token;
        this.timeoutMs = (int) timeout.toMillis();
    }

    public Assigned register(String group, String name, String zone, String topic, int partitions) throws IOException {
        ObjectNode body = RoutingTable.JSON.createObjectNode().put("zone", zone).put("topic", topic).put("partitions", partitions);
        if (name != null) {
            body.put("name", name);
        }
        Assigned a = decode(call("POST", "/v1/lanes/" + Router.encode(group) + "/members", body, null));
        if (a.memberSecret() == null) {
            throw new IOException("unexpected answer from tidegate: `member_secret` is missing");
        }
        return a;
    }

    public Assigned heartbeat(String group, String memberId, String secret, Collection<Integer> holding,
                              String zone, String topic, int partitions) throws IOException {
        ObjectNode body = RoutingTable.JSON.createObjectNode();
        var list = body.putArray("holding");
        holding.forEach(list::add);
        body.put("zone", zone).put("topic", topic).put("partitions", partitions);
        return decode(call("POST", "/v1/lanes/" + Router.encode(group) + "/members/" + Router.encode(memberId)
                + "/heartbeat", body, secret));
    }

    public void leave(String group, String memberId, String secret) throws IOException {
        call("DELETE", "/v1/lanes/" + Router.encode(group) + "/members/" + Router.encode(memberId), null, secret);
    }

    private JsonNode call(String method, String path, JsonNode body, String secret) throws IOException {
        int n = bases.size();
        int next = current.get() % n;
        boolean[] tried = new boolean[n];
        IOException last = null;
        for (int k = 0; k < n; k++) {
            int index = -1;
            for (int j = 0; j < n; j++) {
                if (!tried[(next + j) % n]) {
                    index = (next + j) % n;
                    break;
                }
            }
            if (index < 0) {
                break;
            }
            tried[index] = true;
            try {
                JsonNode v = callOne(bases.get(index), method, path, body, secret);
                current.set(index);
                return v;
            } catch (ApiError e) {
                if (!"not_lane_authority".equals(e.code)) {
                    current.set(index);
                    throw e;
                }
                last = e;
                next = (index + 1) % n;
                if (e.authority != null && bases.contains(e.authority)) {
                    next = bases.indexOf(e.authority);
                }
                current.set(next);
            } catch (MemberGone e) {
                current.set(index);
                throw e;
            } catch (IOException e) {
                last = new IOException("cannot reach tidegate at " + bases.get(index) + ": " + e.getMessage(), e);
                next = (index + 1) % n;
                current.set(next);
            }
        }
        throw last;
    }

    private JsonNode callOne(String base, String method, String path, JsonNode body, String secret) throws IOException {
        HttpURLConnection c = Router.open(URI.create(base + path), proxies);
        c.setRequestMethod(method);
        c.setConnectTimeout(timeoutMs);
        c.setReadTimeout(timeoutMs);
        if (token != null) {
            c.setRequestProperty("Authorization", "Bearer " + token);
        }
        if (secret != null) {
            c.setRequestProperty(SECRET_HEADER, secret);
        }
        if (!method.equals("GET") && !method.equals("DELETE")) {
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream o = c.getOutputStream()) {
                o.write((body == null ? "{}" : body.toString()).getBytes(StandardCharsets.UTF_8));
            }
        }
        int status = c.getResponseCode();
        JsonNode value;
        try (InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream()) {
            byte[] bytes = in == null ? new byte[0] : in.readAllBytes();
            try {
                value = bytes.length == 0 ? RoutingTable.JSON.createObjectNode() : RoutingTable.JSON.readTree(bytes);
            } catch (IOException e) {
                throw new IOException("unexpected answer from tidegate: HTTP " + status + ", body not JSON");
            }
        }
        if (status >= 400) {
            String code = value.path("error").asText("error");
            String detail = value.path("detail").asText("");
            if (code.equals("member_not_found") || code.equals("member_secret_mismatch")) {
                throw new MemberGone(detail);
            }
            String authority = value.path("authority").path("url").asText(null);
            throw new ApiError(status, code, detail, authority == null ? null : authority.replaceAll("/+$", ""));
        }
        return value;
    }

    private static Assigned decode(JsonNode v) throws IOException {
        if (!v.path("member_id").isTextual()) {
            throw new IOException("unexpected answer from tidegate: `member_id` is missing");
        }
        return new Assigned(v.get("member_id").asText(),
                v.path("member_secret").isTextual() ? v.get("member_secret").asText() : null,
                v.path("generation").asLong(), ints(v.path("assignment")), ints(v.path("pending")),
                v.path("heartbeat_interval_ms").asLong(1000), v.path("session_timeout_ms").asLong(10_000));
    }

    private static List<Integer> ints(JsonNode list) {
        List<Integer> out = new ArrayList<>();
        list.forEach(n -> out.add(n.asInt()));
        return out;
    }
}
