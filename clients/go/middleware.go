package tidegate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

// Sources of a resolved colour.
const (
	SourcePropagated = "propagated" // from the incoming headers (decided upstream)
	SourceRecomputed = "recomputed" // from the user ID with the local table
	SourceFallback   = "fallback"   // neither header nor user ID: the fallback
)

// Resolved is a request's colour and where it came from.
type Resolved struct {
	Lane    string
	Zone    string
	Version uint64 // 0: unknown
	Source  string
}

// Headers are the headers to forward to the next hop.
func (r Resolved) Headers() map[string]string {
	out := map[string]string{ColorHeader: r.Lane}
	if r.Version > 0 {
		out[VersionHeader] = strconv.FormatUint(r.Version, 10)
	}
	return out
}

// HeadersFor are the headers to forward for a tag.
func HeadersFor(t Tag) map[string]string {
	return map[string]string{ColorHeader: t.Lane, VersionHeader: strconv.FormatUint(t.Version, 10)}
}

// Resolve gives an incoming request's colour, as the Rust client's resolve: the propagated
// x-tidegate-color if it names a lane of the table (recomputed from the user ID instead when
// its x-tidegate-version is older than the local table), else the user ID with the local table,
// else the fallback. It trusts whoever set the header: use it behind a gateway that overwrites
// client-sent x-tidegate-* headers.
func (r *Router) Resolve(h http.Header, user string) (Resolved, error) {
	t, err := r.current()
	if err != nil {
		return Resolved{}, err
	}
	if lane := strings.TrimSpace(h.Get(ColorHeader)); lane != "" {
		if zone, ok := t.ZoneByLane(lane); ok {
			version, verr := strconv.ParseUint(strings.TrimSpace(h.Get(VersionHeader)), 10, 64)
			stale := verr == nil && version < t.Version
			if !(stale && user != "") {
				if verr != nil {
					version = 0
				}
				return Resolved{Lane: lane, Zone: t.Zones[zone].Name, Version: version, Source: SourcePropagated}, nil
			}
		}
	}
	if user != "" {
		tag, err := t.Tag(user)
		if err != nil {
			return Resolved{}, err
		}
		return Resolved{Lane: tag.Lane, Zone: tag.Zone, Version: tag.Version, Source: SourceRecomputed}, nil
	}
	zone, err := r.Untagged()
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{Lane: t.Zones[zone].Lane, Zone: t.Zones[zone].Name, Version: t.Version, Source: SourceFallback}, nil
}

type ctxKey int

const (
	resolvedKey ctxKey = iota
	answerKey
)

// ResolvedFrom gives the colour the Middleware resolved for a request.
func ResolvedFrom(ctx context.Context) (Resolved, bool) {
	v, ok := ctx.Value(resolvedKey).(Resolved)
	return v, ok
}

// WriteAnswerFrom gives the write check's answer the Middleware let through (Owned).
func WriteAnswerFrom(ctx context.Context) (WriteAnswer, bool) {
	v, ok := ctx.Value(answerKey).(WriteAnswer)
	return v, ok
}

// Middleware is net/http middleware over a Router. Reads (GET, HEAD, OPTIONS) are tagged: the
// request's colour is resolved (Resolve) and set on the request's x-tidegate-color and
// x-tidegate-version headers, so a handler forwarding the request's headers propagates it, and
// in its context (ResolvedFrom). Writes (every other method), when LocalZone is set, are
// checked: the write check runs inside a write scope held until the handler returns; owned
// writes reach the handler, misrouted ones are forwarded once to Forward(owner zone) (or
// refused with 421 without it), behind, frozen and unconfirmed ones (a lease run out: see
// Router.CheckWrite) get 503 with Retry-After and the answer's name as the body's `error`.
type Middleware struct {
	Router *Router
	// UserID finds a request's user ID ("" when it has none); by default the x-user-id header,
	// then the user_id query parameter.
	UserID func(*http.Request) string
	// LocalZone is this service's zone (name or lane); "" tags writes like reads.
	LocalZone string
	// Forward gives the base URL of a zone's instance of this service, for forwarding a
	// misrouted write once; nil refuses misrouted writes with 421.
	Forward func(zone string) *url.URL
}

// DefaultUserID reads x-user-id, then the user_id query parameter.
func DefaultUserID(r *http.Request) string {
	if u := r.Header.Get("x-user-id"); u != "" {
		return u
	}
	return r.URL.Query().Get("user_id")
}

func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// Handler wraps next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	userID := m.UserID
	if userID == nil {
		userID = DefaultUserID
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user := userID(req)
		if m.LocalZone == "" || isRead(req.Method) {
			resolved, err := m.Router.Resolve(req.Header, user)
			if err != nil {
				refuse(w, http.StatusBadRequest, 0, "untagged", err.Error(), nil)
				return
			}
			for k, v := range resolved.Headers() {
				req.Header.Set(k, v)
			}
			next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), resolvedKey, resolved)))
			return
		}
		if user == "" {
			refuse(w, http.StatusBadRequest, 0, "missing_user_id", "a write needs a user ID: writes never land in a zone drawn at random", nil)
			return
		}
		incoming, _ := strconv.ParseUint(strings.TrimSpace(req.Header.Get(VersionHeader)), 10, 64)
		scope := m.Router.WriteScope()
		defer scope.End()
		answer, err := m.Router.CheckWrite(user, m.LocalZone, incoming)
		if err != nil {
			refuse(w, http.StatusBadRequest, 0, "invalid_user_id", err.Error(), nil)
			return
		}
		route := ForwardOnce(answer, req.Header.Get(HopHeader))
		if route.Action != RouteWrite {
			scope.End() // no write here: do not hold acknowledgements while forwarding
		}
		switch route.Action {
		case RouteWrite:
			next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), answerKey, answer)))
		case RouteForward:
			var target *url.URL
			if m.Forward != nil {
				target = m.Forward(route.Zone)
			}
			if target == nil {
				refuse(w, 421, 0, Misrouted, fmt.Sprintf("the user belongs to %s (%s) at routing version %d", answer.OwnerZone, answer.OwnerLane, answer.Version),
					map[string]any{"owner_zone": answer.OwnerZone, "owner_lane": answer.OwnerLane, "version": answer.Version})
				return
			}
			proxy := httputil.NewSingleHostReverseProxy(target)
			for k, v := range route.Headers {
				req.Header.Set(k, v)
			}
			proxy.ServeHTTP(w, req)
		default:
			extra := map[string]any{"version": answer.Version}
			if answer.OwnerZone != "" {
				extra["owner_zone"], extra["owner_lane"] = answer.OwnerZone, answer.OwnerLane
			}
			refuse(w, route.Status, route.RetryAfter.Milliseconds(), answer.Check, route.Detail, extra)
		}
	})
}

func refuse(w http.ResponseWriter, status int, retryAfterMs int64, code, detail string, extra map[string]any) {
	body := map[string]any{"error": code, "detail": detail}
	for k, v := range extra {
		body[k] = v
	}
	if retryAfterMs > 0 {
		body["retry_after_ms"] = retryAfterMs
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(float64(retryAfterMs)/1000)), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
