package dev.tidegate.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A real {@code tidegate serve} process from {@code TIDEGATE_TEST_BIN} on a free port, with a
 * clean environment (the server reads {@code TIDEGATE_*} variables as configuration), an operator
 * token and a service token. Fails loudly when the binary is not given or missing.
 */
final class TidegateServer implements AutoCloseable {
    static final String OPERATOR_TOKEN = "tg_test_operator_alice";
    static final String SERVICE_TOKEN = "tg_test_service_java";
    static final ObjectMapper JSON = new ObjectMapper();

    final Process process;
    final String url;
    final Path dir;
    final StringBuffer stderr = new StringBuffer();

    static Path binary() {
        String bin = System.getenv("TIDEGATE_TEST_BIN");
        if (bin == null || bin.isBlank()) {
            throw new IllegalStateException("TIDEGATE_TEST_BIN is not set: point it at a tidegate binary "
                    + "(scripts/client-java.sh defaults it to ${CARGO_TARGET_DIR:-target}/debug/tidegate)");
        }
        Path path = Path.of(bin);
        if (!Files.isExecutable(path)) {
            throw new IllegalStateException("TIDEGATE_TEST_BIN=" + bin + " is not an executable file");
        }
        return path;
    }

    static String sha256(String token) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                    .digest(token.getBytes(StandardCharsets.UTF_8)));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * A configuration with the service and operator tokens. Unless {@code extra} has its own
     * {@code [freeze]} table, moves are at once ({@code by_default = false}): these tests count
     * one version per dial and hold Routers that do not acknowledge on purpose, while a move
     * frozen by the server's default is three versions and waits for every live subscriber (as
     * {@code tests/common/mod.rs::config_toml} does for the Rust suites).
     */
    static String config(String extraTop, String extra) {
        String atOnce = extra.contains("[freeze]") ? "" : "[freeze]\nby_default = false\n";
        return "service_tokens_sha256 = [\"" + sha256(SERVICE_TOKEN) + "\"]\n" + extraTop + "\n" + extra + "\n"
                + atOnce
                + "[[operators]]\nname = \"alice\"\ntoken_sha256 = \"" + sha256(OPERATOR_TOKEN) + "\"\nrole = \"operator\"\n";
    }

    static TidegateServer start(Path dir, String toml) throws Exception {
        return start(dir, toml, 0);
    }

    static TidegateServer start(Path dir, String toml, int port) throws Exception {
        Path bin = binary();
        Files.createDirectories(dir);
        Path config = dir.resolve("tidegate.toml");
        Files.writeString(config, toml);
        ProcessBuilder pb = new ProcessBuilder(bin.toString(), "serve", "--address", "127.0.0.1",
                "--port", Integer.toString(port), "--config", config.toString(),
                "--data-dir", dir.resolve("data").toString());
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("RUST_LOG", "warn");
        return new TidegateServer(pb.start(), dir);
    }

    private TidegateServer(Process process, Path dir) throws Exception {
        this.process = process;
        this.dir = dir;
        CompletableFuture<String> announced = new CompletableFuture<>();
        Thread out = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (line.startsWith("tidegate listening on ")) {
                        announced.complete(line.substring("tidegate listening on ".length()).trim());
                    }
                }
            } catch (IOException ignored) {
                // The process ended.
            }
            announced.completeExceptionally(new IllegalStateException("tidegate ended before announcing its port"));
        });
        out.setDaemon(true);
        out.start();
        Thread err = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    stderr.append(line).append('\n');
                }
            } catch (IOException ignored) {
                // The process ended.
            }
        });
        err.setDaemon(true);
        err.start();
        try {
            this.url = announced.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            process.destroyForcibly();
            throw new IllegalStateException("tidegate did not announce its port; stderr:\n" + stderr, e);
        }
    }

    int port() {
        return URI.create(url).getPort();
    }

    /** kill -9. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws Exception {
        if (process.isAlive()) {
            process.destroy();
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                kill();
            }
        }
    }

    record Response(int status, JsonNode body) {}

    Response call(String method, String path, String token, Object body) throws IOException {
        HttpURLConnection c = (HttpURLConnection) URI.create(url + path).toURL().openConnection();
        c.setRequestMethod(method);
        c.setConnectTimeout(5000);
        c.setReadTimeout(30000);
        if (token != null) {
            c.setRequestProperty("Authorization", "Bearer " + token);
        }
        if (body != null) {
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream o = c.getOutputStream()) {
                o.write(JSON.writeValueAsBytes(body));
            }
        }
        int status = c.getResponseCode();
        try (InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream()) {
            byte[] bytes = in == null ? new byte[0] : in.readAllBytes();
            return new Response(status, bytes.length == 0 ? JSON.nullNode() : JSON.readTree(bytes));
        }
    }

    JsonNode ok(String method, String path, Object body) throws IOException {
        Response r = call(method, path, OPERATOR_TOKEN, body);
        if (r.status() / 100 != 2) {
            throw new AssertionError(method + " " + path + " -> " + r.status() + " " + r.body());
        }
        return r.body();
    }

    JsonNode routing() throws IOException {
        return ok("GET", "/v1/routing", null);
    }

    long version() throws IOException {
        return routing().get("version").asLong();
    }
}
