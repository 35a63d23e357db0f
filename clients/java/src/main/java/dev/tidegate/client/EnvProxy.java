package dev.tidegate.client;

import java.io.IOException;
import java.net.IDN;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Proxy;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The proxy settings of the environment, read as Go's {@code net/http.ProxyFromEnvironment}
 * reads them (golang.org/x/net/http/httpproxy), so that a Java service behind the same proxy as
 * its Go neighbours reaches the coordinators the same way:
 *
 * <ul>
 *   <li>{@code HTTPS_PROXY} (else {@code https_proxy}) for {@code https://} coordinators,
 *       {@code HTTP_PROXY} (else {@code http_proxy}) for {@code http://} ones; an empty value is
 *       none. A value without a scheme ({@code proxy:3128}) is {@code http://proxy:3128}; the
 *       port defaults to 80. Only {@code http://} proxies are supported (an {@code https://}
 *       or {@code socks5://} proxy, or credentials in the URL, is an error naming it, never a
 *       silent direct connection).</li>
 *   <li>{@code NO_PROXY} (else {@code no_proxy}): comma-separated; {@code *} alone turns the
 *       proxy off; an IP address or CIDR ({@code 10.0.0.0/8}) matches that address or range; a
 *       name matches itself and its subdomains ({@code example.com}), a leading dot or
 *       {@code *.} only subdomains ({@code .example.com}); {@code :port} after an IP or name
 *       limits the entry to that port.</li>
 *   <li>{@code localhost} and loopback addresses are never proxied.</li>
 *   <li>Under CGI ({@code REQUEST_METHOD} set) {@code HTTP_PROXY} is refused: it may come from a
 *       request's {@code Proxy:} header ("httpoxy").</li>
 * </ul>
 *
 * <p>Through a proxy, an {@code https://} coordinator is reached through an HTTP CONNECT tunnel
 * (TLS end to end with the coordinator), an {@code http://} one by sending the request in absolute
 * form to the proxy, as Go's transport does. The environment is read once per JVM, as Go reads
 * it once per process.
 */
final class EnvProxy {
    /** Where a connection goes: {@code proxy} null means directly to the target. */
    record Route(String proxyHost, int proxyPort) {
        boolean direct() {
            return proxyHost == null;
        }

        /** For {@link java.net.URL#openConnection(Proxy)}. */
        Proxy proxy() {
            return direct() ? Proxy.NO_PROXY
                    : new Proxy(Proxy.Type.HTTP, InetSocketAddress.createUnresolved(proxyHost, proxyPort));
        }
    }

    static final Route DIRECT = new Route(null, 0);

    private static volatile EnvProxy environment;

    private final String httpProxy;
    private final String httpsProxy;
    private final boolean cgi;
    private final boolean all;
    private final List<IpMatch> ipMatchers = new ArrayList<>();
    private final List<DomainMatch> domainMatchers = new ArrayList<>();

    private record IpMatch(byte[] ip, int prefix, String port) {
        boolean matches(byte[] addr, String p) {
            if (addr.length != ip.length) {
                return false;
            }
            if (prefix < 0) {
                return java.util.Arrays.equals(addr, ip) && (port.isEmpty() || port.equals(p));
            }
            for (int bit = 0; bit < prefix; bit++) {
                int mask = 0x80 >> (bit % 8);
                if ((addr[bit / 8] & mask) != (ip[bit / 8] & mask)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** {@code host} starts with a dot; {@code matchHost}: the bare name matches too. */
    private record DomainMatch(String host, String port, boolean matchHost) {
        boolean matches(String h, String p) {
            if (h.endsWith(host) || (matchHost && h.equals(host.substring(1)))) {
                return port.isEmpty() || port.equals(p);
            }
            return false;
        }
    }

    private EnvProxy(Map<String, String> env) {
        httpProxy = any(env, "HTTP_PROXY", "http_proxy");
        httpsProxy = any(env, "HTTPS_PROXY", "https_proxy");
        cgi = !any(env, "REQUEST_METHOD").isEmpty();
        boolean star = false;
        for (String raw : any(env, "NO_PROXY", "no_proxy").split(",")) {
            String p = raw.trim().toLowerCase(Locale.ROOT);
            if (p.isEmpty()) {
                continue;
            }
            if (p.equals("*")) {
                star = true;
                break;
            }
            int slash = p.indexOf('/');
            if (slash > 0) {
                byte[] net = ipLiteral(p.substring(0, slash));
                Integer bits = digits(p.substring(slash + 1));
                if (net != null && bits != null && bits <= net.length * 8) {
                    ipMatchers.add(new IpMatch(net, bits, ""));
                }
                continue; // a malformed CIDR matches nothing, as in Go
            }
            String host = p;
            String port = "";
            int colon = p.lastIndexOf(':');
            if (p.startsWith("[") && p.contains("]")) { // [v6] or [v6]:port
                int close = p.indexOf(']');
                host = p.substring(1, close);
                if (close + 1 < p.length() && p.charAt(close + 1) == ':') {
                    port = p.substring(close + 2);
                }
            } else if (colon > 0 && p.indexOf(':') == colon) { // host:port (one colon: not bare v6)
                host = p.substring(0, colon);
                port = p.substring(colon + 1);
            }
            if (host.isEmpty()) {
                continue;
            }
            byte[] ip = ipLiteral(host);
            if (ip != null) {
                ipMatchers.add(new IpMatch(ip, -1, port));
                continue;
            }
            if (host.startsWith("*.")) {
                host = host.substring(1);
            }
            boolean matchHost = false;
            if (host.charAt(0) != '.') {
                matchHost = true;
                host = "." + host;
            }
            try {
                host = IDN.toASCII(host);
            } catch (IllegalArgumentException ignored) {
                // Kept as written, as Go keeps a name it cannot convert.
            }
            domainMatchers.add(new DomainMatch(host, port, matchHost));
        }
        all = star;
    }

    /** The settings of this process's environment, read on first use. */
    static EnvProxy environment() {
        EnvProxy e = environment;
        if (e == null) {
            e = new EnvProxy(System.getenv());
            environment = e;
        }
        return e;
    }

    /** The settings a given environment would give (for tests, and to name a proxy explicitly). */
    static EnvProxy of(Map<String, String> env) {
        return new EnvProxy(env);
    }

    /**
     * Where a connection to {@code target} ({@code http://} or {@code https://}) goes: directly,
     * or through the named HTTP proxy. Fails when the environment names a proxy this client
     * cannot use for it.
     */
    Route route(URI target) throws IOException {
        String scheme = target.getScheme() == null ? "" : target.getScheme().toLowerCase(Locale.ROOT);
        String value;
        String variable;
        if (scheme.equals("https")) {
            value = httpsProxy;
            variable = "HTTPS_PROXY";
        } else if (scheme.equals("http")) {
            value = httpProxy;
            variable = "HTTP_PROXY";
            if (!value.isEmpty() && cgi) {
                throw new IOException("refusing to use HTTP_PROXY in a CGI environment (REQUEST_METHOD is set)");
            }
        } else {
            return DIRECT;
        }
        if (value.isEmpty()) {
            return DIRECT;
        }
        String host = target.getHost();
        if (host == null) {
            return DIRECT;
        }
        int port = target.getPort() > 0 ? target.getPort() : (scheme.equals("https") ? 443 : 80);
        if (!useProxy(host, Integer.toString(port))) {
            return DIRECT;
        }
        URI proxy = parseProxy(value, variable);
        String proxyScheme = proxy.getScheme().toLowerCase(Locale.ROOT);
        if (!proxyScheme.equals("http")) {
            throw new IOException(variable + " names a " + proxyScheme + ":// proxy; the Java client supports http:// proxies only");
        }
        if (proxy.getRawUserInfo() != null) {
            throw new IOException(variable + " carries credentials; the Java client does not authenticate to proxies");
        }
        return new Route(proxy.getHost(), proxy.getPort() > 0 ? proxy.getPort() : 80);
    }

    /** Go's {@code useProxy}: false for localhost, loopback and NO_PROXY's matches. */
    boolean useProxy(String rawHost, String port) {
        String host = rawHost.startsWith("[") && rawHost.endsWith("]") ? rawHost.substring(1, rawHost.length() - 1) : rawHost;
        if (host.isEmpty()) {
            return true;
        }
        if (host.equals("localhost")) {
            return false;
        }
        byte[] ip = ipLiteral(host);
        if (ip != null && isLoopback(ip)) {
            return false;
        }
        if (all) {
            return false;
        }
        String h = host.trim().toLowerCase(Locale.ROOT);
        if (ip != null) {
            for (IpMatch m : ipMatchers) {
                if (m.matches(ip, port)) {
                    return false;
                }
            }
        }
        for (DomainMatch m : domainMatchers) {
            if (m.matches(h, port)) {
                return false;
            }
        }
        return true;
    }

    private static URI parseProxy(String value, String variable) throws IOException {
        URI u = null;
        try {
            u = new URI(value);
        } catch (URISyntaxException ignored) {
            // Tried again with http:// below, as Go does with a bogus value.
        }
        if (u == null || u.getScheme() == null || u.getHost() == null) {
            try {
                u = new URI("http://" + value);
            } catch (URISyntaxException e) {
                throw new IOException("invalid proxy address in " + variable + ": " + value);
            }
        }
        if (u.getHost() == null) {
            throw new IOException("invalid proxy address in " + variable + ": " + value);
        }
        return u;
    }

    private static String any(Map<String, String> env, String... names) {
        for (String n : names) {
            String v = env.get(n);
            if (v != null && !v.isEmpty()) {
                return v;
            }
        }
        return "";
    }

    private static Integer digits(String s) {
        if (s.isEmpty() || s.length() > 3 || !s.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return null;
        }
        return Integer.parseInt(s);
    }

    private static final Pattern IPV4 = Pattern.compile("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})");

    /** The bytes of an IPv4 or IPv6 literal, else null (never a DNS lookup). */
    static byte[] ipLiteral(String s) {
        var m = IPV4.matcher(s);
        if (m.matches()) {
            byte[] b = new byte[4];
            for (int i = 0; i < 4; i++) {
                int v = Integer.parseInt(m.group(i + 1));
                if (v > 255) {
                    return null;
                }
                b[i] = (byte) v;
            }
            return b;
        }
        // A name never contains a colon, so this parses a literal and resolves nothing.
        if (s.indexOf(':') >= 0 && s.chars().allMatch(c -> c == ':' || c == '.' || Character.digit(c, 16) >= 0)) {
            try {
                byte[] b = InetAddress.getByName(s).getAddress();
                return b.length == 16 && isMappedV4(b) ? java.util.Arrays.copyOfRange(b, 12, 16) : b;
            } catch (UnknownHostException e) {
                return null;
            }
        }
        return null;
    }

    private static boolean isMappedV4(byte[] b) {
        for (int i = 0; i < 10; i++) {
            if (b[i] != 0) {
                return false;
            }
        }
        return b[10] == (byte) 0xff && b[11] == (byte) 0xff;
    }

    private static boolean isLoopback(byte[] ip) {
        if (ip.length == 4) {
            return ip[0] == 127;
        }
        for (int i = 0; i < 15; i++) {
            if (ip[i] != 0) {
                return false;
            }
        }
        return ip[15] == 1;
    }
}
