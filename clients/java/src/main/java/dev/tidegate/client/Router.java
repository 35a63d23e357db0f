package dev.tidegate.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.Socket;
import java.net.URI;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A local copy of the routing table, kept current over the coordinators' watch stream, as the
 * Rust {@code tidegate_client::Router}: failover over a comma-separated list of coordinators
 * (starting at the one {@link #firstChoice} picks for the subscriber ID), a stall bound (8 s by
 * default; a coordinator that sends neither an event nor a heartbeat within it is left),
 * registration as a subscriber and an acknowledgement of every applied version (with a service
 * token; sent by a thread of its own once the open write scopes end, so the stream reader never
 * waits for them), a disk cache that keeps the table and its command log, and refusal of tables
 * from another command log. A reconnect names the command log it holds ({@code log_id}) and resumes
 * ({@code Last-Event-ID}) from the acknowledged version (a registered subscriber) or the held one
 * (a plain watcher). Tagging and the write check are local and never block on the network.
 *
 * <p>The lease: a coordinator that announces {@code x-tidegate-lease-ms: T} on the stream confirms
 * in its heartbeats ({@code :heartbeat c=<ms>}) when it last read its whole command log; the held
 * table is confirmed current until {@code c + T} (by this client's clock, never longer than T
 * from the heartbeat's arrival). Once that passes, a write check that would answer
 * {@link WriteCheck#OWNED} answers {@link WriteCheck#UNCONFIRMED}: a zone cut off from the
 * coordinators stops writing users that others may have taken over. Tags and the other answers
 * go on from the held table. A stream whose heartbeats confirm nothing for T is left for the next
 * coordinator, as a stalled one. Without the header (an older coordinator) there is no lease.
 */
public final class Router implements AutoCloseable {
    /** The default stall bound: the coordinators' default heartbeat (5 s) and 3 s of margin. */
    public static final Duration DEFAULT_STALL_TIMEOUT = Duration.ofSeconds(8);
    /** How long an acknowledgement may take (at most the stall bound). */
    static final Duration ACK_TIMEOUT = Duration.ofSeconds(5);

    /** Who this client is, as the coordinator's convergence view shows it. */
    public record Identity(String subscriberId, String zone, String kind) {}

    /** Settings; every field has the Rust client's default. */
    public static final class Options {
        /** A service token: sent on the watch and every ack. Without one the client only reads. */
        public String token;
        /** Where to keep the last known table (written atomically on every new version). */
        public Path cachePath;
        public Duration connectTimeout = Duration.ofSeconds(2);
        /** The stall bound (raised to the coordinator's heartbeat plus a second if shorter). */
        public Duration readTimeout = DEFAULT_STALL_TIMEOUT;
        public Duration backoffMin = Duration.ofMillis(100);
        public Duration backoffMax = Duration.ofSeconds(5);
        /** Acknowledge applied versions (turn off only to simulate a stuck subscriber). */
        public boolean acknowledge = true;
        /**
         * The proxies: the environment's ({@code HTTPS_PROXY}, {@code HTTP_PROXY}, {@code NO_PROXY},
         * read as Go reads them; see {@link EnvProxy}). Package-private: tests give their own.
         */
        EnvProxy proxies = EnvProxy.environment();

        public Options token(String t) {
            token = t;
            return this;
        }

        public Options cachePath(Path p) {
            cachePath = p;
            return this;
        }

        public Options readTimeout(Duration d) {
            readTimeout = d;
            return this;
        }

        public Options acknowledge(boolean a) {
            acknowledge = a;
            return this;
        }
    }

    /** Where the held table came from. */
    public enum Origin { NONE, DISK_CACHE, COORDINATOR }

    /**
     * A snapshot of the client's health, as {@code Router::status} in Rust. The lease:
     * {@code leaseMs} is the T the open or last stream announced (null: none, and writes are
     * checked without a lease); {@code leaseConfirmedAt} the coordinator's time {@code c} of the
     * last confirmation received (null: none yet); {@code leaseRemainingMs} how long the held
     * table stays confirmed (0: expired, or never confirmed, so owned writes answer unconfirmed;
     * null without a lease).
     */
    public record Status(Long version, Origin origin, boolean connected, String coordinator,
                         String lastError, boolean stalled, String refused, long reconnects,
                         Instant lastHeard, Instant updatedAt, Long stallBoundMs,
                         Long coordinatorHeartbeatMs, Long leaseMs, Instant leaseConfirmedAt,
                         Long leaseRemainingMs) {
        /** A lease is announced and not (or no longer) confirmed: owned writes answer unconfirmed. */
        public boolean leaseExpired() {
            return leaseMs != null && (leaseRemainingMs == null || leaseRemainingMs <= 0);
        }

        @Override
        public String toString() {
            StringBuilder s = new StringBuilder("serving ");
            s.append(version == null ? "no table" : "version " + version).append(" from ");
            s.append(switch (origin) {
                case NONE -> "nothing";
                case DISK_CACHE -> "the disk cache";
                case COORDINATOR -> "the coordinator";
            });
            if (!connected) {
                s.append("; coordinator unreachable");
                if (stalled) {
                    s.append("; coordinator stalled");
                }
                if (lastError != null) {
                    s.append(" (").append(lastError).append(')');
                }
            }
            if (refused != null) {
                s.append("; refused: ").append(refused);
            }
            if (leaseMs != null) {
                s.append("; lease ").append(leaseMs).append(" ms ");
                if (!leaseExpired()) {
                    s.append("expires in ").append(leaseRemainingMs).append(" ms");
                } else {
                    s.append(leaseConfirmedAt == null ? "not confirmed yet" : "expired (last confirmation " + leaseConfirmedAt + ")");
                    s.append(": owned writes answer unconfirmed");
                }
            }
            return s.toString();
        }
    }

    private final List<String> endpoints;
    private final Identity identity;
    private final Options options;
    private final AtomicReference<RoutingTable> table = new AtomicReference<>();
    private final AtomicLong acked = new AtomicLong();
    private final ReentrantReadWriteLock writes = new ReentrantReadWriteLock();
    private final Object statusLock = new Object();
    private final AtomicReference<Socket> socket = new AtomicReference<>();
    private final Thread watcher;
    /** Acknowledges what the watcher applied; null without a token or with acknowledge off. */
    private final Thread acknowledger;
    /** Versions applied from a stream, with the coordinator that sent them, for the acknowledger. */
    private final BlockingQueue<Pending> pending = new LinkedBlockingQueue<>();
    private volatile boolean stop;
    private volatile String logId;
    /**
     * The lease as the watcher left it, replaced whole (one writer, the watcher; write checks read
     * it). Null: the open or last stream announced none (an older coordinator), or no stream has
     * opened yet. A Router started from its disk cache has no stream yet, so it checks writes as
     * before leases: the cache does not say whether the coordinators confirm leases, and refusing
     * every write until one is reached would turn a coordinator outage at start-up into a write
     * outage of every client, old coordinators' too. The first stream that announces a lease
     * makes owned writes unconfirmed until its first confirmation.
     */
    private volatile Lease lease;
    // Status fields, under statusLock.
    private Origin origin = Origin.NONE;
    private boolean connected;
    private String coordinator;
    private String lastError;
    private boolean stalled;
    private String refused;
    private long reconnects;
    private Instant lastHeard;
    private Instant updatedAt;
    private Long stallBoundMs;
    private Long heartbeatMs;

    /**
     * An announced lease: {@code ms} is T; {@code untilNanos} ({@link System#nanoTime}) is when the
     * held table stops being confirmed, meaningful once {@code confirmed}; {@code lastC} is the
     * coordinator's time of the last confirmation received (renewing or not), for the status.
     */
    private record Lease(long ms, boolean confirmed, long untilNanos, Long lastC) {
        boolean holds(long nowNanos) {
            return confirmed && nowNanos - untilNanos < 0;
        }
    }

    /** The longest renewal taken, so that expiries compare by subtraction (about 73 years). */
    private static final long MAX_RENEWAL_MS = Long.MAX_VALUE / 4 / 1_000_000L;

    private Router(List<String> endpoints, Identity identity, Options options) {
        this.endpoints = endpoints;
        this.identity = identity;
        this.options = options;
        if (options.cachePath != null) {
            RoutingTable cached = loadCache(options.cachePath);
            if (cached != null) {
                table.set(cached);
                logId = cached.logId();
                origin = Origin.DISK_CACHE;
                try {
                    updatedAt = Files.getLastModifiedTime(options.cachePath).toInstant();
                } catch (IOException ignored) {
                    updatedAt = null;
                }
            }
        }
        watcher = new Thread(this::watchLoop, "tidegate-router-" + identity.subscriberId());
        watcher.setDaemon(true);
        if (options.acknowledge && options.token != null) {
            acknowledger = new Thread(this::acknowledgeLoop, "tidegate-router-ack-" + identity.subscriberId());
            acknowledger.setDaemon(true);
        } else {
            acknowledger = null;
        }
    }

    /**
     * Starts following {@code urls} (one URL or several, comma-separated). Returns at once, with
     * the disk cache's table if there is one; {@link #waitForVersion} waits for the first one.
     */
    public static Router connect(String urls, Identity identity, Options options) {
        List<String> list = new ArrayList<>();
        for (String u : urls.split(",")) {
            String t = u.trim();
            while (t.endsWith("/")) {
                t = t.substring(0, t.length() - 1);
            }
            if (!t.isEmpty()) {
                if (!t.startsWith("http://") && !t.startsWith("https://")) {
                    throw new IllegalArgumentException("coordinator URL `" + t + "` is neither http:// nor https://");
                }
                list.add(t);
            }
        }
        if (list.isEmpty()) {
            throw new IllegalArgumentException("no coordinator URL in `" + urls + "`");
        }
        if (options.readTimeout.isZero() || options.readTimeout.isNegative()) {
            throw new IllegalArgumentException("readTimeout (the stall bound) must be longer than zero");
        }
        Router r = new Router(List.copyOf(list), identity, options);
        if (r.acknowledger != null) {
            r.acknowledger.start();
        }
        r.watcher.start();
        return r;
    }

    // ----------------------------------------------------------------------------------------
    // What services call

    /** The held table, or null before the first one (no coordinator reached, no cache). */
    public RoutingTable table() {
        return table.get();
    }

    private RoutingTable need() throws TagException {
        RoutingTable t = table.get();
        if (t == null) {
            throw new TagException("no_table", "no routing table yet (coordinator unreachable and no disk cache)");
        }
        return t;
    }

    public Long version() {
        RoutingTable t = table.get();
        return t == null ? null : t.version();
    }

    /** The newest version acknowledged to a coordinator. */
    public long ackedVersion() {
        return acked.get();
    }

    /** The command log the held table came from, if known. */
    public String logId() {
        return logId;
    }

    /** Blocks until the table is at {@code version} or newer, or {@code timeout} passes. */
    public boolean waitForVersion(long version, Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        while (true) {
            Long v = version();
            if (v != null && v >= version) {
                return true;
            }
            if (System.nanoTime() >= end) {
                return false;
            }
            Thread.sleep(2);
        }
    }

    public Tag tag(String userId) throws TagException {
        return need().tag(userId, null, null);
    }

    /** The tag of a call of {@code service}: its release channel decides for the users it selects. */
    public Tag tagForService(String userId, String service) throws TagException {
        return need().tag(userId, service, null);
    }

    /** The tag in routing domain {@code domain}, for a call of {@code service} (null: none). */
    public Tag tagInDomain(String userId, String domain, String service) throws TagException {
        return need().tag(userId, service, domain);
    }

    /**
     * The write check with the held table (see {@link RoutingTable#checkWrite}): {@code local} is
     * this service's zone (name or lane), {@code incomingVersion} the propagated
     * {@code x-tidegate-version} (null when none). Hold a {@link #writeScope()} around check and commit.
     */
    public RoutingTable.WriteAnswer checkWrite(String userId, String local, Long incomingVersion) throws TagException {
        return leased(need().checkWrite(null, userId, local, incomingVersion));
    }

    public RoutingTable.WriteAnswer checkWriteIn(String domain, String userId, String local, Long incomingVersion)
            throws TagException {
        return leased(need().checkWrite(domain, userId, local, incomingVersion));
    }

    /**
     * The write check of a write by {@code service} in {@code domain} (null: the default domain)
     * with the held table (see {@link RoutingTable#checkWriteFor}): that service's release channel
     * owns the writes of the users it selects.
     */
    public RoutingTable.WriteAnswer checkWriteFor(String domain, String service, String userId, String local,
            Long incomingVersion) throws TagException {
        return leased(need().checkWriteFor(domain, service, userId, local, incomingVersion));
    }

    /**
     * The global write check with the held table (see {@link RoutingTable#checkGlobalWrite}): may
     * this service in {@code local} (zone name or lane) write global data its caller routed here at
     * {@code incomingVersion} (null when none)? Hold a {@link #writeScope()} around check and
     * commit. Under a lapsed lease owned becomes {@link GlobalWriteCheck#UNCONFIRMED}, as in
     * {@link #checkWrite}: a zone cut off from the coordinators may no longer be the global writer.
     *
     * @param local this service's zone, by name or lane
     * @param incomingVersion the caller's propagated version, or null when none
     * @return the answer
     * @throws TagException {@code unknown_zone} for an unknown {@code local}; {@code no_table} when no table is held yet
     */
    public RoutingTable.GlobalWriteAnswer checkGlobalWrite(String local, Long incomingVersion) throws TagException {
        RoutingTable.GlobalWriteAnswer answer = need().checkGlobalWrite(local, incomingVersion);
        if (answer.check() != GlobalWriteCheck.OWNED) {
            return answer;
        }
        Lease l = lease;
        return l == null || l.holds(System.nanoTime()) ? answer : answer.as(GlobalWriteCheck.UNCONFIRMED);
    }

    /**
     * The lease on top of the table's answer: owned becomes unconfirmed when a lease is announced
     * and the held table is not confirmed current (expired, or no confirmation yet). Only owned:
     * behind, frozen and misrouted are already refusals or forwards, and stay what the table says.
     */
    private RoutingTable.WriteAnswer leased(RoutingTable.WriteAnswer answer) {
        if (answer.check() != WriteCheck.OWNED) {
            return answer;
        }
        Lease l = lease;
        return l == null || l.holds(System.nanoTime()) ? answer : answer.as(WriteCheck.UNCONFIRMED);
    }

    /**
     * How long a confirmation at the coordinator's time {@code confirmedAtMs} keeps the table
     * confirmed, seen at this client's {@code nowMs}: {@code min(T, c + T - now)}, 0 or less
     * renewing nothing. A coordinator clock ahead of this one never gives more than T.
     */
    static long renewalMs(long leaseMs, long confirmedAtMs, long nowMs) {
        long age = nowMs - confirmedAtMs;
        return age <= 0 ? leaseMs : leaseMs - age;
    }

    /**
     * A write in flight: while one is open the Router applies newer tables (the stream is read on)
     * but acknowledges none; once the scopes open before a table was applied have closed, the
     * newest applied version is acknowledged.
     */
    public interface WriteScope extends AutoCloseable {
        @Override
        void close();
    }

    /** Opens a write scope: keep it from before the check until the write is committed or refused. */
    public WriteScope writeScope() {
        writes.readLock().lock();
        return () -> writes.readLock().unlock();
    }

    public Status status() {
        Lease l = lease;
        Long remaining = null;
        if (l != null) {
            long left = l.untilNanos() - System.nanoTime();
            // Rounded up, so that a lease that still holds never shows 0.
            remaining = l.confirmed() && left > 0 ? (left + 999_999L) / 1_000_000L : 0L;
        }
        synchronized (statusLock) {
            return new Status(version(), origin, connected, coordinator, lastError, stalled, refused,
                    reconnects, lastHeard, updatedAt, stallBoundMs, heartbeatMs,
                    l == null ? null : l.ms(), l == null || l.lastC() == null ? null : Instant.ofEpochMilli(l.lastC()),
                    remaining);
        }
    }

    @Override
    public void close() {
        stop = true;
        Socket s = socket.get();
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // Best effort: the thread also checks `stop`.
            }
        }
        watcher.interrupt();
        if (acknowledger != null) {
            acknowledger.interrupt();
        }
        try {
            watcher.join(5000);
            if (acknowledger != null) {
                acknowledger.join(5000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ----------------------------------------------------------------------------------------
    // The watch loop

    /**
     * Which of {@code count} coordinators a client tries first: FNV-1a of the subscriber ID with a
     * final mix, modulo the count (the Rust {@code first_choice}), so clients spread over replicas.
     */
    public static int firstChoice(String subscriberId, int count) {
        if (count <= 1) {
            return 0;
        }
        long h = 0xcbf29ce484222325L;
        for (byte b : subscriberId.getBytes(StandardCharsets.UTF_8)) {
            h ^= (b & 0xff);
            h *= 0x00000100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return (int) Long.remainderUnsigned(h, count);
    }

    private void watchLoop() {
        long backoff = options.backoffMin.toMillis();
        int next = firstChoice(identity.subscriberId(), endpoints.size());
        int tried = 0;
        while (!stop) {
            String endpoint = endpoints.get(next % endpoints.size());
            next++;
            tried++;
            synchronized (statusLock) {
                coordinator = endpoint;
            }
            Ended ended = watchOnce(endpoint);
            if (ended.opened) {
                backoff = options.backoffMin.toMillis();
            }
            synchronized (statusLock) {
                connected = false;
                stalled = ended.stalled;
                if (ended.error != null) {
                    lastError = ended.error;
                }
                reconnects++;
            }
            if (ended.opened) {
                tried = 1;
            }
            if (tried < endpoints.size()) {
                continue;
            }
            tried = 0;
            long jittered = (long) (backoff * ThreadLocalRandom.current().nextDouble());
            sleepUnlessStopped(Math.max(10, jittered));
            backoff = Math.min(backoff * 2, options.backoffMax.toMillis());
        }
    }

    private void sleepUnlessStopped(long ms) {
        long end = System.nanoTime() + ms * 1_000_000L;
        while (!stop && System.nanoTime() < end) {
            try {
                Thread.sleep(Math.min(10, Math.max(1, (end - System.nanoTime()) / 1_000_000L)));
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private record Ended(boolean opened, boolean stalled, String error) {}

    private Ended watchOnce(String base) {
        String heldLog = logId;
        List<String> query = new ArrayList<>();
        if (options.token != null) {
            query.add("subscriber_id=" + encode(identity.subscriberId()));
            query.add("zone=" + encode(identity.zone()));
            query.add("kind=" + encode(identity.kind()));
        }
        // The log the resumed version belongs to: a coordinator on another log sends its current
        // table (which `arrival` refuses, loudly) instead of nothing at an equal version.
        if (heldLog != null) {
            query.add("log_id=" + encode(heldLog));
        }
        String path = query.isEmpty() ? "/v1/routing/watch" : "/v1/routing/watch?" + String.join("&", query);
        List<String[]> headers = new ArrayList<>();
        // Resume: the server sends nothing until something newer than Last-Event-ID exists, and a
        // registered subscriber counts it as acknowledged. So a subscriber names the version it
        // has acknowledged (a table applied while a write scope was open is not, yet), and a
        // plain watcher the version it holds.
        Long resume;
        if (options.token != null) {
            long a = acked.get();
            resume = a > 0 ? a : null;
        } else {
            RoutingTable held = table.get();
            resume = held == null ? null : held.version();
        }
        if (resume != null && options.acknowledge) {
            headers.add(new String[] {"Last-Event-ID", Long.toString(resume)});
        }
        if (options.token != null) {
            headers.add(new String[] {"Authorization", "Bearer " + options.token});
        }
        long bound = options.readTimeout.toMillis();
        SseConnection conn;
        try {
            conn = SseConnection.open(base, path, headers, (int) options.connectTimeout.toMillis(), bound, socket::set,
                    options.proxies);
        } catch (SseConnection.Silence e) {
            return new Ended(false, true, base + " is stalled: it took the connection but did not answer the watch within " + bound + " ms");
        } catch (IOException | RuntimeException e) {
            return new Ended(false, false, "cannot watch " + base + ": " + e.getMessage());
        }
        try (conn) {
            if (stop) {
                return new Ended(true, false, null);
            }
            // The lease follows what this stream announced: none from an older coordinator (writes
            // checked as before leases). An expiry a previous stream's confirmation set is kept:
            // it was the held table that was confirmed, and it lapses at the same time whichever
            // coordinator we read next, so a failover costs no unconfirmed answers while it holds.
            Long announced = conn.leaseMs();
            Lease was = lease;
            lease = announced == null ? null : was == null ? new Lease(announced, false, 0, null)
                    : new Lease(announced, was.confirmed(), was.untilNanos(), was.lastC());
            // When this stream last renewed the lease (its opening, to begin with), to leave a
            // coordinator whose heartbeats confirm nothing for T; and whether it sent a table of
            // another command log, whose confirmations are not about the held table.
            long renewedAt = System.nanoTime();
            Long staleC = null;
            boolean refusedHere = false;
            synchronized (statusLock) {
                connected = true;
                stalled = false;
                lastError = null;
                lastHeard = Instant.now();
                heartbeatMs = conn.heartbeatMs();
                stallBoundMs = conn.boundMs();
            }
            while (true) {
                SseConnection.Item item;
                try {
                    item = conn.next();
                } catch (SseConnection.Silence e) {
                    return new Ended(true, true, base + " is stalled: neither an event nor a heartbeat within "
                            + conn.boundMs() + " ms; moving to the next coordinator");
                } catch (IOException | RuntimeException e) {
                    return new Ended(true, false, stop ? null : "watch stream broke: " + e.getMessage());
                }
                if (item == null) {
                    return new Ended(true, false, "the coordinator closed the watch stream");
                }
                synchronized (statusLock) {
                    lastHeard = Instant.now();
                }
                if (item.isComment()) {
                    Lease l = lease;
                    if (l == null || refusedHere) {
                        continue;
                    }
                    // In stream order: every event sent before this heartbeat is applied, so the
                    // confirmation is about a table at least as new as the held one.
                    Long c = SseConnection.confirmation(item.data());
                    long now = System.nanoTime();
                    if (c != null) {
                        long ms = renewalMs(l.ms(), c, System.currentTimeMillis());
                        if (ms > 0) {
                            long until = now + Math.min(ms, MAX_RENEWAL_MS) * 1_000_000L;
                            boolean later = !l.confirmed() || until - l.untilNanos() > 0;
                            lease = new Lease(l.ms(), true, later ? until : l.untilNanos(), c);
                            renewedAt = now;
                            staleC = null;
                        } else {
                            lease = new Lease(l.ms(), l.confirmed(), l.untilNanos(), c);
                            staleC = c;
                        }
                    }
                    if (now - renewedAt >= Math.min(l.ms(), MAX_RENEWAL_MS) * 1_000_000L) {
                        // Heartbeats come but confirm nothing: the coordinator cannot read its
                        // log (or its clock is far from ours). Another may; leave as if stalled.
                        String why = staleC == null ? "" : " (its last confirmation, c=" + staleC + ", is "
                                + (System.currentTimeMillis() - staleC) + " ms old by this client's clock)";
                        return new Ended(true, true, base + " has not confirmed its table for " + l.ms() + " ms"
                                + why + ": moving to the next coordinator");
                    }
                    continue;
                }
                if (!"routing".equals(item.event())) {
                    continue;
                }
                RoutingTable next;
                try {
                    next = RoutingTable.decode(item.data());
                } catch (DecodeException e) {
                    // Refused; the held table stays. Another coordinator may send a good one.
                    return new Ended(true, false, "bad routing event from " + base + ": " + e.getMessage());
                }
                String why = arrival(table.get(), logId, next);
                if (why != null) {
                    String full = why + "; if the coordinators' log was replaced on purpose, "
                            + (options.cachePath != null ? "remove the disk cache " + options.cachePath + " and " : "")
                            + "restart the client to follow it";
                    synchronized (statusLock) {
                        lastError = full;
                        refused = full;
                    }
                    // This coordinator's confirmations are about its log, not the held table's:
                    // they renew nothing (and, as before leases, the stream is kept: the refusal
                    // stays loud in the status while owned writes turn unconfirmed).
                    refusedHere = true;
                    continue;
                }
                RoutingTable current = table.get();
                if (current == null || next.version() > current.version()) {
                    logId = next.logId();
                    table.set(next);
                    synchronized (statusLock) {
                        origin = Origin.COORDINATOR;
                        updatedAt = Instant.now();
                        refused = null;
                    }
                    if (options.cachePath != null) {
                        try {
                            saveCache(options.cachePath, item.data());
                        } catch (IOException e) {
                            synchronized (statusLock) {
                                lastError = "cannot save " + options.cachePath + ": " + e.getMessage();
                            }
                        }
                    }
                }
                if (acknowledger != null) {
                    // The acknowledger waits for the writes judged with an older table; the reader
                    // goes on applying tables (a freeze among them) meanwhile.
                    pending.add(new Pending(next.version(), base));
                }
            }
        }
    }

    /** Null to take or keep the table; else why a table of another command log is refused. */
    static String arrival(RoutingTable held, String heldLog, RoutingTable next) {
        if (held == null) {
            return null;
        }
        if (heldLog != null && next.logId() != null && !heldLog.equals(next.logId())) {
            return "refused the table at version " + next.version() + " of command log " + next.logId()
                    + ": the held table is at version " + held.version() + " of another log (" + heldLog + ")";
        }
        return null;
    }

    /** A version applied from the stream of coordinator {@code base}. */
    private record Pending(long version, String base) {}

    /**
     * Acknowledges the versions the watcher applied, newest first: before each acknowledgement it
     * waits for the writes judged with an older table ({@link #writeScope}) to end. The table is
     * already stored when its version is queued, so every write that starts after that judges
     * with it, and once the exclusive lock is taken no write that started before is in flight.
     * The versions queued by then are drained under the lock and the newest is acknowledged, to
     * the coordinator that sent it. One per Router, for its lifetime: a stream that breaks while
     * an acknowledgement waits does not hold the reconnect (which resumes from the acknowledged
     * version, so the coordinator sends the current table again).
     */
    private void acknowledgeLoop() {
        while (!stop) {
            Pending p;
            try {
                p = pending.take();
                writes.writeLock().lockInterruptibly();
            } catch (InterruptedException e) {
                return;
            }
            try {
                for (Pending newer; (newer = pending.poll()) != null; ) {
                    if (newer.version() >= p.version()) {
                        p = newer;
                    }
                }
            } finally {
                writes.writeLock().unlock();
            }
            if (stop) {
                return;
            }
            acknowledge(p.base(), p.version());
        }
    }

    private void acknowledge(String base, long version) {
        try {
            URI uri = URI.create(base + "/v1/subscribers/" + encode(identity.subscriberId()) + "/ack");
            HttpURLConnection c = open(uri, options.proxies);
            int timeout = (int) Math.min(ACK_TIMEOUT.toMillis(), options.readTimeout.toMillis());
            c.setConnectTimeout(timeout);
            c.setReadTimeout(timeout);
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            c.setRequestProperty("Authorization", "Bearer " + options.token);
            var body = RoutingTable.JSON.createObjectNode();
            body.put("version", version).put("zone", identity.zone()).put("kind", identity.kind());
            try (OutputStream out = c.getOutputStream()) {
                out.write(body.toString().getBytes(StandardCharsets.UTF_8));
            }
            int status = c.getResponseCode();
            try (InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream()) {
                if (in != null) {
                    in.readAllBytes();
                }
            }
            if (status >= 200 && status < 300) {
                acked.accumulateAndGet(version, Math::max);
            } else {
                synchronized (statusLock) {
                    lastError = "ack of v" + version + " got HTTP " + status;
                }
            }
        } catch (IOException | RuntimeException e) {
            synchronized (statusLock) {
                lastError = "ack of v" + version + " failed: " + e.getMessage();
            }
        }
    }

    /**
     * A connection to {@code uri}, through the environment's proxy for it ({@link EnvProxy}: the
     * JDK tunnels {@code https://} with CONNECT and sends {@code http://} requests in absolute
     * form). Without one, the JVM's own proxy settings apply, as before.
     */
    static HttpURLConnection open(URI uri, EnvProxy proxies) throws IOException {
        EnvProxy.Route route = proxies.route(uri);
        return (HttpURLConnection) (route.direct() ? uri.toURL().openConnection() : uri.toURL().openConnection(route.proxy()));
    }

    static String encode(String text) {
        StringBuilder out = new StringBuilder();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                    || c == '-' || c == '_' || c == '.' || c == '~') {
                out.append((char) c);
            } else {
                out.append('%').append(String.format("%02X", c));
            }
        }
        return out.toString();
    }

    /** The cached table (with the log id of its event), or null when absent or unreadable. */
    static RoutingTable loadCache(Path path) {
        try {
            return RoutingTable.decode(Files.readString(path));
        } catch (IOException | DecodeException | RuntimeException e) {
            return null;
        }
    }

    /** Writes the event's data atomically: data fsynced, renamed over, directory fsynced. */
    static void saveCache(Path path, String data) throws IOException {
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ch.write(java.nio.ByteBuffer.wrap(data.getBytes(StandardCharsets.UTF_8)));
            ch.force(true);
        }
        Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        Path dir = path.toAbsolutePath().getParent();
        if (dir != null) {
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException ignored) {
                // Some file systems do not let a directory be opened for fsync.
            }
        }
    }
}
