package tidegate

import (
	"context"
	"errors"
	"fmt"

	of "github.com/open-feature/go-sdk/openfeature"
)

// Flag keys the Provider answers.
const (
	// ColorFlag is the user's lane (`blue`, `green`, ...), as the coordinator's and the
	// edge's OFREP flag `tidegate-color`.
	ColorFlag = "tidegate-color"
	// ZoneFlag is the user's zone name (`az-a`).
	ZoneFlag = "tidegate-zone"
)

// Provider is an OpenFeature in-process provider over a Router: it resolves the flags
// `tidegate-color` (the lane) and `tidegate-zone` (the zone) for the context's targeting key
// (the user ID) from the local table, with no network call. The context may name a `service`
// (its release channel may decide) and a `domain`. Reasons are OFREP's: SPLIT (the unit
// decided), TARGETING_MATCH (a pin or a release channel), DEFAULT (no targeting key, the
// random fallback). Metadata carries version, zone, lane, unit, pinned and rule.
type Provider struct {
	Router *Router
}

// NewProvider is a Provider over router.
func NewProvider(router *Router) *Provider { return &Provider{Router: router} }

var _ of.FeatureProvider = (*Provider)(nil)

// Metadata names the provider.
func (p *Provider) Metadata() of.Metadata { return of.Metadata{Name: "tidegate-in-process"} }

// Hooks are none.
func (p *Provider) Hooks() []of.Hook { return nil }

// StringEvaluation resolves tidegate-color and tidegate-zone.
func (p *Provider) StringEvaluation(_ context.Context, flag string, defaultValue string, flat of.FlattenedContext) of.StringResolutionDetail {
	value, detail := p.resolve(flag, flat)
	if detail.ResolutionError != (of.ResolutionError{}) {
		return of.StringResolutionDetail{Value: defaultValue, ProviderResolutionDetail: detail}
	}
	return of.StringResolutionDetail{Value: value, ProviderResolutionDetail: detail}
}

// ObjectEvaluation answers the same as StringEvaluation, the value as a string.
func (p *Provider) ObjectEvaluation(_ context.Context, flag string, defaultValue any, flat of.FlattenedContext) of.InterfaceResolutionDetail {
	value, detail := p.resolve(flag, flat)
	if detail.ResolutionError != (of.ResolutionError{}) {
		return of.InterfaceResolutionDetail{Value: defaultValue, ProviderResolutionDetail: detail}
	}
	return of.InterfaceResolutionDetail{Value: value, ProviderResolutionDetail: detail}
}

func (p *Provider) mismatch(flag string) of.ProviderResolutionDetail {
	if flag != ColorFlag && flag != ZoneFlag {
		return of.ProviderResolutionDetail{Reason: of.ErrorReason,
			ResolutionError: of.NewFlagNotFoundResolutionError(fmt.Sprintf("flag `%s` is not a tidegate flag", flag))}
	}
	return of.ProviderResolutionDetail{Reason: of.ErrorReason,
		ResolutionError: of.NewTypeMismatchResolutionError(fmt.Sprintf("flag `%s` is a string", flag))}
}

// BooleanEvaluation: tidegate flags are strings.
func (p *Provider) BooleanEvaluation(_ context.Context, flag string, d bool, _ of.FlattenedContext) of.BoolResolutionDetail {
	return of.BoolResolutionDetail{Value: d, ProviderResolutionDetail: p.mismatch(flag)}
}

// FloatEvaluation: tidegate flags are strings.
func (p *Provider) FloatEvaluation(_ context.Context, flag string, d float64, _ of.FlattenedContext) of.FloatResolutionDetail {
	return of.FloatResolutionDetail{Value: d, ProviderResolutionDetail: p.mismatch(flag)}
}

// IntEvaluation: tidegate flags are strings.
func (p *Provider) IntEvaluation(_ context.Context, flag string, d int64, _ of.FlattenedContext) of.IntResolutionDetail {
	return of.IntResolutionDetail{Value: d, ProviderResolutionDetail: p.mismatch(flag)}
}

func (p *Provider) resolve(flag string, flat of.FlattenedContext) (string, of.ProviderResolutionDetail) {
	fail := func(e of.ResolutionError) (string, of.ProviderResolutionDetail) {
		return "", of.ProviderResolutionDetail{Reason: of.ErrorReason, ResolutionError: e}
	}
	if flag != ColorFlag && flag != ZoneFlag {
		return fail(of.NewFlagNotFoundResolutionError(fmt.Sprintf("flag `%s` is not a tidegate flag", flag)))
	}
	pick := func(lane, zone string) string {
		if flag == ZoneFlag {
			return zone
		}
		return lane
	}
	str := func(key string) string { s, _ := flat[key].(string); return s }
	user := str(of.TargetingKey)
	if user == "" {
		zone, err := p.Router.Untagged()
		if errors.Is(err, ErrUntagged) {
			return fail(of.NewTargetingKeyMissingResolutionError("no targeting key and the fallback is `reject`"))
		}
		if err != nil {
			return fail(of.NewGeneralResolutionError(err.Error()))
		}
		t := p.Router.Table()
		z := t.Zones[zone]
		return pick(z.Lane, z.Name), of.ProviderResolutionDetail{Reason: of.DefaultReason, Variant: z.Lane,
			FlagMetadata: of.FlagMetadata{"version": int64(t.Version), "zone": z.Name, "lane": z.Lane}}
	}
	tag, err := p.Router.TagForServiceIn(str("domain"), user, str("service"))
	switch {
	case errors.Is(err, ErrNoTable):
		return fail(of.NewGeneralResolutionError(err.Error()))
	case err != nil:
		return fail(of.NewInvalidContextResolutionError(err.Error()))
	}
	reason := of.SplitReason
	if tag.Reason != "unit" {
		reason = of.TargetingMatchReason
	}
	return pick(tag.Lane, tag.Zone), of.ProviderResolutionDetail{Reason: reason, Variant: tag.Lane,
		FlagMetadata: of.FlagMetadata{"version": int64(tag.Version), "zone": tag.Zone, "lane": tag.Lane,
			"unit": int64(tag.Unit), "pinned": tag.Pinned, "rule": tag.Reason}}
}
