package tidegate

import (
	"context"
	"fmt"
	"testing"
	"time"

	of "github.com/open-feature/go-sdk/openfeature"
)

// The in-process provider, through the OpenFeature Go SDK, answers what POST /v1/tag answers
// for 10 000 users (pins and a release channel included), and the SDK sees its errors.
func TestTheOpenFeatureProviderAgreesWithTheServer(t *testing.T) {
	s := startServer(t, configTOML("", ""))
	s.ok("PUT", "/v1/pins/user-5", map[string]any{"color": "green", "expected_version": s.version(), "reason": "go of"})
	s.ok("PUT", "/v1/channels/orders-v2", map[string]any{"services": []string{"orders"}, "zone": "blue", "percent": 20,
		"expected_version": s.version(), "reason": "go of"})
	want := s.version()
	r, err := Connect(s.URL, Identity{SubscriberID: "go-openfeature", Zone: "az-a", Kind: "service"}, serviceOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.WaitForVersion(want, 10*time.Second) {
		t.Fatalf("%v", r.Status())
	}
	if err := of.SetNamedProviderAndWait("tidegate-go-test", NewProvider(r)); err != nil {
		t.Fatal(err)
	}
	client := of.NewClient("tidegate-go-test")
	ctx := context.Background()
	users := make([]string, 10000)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	reasons := map[of.Reason]int{}
	for _, service := range []string{"", "orders"} {
		extra := map[string]any{}
		if service != "" {
			extra["service"] = service
		}
		theirs, _ := serverTags(t, s, users, extra)
		for i, user := range users {
			attrs := map[string]any{}
			if service != "" {
				attrs["service"] = service
			}
			ec := of.NewEvaluationContext(user, attrs)
			color, err := client.StringValueDetails(ctx, ColorFlag, "none", ec)
			if err != nil || color.Value != theirs[i]["color"] || color.Variant != color.Value {
				t.Fatalf("%s/%s: %+v %v, server %v", service, user, color, err, theirs[i])
			}
			zone, _ := client.StringValue(ctx, ZoneFlag, "none", ec)
			if zone != theirs[i]["zone"] || color.FlagMetadata["zone"] != zone || color.FlagMetadata["version"] != int64(want) ||
				color.FlagMetadata["unit"] != int64(num(theirs[i]["unit"])) || color.FlagMetadata["pinned"] != theirs[i]["pinned"] {
				t.Fatalf("%s/%s: zone %s, %+v, server %v", service, user, zone, color.FlagMetadata, theirs[i])
			}
			wantReason := of.SplitReason
			if theirs[i]["pinned"] == true || (service != "" && theirs[i]["reason"] != "unit") {
				wantReason = of.TargetingMatchReason
			}
			if color.Reason != wantReason {
				t.Fatalf("%s/%s: reason %s, server %v", service, user, color.Reason, theirs[i])
			}
			reasons[color.Reason]++
		}
	}
	if reasons[of.SplitReason] == 0 || reasons[of.TargetingMatchReason] < 1000 {
		t.Fatalf("%v", reasons)
	}
	// Errors reach the SDK's details.
	missing, _ := client.StringValueDetails(ctx, "no-such-flag", "dflt", of.NewEvaluationContext("user-1", nil))
	bad, _ := client.StringValueDetails(ctx, ColorFlag, "dflt", of.NewEvaluationContext("a\nb", nil))
	wrongType, _ := client.BooleanValueDetails(ctx, ColorFlag, false, of.NewEvaluationContext("user-1", nil))
	if missing.ErrorCode != of.FlagNotFoundCode || missing.Value != "dflt" || bad.ErrorCode != of.InvalidContextCode ||
		wrongType.ErrorCode != of.TypeMismatchCode {
		t.Fatalf("%+v / %+v / %+v", missing, bad, wrongType)
	}
	untagged, _ := client.StringValueDetails(ctx, ColorFlag, "dflt", of.NewEvaluationContext("", nil))
	if untagged.Reason != of.DefaultReason || (untagged.Value != "blue" && untagged.Value != "green") {
		t.Fatalf("%+v", untagged)
	}
	rejecting := Fixed(r.Table())
	rejecting.fallback = FallbackReject
	if err := of.SetNamedProviderAndWait("tidegate-go-reject", NewProvider(rejecting)); err != nil {
		t.Fatal(err)
	}
	noKey, _ := of.NewClient("tidegate-go-reject").StringValueDetails(ctx, ColorFlag, "dflt", of.NewEvaluationContext("", nil))
	if noKey.ErrorCode != of.TargetingKeyMissingCode {
		t.Fatalf("%+v", noKey)
	}
	t.Logf("FIGURE openfeature evaluations=%d split=%d targeting_match=%d", 2*len(users), reasons[of.SplitReason], reasons[of.TargetingMatchReason])
}
