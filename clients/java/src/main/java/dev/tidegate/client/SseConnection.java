package dev.tidegate.client;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import javax.net.ssl.SSLSocketFactory;

/**
 * One watch stream over a plain socket, as the Rust client's {@code sse.rs} does it: a GET, the
 * response head, chunked or plain body, {@code event/id/data} lines. The socket gives what the
 * stall bound needs: every item (an event or a heartbeat comment) must arrive within the bound
 * of the previous one, however the bytes trickle, and {@link #close()} from another thread
 * wakes a blocked read at once.
 */
final class SseConnection implements AutoCloseable {
    /** The response header in which the coordinator announces its heartbeat, in milliseconds. */
    static final String HEARTBEAT_HEADER = "x-tidegate-heartbeat-ms";
    /**
     * The response header in which a coordinator that confirms leases announces the lease T, in
     * milliseconds: a copy of the table is confirmed current for at most T after the coordinator
     * last confirmed it had read its whole command log. Absent from older coordinators.
     */
    static final String LEASE_HEADER = "x-tidegate-lease-ms";
    /** How much longer than the server's heartbeat the stall bound must be at least. */
    static final long HEARTBEAT_MARGIN_MS = 1000;

    /** An event, or a comment (heartbeats are comments: {@code event} is null). */
    record Item(String event, String id, String data) {
        boolean isComment() {
            return event == null;
        }
    }

    /** The stream was silent for longer than the bound. */
    static final class Silence extends IOException {
        Silence(String message) {
            super(message);
        }
    }

    private final Socket socket;
    private final InputStream in;
    private final long boundMs;
    private final Long heartbeatMs;
    private Long leaseMs;
    private long deadline;
    private boolean chunked;
    private long chunkLeft;
    private boolean ended;

    private SseConnection(Socket socket, InputStream in, long boundMs, Long heartbeatMs) {
        this.socket = socket;
        this.in = in;
        this.boundMs = boundMs;
        this.heartbeatMs = heartbeatMs;
    }

    /** The stall bound in force: the caller's, raised to the server's heartbeat plus a second. */
    static long stallBound(long boundMs, Long heartbeatMs) {
        return heartbeatMs == null ? boundMs : Math.max(boundMs, heartbeatMs + HEARTBEAT_MARGIN_MS);
    }

    long boundMs() {
        return boundMs;
    }

    Long heartbeatMs() {
        return heartbeatMs;
    }

    /** The lease this stream announced ({@link #LEASE_HEADER}), or null: none (an older coordinator). */
    Long leaseMs() {
        return leaseMs;
    }

    /**
     * The lease of a response head's {@link #LEASE_HEADER} value: a whole number of milliseconds
     * above zero, else null. An unreadable value counts as no lease, as an unreadable heartbeat
     * header leaves the caller's bound: the stream is followed as an older coordinator's.
     */
    static Long parseLease(String value) {
        if (value == null) {
            return null;
        }
        try {
            long ms = Long.parseLong(value.trim());
            return ms > 0 ? ms : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /**
     * The confirmation a comment carries: the {@code c} of {@code heartbeat c=<ms>}, the
     * coordinator's wall-clock time (Unix epoch ms) at which it last confirmed it had read its
     * whole command log; null when the comment confirms nothing. {@code comment} is the line
     * after its colon. Rules: spaces before {@code heartbeat} are skipped (SSE comments are free
     * text; {@code ": heartbeat"} is as good as {@code ":heartbeat"}); the first word must be
     * exactly {@code heartbeat}; the words after it are space-separated {@code key=value} fields,
     * of which the first {@code c} counts and the others are ignored (a later protocol may add
     * some); {@code c}'s value must be ASCII digits only (no sign) that fit a long. A bare
     * {@code heartbeat}, another comment or an unreadable {@code c} confirm nothing.
     */
    static Long confirmation(String comment) {
        if (comment == null) {
            return null;
        }
        String[] words = comment.trim().split(" +");
        if (words.length < 2 || !words[0].equals("heartbeat")) {
            return null;
        }
        for (int i = 1; i < words.length; i++) {
            if (!words[i].startsWith("c=")) {
                continue;
            }
            String v = words[i].substring(2);
            if (v.isEmpty() || v.length() > 18 || !v.chars().allMatch(ch -> ch >= '0' && ch <= '9')) {
                return null;
            }
            return Long.parseLong(v);
        }
        return null;
    }

    /**
     * Opens {@code path} on {@code base} with {@code headers} and reads the response head within
     * {@code boundMs} (else {@link Silence}). Fails on any status but 200. With a proxy for
     * {@code base} in {@code proxies} ({@link EnvProxy}: {@code HTTPS_PROXY} and the rest), an
     * {@code https://} coordinator is reached through a CONNECT tunnel (the proxy's answer too
     * must come within the bound), an {@code http://} one by a request in absolute form.
     */
    static SseConnection open(String base, String path, List<String[]> headers, int connectTimeoutMs,
                              long boundMs, java.util.function.Consumer<Socket> onSocket, EnvProxy proxies)
            throws IOException {
        URI uri = URI.create(base);
        boolean tls = "https".equalsIgnoreCase(uri.getScheme());
        int port = uri.getPort() > 0 ? uri.getPort() : (tls ? 443 : 80);
        String authority = uri.getHost() + ':' + port;
        EnvProxy.Route route = proxies.route(uri);
        Socket socket = new Socket();
        onSocket.accept(socket);
        try {
            if (route.direct()) {
                socket.connect(new InetSocketAddress(uri.getHost(), port), connectTimeoutMs);
            } else {
                // The proxy resolves the coordinator's name: the client resolves only the proxy's.
                try {
                    socket.connect(new InetSocketAddress(route.proxyHost(), route.proxyPort()), connectTimeoutMs);
                } catch (IOException e) {
                    throw new IOException("cannot reach proxy " + route.proxyHost() + ':' + route.proxyPort()
                            + " (from the environment's " + (tls ? "HTTPS_PROXY" : "HTTP_PROXY") + "): " + e.getMessage(), e);
                }
            }
            socket.setTcpNoDelay(true);
            if (!route.direct() && tls) {
                tunnel(socket, authority, route, boundMs);
            }
            Socket s = tls ? ((SSLSocketFactory) SSLSocketFactory.getDefault())
                    .createSocket(socket, uri.getHost(), port, true) : socket;
            if (s != socket) {
                onSocket.accept(s);
            }
            StringBuilder req = new StringBuilder();
            // Through a proxy, a plain-HTTP request names its target in absolute form.
            String target = !route.direct() && !tls ? "http://" + authority + path : path;
            req.append("GET ").append(target).append(" HTTP/1.1\r\n");
            req.append("Host: ").append(uri.getHost()).append(':').append(port).append("\r\n");
            req.append("Accept: text/event-stream\r\n");
            for (String[] h : headers) {
                req.append(h[0]).append(": ").append(h[1]).append("\r\n");
            }
            req.append("\r\n");
            OutputStream out = s.getOutputStream();
            out.write(req.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
            SseConnection c = new SseConnection(s, new java.io.BufferedInputStream(s.getInputStream()), boundMs, null);
            c.deadline = System.nanoTime() + boundMs * 1_000_000L;
            String status = c.rawLine();
            String[] parts = status.split(" ", 3);
            Map<String, String> head = new HashMap<>();
            for (String line = c.rawLine(); !line.isEmpty(); line = c.rawLine()) {
                int colon = line.indexOf(':');
                if (colon > 0) {
                    head.put(line.substring(0, colon).trim().toLowerCase(Locale.ROOT), line.substring(colon + 1).trim());
                }
            }
            if (parts.length < 2 || !parts[1].equals("200")) {
                throw new IOException("HTTP " + (parts.length > 1 ? parts[1] : status) + " from " + base + path);
            }
            Long heartbeat = null;
            try {
                if (head.containsKey(HEARTBEAT_HEADER)) {
                    heartbeat = Long.parseLong(head.get(HEARTBEAT_HEADER));
                }
            } catch (NumberFormatException ignored) {
                // An unreadable heartbeat leaves the caller's bound in force.
            }
            SseConnection opened = new SseConnection(s, c.in, stallBound(boundMs, heartbeat), heartbeat);
            opened.leaseMs = parseLease(head.get(LEASE_HEADER));
            opened.chunked = "chunked".equalsIgnoreCase(head.getOrDefault("transfer-encoding", ""));
            opened.deadline = System.nanoTime() + opened.boundMs * 1_000_000L;
            return opened;
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    /**
     * Asks the proxy on {@code socket} for a tunnel to {@code authority} ({@code host:port}) and
     * reads its answer head byte by byte (nothing of the tunnel's own bytes is consumed), within
     * {@code boundMs}. Any answer but 200 is an error naming the proxy and its status line, as in
     * Go's transport.
     */
    static void tunnel(Socket socket, String authority, EnvProxy.Route route, long boundMs) throws IOException {
        String proxy = route.proxyHost() + ':' + route.proxyPort();
        OutputStream out = socket.getOutputStream();
        out.write(("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        out.flush();
        InputStream in = socket.getInputStream();
        long deadline = System.nanoTime() + boundMs * 1_000_000L;
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        while (true) {
            long left = (deadline - System.nanoTime()) / 1_000_000L;
            if (left <= 0) {
                throw new Silence("proxy " + proxy + " did not answer CONNECT " + authority + " within " + boundMs + " ms");
            }
            socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, left)));
            int b;
            try {
                b = in.read();
            } catch (SocketTimeoutException e) {
                throw new Silence("proxy " + proxy + " did not answer CONNECT " + authority + " within " + boundMs + " ms");
            }
            if (b < 0) {
                throw new EOFException("proxy " + proxy + " closed the connection during CONNECT " + authority);
            }
            head.write(b);
            int n = head.size();
            byte[] h = head.toByteArray();
            if (n >= 4 && h[n - 4] == '\r' && h[n - 3] == '\n' && h[n - 2] == '\r' && h[n - 1] == '\n') {
                break;
            }
            if (n > 64 * 1024) {
                throw new IOException("proxy " + proxy + " sent an oversized answer to CONNECT " + authority);
            }
        }
        String text = head.toString(StandardCharsets.ISO_8859_1);
        String status = text.substring(0, text.indexOf('\r'));
        String[] parts = status.split(" ", 3);
        if (parts.length < 2 || !parts[1].equals("200")) {
            throw new IOException("proxy " + proxy + " refused CONNECT " + authority + ": " + status);
        }
    }

    /** One byte of the socket, waiting at most until the deadline. -1 at the end. */
    private int rawByte() throws IOException {
        long left = (deadline - System.nanoTime()) / 1_000_000L;
        if (left <= 0) {
            throw new Silence("no event or heartbeat within " + boundMs + " ms");
        }
        socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, left)));
        try {
            return in.read();
        } catch (SocketTimeoutException e) {
            throw new Silence("no event or heartbeat within " + boundMs + " ms");
        }
    }

    private String rawLine() throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        while (true) {
            int b = rawByte();
            if (b < 0) {
                throw new EOFException("the coordinator closed the connection");
            }
            if (b == '\n') {
                break;
            }
            buf.write(b);
        }
        String s = buf.toString(StandardCharsets.UTF_8);
        return s.endsWith("\r") ? s.substring(0, s.length() - 1) : s;
    }

    /** One byte of the body (chunked or not), -1 at its end. */
    private int bodyByte() throws IOException {
        if (ended) {
            return -1;
        }
        if (!chunked) {
            int b = rawByte();
            if (b < 0) {
                ended = true;
            }
            return b;
        }
        if (chunkLeft == 0) {
            String size = rawLine();
            if (size.isEmpty()) {
                size = rawLine();
            }
            int semi = size.indexOf(';');
            chunkLeft = Long.parseLong((semi >= 0 ? size.substring(0, semi) : size).trim(), 16);
            if (chunkLeft == 0) {
                ended = true;
                return -1;
            }
        }
        int b = rawByte();
        if (b < 0) {
            ended = true;
            return -1;
        }
        chunkLeft--;
        if (chunkLeft == 0) {
            rawLine(); // the CRLF after the chunk
        }
        return b;
    }

    private String bodyLine() throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        while (true) {
            int b = bodyByte();
            if (b < 0) {
                return buf.size() == 0 ? null : buf.toString(StandardCharsets.UTF_8);
            }
            if (b == '\n') {
                String s = buf.toString(StandardCharsets.UTF_8);
                return s.endsWith("\r") ? s.substring(0, s.length() - 1) : s;
            }
            buf.write(b);
        }
    }

    /** The next event or comment, within the stall bound of the previous one; null at the end. */
    Item next() throws IOException {
        String event = null;
        String id = null;
        StringBuilder data = null;
        while (true) {
            String line = bodyLine();
            if (line == null) {
                return null;
            }
            if (line.isEmpty()) {
                if (data != null || event != null) {
                    deadline = System.nanoTime() + boundMs * 1_000_000L;
                    return new Item(event == null ? "message" : event, id, data == null ? "" : data.toString());
                }
                continue;
            }
            if (line.startsWith(":")) {
                if (data == null && event == null) {
                    deadline = System.nanoTime() + boundMs * 1_000_000L;
                    return new Item(null, null, line.substring(1));
                }
                continue;
            }
            int colon = line.indexOf(':');
            String name = colon < 0 ? line : line.substring(0, colon);
            String value = colon < 0 ? "" : line.substring(colon + 1);
            if (value.startsWith(" ")) {
                value = value.substring(1);
            }
            switch (name) {
                case "event" -> event = value;
                case "id" -> id = value;
                case "data" -> {
                    if (data == null) {
                        data = new StringBuilder(value);
                    } else {
                        data.append('\n').append(value);
                    }
                }
                default -> { }
            }
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Closing is best effort.
        }
    }
}
