package dev.tidegate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * HTTPS_PROXY, HTTP_PROXY and NO_PROXY, read as Go's ProxyFromEnvironment reads them
 * ({@link EnvProxy}): the decision table, then the Router and the lane membership calls against
 * a fake coordinator (TLS, its certificate for {@code coordinator.test}) that is reachable only
 * through a tiny proxy in this test: {@code coordinator.test} resolves nowhere, the proxy maps it
 * to the fake's local port. The proxy counts the CONNECTs (and absolute-form requests) it served.
 */
class ProxyTest {
    static final String HOST = "coordinator.test";

    /** A tiny HTTP proxy: CONNECT tunnels and absolute-form forwarding, to mapped local ports. */
    static final class TinyProxy implements AutoCloseable {
        final ServerSocket server;
        /** {@code host:port} as the client names it, to the local port that serves it. */
        final Map<String, Integer> routes = new ConcurrentHashMap<>();
        final List<String> connects = new CopyOnWriteArrayList<>();
        final List<String> forwards = new CopyOnWriteArrayList<>();
        final java.util.concurrent.ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "tiny-proxy");
            t.setDaemon(true);
            return t;
        });

        TinyProxy() throws IOException {
            server = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
            pool.submit(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket c = server.accept();
                        pool.submit(() -> serve(c));
                    } catch (IOException e) {
                        return;
                    }
                }
            });
        }

        String url() {
            return "http://127.0.0.1:" + server.getLocalPort();
        }

        private void serve(Socket client) {
            try (client) {
                InputStream in = client.getInputStream();
                String head = readHead(in);
                String[] first = head.substring(0, head.indexOf("\r\n")).split(" ");
                OutputStream out = client.getOutputStream();
                if (first[0].equals("CONNECT")) {
                    connects.add(first[1]);
                    Integer port = routes.get(first[1]);
                    if (port == null) {
                        out.write("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                        return;
                    }
                    try (Socket origin = new Socket("127.0.0.1", port)) {
                        out.write("HTTP/1.1 200 Connection established\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                        out.flush();
                        pipe(client, origin, in);
                    }
                    return;
                }
                // Absolute form: GET http://host:port/path HTTP/1.1. Forwarded in origin form, one
                // request per connection (Connection: close).
                URI target = URI.create(first[1]);
                String authority = target.getHost() + ":" + (target.getPort() > 0 ? target.getPort() : 80);
                forwards.add(first[0] + " " + authority);
                Integer port = routes.get(authority);
                if (port == null) {
                    out.write("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    return;
                }
                StringBuilder rewritten = new StringBuilder();
                rewritten.append(first[0]).append(' ').append(target.getRawPath())
                        .append(target.getRawQuery() == null ? "" : "?" + target.getRawQuery()).append(' ').append(first[2]).append("\r\n");
                for (String line : head.substring(head.indexOf("\r\n") + 2).split("\r\n")) {
                    String lower = line.toLowerCase(java.util.Locale.ROOT);
                    if (line.isEmpty() || lower.startsWith("connection:") || lower.startsWith("proxy-connection:")) {
                        continue;
                    }
                    rewritten.append(line).append("\r\n");
                }
                rewritten.append("Connection: close\r\n\r\n");
                try (Socket origin = new Socket("127.0.0.1", port)) {
                    origin.getOutputStream().write(rewritten.toString().getBytes(StandardCharsets.ISO_8859_1));
                    pipe(client, origin, in);
                }
            } catch (IOException ignored) {
                // A side went away.
            }
        }

        /** Copies both ways until either side ends. */
        private void pipe(Socket client, Socket origin, InputStream clientIn) throws IOException {
            var up = pool.submit(() -> {
                try {
                    clientIn.transferTo(origin.getOutputStream());
                } catch (IOException ignored) {
                    // Closed.
                }
                try {
                    origin.shutdownOutput();
                } catch (IOException ignored) {
                    // Closed.
                }
            });
            try {
                origin.getInputStream().transferTo(client.getOutputStream());
            } finally {
                up.cancel(true);
            }
        }

        private static String readHead(InputStream in) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            while (true) {
                int c = in.read();
                if (c < 0) {
                    throw new IOException("closed in the request head");
                }
                b.write(c);
                byte[] a = b.toByteArray();
                int n = a.length;
                if (n >= 4 && a[n - 4] == '\r' && a[n - 3] == '\n' && a[n - 2] == '\r' && a[n - 1] == '\n') {
                    return b.toString(StandardCharsets.ISO_8859_1);
                }
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
            pool.shutdownNow();
        }
    }

    /**
     * A fake coordinator: each watch gets a routing event at version 1 and heartbeats every 50 ms;
     * acks and lane registrations are recorded and answered.
     */
    static final class Coordinator implements AutoCloseable {
        final HttpServer server;
        final AtomicInteger watches = new AtomicInteger();
        final List<Long> acks = new CopyOnWriteArrayList<>();
        final AtomicInteger registrations = new AtomicInteger();

        Coordinator(SSLContext tls) throws IOException {
            InetSocketAddress at = new InetSocketAddress("127.0.0.1", 0);
            if (tls != null) {
                HttpsServer s = HttpsServer.create(at, 0);
                s.setHttpsConfigurator(new HttpsConfigurator(tls));
                server = s;
            } else {
                server = HttpServer.create(at, 0);
            }
            server.setExecutor(Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r, "fake-coordinator");
                t.setDaemon(true);
                return t;
            }));
            server.createContext("/v1/routing/watch", exchange -> {
                watches.incrementAndGet();
                exchange.getResponseHeaders().add("content-type", "text/event-stream");
                exchange.sendResponseHeaders(200, 0);
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(FakeCoordinatorTest.event(FakeCoordinatorTest.table(1, "log-proxy").toString())
                            .getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    for (int i = 0; i < 400; i++) {
                        Thread.sleep(50);
                        out.write(": heartbeat\n\n".getBytes(StandardCharsets.UTF_8));
                        out.flush();
                    }
                } catch (IOException | InterruptedException ignored) {
                    // The client went away.
                }
            });
            server.createContext("/v1/subscribers/", exchange -> {
                try (exchange) {
                    byte[] body = exchange.getRequestBody().readAllBytes();
                    acks.add(RoutingTable.JSON.readTree(body).get("version").asLong());
                    exchange.sendResponseHeaders(200, 2);
                    exchange.getResponseBody().write("{}".getBytes(StandardCharsets.UTF_8));
                }
            });
            server.createContext("/v1/lanes/", exchange -> {
                try (exchange) {
                    exchange.getRequestBody().readAllBytes();
                    registrations.incrementAndGet();
                    byte[] answer = ("{\"member_id\": \"m-1\", \"member_secret\": \"s\", \"generation\": 1, "
                            + "\"assignment\": [0, 1], \"pending\": [], \"heartbeat_interval_ms\": 1000, "
                            + "\"session_timeout_ms\": 10000}").getBytes(StandardCharsets.UTF_8);
                    exchange.getResponseHeaders().add("content-type", "application/json");
                    exchange.sendResponseHeaders(200, answer.length);
                    exchange.getResponseBody().write(answer);
                }
            });
            server.start();
        }

        int port() {
            return server.getAddress().getPort();
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    static SSLContext serverTls;
    static SSLContext clientTls;
    static SSLContext savedDefault;
    static SSLSocketFactory savedHttpsFactory;

    /**
     * A self-signed certificate for coordinator.test and 127.0.0.1 (keytool, from this JDK), the
     * fake's key; the JVM's default TLS context trusts it for the duration of these tests (the
     * watch stream's socket uses the default context, acks HttpsURLConnection's default factory).
     */
    @BeforeAll
    static void certificates(@TempDir Path dir) throws Exception {
        Path ks = dir.resolve("coordinator.p12");
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-genkeypair", "-alias", "coordinator", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=" + HOST, "-ext", "SAN=dns:" + HOST + ",ip:127.0.0.1", "-validity", "2",
                "-keystore", ks.toString(), "-storetype", "PKCS12", "-storepass", "changeit", "-keypass", "changeit")
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool failed: " + out);
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(ks)) {
            keys.load(in, "changeit".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, "changeit".toCharArray());
        serverTls = SSLContext.getInstance("TLS");
        serverTls.init(kmf.getKeyManagers(), null, null);
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        trust.setCertificateEntry("coordinator", keys.getCertificate("coordinator"));
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        clientTls = SSLContext.getInstance("TLS");
        clientTls.init(null, tmf.getTrustManagers(), null);
        savedDefault = SSLContext.getDefault();
        savedHttpsFactory = HttpsURLConnection.getDefaultSSLSocketFactory();
        SSLContext.setDefault(clientTls);
        HttpsURLConnection.setDefaultSSLSocketFactory(clientTls.getSocketFactory());
    }

    @AfterAll
    static void restore() {
        SSLContext.setDefault(savedDefault);
        HttpsURLConnection.setDefaultSSLSocketFactory(savedHttpsFactory);
    }

    static Router.Options options(Map<String, String> env) {
        Router.Options o = new Router.Options().token("service-token").readTimeout(Duration.ofSeconds(2));
        o.backoffMin = Duration.ofMillis(20);
        o.backoffMax = Duration.ofMillis(200);
        o.proxies = EnvProxy.of(env);
        return o;
    }

    static final Router.Identity ME = new Router.Identity("orders-az-a-7", "az-a", "service");

    // ---- The decision table (golang.org/x/net/http/httpproxy's rules) ----

    static String route(Map<String, String> env, String url) throws IOException {
        EnvProxy.Route r = EnvProxy.of(env).route(URI.create(url));
        return r.direct() ? "direct" : r.proxyHost() + ":" + r.proxyPort();
    }

    @Test
    void decisionsFollowGo() throws IOException {
        Map<String, String> https = Map.of("HTTPS_PROXY", "http://proxy.corp:3128");
        assertEquals("proxy.corp:3128", route(https, "https://tidegate.internal:8443"));
        assertEquals("direct", route(https, "http://tidegate.internal:8080"), "HTTPS_PROXY is for https:// only");
        assertEquals("proxy.corp:80", route(Map.of("HTTP_PROXY", "proxy.corp"), "http://tidegate.internal"),
                "no scheme: http://, port 80");
        assertEquals("proxy.corp:3128", route(Map.of("https_proxy", "proxy.corp:3128"), "https://a.example"),
                "lower case, and host:port without a scheme");
        assertEquals("upper:1", route(Map.of("HTTPS_PROXY", "http://upper:1", "https_proxy", "http://lower:2"),
                "https://a.example"), "upper case wins");
        assertEquals("lower:2", route(Map.of("HTTPS_PROXY", "", "https_proxy", "http://lower:2"),
                "https://a.example"), "an empty value is none");
        assertEquals("direct", route(Map.of(), "https://a.example"));
        // Never proxied: localhost and loopback, whatever NO_PROXY says.
        for (String url : List.of("https://localhost:8443", "https://127.0.0.1:8443", "https://127.9.9.9",
                "https://[::1]:8443")) {
            assertEquals("direct", route(https, url), url);
        }
        // NO_PROXY.
        Map<String, String> no = Map.of("HTTPS_PROXY", "http://p:1",
                "NO_PROXY", " example.com, .sub.org,*.star.net, 10.0.0.0/8, 192.168.1.7, only.port:8443, [fd00::1], 2001:db8::/32 ");
        String[][] cases = {
                {"https://example.com", "direct"}, {"https://api.example.com", "direct"},
                {"https://notexample.com", "p:1"}, {"https://EXAMPLE.COM", "direct"},
                {"https://sub.org", "p:1"}, {"https://x.sub.org", "direct"},
                {"https://star.net", "p:1"}, {"https://a.star.net", "direct"},
                {"https://10.1.2.3:8443", "direct"}, {"https://11.1.2.3", "p:1"},
                {"https://192.168.1.7", "direct"}, {"https://192.168.1.8", "p:1"},
                {"https://only.port:8443", "direct"}, {"https://only.port:9443", "p:1"}, {"https://only.port", "p:1"},
                {"https://[fd00::1]:8443", "direct"}, {"https://[fd00::2]", "p:1"},
                {"https://[2001:db8::5]", "direct"}, {"https://[2001:db9::5]", "p:1"},
        };
        for (String[] c : cases) {
            assertEquals(c[1], route(no, c[0]), c[0]);
        }
        assertEquals("direct", route(Map.of("HTTPS_PROXY", "http://p:1", "no_proxy", "*"), "https://a.example"),
                "* turns the proxy off");
        assertEquals("p:1", route(Map.of("HTTPS_PROXY", "http://p:1", "NO_PROXY", "*.example"), "https://a.other"));
        // CGI: HTTP_PROXY may come from a request's Proxy: header; HTTPS_PROXY is still used.
        Map<String, String> cgi = Map.of("HTTP_PROXY", "http://p:1", "HTTPS_PROXY", "http://p:2", "REQUEST_METHOD", "GET");
        assertThrows(IOException.class, () -> route(cgi, "http://a.example"));
        assertEquals("p:2", route(cgi, "https://a.example"));
        // What this client cannot do is an error, never a silent direct connection.
        IOException socks = assertThrows(IOException.class,
                () -> route(Map.of("HTTPS_PROXY", "socks5://p:1080"), "https://a.example"));
        assertTrue(socks.getMessage().contains("socks5"), socks.getMessage());
        IOException creds = assertThrows(IOException.class,
                () -> route(Map.of("HTTPS_PROXY", "http://user:secret@p:1"), "https://a.example"));
        assertTrue(creds.getMessage().contains("credentials") && !creds.getMessage().contains("secret"), creds.getMessage());
    }

    @Test
    void anUnreachableProxyIsNamed() throws Exception {
        int closed;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            closed = s.getLocalPort();
        }
        Map<String, String> env = Map.of("HTTPS_PROXY", "127.0.0.1:" + closed);
        try (Router r = Router.connect("https://" + HOST, ME, options(env))) {
            FakeCoordinatorTest.waitFor(() -> r.status().lastError() != null, Duration.ofSeconds(10),
                    () -> "an error: " + r.status());
            String e = r.status().lastError();
            assertTrue(e.contains("cannot reach proxy 127.0.0.1:" + closed) && e.contains("HTTPS_PROXY"), e);
        }
    }

    // ---- Through a real (tiny) proxy ----

    @Test
    void httpsCoordinatorThroughConnectProxy() throws Exception {
        try (Coordinator c = new Coordinator(serverTls); TinyProxy proxy = new TinyProxy()) {
            proxy.routes.put(HOST + ":443", c.port());
            Map<String, String> env = Map.of("HTTPS_PROXY", proxy.url(), "NO_PROXY", "example.org");
            try (Router r = Router.connect("https://" + HOST, ME, options(env))) {
                assertTrue(r.waitForVersion(1, Duration.ofSeconds(10)), "no table through the proxy: " + r.status());
                FakeCoordinatorTest.waitFor(() -> c.acks.contains(1L), Duration.ofSeconds(10),
                        () -> "the ack of v1 through the proxy: " + r.status());
                assertEquals("https://" + HOST, r.status().coordinator());
            }
            // The watch stream's tunnel and the ack's (HttpsURLConnection), both to coordinator.test:443.
            assertEquals(List.of(HOST + ":443", HOST + ":443"), proxy.connects);
            assertEquals(1, c.watches.get());
            // The lane membership calls go the same way (coordinator.test resolves nowhere, so an
            // answer came through the proxy; the JDK may reuse the ack's tunnel for it).
            LaneMembership m = new LaneMembership("https://" + HOST, "service-token", Duration.ofSeconds(5), EnvProxy.of(env));
            assertEquals(List.of(0, 1), m.register("orders", null, "az-a", "orders", 2).assignment());
            assertEquals(1, c.registrations.get());
            assertTrue(proxy.connects.size() >= 2 && proxy.connects.stream().allMatch((HOST + ":443")::equals),
                    proxy.connects.toString());
            System.out.println("[figures] proxy: https://" + HOST + " watched, acked and lane-registered through "
                    + proxy.connects.size() + " CONNECTs of an HTTPS_PROXY");
        }
    }

    @Test
    void httpCoordinatorThroughHttpProxyInAbsoluteForm() throws Exception {
        try (Coordinator c = new Coordinator(null); TinyProxy proxy = new TinyProxy()) {
            proxy.routes.put(HOST + ":8080", c.port());
            Map<String, String> env = Map.of("HTTP_PROXY", proxy.url());
            try (Router r = Router.connect("http://" + HOST + ":8080", ME, options(env))) {
                assertTrue(r.waitForVersion(1, Duration.ofSeconds(10)), "no table through the proxy: " + r.status());
                FakeCoordinatorTest.waitFor(() -> c.acks.contains(1L), Duration.ofSeconds(10),
                        () -> "the ack of v1 through the proxy: " + r.status());
            }
            assertEquals(List.of(), proxy.connects, "plain HTTP is forwarded, not tunnelled (as Go)");
            assertEquals(List.of("GET " + HOST + ":8080", "POST " + HOST + ":8080"), proxy.forwards);
        }
    }

    @Test
    void noProxyAndLoopbackGoDirect() throws Exception {
        try (Coordinator c = new Coordinator(serverTls); TinyProxy proxy = new TinyProxy()) {
            proxy.routes.put(HOST + ":443", c.port());
            // NO_PROXY names the coordinator: the client connects itself, and coordinator.test
            // resolves nowhere, so it cannot reach it (through the proxy it would).
            Map<String, String> env = Map.of("HTTPS_PROXY", proxy.url(), "NO_PROXY", "example.org, ." + "test");
            try (Router r = Router.connect("https://" + HOST, ME, options(env))) {
                FakeCoordinatorTest.waitFor(() -> r.status().reconnects() >= 2 && r.status().lastError() != null,
                        Duration.ofSeconds(20), () -> "two failed direct attempts: " + r.status());
                assertEquals(null, r.version());
                assertTrue(r.status().lastError().contains(HOST), r.status().lastError());
            }
            assertEquals(List.of(), proxy.connects);
            // A loopback coordinator is never proxied (Go's rule), even with no NO_PROXY.
            Map<String, String> loop = Map.of("HTTPS_PROXY", proxy.url());
            try (Router r = Router.connect("https://127.0.0.1:" + c.port(), ME, options(loop))) {
                assertTrue(r.waitForVersion(1, Duration.ofSeconds(10)), "no table from the loopback coordinator: " + r.status());
                FakeCoordinatorTest.waitFor(() -> c.acks.contains(1L), Duration.ofSeconds(10), () -> "the direct ack: " + r.status());
            }
            assertEquals(List.of(), proxy.connects);
        }
    }

    @Test
    void aRefusedConnectIsReported() throws Exception {
        try (TinyProxy proxy = new TinyProxy()) {
            Map<String, String> env = Map.of("HTTPS_PROXY", proxy.url());
            try (Router r = Router.connect("https://unknown.test", ME, options(env))) {
                FakeCoordinatorTest.waitFor(() -> r.status().lastError() != null, Duration.ofSeconds(10),
                        () -> "an error: " + r.status());
                String e = r.status().lastError();
                assertTrue(e.contains("refused CONNECT unknown.test:443") && e.contains("403"), e);
            }
            assertTrue(proxy.connects.size() >= 1 && proxy.connects.stream().allMatch("unknown.test:443"::equals),
                    proxy.connects.toString());
        }
    }
}
