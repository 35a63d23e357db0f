package tidegate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverTags tags users with POST /v1/tag (10 000 per request) with the request's extra fields.
func serverTags(t *testing.T, s *server, users []string, extra map[string]any) ([]map[string]any, uint64) {
	t.Helper()
	var tags []map[string]any
	var version uint64
	for i := 0; i < len(users); i += 10000 {
		body := map[string]any{"user_ids": users[i:min(i+10000, len(users))]}
		for k, v := range extra {
			body[k] = v
		}
		out := s.ok("POST", "/v1/tag", body)
		version = num(out["version"])
		for _, tag := range out["tags"].([]any) {
			tags = append(tags, tag.(map[string]any))
		}
	}
	return tags, version
}

// Local tags equal the server's POST /v1/tag for 100 000 users (and the fixture's vectors) on a
// three-zone map, with pins to a third lane, a named domain and release channels, for the
// global rule and for calls of services with a channel, in both domains.
func TestLocalTagsAgreeWithTheServerOn100000UsersAcrossZonesDomainsAndChannels(t *testing.T) {
	s := startServer(t, configTOML("", "[zones.az-c]\nlane = \"red\"\nclass = \"gzone\"\n"))
	s.ok("PUT", "/v1/units", map[string]any{"moves": []map[string]any{{"units": "10-29,60", "zone": "az-c"}, {"units": "95-99", "zone": "blue"}},
		"expected_version": s.version(), "reason": "go client"})
	s.ok("POST", "/v1/domains", map[string]any{"name": "search", "expected_version": s.version(), "reason": "go client"})
	s.ok("PUT", "/v1/channels/orders-v2", map[string]any{"services": []string{"orders"}, "zone": "green", "percent": 10,
		"users": []string{"user-7"}, "expected_version": s.version(), "reason": "go client"})
	s.ok("PUT", "/v1/channels/ranker-v3", map[string]any{"services": []string{"ranker"}, "zone": "red", "units": "60-79",
		"domain": "search", "expected_version": s.version(), "reason": "go client"})
	s.ok("PUT", "/v1/pins/user-3", map[string]any{"color": "red", "expected_version": s.version(), "reason": "go client"})
	s.ok("PUT", "/v1/pins/user-11", map[string]any{"color": "green", "expected_version": s.version(), "reason": "go client"})
	want := s.version()

	r, err := Connect(s.URL, Identity{SubscriberID: "go-equality", Zone: "az-a", Kind: "test"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(want, 10*time.Second) {
		t.Fatalf("no table v%d: %v", want, r.Status())
	}
	if z := r.Table().Zones; len(z) != 3 || z[2].Lane != "red" || z[2].Class != "gzone" {
		t.Fatalf("%+v", z)
	}

	users := make([]string, 0, 100010)
	for i := 0; i < 100000; i++ {
		users = append(users, fmt.Sprintf("user-%d", i))
	}
	users = append(users, "ユーザー", "müller", "a/b?c=d", "😀", "user 42", strings.Repeat("é", 128))
	var file struct {
		Vectors []struct {
			UserID string `json:"user_id"`
		} `json:"vectors"`
	}
	fixture(t, "unit_hash_vectors.json", &file)
	for _, v := range file.Vectors {
		users = append(users, v.UserID)
	}
	variants := []struct{ domain, service string }{{"", ""}, {"", "orders"}, {"search", "ranker"}, {"search", ""}}
	checked := 0
	lanes := map[string]int{}
	reasons := map[string]int{}
	for _, v := range variants {
		extra := map[string]any{}
		if v.domain != "" {
			extra["domain"] = v.domain
		}
		if v.service != "" {
			extra["service"] = v.service
		}
		theirs, version := serverTags(t, s, users, extra)
		if len(theirs) != len(users) || version != want {
			t.Fatalf("%v: %d tags at v%d", v, len(theirs), version)
		}
		for i, user := range users {
			ours, err := r.TagForServiceIn(v.domain, user, v.service)
			if err != nil {
				t.Fatalf("%v %q: %v", v, user, err)
			}
			b := theirs[i]
			if b["user_id"] != user || b["color"] != ours.Lane || b["zone"] != ours.Zone || num(b["unit"]) != uint64(ours.Unit) ||
				b["pinned"] != ours.Pinned || ours.Version != version {
				t.Fatalf("%v %q: local %+v, server %v", v, user, ours, b)
			}
			if v.service != "" && b["reason"] != ours.Reason {
				t.Fatalf("%v %q: reason %s, server %v", v, user, ours.Reason, b["reason"])
			}
			lanes[ours.Lane]++
			reasons[v.service+"/"+ours.Reason]++
			checked++
		}
	}
	if len(lanes) != 3 || reasons["orders/channel:orders-v2"] == 0 || reasons["ranker/channel:ranker-v3"] == 0 || reasons["/pin"] == 0 {
		t.Fatalf("not every rule was exercised: lanes %v, reasons %v", lanes, reasons)
	}
	t.Logf("FIGURE tag_agreement users=%d variants=%d tags_compared=%d fixture_vectors=%d", len(users), len(variants), checked, len(file.Vectors))
}

// The Router follows dial moves and acknowledges each with its service token; the convergence
// gate counts it. p50/p99 from the PUT /v1/dial answer to the applied table and to the ack.
func TestFollowsTwentyDialMovesAndAcknowledgesEach(t *testing.T) {
	s := startServer(t, configTOML("", ""))
	r, err := Connect(s.URL, Identity{SubscriberID: "go-follow", Zone: "az-a", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !waitUntil(10*time.Second, func() bool { return r.AckedVersion() >= 1 }) {
		t.Fatalf("%v", r.Status())
	}
	// From the PUT /v1/dial answer (as tests/client_router.rs measures) and from the request.
	var applied, acked, appliedSent, ackedSent []time.Duration
	for round := 0; round < 20; round++ {
		version, sent, answered := s.dialTimed([]int{30, 60}[round%2])
		deadline := answered.Add(5 * time.Second)
		for r.Version() < version {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: v%d not applied: %v", round, version, r.Status())
			}
			time.Sleep(50 * time.Microsecond)
		}
		appliedAt := time.Now()
		for r.AckedVersion() < version {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: v%d not acknowledged: %v", round, version, r.Status())
			}
			time.Sleep(50 * time.Microsecond)
		}
		ackedAt := time.Now()
		applied = append(applied, max(0, appliedAt.Sub(answered)))
		acked = append(acked, max(0, ackedAt.Sub(answered)))
		appliedSent = append(appliedSent, appliedAt.Sub(sent))
		ackedSent = append(ackedSent, ackedAt.Sub(sent))
		conv := s.ok("GET", fmt.Sprintf("/v1/routing/convergence?version=%d", version), nil)
		if num(conv["live"]) != 1 || num(conv["converged"]) != 1 || conv["complete"] != true {
			t.Fatalf("round %d: %v", round, conv)
		}
	}
	subs := s.ok("GET", "/v1/subscribers", nil)["subscribers"].([]any)
	if len(subs) != 1 || subs[0].(map[string]any)["subscriber_id"] != "go-follow" || subs[0].(map[string]any)["state"] != "current" {
		t.Fatalf("%v", subs)
	}
	for _, d := range [][]time.Duration{applied, acked, appliedSent, ackedSent} {
		sortDurations(d)
	}
	if p99 := percentile(ackedSent, 0.99); p99 > time.Second {
		t.Fatalf("ack p99 %v is beyond 1 s", p99)
	}
	r2 := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	t.Logf("FIGURE follow moves=%d from_PUT_answer: applied p50=%v p99=%v, acked p50=%v p99=%v; from_PUT_sent: applied p50=%v p99=%v, acked p50=%v p99=%v max=%v",
		len(applied), r2(percentile(applied, 0.5)), r2(percentile(applied, 0.99)), r2(percentile(acked, 0.5)), r2(percentile(acked, 0.99)),
		r2(percentile(appliedSent, 0.5)), r2(percentile(appliedSent, 0.99)), r2(percentile(ackedSent, 0.5)), r2(percentile(ackedSent, 0.99)), r2(ackedSent[len(ackedSent)-1]))
}

// A Go client that stops acknowledging holds a drain step at the convergence gate; the pause
// names it and not the healthy one.
func TestAGoClientThatStopsAcknowledgingHoldsTheDrain(t *testing.T) {
	s := startServer(t, configTOML("", "[drain]\ntick = \"20ms\"\nconvergence_timeout = \"1s\"\n"))
	healthy, err := Connect(s.URL, Identity{SubscriberID: "healthy-go", Zone: "az-a", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer healthy.Close()
	opts := serviceOptions()
	opts.NoAck = true
	stuck, err := Connect(s.URL, Identity{SubscriberID: "stuck-go", Zone: "az-b", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if !healthy.WaitForVersion(1, 10*time.Second) || !stuck.WaitForVersion(1, 10*time.Second) {
		t.Fatal("no table")
	}
	if !waitUntil(10*time.Second, func() bool { return num(s.ok("GET", "/v1/routing/convergence", nil)["live"]) == 2 }) {
		t.Fatalf("%v", s.ok("GET", "/v1/routing/convergence", nil))
	}
	s.ok("POST", "/v1/outcomes", []map[string]any{{"zone": "az-b", "color": "blue", "ok": 5000}, {"zone": "az-a", "color": "green", "ok": 5000}})
	started := time.Now()
	status, body := s.call("POST", "/v1/drains", map[string]any{"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "200ms", "reason": "go convergence test"})
	if status != 201 {
		t.Fatalf("%d %v", status, body)
	}
	if !waitUntil(15*time.Second, func() bool { return s.ok("GET", "/v1/drains/1", nil)["state"] == "paused" }) {
		t.Fatalf("%v", s.ok("GET", "/v1/drains/1", nil))
	}
	held := time.Since(started)
	drain := s.ok("GET", "/v1/drains/1", nil)
	reason, _ := drain["hold_reason"].(string)
	if num(drain["steps_done"]) != 1 || !strings.Contains(reason, "stuck-go") || strings.Contains(reason, "healthy-go") {
		t.Fatalf("%v", drain)
	}
	if held < time.Second {
		t.Fatalf("paused after %v, before the 1 s convergence timeout", held)
	}
	// The pause is itself a logged change: the healthy client may be a millisecond behind it
	// when we look, so wait for it to catch up; the stuck one must stay behind throughout.
	var conv map[string]any
	onlyStuck := waitUntil(5*time.Second, func() bool {
		conv = s.ok("GET", "/v1/routing/convergence", nil)
		behind, _ := conv["behind"].([]any)
		for _, b := range behind {
			if b.(map[string]any)["subscriber_id"] == "stuck-go" && len(behind) == 1 {
				return true
			}
		}
		return false
	})
	if !onlyStuck {
		t.Fatalf("%v", conv)
	}
	current := s.version()
	if !waitUntil(5*time.Second, func() bool { return healthy.AckedVersion() == current && stuck.Version() == current }) ||
		stuck.AckedVersion() != 0 {
		t.Fatalf("healthy acked v%d, stuck applied v%d acked v%d, server v%d", healthy.AckedVersion(), stuck.Version(), stuck.AckedVersion(), current)
	}
	t.Logf("FIGURE drain_held_by_stuck_client paused_after=%v steps_done=1", held.Round(time.Millisecond))
}

// userMoving finds a user whose owner is blue at blue units `before` and green after `after`.
func userMoving(t *testing.T, table *Table, before, after uint32) string {
	for i := 0; i < 100000; i++ {
		id := fmt.Sprintf("user-%d", i)
		if u, _ := table.UnitOf(id); u >= after && u < before {
			return id
		}
	}
	t.Fatal("no user in the moving units")
	return ""
}

// The write contract in the stale-callee scenario: a callee whose table is older than the
// caller's answers behind (never misrouted), the same callee judging an old caller answers
// misrouted, an up-to-date owner answers owned; misrouted writes are forwarded once through the
// middleware and refused with 421 after their hop.
func TestWriteChecksInTheStaleCalleeScenario(t *testing.T) {
	s := startServer(t, configTOML("", ""))
	dir := t.TempDir()
	freshCache := dir + "/fresh.json"
	opts := serviceOptions()
	opts.CachePath = freshCache
	freshA, err := Connect(s.URL, Identity{SubscriberID: "orders-az-a", Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer freshA.Close()
	if !freshA.WaitForVersion(1, 10*time.Second) {
		t.Fatalf("%v", freshA.Status())
	}
	// The stale callee: started from a copy of the version-1 cache, its coordinator unreachable.
	// (The cache is written just after the table is applied.)
	var old []byte
	if !waitUntil(5*time.Second, func() bool { old, err = os.ReadFile(freshCache); return err == nil }) {
		t.Fatal(err)
	}
	staleCache := dir + "/stale.json"
	os.WriteFile(staleCache, old, 0o600)
	v1 := s.version()
	v2, _ := s.dial(20) // units 20-49 move from blue (az-b) to green (az-a)
	staleOpts := serviceOptions()
	staleOpts.CachePath = staleCache
	stale, err := Connect("http://127.0.0.1:1", Identity{SubscriberID: "orders-az-a-stale", Zone: "az-a", Kind: "service"}, staleOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	freshB, err := Connect(s.URL, Identity{SubscriberID: "orders-az-b", Zone: "az-b", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer freshB.Close()
	if !freshA.WaitForVersion(v2, 10*time.Second) || !freshB.WaitForVersion(v2, 10*time.Second) || stale.Version() != v1 ||
		stale.Status().Origin != OriginDiskCache {
		t.Fatalf("fresh %v / %v, stale %v", freshA.Status(), freshB.Status(), stale.Status())
	}
	user := userMoving(t, freshA.Table(), 50, 20)
	callerTag, _ := freshA.Tag(user)
	if callerTag.Zone != "az-a" || callerTag.Version != v2 {
		t.Fatalf("%+v", callerTag)
	}
	expect := func(r *Router, local string, incoming uint64, check, owner string) WriteAnswer {
		t.Helper()
		a, err := r.CheckWrite(user, local, incoming)
		if err != nil || a.Check != check || a.OwnerZone != owner {
			t.Fatalf("%s at v%d, caller v%d: got %+v %v, want %s owner %q", local, r.Version(), incoming, a, err, check, owner)
		}
		return a
	}
	// The caller routed at v2 to az-a; the stale az-a callee (v1: the user is az-b's) cannot judge.
	behind := expect(stale, "az-a", v2, Behind, "")
	if route := ForwardOnce(behind, ""); route.Status != 503 || route.RetryAfter != WriteRetryAfter {
		t.Fatalf("%+v", route)
	}
	// A caller as old as the stale callee: the callee judges, the user is az-b's there.
	misrouted := expect(stale, "az-a", v1, Misrouted, "az-b")
	if route := ForwardOnce(misrouted, ""); route.Action != RouteForward || route.Zone != "az-b" {
		t.Fatalf("%+v", route)
	}
	expect(freshA, "az-a", v2, Owned, "az-a")
	expect(freshA, "green", 0, Owned, "az-a")
	expect(freshB, "az-b", v2, Misrouted, "az-a")
	expect(freshB, "az-b", v1, Misrouted, "az-a") // the newer local table judges an older caller

	// Through the middleware: two zones' services, a write sent to the wrong one.
	var mu sync.Mutex
	commits := map[string][]string{}
	handler := func(zone string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				fmt.Fprintf(w, "%s %s", r.Header.Get(ColorHeader), r.Header.Get(VersionHeader))
				return
			}
			a, _ := WriteAnswerFrom(r.Context())
			mu.Lock()
			commits[zone] = append(commits[zone], fmt.Sprintf("%s@v%d hop=%s", DefaultUserID(r), a.Version, r.Header.Get(HopHeader)))
			mu.Unlock()
			w.WriteHeader(201)
		})
	}
	zones := map[string]*url.URL{}
	mwA := &Middleware{Router: freshA, LocalZone: "az-a", Forward: func(z string) *url.URL { return zones[z] }}
	mwB := &Middleware{Router: freshB, LocalZone: "az-b", Forward: func(z string) *url.URL { return zones[z] }}
	srvA := httptest.NewServer(mwA.Handler(handler("az-a")))
	defer srvA.Close()
	srvB := httptest.NewServer(mwB.Handler(handler("az-b")))
	defer srvB.Close()
	zones["az-a"], _ = url.Parse(srvA.URL)
	zones["az-b"], _ = url.Parse(srvB.URL)
	send := func(method, base string, headers map[string]string) (int, string, http.Header) {
		req, _ := http.NewRequest(method, base+"/orders", nil)
		req.Header.Set("x-user-id", user)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	if status, body, _ := send("GET", srvB.URL, nil); status != 200 || body != fmt.Sprintf("green %d", v2) {
		t.Fatalf("a read is tagged: %d %q", status, body)
	}
	if status, body, _ := send("POST", srvB.URL, map[string]string{VersionHeader: fmt.Sprint(v2)}); status != 201 {
		t.Fatalf("forwarded once to the owner: %d %s", status, body)
	}
	status, body, _ := send("POST", srvB.URL, map[string]string{VersionHeader: fmt.Sprint(v2), HopHeader: "1"})
	var refusal map[string]any
	json.Unmarshal([]byte(body), &refusal)
	if status != 421 || refusal["error"] != Misrouted || refusal["owner_zone"] != "az-a" {
		t.Fatalf("a second hop is refused: %d %s", status, body)
	}
	status, body, header := send("POST", srvA.URL, map[string]string{VersionHeader: fmt.Sprint(v2 + 5)})
	if status != 503 || header.Get("Retry-After") != "1" || !strings.Contains(body, `"behind"`) {
		t.Fatalf("a caller from the future: %d %s", status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(commits["az-a"]) != 1 || len(commits["az-b"]) != 0 || commits["az-a"][0] != fmt.Sprintf("%s@v%d hop=1", user, v2) {
		t.Fatalf("commits %v", commits)
	}
	t.Logf("FIGURE stale_callee answers: behind, misrouted(az-b), owned, misrouted(az-a); middleware: forwarded=1 refused_421=1 refused_503=1")
}

// A loss-less drain step freezes the moving units: the Router answers frozen for their users'
// writes, and a write scope held open holds the step's switch until it ends.
func TestAFrozenUnitIsAnsweredFrozenAndAWriteScopeHoldsTheSwitch(t *testing.T) {
	s := startServer(t, configTOML("", "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n"))
	r, err := Connect(s.URL, Identity{SubscriberID: "writer-az-b", Zone: "az-b", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !waitUntil(10*time.Second, func() bool { return r.AckedVersion() >= 1 }) {
		t.Fatalf("%v", r.Status())
	}
	stop := make(chan struct{})
	var feeding sync.WaitGroup
	feeding.Add(1)
	go func() {
		defer feeding.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			s.call("POST", "/v1/outcomes", []map[string]any{{"zone": "az-b", "color": "blue", "ok": 100, "error": 0}, {"zone": "az-a", "color": "green", "ok": 100, "error": 0}})
		}
	}()
	defer func() { close(stop); feeding.Wait() }()
	time.Sleep(300 * time.Millisecond)
	scope := r.WriteScope() // a write in flight, judged with version 1
	status, body := s.call("POST", "/v1/drains", map[string]any{
		"zone": "az-b", "target_percent": 40, "step_percent": 10, "interval": "200ms", "freeze": true, "freeze_window": "10s",
		"guard":  map[string]any{"max_error_rate": 0.02, "min_requests": 10, "breaches": 2, "on_breach": "pause"},
		"reason": "go loss-less drain"})
	if status != 201 {
		scope.End()
		t.Fatalf("%d %v", status, body)
	}
	var frozenTable *Table
	if !waitUntil(10*time.Second, func() bool {
		t := r.Table()
		if len(t.Frozen()) > 0 {
			frozenTable = t
			return true
		}
		return false
	}) {
		scope.End()
		t.Fatalf("no freeze arrived: %v", s.ok("GET", "/v1/drains/1", nil))
	}
	units := frozenTable.Frozen()["default"]
	var inside, outside string
	for i := 0; inside == "" || outside == ""; i++ {
		id := fmt.Sprintf("user-%d", i)
		u, _ := frozenTable.UnitOf(id)
		if units.Contains(u) && inside == "" {
			inside = id
		} else if !units.Contains(u) && u < 40 && outside == "" {
			outside = id
		}
	}
	a, err := r.CheckWrite(inside, "az-b", frozenTable.Version)
	if err != nil || a.Check != Frozen || a.OwnerZone != "az-b" || a.RetryAfter() != WriteRetryAfter {
		t.Fatalf("%s in frozen %s: %+v %v", inside, units, a, err)
	}
	if a, _ := r.CheckWrite(outside, "az-b", frozenTable.Version); a.Check != Owned {
		t.Fatalf("%s outside the freeze: %+v", outside, a)
	}
	// While the scope is open the freeze is applied but not acknowledged: the switch waits.
	time.Sleep(700 * time.Millisecond)
	drain := s.ok("GET", "/v1/drains/1", nil)
	current, _ := drain["freeze"].(map[string]any)["current"].(map[string]any)
	if current == nil || current["phase"] != "freezing" || r.AckedVersion() >= frozenTable.Version {
		t.Fatalf("the switch did not wait for the open write: acked v%d, %v", r.AckedVersion(), drain)
	}
	heldFor := time.Now()
	scope.End()
	if !waitUntil(10*time.Second, func() bool {
		t := r.Table()
		return t.Version > frozenTable.Version && len(t.Frozen()) == 0 && r.AckedVersion() == t.Version
	}) {
		t.Fatalf("the step did not go on: %v %v", r.Status(), s.ok("GET", "/v1/drains/1", nil))
	}
	after, _ := r.CheckWrite(inside, "az-b", 0)
	if after.Check != Misrouted || after.OwnerZone != "az-a" {
		t.Fatalf("after the switch %s is az-a's: %+v", inside, after)
	}
	t.Logf("FIGURE freeze frozen_units=%s answered=frozen switch_after_scope_end=%v", units, time.Since(heldFor).Round(time.Millisecond))
}

// With every coordinator killed, a Router keeps tagging, and a new one starts from the disk
// cache and tags as the server did; failing over to a coordinator of another log is refused.
func TestKeepsTaggingFromTheDiskCacheWithEveryCoordinatorKilled(t *testing.T) {
	a := startServer(t, configTOML("", ""))
	b := startServer(t, configTOML("", "")) // another cluster: another command log
	id := ""
	for n := 0; id == ""; n++ {
		if FirstChoice(fmt.Sprintf("orders-%d", n), 2) == 0 {
			id = fmt.Sprintf("orders-%d", n)
		}
	}
	cache := t.TempDir() + "/tidegate.json"
	opts := serviceOptions()
	opts.CachePath = cache
	list := a.URL + "," + b.URL
	r, err := Connect(list, Identity{SubscriberID: id, Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	version, _ := a.dial(20)
	// Acknowledged too: a reconnect resumes from the acknowledged version, and b (at version 1)
	// sends nothing to a client resuming from its own current version.
	if !r.WaitForVersion(version, 10*time.Second) || !waitUntil(10*time.Second, func() bool { return r.AckedVersion() == version }) ||
		r.Status().Coordinator != a.URL {
		t.Fatalf("%v", r.Status())
	}
	users := make([]string, 2000)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	before, _ := serverTags(t, a, users, nil)
	logA := r.LogID()
	a.kill()
	// Failover to b: its table belongs to another log and is refused.
	if !waitUntil(15*time.Second, func() bool { return r.Status().Refused != "" }) {
		t.Fatalf("%v", r.Status())
	}
	if r.Version() != version || r.LogID() != logA || r.Status().Coordinator != b.URL {
		t.Fatalf("%v", r.Status())
	}
	b.kill()
	if !waitUntil(15*time.Second, func() bool { return !r.Status().Connected }) {
		t.Fatalf("%v", r.Status())
	}
	late, err := Connect(list, Identity{SubscriberID: "orders-late", Zone: "az-b", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if late.Status().Origin != OriginDiskCache || late.Version() != version || late.LogID() != logA {
		t.Fatalf("%v", late.Status())
	}
	time.Sleep(300 * time.Millisecond)
	if s := late.Status(); !strings.Contains(s.String(), "from the disk cache; coordinator unreachable") {
		t.Fatalf("%s: %+v", s, s)
	}
	for i, user := range users {
		for _, router := range []*Router{r, late} {
			tag, err := router.Tag(user)
			if err != nil || tag.Lane != before[i]["color"] || tag.Zone != before[i]["zone"] || uint64(tag.Unit) != num(before[i]["unit"]) {
				t.Fatalf("%s: %+v %v, server said %v", user, tag, err, before[i])
			}
		}
	}
	// The coordinator comes back where it was: the late client resumes from it.
	back := startServerAt(t, a.dir, a.config, mustAtoi(t, a.port()))
	if !waitUntil(15*time.Second, func() bool { return late.Status().Connected }) {
		t.Fatalf("%v", late.Status())
	}
	// Resumed at its version (Last-Event-ID): nothing new to send until the next change.
	next, _ := back.dial(70)
	if !late.WaitForVersion(next, 10*time.Second) || !waitUntil(5*time.Second, func() bool { return late.AckedVersion() == next }) ||
		late.Status().Origin != OriginCoordinator {
		t.Fatalf("%v", late.Status())
	}
	t.Logf("FIGURE cache_restart users_tagged_from_cache=%d routers=2 coordinators_killed=2", len(users))
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A client holding a table of another command log at the very version the coordinator is at
// learns of it at once: the watch names the held table's log (log_id), so the coordinator
// ignores Last-Event-ID and sends its table instead of nothing, and the client refuses it
// loudly, naming both logs, and acknowledges nothing. Three clusters at the same version: a
// registered subscriber failing over from the first to the second, and a plain (anonymous)
// watcher started from the first one's disk cache against the third, which allows anonymous
// reads (no service tokens).
func TestATableOfAnotherLogAtTheSameVersionIsRefusedAtOnce(t *testing.T) {
	a := startServer(t, configTOML("", ""))
	b := startServer(t, configTOML("", "")) // another cluster: another command log
	c := startServer(t, fmt.Sprintf("[freeze]\nby_default = false\n[[operators]]\nname = \"alice\"\ntoken_sha256 = \"%s\"\nrole = \"operator\"\n", sha256Hex(operatorToken)))
	va, _ := a.dial(20)
	vb, _ := b.dial(20)
	vc, _ := c.dial(20)
	if va != vb || va != vc {
		t.Fatalf("the clusters are at v%d, v%d and v%d: the test needs one version", va, vb, vc)
	}
	logOf := func(s *server) string {
		t.Helper()
		id, _ := s.ok("GET", "/v1/routing", nil)["log_id"].(string)
		if id == "" {
			t.Fatal("GET /v1/routing names no log_id")
		}
		return id
	}
	logB, logC := logOf(b), logOf(c)
	id := ""
	for n := 0; id == ""; n++ {
		if FirstChoice(fmt.Sprintf("payments-%d", n), 2) == 0 {
			id = fmt.Sprintf("payments-%d", n)
		}
	}
	dir := t.TempDir()
	cache := dir + "/tidegate.json"
	opts := serviceOptions()
	opts.CachePath = cache
	r, err := Connect(a.URL+","+b.URL, Identity{SubscriberID: id, Zone: "az-a", Kind: "service"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Acknowledged: the failover resumes from va, b's current version too.
	if !waitUntil(10*time.Second, func() bool { return r.AckedVersion() == va }) || r.Status().Coordinator != a.URL {
		t.Fatalf("%v", r.Status())
	}
	logA := r.LogID()
	if logA == "" || logA == logB || logA == logC || logB == logC {
		t.Fatalf("log ids %q, %q and %q", logA, logB, logC)
	}
	refusedBy := func(router *Router, cachePath string, other *server, otherLog string) {
		t.Helper()
		s := router.Status()
		for _, want := range []string{
			fmt.Sprintf("refused the table at version %d of command log %s", va, otherLog),
			fmt.Sprintf("the held table is at version %d of another log (%s)", va, logA),
			"remove the disk cache " + cachePath,
		} {
			if !strings.Contains(s.Refused, want) || !strings.Contains(s.String(), want) {
				t.Fatalf("the refusal does not say %q: %+v", want, s)
			}
		}
		if router.Version() != va || router.LogID() != logA || s.Coordinator != other.URL || !s.Connected {
			t.Fatalf("v%d of %s: %+v", router.Version(), router.LogID(), s)
		}
	}

	a.kill()
	killed := time.Now()
	if !waitUntil(2*time.Second, func() bool { return r.Status().Refused != "" }) {
		t.Fatalf("not refused within 2 s of the failover to the other log's coordinator at the same version: %+v", r.Status())
	}
	failover := time.Since(killed)
	refusedBy(r, cache, b, logB)
	// Nothing counts as applied on b: not the resumed version, not an ack.
	time.Sleep(200 * time.Millisecond)
	if r.AckedVersion() != va {
		t.Fatalf("acked v%d", r.AckedVersion())
	}
	subs := b.ok("GET", "/v1/subscribers", nil)["subscribers"].([]any)
	if len(subs) != 1 || subs[0].(map[string]any)["subscriber_id"] != id || num(subs[0].(map[string]any)["applied_version"]) != 0 {
		t.Fatalf("b counts the client as having applied something: %v", subs)
	}

	// A plain watcher (no token) started from a's disk cache, against c.
	data, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	copied := dir + "/from-a.json"
	if err := os.WriteFile(copied, data, 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	plain, err := Connect(c.URL, Identity{SubscriberID: "edge-from-a"},
		Options{CachePath: copied, StallTimeout: 3 * time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Status().Origin != OriginDiskCache || plain.Version() != va || plain.LogID() != logA {
		t.Fatalf("%+v", plain.Status())
	}
	if !waitUntil(2*time.Second, func() bool { return plain.Status().Refused != "" }) {
		t.Fatalf("not refused within 2 s of starting from another log's cache at the coordinator's version: %+v", plain.Status())
	}
	fromCache := time.Since(started)
	refusedBy(plain, copied, c, logC)
	if plain.Status().Origin != OriginDiskCache {
		t.Fatalf("%+v", plain.Status())
	}
	if now, _ := os.ReadFile(copied); string(now) != string(data) {
		t.Fatal("the cache was overwritten with the other log's table")
	}
	t.Logf("FIGURE other_log_same_version v%d refused: failover_after=%v cache_start_after=%v",
		va, failover.Round(time.Millisecond), fromCache.Round(time.Millisecond))
}

// The Go client's write check of a service's writes agrees with the edge's
// GET /v1/write-check?service= on the real binary (three zones, a 20 % release channel of
// `orders` to az-c): 300 users x {orders, billing} x every zone, answer and owner.
func TestServiceWriteChecksAgreeWithTheEdge(t *testing.T) {
	config := configTOML("", "[edge]\ntoken = \""+serviceToken+"\"\n[zones.az-c]\nlane = \"red\"\n")
	s := startServer(t, config)
	s.ok("PUT", "/v1/units", map[string]any{"moves": []map[string]any{{"units": "60-89", "zone": "az-c"}},
		"expected_version": s.version(), "reason": "go client"})
	s.ok("PUT", "/v1/channels/orders-v2", map[string]any{"services": []string{"orders"}, "zone": "az-c", "percent": 20,
		"expected_version": s.version(), "reason": "go client"})
	want := s.version()
	edge := startEdge(t, s.config, s.URL)
	r, err := Connect(s.URL, Identity{SubscriberID: "go-write-for", Zone: "az-a", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(want, 10*time.Second) {
		t.Fatalf("no table v%d: %v", want, r.Status())
	}
	if !waitUntil(10*time.Second, func() bool {
		status, _ := edge.call("GET", fmt.Sprintf("/v1/write-check?user_id=user-0&zone=az-a&version=%d", want), nil)
		return status != 503
	}) {
		t.Fatalf("the edge never reached v%d: %s", want, edge.stderrText())
	}
	counts := map[string]int{}
	for i := 0; i < 300; i++ {
		user := fmt.Sprintf("user-%d", i)
		for _, service := range []string{"orders", "billing"} {
			tag, _ := r.TagForService(user, service)
			for _, zone := range []string{"az-a", "az-b", "az-c"} {
				ours, err := r.CheckWriteFor("", service, user, zone, want)
				if err != nil {
					t.Fatalf("%s %s %s: %v", user, service, zone, err)
				}
				status, body := edge.call("GET", fmt.Sprintf("/v1/write-check?user_id=%s&zone=%s&service=%s&version=%d", user, zone, service, want), nil)
				theirs, _ := body["answer"].(string)
				owner, _ := body["owner_zone"].(string)
				if theirs == "" {
					theirs, _ = body["error"].(string)
				}
				if ours.Status() == 0 && status != 200 || ours.Status() != 0 && status != ours.Status() || theirs != ours.Check {
					t.Fatalf("%s %s in %s: ours %+v, the edge's HTTP %d %v", user, service, zone, ours, status, body)
				}
				if ours.Check == Misrouted && (owner != ours.OwnerZone || owner != tag.Zone) {
					t.Fatalf("%s %s in %s: owner ours %s (tag %s), the edge's %s", user, service, zone, ours.OwnerZone, tag.Zone, owner)
				}
				counts[service+"/"+tag.Reason+"/"+ours.Check]++
			}
		}
	}
	if counts["orders/channel:orders-v2/owned"] == 0 || counts["orders/channel:orders-v2/misrouted"] == 0 || counts["billing/unit/owned"] == 0 {
		t.Fatalf("not every answer was exercised: %v", counts)
	}
	t.Logf("FIGURE service_write_checks_vs_edge %v", counts)
}
