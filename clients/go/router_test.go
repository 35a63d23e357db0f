package tidegate

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCoordinator is a tiny stand-in coordinator: each watch gets the events of `script` (a
// function of the connection number), then heartbeats every 50 ms (or silence when hung).
// Acknowledgements are recorded.
type fakeCoordinator struct {
	*httptest.Server
	mu      sync.Mutex
	acks    []uint64
	watches int
	auth    []string
	resumes []string // the Last-Event-ID of every watch
	queries []string // the raw query of every watch
}

func routingEvent(t *testing.T, table map[string]any) string {
	return fmt.Sprintf("id:%v\nevent:routing\ndata:%s\n\n", table["version"], mustJSON(t, table))
}

func newFake(t *testing.T, hung bool, script func(conn int) []string) *fakeCoordinator {
	f := &fakeCoordinator{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			var body struct{ Version uint64 }
			json.NewDecoder(r.Body).Decode(&body)
			f.mu.Lock()
			f.acks = append(f.acks, body.Version)
			f.auth = append(f.auth, r.Header.Get("Authorization"))
			f.mu.Unlock()
			w.Write([]byte("{}"))
			return
		}
		f.mu.Lock()
		f.watches++
		conn := f.watches
		f.resumes = append(f.resumes, r.Header.Get("Last-Event-ID"))
		f.queries = append(f.queries, r.URL.RawQuery)
		f.mu.Unlock()
		w.Header().Set("content-type", "text/event-stream")
		w.WriteHeader(200)
		flusher := w.(http.Flusher)
		for _, e := range script(conn) {
			if e == "close" {
				return
			}
			if strings.HasPrefix(e, "sleep:") {
				d, _ := time.ParseDuration(strings.TrimPrefix(e, "sleep:"))
				time.Sleep(d)
				continue
			}
			io.WriteString(w, e)
			flusher.Flush()
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			if !hung {
				if _, err := io.WriteString(w, ":heartbeat\n\n"); err != nil {
					return
				}
				flusher.Flush()
			}
		}
	}))
	t.Cleanup(f.Server.Close)
	return f
}

func (f *fakeCoordinator) ackList() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.acks...)
}

func fastOptions() Options {
	return Options{StallTimeout: 2 * time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
}

func waitUntil(timeout time.Duration, check func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if check() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return check()
}

// A malformed event and tables of unknown formats, from the coordinator side, are refused with
// a clear error; the last good table stays in force and tagging goes on with it.
func TestAMalformedEventOrUnknownFormatIsRefusedAndTheLastGoodTableKept(t *testing.T) {
	good := routingEvent(t, dialTable(1, 100, 50, nil))
	bad := []struct{ event, want string }{
		{"id:2\nevent:routing\ndata:{\"version\": 2, \"units\": \n\n", "not valid JSON"},
		{routingEvent(t, dialTable(2, 100, 50, map[string]any{"unit_mode": "prefix"})), "unknown unit_mode `prefix`"},
		{routingEvent(t, dialTable(3, 100, 50, map[string]any{"hash": "xxh4_64(seed=1) mod units"})), "unknown `hash`"},
		{routingEvent(t, dialTable(4, 100, 50, map[string]any{"precedence": []string{"channel", "pin", "unit"}})), "unknown `precedence`"},
		{routingEvent(t, dialTable(5, 100, 50, map[string]any{"unit_map": []map[string]any{{"units": "0-10", "lane": "blue"}}})), "gap or an overlap"},
		{routingEvent(t, dialTable(6, 100, 50, map[string]any{"version": "6"})), "`version` is not a whole number"},
	}
	refused := uint64(0)
	for _, b := range bad {
		fake := newFake(t, false, func(conn int) []string {
			if conn == 1 {
				return []string{good, b.event}
			}
			return []string{b.event}
		})
		r, err := Connect(fake.URL, Identity{SubscriberID: "svc-1", Zone: "az-a", Kind: "service"}, fastOptions())
		if err != nil {
			t.Fatal(err)
		}
		if !r.WaitForVersion(1, 5*time.Second) {
			t.Fatalf("no table: %v", r.Status())
		}
		if !waitUntil(5*time.Second, func() bool { return r.Status().Rejected >= 2 }) {
			t.Fatalf("%s: not refused: %+v", b.want, r.Status())
		}
		status := r.Status()
		if !strings.Contains(status.LastError, b.want) || !strings.Contains(status.LastError, "keeping version 1") {
			t.Fatalf("%s: unclear error: %s", b.want, status.LastError)
		}
		if r.Version() != 1 || status.Version != 1 || status.Origin != OriginCoordinator {
			t.Fatalf("%s: the last good table is not kept: v%d %+v", b.want, r.Version(), status)
		}
		tag, err := r.Tag("user-42")
		if err != nil || tag.Version != 1 || tag.Unit != 21 || tag.Lane != "blue" {
			t.Fatalf("%s: tagging with the last good table: %+v %v", b.want, tag, err)
		}
		refused += status.Rejected
		r.Close()
	}
	t.Logf("FIGURE fake_bad_forms=%d refused_events=%d", len(bad), refused)
}

// The coordinator list: a hung coordinator (takes the connection, then silence) is left within
// the stall bound, and the status says stalled while there is nowhere else to go.
func TestAStalledCoordinatorIsLeftWithinTheBound(t *testing.T) {
	hung := newFake(t, true, func(int) []string { return []string{routingEvent(t, dialTable(1, 100, 50, nil))} })
	live := newFake(t, false, func(int) []string { return []string{routingEvent(t, dialTable(2, 100, 50, nil))} })
	id := ""
	for n := 0; id == ""; n++ {
		if FirstChoice(fmt.Sprintf("edge-%d", n), 2) == 0 {
			id = fmt.Sprintf("edge-%d", n)
		}
	}
	opts := fastOptions()
	opts.StallTimeout = 400 * time.Millisecond
	r, err := Connect(hung.URL+","+live.URL, Identity{SubscriberID: id, Zone: "az-a", Kind: "edge"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(1, 5*time.Second) || r.Version() != 1 {
		t.Fatalf("did not start on its first choice: %v", r.Status())
	}
	got := time.Now()
	if !r.WaitForVersion(2, 5*time.Second) {
		t.Fatalf("did not fail over: %v", r.Status())
	}
	left := time.Since(got)
	if left < 350*time.Millisecond || left > 1200*time.Millisecond {
		t.Fatalf("left the hung coordinator after %v (bound 400ms)", left)
	}
	if s := r.Status(); !s.Connected || s.Coordinator != live.URL || s.Reconnects != 1 {
		t.Fatalf("%+v", s)
	}
	// A coordinator that takes the connection and never answers.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	alone, err := Connect("http://"+mute.Addr().String(), Identity{SubscriberID: "alone"}, Options{StallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if !waitUntil(3*time.Second, func() bool { return alone.Status().Stalled }) {
		t.Fatalf("%+v", alone.Status())
	}
	if s := alone.Status(); s.Connected || !strings.Contains(s.String(), "coordinator stalled") {
		t.Fatalf("%s", s)
	}
	t.Logf("FIGURE stall_failover_ms=%d (bound 400)", left.Milliseconds())
}

// A write scope holds back the acknowledgement of a newer table, not the table itself (nor
// the tables after it); a reconnect meanwhile resumes from the acknowledged version, not the
// applied one (the server counts Last-Event-ID as an ack); acks carry the service token.
func TestAnOpenWriteScopeHoldsBackTheAckNotTheTable(t *testing.T) {
	fake := newFake(t, false, func(conn int) []string {
		if conn == 1 {
			return []string{routingEvent(t, dialTable(1, 100, 50, nil)), "sleep:300ms", routingEvent(t, dialTable(2, 100, 60, nil)),
				"sleep:100ms", routingEvent(t, dialTable(3, 100, 70, nil)), "sleep:100ms", "close"}
		}
		return []string{routingEvent(t, dialTable(3, 100, 70, nil))}
	})
	opts := fastOptions()
	opts.Token = "svc-token"
	r, err := Connect(fake.URL, Identity{SubscriberID: "writer-1", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !waitUntil(5*time.Second, func() bool { return r.AckedVersion() == 1 }) {
		t.Fatalf("%+v", r.Status())
	}
	scope := r.WriteScope()
	if !r.WaitForVersion(3, 5*time.Second) {
		t.Fatalf("%+v", r.Status())
	}
	if tag, _ := r.Tag("user-1"); tag.Version != 3 {
		t.Fatalf("new checks use the newest table: %+v", tag)
	}
	later := r.WriteScope() // opened under version 3: holds nothing older
	if !waitUntil(5*time.Second, func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.watches >= 2 }) {
		t.Fatalf("no reconnect: %+v", r.Status())
	}
	time.Sleep(200 * time.Millisecond)
	if r.AckedVersion() != 1 {
		t.Fatalf("acknowledged v%d while a write was in flight", r.AckedVersion())
	}
	scope.End()
	scope.End()
	if !waitUntil(5*time.Second, func() bool { return r.AckedVersion() == 3 }) {
		t.Fatalf("%+v", r.Status())
	}
	later.End()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.acks[0] != 1 || fake.acks[len(fake.acks)-1] != 3 || fake.auth[0] != "Bearer svc-token" {
		t.Fatalf("acks %v, auth %v", fake.acks, fake.auth)
	}
	if fake.resumes[0] != "" || fake.resumes[1] != "1" {
		t.Fatalf("Last-Event-ID of the watches: %q (the reconnect must name the acknowledged v1)", fake.resumes)
	}
}

// A client restarted from its disk cache knows the log its table came from, and refuses a
// table of another log whatever its version, without overwriting the cache.
func TestARestartFromTheCacheKeepsTheLogIDAndRefusesAnotherLogsTable(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "table.json")
	old := dialTable(5, 100, 50, map[string]any{"log_id": "log-old"})
	data := mustJSON(t, old)
	if err := os.WriteFile(cache, data, 0o600); err != nil {
		t.Fatal(err)
	}
	other := newFake(t, false, func(int) []string {
		return []string{routingEvent(t, dialTable(7, 100, 10, map[string]any{"log_id": "log-new"}))}
	})
	opts := fastOptions()
	opts.CachePath = cache
	r, err := Connect(other.URL, Identity{SubscriberID: "edge-cache"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LogID() != "log-old" || r.Version() != 5 || r.Status().Origin != OriginDiskCache {
		t.Fatalf("%s %d %+v", r.LogID(), r.Version(), r.Status())
	}
	if !waitUntil(5*time.Second, func() bool { return r.Status().Refused != "" }) {
		t.Fatalf("%+v", r.Status())
	}
	refused := r.Status().Refused
	if !strings.Contains(refused, "version 7 of command log log-new") || !strings.Contains(refused, cache) {
		t.Fatal(refused)
	}
	if r.Version() != 5 || r.LogID() != "log-old" {
		t.Fatalf("v%d %s", r.Version(), r.LogID())
	}
	if now, _ := os.ReadFile(cache); string(now) != string(data) {
		t.Fatal("the cache was overwritten")
	}
}

// The watch names the log of the held table (log_id, percent-encoded) beside Last-Event-ID, so
// a coordinator of another log sends its table (to be refused) instead of nothing: a registered
// subscriber on its reconnect, with the version it acknowledged; a plain watcher started from
// the disk cache on its first watch, with the cache's version. No table, no log_id.
func TestTheWatchQueryNamesTheLogOfTheHeldTable(t *testing.T) {
	const odd = "log a/ü+&=%" // every character that needs escaping in a query value
	fake := newFake(t, false, func(conn int) []string {
		if conn == 1 {
			return []string{routingEvent(t, dialTable(1, 100, 50, map[string]any{"log_id": odd})), "sleep:300ms", "close"}
		}
		return nil
	})
	opts := fastOptions()
	opts.Token = "svc-token"
	r, err := Connect(fake.URL, Identity{SubscriberID: "svc 1", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !waitUntil(5*time.Second, func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.watches >= 2 }) {
		t.Fatalf("no reconnect: %+v", r.Status())
	}
	fake.mu.Lock()
	queries, resumes := append([]string(nil), fake.queries...), append([]string(nil), fake.resumes...)
	fake.mu.Unlock()
	parse := func(raw string) url.Values {
		t.Helper()
		q, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		return q
	}
	if first := parse(queries[0]); first.Has("log_id") || first.Get("subscriber_id") != "svc 1" || resumes[0] != "" {
		t.Fatalf("the first watch holds no table: query %q, Last-Event-ID %q", queries[0], resumes[0])
	}
	again := parse(queries[1])
	if again.Get("log_id") != odd || again.Get("subscriber_id") != "svc 1" || again.Get("zone") != "az-a" || again.Get("kind") != "service" ||
		!strings.Contains(queries[1], "log_id=log+a%2F%C3%BC%2B%26%3D%25") || resumes[1] != "1" {
		t.Fatalf("the reconnect: query %q, Last-Event-ID %q (want log_id %q and the acknowledged v1)", queries[1], resumes[1], odd)
	}

	// A plain watcher (no token) started from a disk cache names the cache's log at once.
	cache := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(cache, mustJSON(t, dialTable(5, 100, 50, map[string]any{"log_id": "log-old"})), 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := newFake(t, false, func(int) []string { return nil })
	plainOpts := fastOptions()
	plainOpts.CachePath = cache
	plain, err := Connect(quiet.URL, Identity{SubscriberID: "edge-1"}, plainOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if !waitUntil(5*time.Second, func() bool { quiet.mu.Lock(); defer quiet.mu.Unlock(); return quiet.watches >= 1 }) {
		t.Fatalf("no watch: %+v", plain.Status())
	}
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.queries[0] != "log_id=log-old" || quiet.resumes[0] != "5" {
		t.Fatalf("query %q, Last-Event-ID %q (want only log_id=log-old, and 5)", quiet.queries[0], quiet.resumes[0])
	}
}

// An https:// coordinator is trusted through Options.CAFile (TIDEGATE_CA_FILE by default), and
// an unreadable or empty CA file fails Connect.
func TestAnHTTPSCoordinatorIsTrustedThroughTheCAFile(t *testing.T) {
	tlsFake := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/event-stream")
		io.WriteString(w, routingEvent(t, dialTable(4, 100, 50, nil)))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer tlsFake.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	cert := tlsFake.Certificate()
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := fastOptions()
	opts.CAFile = ca
	r, err := Connect(tlsFake.URL, Identity{SubscriberID: "tls-1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(4, 5*time.Second) {
		t.Fatalf("%+v", r.Status())
	}
	// Without the CA file the certificate is not trusted.
	untrusting, err := Connect(tlsFake.URL, Identity{SubscriberID: "tls-2"}, Options{StallTimeout: time.Second, CAFile: "/etc/ssl/certs/ca-certificates.crt"})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if !waitUntil(5*time.Second, func() bool { return strings.Contains(untrusting.Status().LastError, "certificate") }) || untrusting.Version() != 0 {
		t.Fatalf("%+v", untrusting.Status())
	}
	os.WriteFile(filepath.Join(dir, "empty.pem"), []byte("nothing"), 0o600)
	for _, bad := range []string{filepath.Join(dir, "missing.pem"), filepath.Join(dir, "empty.pem")} {
		if _, err := Connect(tlsFake.URL, Identity{SubscriberID: "tls-3"}, Options{CAFile: bad}); err == nil || !strings.Contains(err.Error(), "CA file") {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}
