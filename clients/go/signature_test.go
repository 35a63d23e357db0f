package tidegate

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Signatures computed independently with Python's hmac over the documented message.
func TestTagSignaturesMatchIndependentVectors(t *testing.T) {
	k7, _ := NewTagKey([]byte(strings.Repeat("\x07", 32)))
	if got := k7.Sign("green", 12, "user-42"); got != "840fec3d8b284aa1a80e0072e8003e10" {
		t.Fatal(got)
	}
	seq := make([]byte, 32)
	for i := range seq {
		seq[i] = byte(i)
	}
	kseq, _ := NewTagKey(seq)
	if got := kseq.Sign("red", 3, "ユーザー"); got != "656f8d0a0863520fefbc029873ea254a" {
		t.Fatal(got)
	}
	sig := k7.Sign("green", 12, "user-42")
	if !k7.Verify("green", 12, "user-42", strings.ToUpper(sig)) || k7.Verify("blue", 12, "user-42", sig) ||
		k7.Verify("green", 13, "user-42", sig) || k7.Verify("green", 12, "user-43", sig) || kseq.Verify("green", 12, "user-42", sig) {
		t.Fatal("a signature binds key, lane, version and user")
	}
	// A tag decided for a service or in a named domain binds them (the Rust unit test's vectors).
	for _, v := range []struct{ lane, domain, service, want string }{
		{"green", "default", "", "840fec3d8b284aa1a80e0072e8003e10"},
		{"green", "", "orders", "e8c33cc0294eb31db674b9c95a0f4ba9"},
		{"red", "search", "", "1c6d2a3c053a213f185eb29fa50fb41c"},
		{"red", "search", "ranker", "30fe25b802e3c1ea92c6c2527bbe1d55"},
	} {
		if got := k7.SignFor(v.lane, 12, "user-42", v.domain, v.service); got != v.want {
			t.Fatalf("%+v: %s", v, got)
		}
	}
	orders := k7.SignFor("green", 12, "user-42", "", "orders")
	if !k7.VerifyFor("green", 12, "user-42", "", "orders", orders) || k7.Verify("green", 12, "user-42", orders) ||
		k7.VerifyFor("green", 12, "user-42", "", "billing", orders) || k7.VerifyFor("green", 12, "user-42", "search", "orders", orders) {
		t.Fatal("a signature for a service binds the service and the domain")
	}
	if got := kseq.SignFor("red", 3, "ユーザー", "", "billing"); got != "62fb52f77e8267272ba37927d3e493d9" {
		t.Fatal(got)
	}
	if _, err := NewTagKey([]byte("short")); err == nil || !strings.Contains(err.Error(), "got 5") {
		t.Fatal(err)
	}
}

// The real edge's gate signs tags; the Go client verifies them and trusts only signed ones.
func TestTheEdgesSignedTagsAreTrustedAndForgedOnesRecomputed(t *testing.T) {
	keyHex := strings.Repeat("3c", 32)
	config := configTOML("", "[edge]\ntag_key = \""+keyHex+"\"\ntoken = \""+serviceToken+"\"\n")
	s := startServer(t, config)
	edge := startEdge(t, s.config, s.URL)
	secret, _ := hex.DecodeString(keyHex)
	key, err := NewTagKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Connect(s.URL, Identity{SubscriberID: "go-signed", Zone: "az-a", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(1, 10*time.Second) {
		t.Fatalf("%v", r.Status())
	}
	gate := func(user string) http.Header {
		var header http.Header
		if !waitUntil(10*time.Second, func() bool {
			req, _ := http.NewRequest("GET", edge.URL+"/v1/gate", nil)
			req.Header.Set("x-user-id", user)
			req.Header.Set("x-tidegate-token", serviceToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			header = resp.Header
			return resp.StatusCode == 200 && header.Get(SignatureHeader) != ""
		}) {
			t.Fatalf("the edge's gate did not sign: %v %s", header, edge.stderrText())
		}
		return header
	}
	signedUsers := 0
	for i := 0; i < 50; i++ {
		user := "user-" + strconv.Itoa(i)
		h := gate(user)
		version, _ := strconv.ParseUint(h.Get(VersionHeader), 10, 64)
		if !key.Verify(h.Get(ColorHeader), version, user, h.Get(SignatureHeader)) {
			t.Fatalf("%s: the edge's signature does not verify: %v", user, h)
		}
		got, err := r.ResolveSigned(h, user, key)
		tag, _ := r.Tag(user)
		if err != nil || got.Source != SourcePropagated || got.Lane != h.Get(ColorHeader) || got.Lane != tag.Lane {
			t.Fatalf("%s: %+v %v", user, got, err)
		}
		forged := h.Clone()
		other := "blue"
		if tag.Lane == "blue" {
			other = "green"
		}
		forged.Set(ColorHeader, other)
		if got, _ := r.ResolveSigned(forged, user, key); got.Source != SourceRecomputed || got.Lane != tag.Lane {
			t.Fatalf("%s: a forged lane was trusted: %+v", user, got)
		}
		if got, _ := r.ResolveSigned(h, "someone-else", key); got.Source != SourceRecomputed {
			t.Fatalf("another user's signed tag was trusted: %+v", got)
		}
		signedUsers++
	}
	// A tag the gate decided for a service is signed for it: a channel routes every `orders`
	// call of user-0 to the other lane; that tag is trusted for `orders` only, and replayed to
	// `billing` or the global rule it is recomputed onto the map's lane.
	mapTag, _ := r.Tag("user-0")
	other := map[string]string{"blue": "green", "green": "blue"}[mapTag.Lane]
	s.ok("PUT", "/v1/channels/orders-v2", map[string]any{"services": []string{"orders"}, "zone": other, "percent": 100,
		"expected_version": s.version(), "reason": "signed tags per service"})
	want := s.version()
	if !r.WaitForVersion(want, 10*time.Second) {
		t.Fatalf("%v", r.Status())
	}
	var h http.Header
	if !waitUntil(10*time.Second, func() bool {
		req, _ := http.NewRequest("GET", edge.URL+"/v1/gate", nil)
		req.Header.Set("x-user-id", "user-0")
		req.Header.Set("x-tidegate-service", "orders")
		req.Header.Set("x-tidegate-token", serviceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		h = resp.Header
		return resp.StatusCode == 200 && h.Get(VersionHeader) == strconv.FormatUint(want, 10)
	}) {
		t.Fatalf("the edge's gate never answered at v%d: %v", want, h)
	}
	if h.Get(ColorHeader) != other || key.Verify(other, want, "user-0", h.Get(SignatureHeader)) ||
		!key.VerifyFor(other, want, "user-0", "", "orders", h.Get(SignatureHeader)) {
		t.Fatalf("the gate's orders tag: %v", h)
	}
	if got, err := r.ResolveSignedFor(h, "user-0", "", "orders", key); err != nil || got.Source != SourcePropagated || got.Lane != other {
		t.Fatalf("orders: %+v %v", got, err)
	}
	if got, _ := r.ResolveSignedFor(h, "user-0", "", "billing", key); got.Source != SourceRecomputed || got.Lane != mapTag.Lane {
		t.Fatalf("an orders tag was trusted for billing: %+v", got)
	}
	if got, _ := r.ResolveSigned(h, "user-0", key); got.Source != SourceRecomputed || got.Lane != mapTag.Lane {
		t.Fatalf("an orders tag was trusted for the global rule: %+v", got)
	}
	t.Logf("FIGURE signed_tags edge_signatures_verified=%d", signedUsers)
}
