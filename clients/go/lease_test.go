package tidegate

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bareHeartbeat is a heartbeat that confirms nothing (today's, and an older coordinator's).
const bareHeartbeat = ":heartbeat\n\n"

// confirmingAt is a heartbeat confirming the coordinator's table at c (with a field this client
// does not know after it, to be ignored).
func confirmingAt(c time.Time) string {
	return fmt.Sprintf(":heartbeat c=%d seq=7\n\n", c.UnixMilli())
}

// newLeaseFake is a fake coordinator whose watch stream announces a lease of leaseMs (no header
// when 0): each watch waits headDelay before its answer, sends events, then a heartbeat at once
// (the coordinator confirms right after the first event) and every 50 ms, each line given by
// heartbeat when it is sent.
func newLeaseFake(t *testing.T, leaseMs int, headDelay time.Duration, events []string, heartbeat func() string) *httptest.Server {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			w.Write([]byte("{}"))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(headDelay):
		}
		w.Header().Set("content-type", "text/event-stream")
		w.Header().Set(HeartbeatHeader, "50")
		if leaseMs > 0 {
			w.Header().Set(LeaseHeader, fmt.Sprint(leaseMs))
		}
		w.WriteHeader(200)
		flusher := w.(http.Flusher)
		for _, e := range events {
			io.WriteString(w, e)
		}
		for {
			if _, err := io.WriteString(w, heartbeat()); err != nil {
				return
			}
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(server.Close)
	return server
}

// userWhere is a user ID whose tag in table passes the test.
func userWhere(t *testing.T, table map[string]any, test func(Tag) bool) string {
	t.Helper()
	fixed := decode(t, table)
	for n := 0; n < 100000; n++ {
		user := fmt.Sprintf("user-%d", n)
		if tag, err := fixed.Tag(user); err == nil && test(tag) {
			return user
		}
	}
	t.Fatal("no such user")
	return ""
}

func inZone(zone string) func(Tag) bool { return func(tag Tag) bool { return tag.Zone == zone } }

// checkOf is the Router's write check of user in az-a, failing the test on an error.
func checkOf(t *testing.T, r *Router, user string, incoming uint64) WriteAnswer {
	t.Helper()
	answer, err := r.CheckWrite(user, "az-a", incoming)
	if err != nil {
		t.Fatal(err)
	}
	return answer
}

// The parsing of confirmations: `heartbeat c=<ms>` after the comment's colon; other fields are
// ignored; anything else confirms nothing.
func TestConfirmationsAreParsedFromHeartbeatComments(t *testing.T) {
	for _, c := range []struct {
		comment string
		c       int64
		ok      bool
	}{
		{"heartbeat c=1765080000123", 1765080000123, true},
		{" heartbeat c=5", 5, true},
		{"heartbeat c=5 seq=9 x=y", 5, true},
		{"heartbeat seq=9 c=6", 6, true},
		{"heartbeat lag c=7", 7, true},
		{"heartbeat c=8 c=9", 8, true},
		{"heartbeat", 0, false},
		{"", 0, false},
		{"heartbeat c=", 0, false},
		{"heartbeat c", 0, false},
		{"heartbeat c=12ms", 0, false},
		{"heartbeat c=-5", 0, false},
		{"heartbeat c=1.5", 0, false},
		{"heartbeat C=5", 0, false},
		{"heartbeat cc=5", 0, false},
		{"heartbeatc=5", 0, false},
		{"ping c=5", 0, false},
		{"c=5", 0, false},
	} {
		got, ok := confirmation(c.comment)
		if got != c.c || ok != c.ok {
			t.Errorf("%q: got %d %v, want %d %v", c.comment, got, ok, c.c, c.ok)
		}
	}
	now := int64(1_765_080_000_000)
	for _, c := range []struct {
		c    int64
		want time.Duration
	}{
		{now, 300 * time.Millisecond},
		{now - 250, 50 * time.Millisecond},
		{now - 300, 0},
		{now - 1000, -700 * time.Millisecond},
		{now + 5000, 300 * time.Millisecond}, // the coordinator's clock ahead: never more than the lease
	} {
		if got := leaseLeft(300*time.Millisecond, c.c, now); got != c.want {
			t.Errorf("c = now%+d: %v left, want %v", c.c-now, got, c.want)
		}
	}
}

// A stream announcing a lease of 300 ms with confirming heartbeats every 50 ms: writes are owned
// as long as the confirmations come; once the heartbeats stop confirming, CheckWrite answers
// unconfirmed about 300 ms after the last confirmation (not before), the middleware answers 503
// with Retry-After and `unconfirmed` while reads are still tagged, and confirmations again make
// it owned.
func TestALeaseRunsOutWhenTheHeartbeatsStopConfirming(t *testing.T) {
	table := dialTable(1, 100, 50, nil)
	var confirm atomic.Bool
	var lastConfirmed atomic.Int64 // when the last confirming heartbeat was sent (Unix ns)
	confirm.Store(true)
	fake := newLeaseFake(t, 300, 0, []string{routingEvent(t, table)}, func() string {
		if !confirm.Load() {
			return bareHeartbeat
		}
		now := time.Now()
		lastConfirmed.Store(now.UnixNano())
		return confirmingAt(now)
	})
	r, err := Connect(fake.URL, Identity{SubscriberID: "lease-1", Zone: "az-a", Kind: "service"}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	user := userWhere(t, table, inZone("az-a"))
	if !r.WaitForVersion(1, 5*time.Second) {
		t.Fatalf("no table: %v", r.Status())
	}
	if !waitUntil(2*time.Second, func() bool { return checkOf(t, r, user, 0).Check == Owned }) {
		t.Fatalf("never owned: %+v", r.Status())
	}
	// Longer than the lease: the confirmations keep renewing it.
	for held := time.Now(); time.Since(held) < 600*time.Millisecond; time.Sleep(5 * time.Millisecond) {
		if a := checkOf(t, r, user, 0); a.Check != Owned {
			t.Fatalf("%s after %v while confirmations come: %+v", a.Check, time.Since(held), r.Status())
		}
	}
	s := r.Status()
	if s.Lease != 300*time.Millisecond || s.LeaseExpired || s.LeaseLeft <= 0 || s.LeaseLeft > 300*time.Millisecond ||
		time.Since(s.LeaseConfirmed) > time.Second || !s.Connected || s.Reconnects != 0 {
		t.Fatalf("status under a confirmed lease: %+v", s)
	}

	confirm.Store(false)
	var answer WriteAnswer
	if !waitUntil(3*time.Second, func() bool { answer = checkOf(t, r, user, 0); return answer.Check == Unconfirmed }) {
		t.Fatalf("still %s: %+v", answer.Check, r.Status())
	}
	ranOut := time.Since(time.Unix(0, lastConfirmed.Load()))
	if ranOut < 200*time.Millisecond || ranOut > 600*time.Millisecond {
		t.Fatalf("unconfirmed %v after the last confirmation (lease 300 ms)", ranOut)
	}
	if answer.Status() != 503 || answer.RetryAfter() != WriteRetryAfter || answer.IsOwned() || answer.OwnerZone != "az-a" {
		t.Fatalf("%+v", answer)
	}
	if s := r.Status(); !s.LeaseExpired || s.LeaseLeft != 0 || !strings.Contains(s.String(), "writes answer unconfirmed") {
		t.Fatalf("status of a lease run out: %+v (%s)", s, s)
	}

	wrote := false
	handler := (&Middleware{Router: r, LocalZone: "az-a"}).Handler(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wrote = req.Method == http.MethodPost
		w.WriteHeader(http.StatusNoContent)
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/orders", nil)
	req.Header.Set("x-user-id", user)
	handler.ServeHTTP(rec, req)
	var body map[string]any
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || body["error"] != Unconfirmed || body["retry_after_ms"] != float64(250) || wrote {
		t.Fatalf("middleware: HTTP %d, Retry-After %q, %s (wrote: %v)", rec.Code, rec.Header().Get("Retry-After"), rec.Body, wrote)
	}
	read := httptest.NewRecorder()
	get := httptest.NewRequest(http.MethodGet, "/orders", nil)
	get.Header.Set("x-user-id", user)
	handler.ServeHTTP(read, get)
	if read.Code != http.StatusNoContent || get.Header.Get(ColorHeader) != "green" {
		t.Fatalf("a read under an unconfirmed table: HTTP %d, colour %q", read.Code, get.Header.Get(ColorHeader))
	}

	confirm.Store(true)
	if !waitUntil(3*time.Second, func() bool { return checkOf(t, r, user, 0).Check == Owned }) {
		t.Fatalf("not owned again once confirmed: %+v", r.Status())
	}
	t.Logf("FIGURE lease_ran_out_after_ms=%d (lease 300)", ranOut.Milliseconds())
}

// A confirmation made long ago renews only what is left of the lease after it: c = now - 900 ms
// under a lease of 1 s leaves 100 ms (a full renewal would be 1 s).
func TestAnOldConfirmationRenewsOnlyWhatIsLeftOfTheLease(t *testing.T) {
	table := dialTable(1, 100, 50, nil)
	var sent atomic.Int64 // when the one confirmation was sent (Unix ns)
	fake := newLeaseFake(t, 1000, 0, []string{routingEvent(t, table)}, func() string {
		if sent.Load() != 0 {
			return bareHeartbeat
		}
		now := time.Now()
		sent.Store(now.UnixNano())
		return confirmingAt(now.Add(-900 * time.Millisecond))
	})
	r, err := Connect(fake.URL, Identity{SubscriberID: "lease-2", Zone: "az-a", Kind: "service"}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	user := userWhere(t, table, inZone("az-a"))
	if !waitUntil(5*time.Second, func() bool { return !r.Status().LeaseConfirmed.IsZero() }) {
		t.Fatalf("no confirmation: %+v", r.Status())
	}
	s := r.Status()
	if s.LeaseLeft <= 0 || s.LeaseLeft > 100*time.Millisecond {
		t.Fatalf("%v left of the lease after a confirmation 900 ms old (want at most 100 ms)", s.LeaseLeft)
	}
	owned := false
	if !waitUntil(2*time.Second, func() bool {
		check := checkOf(t, r, user, 0).Check
		owned = owned || check == Owned
		return check == Unconfirmed && owned
	}) {
		t.Fatalf("owned seen: %v; %+v", owned, r.Status())
	}
	ranOut := time.Since(time.Unix(0, sent.Load()))
	if ranOut < 80*time.Millisecond || ranOut > 400*time.Millisecond {
		t.Fatalf("unconfirmed %v after the confirmation was sent (want about 100 ms, not the lease's 1 s)", ranOut)
	}
	t.Logf("FIGURE old_confirmation_left_ms=%d ran_out_after_ms=%d (c = now - 900, lease 1000)", s.LeaseLeft.Milliseconds(), ranOut.Milliseconds())
}

// Without the lease header (an older coordinator) write checks answer as before, for good, even
// if a heartbeat carries a c; so do a fixed table and a disk-cache start with no stream yet.
func TestWithoutALeaseHeaderWritesStayOwned(t *testing.T) {
	table := dialTable(1, 100, 50, nil)
	var beats atomic.Int64
	fake := newLeaseFake(t, 0, 0, []string{routingEvent(t, table)}, func() string {
		if beats.Add(1)%2 == 0 {
			return confirmingAt(time.UnixMilli(1)) // long ago: would have run any lease out
		}
		return bareHeartbeat
	})
	opts := fastOptions()
	opts.StallTimeout = 400 * time.Millisecond
	r, err := Connect(fake.URL, Identity{SubscriberID: "old-1", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	user := userWhere(t, table, inZone("az-a"))
	if !r.WaitForVersion(1, 5*time.Second) {
		t.Fatalf("no table: %v", r.Status())
	}
	for held := time.Now(); time.Since(held) < 800*time.Millisecond; time.Sleep(5 * time.Millisecond) {
		if a := checkOf(t, r, user, 0); a.Check != Owned {
			t.Fatalf("%s after %v without a lease: %+v", a.Check, time.Since(held), r.Status())
		}
	}
	if s := r.Status(); s.Lease != 0 || s.LeaseExpired || !s.LeaseConfirmed.IsZero() || !s.Connected || s.Reconnects != 0 {
		t.Fatalf("%+v", s)
	}

	if a, _ := Fixed(decode(t, table)).CheckWrite(user, "az-a", 0); a.Check != Owned {
		t.Fatalf("a fixed table: %+v", a)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + closed.Addr().String()
	closed.Close()
	cache := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(cache, mustJSON(t, table), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.CachePath = cache
	cached, err := Connect(down, Identity{SubscriberID: "cached-1", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	if !waitUntil(3*time.Second, func() bool { return cached.Status().LastError != "" }) {
		t.Fatalf("%+v", cached.Status())
	}
	if a := checkOf(t, cached, user, 0); a.Check != Owned || cached.Status().Origin != OriginDiskCache || cached.Status().Lease != 0 {
		t.Fatalf("a disk-cache start with no stream: %+v %+v", a, cached.Status())
	}
}

// A coordinator that heartbeats but confirms nothing for a whole lease is left for the next
// one, with the reason in the status; the next one confirms, and writes are owned again.
func TestACoordinatorThatDoesNotConfirmIsLeftForOneThatDoes(t *testing.T) {
	table := dialTable(1, 100, 50, nil)
	mute := newLeaseFake(t, 300, 0, []string{routingEvent(t, table)}, func() string { return bareHeartbeat })
	// The next one takes 200 ms to answer: the status meanwhile says why the first was left.
	live := newLeaseFake(t, 300, 200*time.Millisecond, []string{routingEvent(t, dialTable(2, 100, 50, nil))}, func() string {
		return confirmingAt(time.Now())
	})
	id := ""
	for n := 0; id == ""; n++ {
		if FirstChoice(fmt.Sprintf("svc-%d", n), 2) == 0 {
			id = fmt.Sprintf("svc-%d", n)
		}
	}
	r, err := Connect(mute.URL+","+live.URL, Identity{SubscriberID: id, Zone: "az-a", Kind: "service"}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	user := userWhere(t, table, inZone("az-a"))
	if !r.WaitForVersion(1, 5*time.Second) || r.Version() != 1 {
		t.Fatalf("did not start on its first choice: %v", r.Status())
	}
	got := time.Now()
	if a := checkOf(t, r, user, 0); a.Check != Unconfirmed {
		t.Fatalf("no confirmation yet on a stream that announced a lease: %+v", a)
	}
	if !waitUntil(3*time.Second, func() bool { return r.Status().Coordinator == live.URL }) {
		t.Fatalf("did not leave: %+v", r.Status())
	}
	left := time.Since(got)
	s := r.Status()
	want := mute.URL + " has not confirmed its table for 300ms: moving to the next coordinator"
	if s.Connected || s.LastError != want || s.Stalled {
		t.Fatalf("while moving: %+v (want the error %q)", s, want)
	}
	if left < 250*time.Millisecond || left > 800*time.Millisecond {
		t.Fatalf("left the coordinator that does not confirm after %v (lease 300 ms)", left)
	}
	if !r.WaitForVersion(2, 5*time.Second) {
		t.Fatalf("%+v", r.Status())
	}
	if !waitUntil(2*time.Second, func() bool { return checkOf(t, r, user, 0).Check == Owned }) {
		t.Fatalf("not owned under the next coordinator: %+v", r.Status())
	}
	// It stays there: its confirmations keep the lease and the stream.
	time.Sleep(500 * time.Millisecond)
	if s := r.Status(); !s.Connected || s.Coordinator != live.URL || s.Reconnects != 1 || s.LeaseExpired || checkOf(t, r, user, 0).Check != Owned {
		t.Fatalf("%+v", s)
	}
	t.Logf("FIGURE unconfirmed_failover_ms=%d (lease 300)", left.Milliseconds())
}

// Under a lease run out only owned changes: behind, frozen and misrouted answer as before, in
// CheckWrite, CheckWriteIn and CheckWriteFor alike. Confirmations older than the lease (a
// coordinator that cannot read its log repeats its last c) renew nothing.
func TestAnExpiredLeaseChangesOnlyOwned(t *testing.T) {
	table := dialTable(3, 100, 50, map[string]any{"frozen": map[string]any{"default": "50-59"}})
	fake := newLeaseFake(t, 300, 0, []string{routingEvent(t, table)}, func() string {
		return confirmingAt(time.Now().Add(-time.Hour))
	})
	r, err := Connect(fake.URL, Identity{SubscriberID: "lease-5", Zone: "az-a", Kind: "service"}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(3, 5*time.Second) {
		t.Fatalf("no table: %v", r.Status())
	}
	if !waitUntil(2*time.Second, func() bool { return !r.Status().LeaseConfirmed.IsZero() }) {
		t.Fatalf("no confirmation read: %+v", r.Status())
	}
	if s := r.Status(); !s.LeaseExpired || s.LeaseLeft != 0 {
		t.Fatalf("a confirmation an hour old renewed the lease: %+v", s)
	}
	owned := userWhere(t, table, func(tag Tag) bool { return tag.Zone == "az-a" && tag.Unit >= 60 })
	frozen := userWhere(t, table, func(tag Tag) bool { return tag.Zone == "az-a" && tag.Unit < 60 })
	elsewhere := userWhere(t, table, inZone("az-b"))
	fixed := Fixed(decode(t, table))
	for _, c := range []struct {
		user     string
		incoming uint64
		want     string // with the lease run out
		without  string // the same table without a lease
	}{
		{owned, 0, Unconfirmed, Owned},
		{owned, 3, Unconfirmed, Owned},
		{frozen, 0, Frozen, Frozen},
		{elsewhere, 0, Misrouted, Misrouted},
		{owned, 4, Behind, Behind},
		{elsewhere, 9, Behind, Behind},
	} {
		checks := map[string]func(*Router) (WriteAnswer, error){
			"CheckWrite":    func(r *Router) (WriteAnswer, error) { return r.CheckWrite(c.user, "az-a", c.incoming) },
			"CheckWriteIn":  func(r *Router) (WriteAnswer, error) { return r.CheckWriteIn("default", c.user, "green", c.incoming) },
			"CheckWriteFor": func(r *Router) (WriteAnswer, error) { return r.CheckWriteFor("", "orders", c.user, "az-a", c.incoming) },
		}
		for name, check := range checks {
			got, err := check(r)
			base, baseErr := check(fixed)
			if err != nil || baseErr != nil || got.Check != c.want || base.Check != c.without {
				t.Fatalf("%s(%s, incoming %d): %s (want %s), without a lease %s (want %s); %v %v",
					name, c.user, c.incoming, got.Check, c.want, base.Check, c.without, err, baseErr)
			}
			if got.Version != base.Version || got.Unit != base.Unit || got.OwnerZone != base.OwnerZone || got.OwnerLane != base.OwnerLane {
				t.Fatalf("%s(%s): %+v against %+v", name, c.user, got, base)
			}
		}
	}
	route := ForwardOnce(WriteAnswer{Check: Unconfirmed, Version: 3}, "")
	if route.Action != RouteRefuse || route.Status != 503 || route.RetryAfter != WriteRetryAfter || !strings.Contains(route.Detail, "version 3") {
		t.Fatalf("%+v", route)
	}
}

// Confirmations on a stream whose table was refused as another log's are that log's: they do
// not renew the lease of the held table (writes stay unconfirmed), though the coordinator, which
// does confirm its own table, is not left for it.
func TestConfirmationsOfAnotherLogDoNotRenewTheHeldTable(t *testing.T) {
	held := dialTable(5, 100, 50, map[string]any{"log_id": "log-old"})
	cache := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(cache, mustJSON(t, held), 0o600); err != nil {
		t.Fatal(err)
	}
	other := newLeaseFake(t, 300, 0, []string{routingEvent(t, dialTable(7, 100, 50, map[string]any{"log_id": "log-new"}))}, func() string {
		return confirmingAt(time.Now())
	})
	opts := fastOptions()
	opts.CachePath = cache
	r, err := Connect(other.URL, Identity{SubscriberID: "old-log-1", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	user := userWhere(t, held, inZone("az-a"))
	if !waitUntil(5*time.Second, func() bool { return r.Status().Refused != "" }) {
		t.Fatalf("%+v", r.Status())
	}
	time.Sleep(600 * time.Millisecond) // two leases of confirmations
	s := r.Status()
	if a := checkOf(t, r, user, 0); a.Check != Unconfirmed || r.Version() != 5 {
		t.Fatalf("another log's confirmations renewed the held table's lease: %+v %+v", a, s)
	}
	if !s.LeaseExpired || !s.LeaseConfirmed.IsZero() || !s.Connected || s.Reconnects != 0 {
		t.Fatalf("%+v", s)
	}
}

// The global write check under a lease run out: owned (this zone is the global writer) becomes
// unconfirmed, as in CheckWrite, since a zone cut off may no longer be the writer; behind,
// frozen, read-only and misrouted answer as before.
func TestAnExpiredLeaseChangesOnlyAnOwnedGlobalWrite(t *testing.T) {
	for _, c := range []struct {
		writer           map[string]any
		local            string
		incoming         uint64
		want, withoutOne string
	}{
		{map[string]any{"zone": "az-a", "read_only": false}, "az-a", 0, Unconfirmed, Owned},
		{map[string]any{"zone": "az-a", "read_only": false}, "green", 3, Unconfirmed, Owned},
		{map[string]any{"zone": "az-a", "read_only": false}, "az-b", 0, Misrouted, Misrouted},
		{map[string]any{"zone": "az-a", "read_only": false}, "az-a", 4, Behind, Behind},
		{map[string]any{"zone": "az-a", "read_only": false, "frozen": true}, "az-a", 0, Frozen, Frozen},
		{map[string]any{"zone": "az-a", "read_only": true}, "az-a", 0, ReadOnly, ReadOnly},
	} {
		table := dialTable(3, 100, 50, map[string]any{"global_writer": c.writer})
		fake := newLeaseFake(t, 300, 0, []string{routingEvent(t, table)}, func() string {
			return confirmingAt(time.Now().Add(-time.Hour))
		})
		r, err := Connect(fake.URL, Identity{SubscriberID: "lease-global", Zone: "az-a", Kind: "service"}, fastOptions())
		if err != nil {
			t.Fatal(err)
		}
		if !r.WaitForVersion(3, 5*time.Second) || !waitUntil(2*time.Second, func() bool { return r.Status().LeaseExpired }) {
			r.Close()
			t.Fatalf("no table or no expired lease: %+v", r.Status())
		}
		got, err := r.CheckGlobalWrite(c.local, c.incoming)
		base, baseErr := Fixed(decode(t, table)).CheckGlobalWrite(c.local, c.incoming)
		r.Close()
		if err != nil || baseErr != nil || got.Check != c.want || base.Check != c.withoutOne {
			t.Fatalf("%v in %s at %d: %s (want %s), without a lease %s (want %s); %v %v",
				c.writer, c.local, c.incoming, got.Check, c.want, base.Check, c.withoutOne, err, baseErr)
		}
		if got.Version != base.Version || got.OwnerZone != base.OwnerZone || got.OwnerLane != base.OwnerLane {
			t.Fatalf("%+v against %+v", got, base)
		}
	}
}
