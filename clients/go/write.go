package tidegate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of tag propagation and of the write contract.
const (
	ColorHeader     = "x-tidegate-color"
	VersionHeader   = "x-tidegate-version"
	HopHeader       = "x-tidegate-hop"
	SignatureHeader = "x-tidegate-signature"
)

// WriteRetryAfter is how long a write refused as frozen, behind or unconfirmed waits before it
// retries (WRITE_RETRY_AFTER_MS).
const WriteRetryAfter = 250 * time.Millisecond

// The four answers of the write check, in the order they are checked, and Unconfirmed.
const (
	Behind    = "behind"
	Frozen    = "frozen"
	Misrouted = "misrouted"
	Owned     = "owned"
	// Unconfirmed is a Router's answer only, in place of Owned: the watch stream announced a
	// lease and no coordinator has confirmed the local table within it, so this zone may have
	// been cut off while another took the user over (see Router.CheckWrite). A table alone
	// never answers it.
	Unconfirmed = "unconfirmed"
)

// WriteAnswer is the answer of a write check, with what a response needs.
type WriteAnswer struct {
	// Check is Behind, Frozen, Misrouted, Owned or (from a Router) Unconfirmed.
	Check string
	// Version is the version of the local table that judged; Incoming the caller's (0: none).
	Version  uint64
	Incoming uint64
	// Unit is the user's unit; for Frozen, the frozen unit.
	Unit uint32
	// OwnerZone and OwnerLane name the user's owner for Misrouted and Frozen (and the local
	// zone for Owned); empty for Behind, where the local table cannot judge.
	OwnerZone string
	OwnerLane string
}

// IsOwned reports whether the write may go ahead here.
func (a WriteAnswer) IsOwned() bool { return a.Check == Owned }

// RetryAfter is how long a behind, frozen or unconfirmed write should wait (0 for the others).
func (a WriteAnswer) RetryAfter() time.Duration {
	if a.Check == Behind || a.Check == Frozen || a.Check == Unconfirmed {
		return WriteRetryAfter
	}
	return 0
}

// Status is the HTTP status a service answers when it does not write: 421 for misrouted, 503
// for behind, frozen and unconfirmed, 0 for owned.
func (a WriteAnswer) Status() int {
	switch a.Check {
	case Misrouted:
		return 421
	case Behind, Frozen, Unconfirmed:
		return 503
	}
	return 0
}

// CheckWrite is the ownership check of a write of user by a service in localZone (a zone
// name or lane) in the default domain, which the caller routed there at incoming (the
// propagated x-tidegate-version; 0 when there is none). In order: a caller newer than the
// table is Behind; a frozen unit is Frozen (for every user of it, pinned or not); another
// owner is Misrouted; else Owned. The same function as tidegate-core's RoutingTable::check_write.
func (t *Table) CheckWrite(user, localZone string, incoming uint64) (WriteAnswer, error) {
	return t.CheckWriteIn("", user, localZone, incoming)
}

// CheckWriteIn is CheckWrite in a routing domain ("" or "default": the default domain).
func (t *Table) CheckWriteIn(domain, user, localZone string, incoming uint64) (WriteAnswer, error) {
	local, ok := t.ResolveZone(localZone)
	if !ok {
		return WriteAnswer{}, fmt.Errorf("the local zone `%s` is not a zone or lane of this table", localZone)
	}
	tag, err := t.TagIn(domain, user)
	if err != nil {
		return WriteAnswer{}, err
	}
	answer := WriteAnswer{Version: t.Version, Incoming: incoming, Unit: tag.Unit}
	if incoming > t.Version {
		answer.Check = Behind
		return answer, nil
	}
	d := domain
	if d == "" {
		d = DefaultDomain
	}
	answer.OwnerZone, answer.OwnerLane = tag.Zone, tag.Lane
	if set, frozen := t.frozen[d]; frozen && set.Contains(tag.Unit) {
		answer.Check = Frozen
		return answer, nil
	}
	if tag.ZoneIndex != local {
		answer.Check = Misrouted
		return answer, nil
	}
	answer.Check = Owned
	return answer, nil
}

// CheckWriteFor is CheckWriteIn of a write by service ("": as CheckWriteIn): a release channel
// of that service that selects the user owns their writes of it, as it routes their calls (pin >
// channel > map). One freeze rule: a freeze covers every write of the users it names, whichever
// rule routes them (pin, channel or map): a map move's frozen units and the freeze of a channel
// change in progress (ChannelFreeze) make those writes Frozen, after Behind. A channel suspended with the `reject` fallback is an error wrapping
// ErrChannelUnavailable: its users' writes have no owner. The same function as tidegate-core's
// RoutingTable::check_write_for and the edge's GET /v1/write-check?service=.
func (t *Table) CheckWriteFor(domain, service, user, localZone string, incoming uint64) (WriteAnswer, error) {
	if service == "" {
		return t.CheckWriteIn(domain, user, localZone, incoming)
	}
	local, ok := t.ResolveZone(localZone)
	if !ok {
		return WriteAnswer{}, fmt.Errorf("the local zone `%s` is not a zone or lane of this table", localZone)
	}
	tag, err := t.TagForServiceIn(domain, user, service)
	if err != nil {
		return WriteAnswer{}, err
	}
	byChannel := strings.HasPrefix(tag.Reason, "channel:")
	frozen := t.channelFreeze.covers(domain, service, user, tag.Unit) || t.unitFrozen(domain, tag.Unit)
	if !byChannel && !frozen {
		return t.CheckWriteIn(domain, user, localZone, incoming)
	}
	answer := WriteAnswer{Version: t.Version, Incoming: incoming, Unit: tag.Unit}
	if incoming > t.Version {
		answer.Check = Behind
		return answer, nil
	}
	answer.OwnerZone, answer.OwnerLane = tag.Zone, tag.Lane
	if frozen {
		answer.Check = Frozen
		return answer, nil
	}
	if tag.ZoneIndex != local {
		answer.Check = Misrouted
		return answer, nil
	}
	answer.Check = Owned
	return answer, nil
}

// ReadOnly is an answer of the global write check only (CheckGlobalWrite): an operator made
// global data read-only, so no zone may write it.
const ReadOnly = "read_only"

// GlobalWriteAnswer is the answer of a global write check (a write of global data, no user).
type GlobalWriteAnswer struct {
	// Check is Behind, Frozen, ReadOnly, Misrouted, Owned or (from a Router) Unconfirmed.
	Check string
	// Version is the version of the local table that judged; Incoming the caller's (0: none).
	Version  uint64
	Incoming uint64
	// OwnerZone and OwnerLane name the global writer for Frozen, ReadOnly, Misrouted and Owned;
	// empty for Behind, where the local table cannot judge, and where there is no global writer.
	OwnerZone string
	OwnerLane string
}

// IsOwned reports whether the global write may go ahead here.
func (a GlobalWriteAnswer) IsOwned() bool { return a.Check == Owned }

// RetryAfter is how long a behind, frozen or unconfirmed global write should wait (0 for the
// others: read-only lasts until an operator lifts it).
func (a GlobalWriteAnswer) RetryAfter() time.Duration {
	if a.Check == Behind || a.Check == Frozen || a.Check == Unconfirmed {
		return WriteRetryAfter
	}
	return 0
}

// Status is the HTTP status a service answers when it does not write: 421 for misrouted, 503
// for behind, frozen, read-only and unconfirmed, 0 for owned.
func (a GlobalWriteAnswer) Status() int {
	switch a.Check {
	case Misrouted:
		return 421
	case Behind, Frozen, ReadOnly, Unconfirmed:
		return 503
	}
	return 0
}

// CheckGlobalWrite is the check of a write of global data (no user) by a service in localZone
// (a zone name or lane), which the caller routed there at incoming (the propagated
// x-tidegate-version; 0 when there is none). In order: a caller newer than the table is Behind;
// a global-writer move in progress (`global_writer.frozen`) is Frozen; global data made
// read-only is ReadOnly; another zone as the global writer, or none, is Misrouted; else Owned.
// The same rule as tidegate-core's RoutingTable::check_global_write
// (tests/fixtures/global_write_checks.json).
func (t *Table) CheckGlobalWrite(localZone string, incoming uint64) (GlobalWriteAnswer, error) {
	local, ok := t.ResolveZone(localZone)
	if !ok {
		return GlobalWriteAnswer{}, fmt.Errorf("the local zone `%s` is not a zone or lane of this table", localZone)
	}
	answer := GlobalWriteAnswer{Version: t.Version, Incoming: incoming}
	if incoming > t.Version {
		answer.Check = Behind
		return answer, nil
	}
	if w := t.Global.Zone; w >= 0 && w < len(t.Zones) {
		answer.OwnerZone, answer.OwnerLane = t.Zones[w].Name, t.Zones[w].Lane
	}
	switch {
	case t.Global.Frozen:
		answer.Check = Frozen
	case t.Global.ReadOnly:
		answer.Check = ReadOnly
	case t.Global.Zone != local:
		answer.Check = Misrouted
	default:
		answer.Check = Owned
	}
	return answer, nil
}

// Route actions of a write (WriteRoute.Action).
const (
	RouteWrite   = "write"
	RouteForward = "forward"
	RouteRefuse  = "refuse"
)

// WriteRoute is what a write handler does with a request.
type WriteRoute struct {
	// Action is RouteWrite, RouteForward or RouteRefuse.
	Action string
	// For RouteForward: the owner, and the headers to add (the hop, the owner's colour, the
	// deciding version).
	Zone    string
	Lane    string
	Headers map[string]string
	// For RouteRefuse: 421 or 503, how long to wait (503) and why.
	Status     int
	RetryAfter time.Duration
	Detail     string
}

// ForwardOnce turns an answer and the request's x-tidegate-hop header into a route:
// a misrouted write without a hop is forwarded to the owner with x-tidegate-hop: 1; a
// misrouted write that already took its hop is refused with 421, so two stale services never
// bounce a write between them; behind, frozen and unconfirmed are 503 with a retry.
func ForwardOnce(a WriteAnswer, hop string) WriteRoute {
	hop = strings.TrimSpace(hop)
	hopped := hop != "" && hop != "0"
	switch a.Check {
	case Owned:
		return WriteRoute{Action: RouteWrite}
	case Misrouted:
		if !hopped {
			return WriteRoute{Action: RouteForward, Zone: a.OwnerZone, Lane: a.OwnerLane, Headers: map[string]string{
				HopHeader:     "1",
				ColorHeader:   a.OwnerLane,
				VersionHeader: strconv.FormatUint(a.Version, 10),
			}}
		}
		return WriteRoute{Action: RouteRefuse, Status: 421, Detail: fmt.Sprintf(
			"the user belongs to %s (%s) at routing version %d, and the write was already forwarded once",
			a.OwnerZone, a.OwnerLane, a.Version)}
	case Behind:
		return WriteRoute{Action: RouteRefuse, Status: 503, RetryAfter: a.RetryAfter(), Detail: fmt.Sprintf(
			"the caller routed at version %d, this service's table is at %d; retry once it catches up",
			a.Incoming, a.Version)}
	case Unconfirmed:
		return WriteRoute{Action: RouteRefuse, Status: 503, RetryAfter: a.RetryAfter(), Detail: fmt.Sprintf(
			"no coordinator has confirmed this service's routing table (version %d) within its lease; retry shortly", a.Version)}
	default: // Frozen
		return WriteRoute{Action: RouteRefuse, Status: 503, RetryAfter: a.RetryAfter(), Detail: fmt.Sprintf(
			"unit %d is frozen by a move in progress; retry shortly", a.Unit)}
	}
}

// unitFrozen says whether a map move (or a pin change) froze unit in domain ("": the default).
func (t *Table) unitFrozen(domain string, unit uint32) bool {
	if domain == "" {
		domain = DefaultDomain
	}
	set, ok := t.frozen[domain]
	return ok && set.Contains(unit)
}
