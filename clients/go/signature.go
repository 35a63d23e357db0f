package tidegate

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// TagKey is the shared secret of signed tags (`[edge] tag_key`): the edge's gateway check
// signs the tag it decided in x-tidegate-signature, so a service can tell a tag its gateway
// set from one a client sent.
type TagKey struct{ secret []byte }

// NewTagKey makes a key of at least 32 bytes (64 hex digits from `openssl rand -hex 32`,
// decoded).
func NewTagKey(secret []byte) (*TagKey, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("a tag key needs at least 32 bytes (64 hex digits from `openssl rand -hex 32`), got %d", len(secret))
	}
	return &TagKey{secret: append([]byte(nil), secret...)}, nil
}

// Sign is the signature of lane at version for user: HMAC-SHA256 over
// "tidegate tag v1\n<lane>\n<version>\n<user>", truncated to 128 bits, 32 lowercase hex digits.
func (k *TagKey) Sign(lane string, version uint64, user string) string {
	return k.SignFor(lane, version, user, "", "")
}

// SignFor is the signature of a tag decided in domain ("" or "default": the default domain)
// for a call of service ("": the global rule): Sign's v1 message without either, else
// "tidegate tag v2\n<lane>\n<version>\n<user>\n<domain>\n<service>" (domain `default` for
// the default one, service empty for none), so the tag is trusted only for that domain and
// service. The same function as the Rust TagKey::sign_for.
func (k *TagKey) SignFor(lane string, version uint64, user, domain, service string) string {
	if domain == DefaultDomain {
		domain = ""
	}
	mac := hmac.New(sha256.New, k.secret)
	if domain == "" && service == "" {
		fmt.Fprintf(mac, "tidegate tag v1\n%s\n%d\n%s", lane, version, user)
	} else {
		if domain == "" {
			domain = DefaultDomain
		}
		fmt.Fprintf(mac, "tidegate tag v2\n%s\n%d\n%s\n%s\n%s", lane, version, user, domain, service)
	}
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// Verify reports, in constant time, whether signature is this key's signature of the tag.
func (k *TagKey) Verify(lane string, version uint64, user, signature string) bool {
	return k.VerifyFor(lane, version, user, "", "", signature)
}

// VerifyFor is Verify of a tag decided in domain for a call of service (see SignFor).
func (k *TagKey) VerifyFor(lane string, version uint64, user, domain, service, signature string) bool {
	expected := k.SignFor(lane, version, user, domain, service)
	given := strings.ToLower(strings.TrimSpace(signature))
	return len(given) == len(expected) && subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1
}

// ResolveSigned is Resolve for a service that shares the edges' tag key: a propagated tag
// counts only when its x-tidegate-signature is the key's signature of that lane and version
// for user; anything else is recomputed from the user ID with the local table.
func (r *Router) ResolveSigned(h http.Header, user string, key *TagKey) (Resolved, error) {
	return r.ResolveSignedFor(h, user, "", "", key)
}

// ResolveSignedFor is ResolveSigned for a call of service in domain ("": the global rule, the
// default domain): a propagated tag counts only when the gate signed it for that domain and
// service (SignFor), so a tag decided for another service, whose release channel may route the
// user elsewhere, is not carried over; anything else is recomputed as service's call in domain.
func (r *Router) ResolveSignedFor(h http.Header, user, domain, service string, key *TagKey) (Resolved, error) {
	t, err := r.current()
	if err != nil {
		return Resolved{}, err
	}
	lane := strings.TrimSpace(h.Get(ColorHeader))
	version, verr := strconv.ParseUint(strings.TrimSpace(h.Get(VersionHeader)), 10, 64)
	if zone, ok := t.ZoneByLane(lane); ok && verr == nil && h.Get(SignatureHeader) != "" &&
		key.VerifyFor(lane, version, user, domain, service, h.Get(SignatureHeader)) {
		return Resolved{Lane: lane, Zone: t.Zones[zone].Name, Version: version, Source: SourcePropagated}, nil
	}
	tag, err := t.TagForServiceIn(domain, user, service)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{Lane: tag.Lane, Zone: tag.Zone, Version: tag.Version, Source: SourceRecomputed}, nil
}
