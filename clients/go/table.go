// Package tidegate is the Go client of tidegate: a watched local copy of the routing table,
// local tagging with the published rule, the write check, header propagation, net/http
// middleware and an OpenFeature in-process provider.
//
// It implements the wire contract of the Rust client (crates/tidegate-client): the routing
// table of GET /v1/routing and of the watch stream, the unit rule (XXH3-64 with seed 0 modulo
// the unit count, or digits mode), the precedence pin > channel > unit, and the write check's
// four answers in the order behind, frozen, misrouted, owned.
package tidegate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"
)

// HashAlgorithm is the hash as GET /v1/routing names it in `hash`. A table naming another
// hash is refused: tagging with a rule this client does not know would misroute silently.
const HashAlgorithm = "xxh3_64(seed=0) mod units"

// DefaultDomain is the name of the domain every table has.
const DefaultDomain = "default"

// Limits of the core model (tidegate-core).
const (
	MinUnits         = 2
	MaxUnits         = 10000
	MaxUserIDBytes   = 256
	MaxZones         = 64
	MaxZoneNameBytes = 64
)

// Precedence is the order of the tagging rules this client implements. A table publishing
// another `precedence` is refused.
var Precedence = []string{"pin", "channel", "unit"}

// DecodeError says why a routing table was refused.
type DecodeError struct{ Msg string }

func (e *DecodeError) Error() string { return "routing table JSON: " + e.Msg }

func decodeErr(format string, args ...any) error {
	return &DecodeError{Msg: fmt.Sprintf(format, args...)}
}

// ErrInvalidUserID is wrapped by every error about a user ID the rule cannot tag.
var ErrInvalidUserID = errors.New("invalid user_id")

// ErrUnknownDomain is wrapped when the table has no routing domain of the asked name.
var ErrUnknownDomain = errors.New("unknown routing domain")

// ErrChannelUnavailable is wrapped when the user's release channel is suspended and its
// fallback is `reject`.
var ErrChannelUnavailable = errors.New("release channel unavailable")

// Zone is one entry of the table's zone list; its index is its position.
type Zone struct {
	Name    string
	Lane    string
	Class   string
	Retired bool
}

// GlobalWriter is the zone that takes writes to global data, whether they are read-only, and
// whether a move of the global writer is in progress (freeze -> switch -> unfreeze, like a unit
// move: global writes wait until it ends).
type GlobalWriter struct {
	Zone     int // -1: none
	ReadOnly bool
	Frozen   bool // `global_writer.frozen`; absent: false
}

// UnitSet is a set of units (`0-9,17`).
type UnitSet struct {
	ranges [][2]uint32
}

// Contains reports whether unit is in the set.
func (s UnitSet) Contains(unit uint32) bool {
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i][1] >= unit })
	return i < len(s.ranges) && s.ranges[i][0] <= unit
}

// Len is the number of units in the set.
func (s UnitSet) Len() int {
	n := 0
	for _, r := range s.ranges {
		n += int(r[1]-r[0]) + 1
	}
	return n
}

// String gives the set as the wire writes it.
func (s UnitSet) String() string {
	parts := make([]string, len(s.ranges))
	for i, r := range s.ranges {
		if r[0] == r[1] {
			parts[i] = strconv.FormatUint(uint64(r[0]), 10)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r[0], r[1])
		}
	}
	return strings.Join(parts, ",")
}

// ParseUnitSet parses `0-9,17` against a unit count, as tidegate-core's UnitSet::parse: an
// empty set, a backwards range, a unit out of range or an overlap is an error.
func ParseUnitSet(text string, units uint32) (UnitSet, error) {
	var ranges [][2]uint32
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		number := func(s string) (uint32, error) {
			s = strings.TrimSpace(s)
			s = strings.TrimPrefix(s, "+") // Rust's u32 parse takes a leading '+'
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil || s == "" || s[0] < '0' || s[0] > '9' {
				return 0, fmt.Errorf("`%s` is not a unit or a range of units", part)
			}
			return uint32(n), nil
		}
		var lo, hi uint32
		var err error
		if a, b, ok := strings.Cut(part, "-"); ok {
			if lo, err = number(a); err != nil {
				return UnitSet{}, err
			}
			if hi, err = number(b); err != nil {
				return UnitSet{}, err
			}
		} else {
			if lo, err = number(part); err != nil {
				return UnitSet{}, err
			}
			hi = lo
		}
		if lo > hi {
			return UnitSet{}, fmt.Errorf("`%s` runs backwards", part)
		}
		ranges = append(ranges, [2]uint32{lo, hi})
	}
	if len(ranges) == 0 {
		return UnitSet{}, errors.New("the unit set is empty")
	}
	sort.Slice(ranges, func(i, j int) bool {
		if ranges[i][0] != ranges[j][0] {
			return ranges[i][0] < ranges[j][0]
		}
		return ranges[i][1] < ranges[j][1]
	})
	for _, r := range ranges {
		if r[1] >= units {
			return UnitSet{}, fmt.Errorf("unit %d is outside the %d units", max(r[0], r[1]), units)
		}
	}
	for i := 1; i < len(ranges); i++ {
		if ranges[i][0] <= ranges[i-1][1] {
			return UnitSet{}, fmt.Errorf("unit %d is listed twice", ranges[i][0])
		}
	}
	return UnitSet{ranges: ranges}, nil
}

// Channel is a release channel: a service's calls for the users it selects go to its zone.
type Channel struct {
	Name        string
	Domain      string // DefaultDomain for the default domain
	Services    []string
	Zone        int
	Units       UnitSet
	Users       map[string]bool
	Fallback    string // "global" or "reject"
	ExpiresAtMs *uint64
	Suspended   bool
}

// ChannelFreeze is the freeze of a loss-less channel change in progress: writes of Services in
// Domain by users of Units or listed in Users are Frozen, whichever rule routes them (pin,
// channel or map).
type ChannelFreeze struct {
	Channel  string
	Domain   string // DefaultDomain for the default domain
	Services []string
	Units    UnitSet
	Users    map[string]bool
}

func (f *ChannelFreeze) covers(domain, service, user string, unit uint32) bool {
	if domain == "" {
		domain = DefaultDomain
	}
	if f == nil || domain != f.Domain {
		return false
	}
	for _, s := range f.Services {
		if s == service {
			return f.Units.Contains(unit) || f.Users[user]
		}
	}
	return false
}

func (c *Channel) serves(service string) bool {
	for _, s := range c.Services {
		if s == service {
			return true
		}
	}
	return false
}

func (c *Channel) selects(user string, unit uint32) bool {
	return c.Units.Contains(unit) || (len(c.Users) > 0 && c.Users[user])
}

// Table is one immutable version of the routing table, decoded from its wire form.
type Table struct {
	Version    uint64
	LogID      string // the command log the table came from ("" when not named)
	Units      uint32
	UnitMode   string // "hash" or "digits"
	DigitsSkip uint8
	Zones      []Zone
	Global     GlobalWriter

	width    int
	owners   []uint16            // the default domain's map: the zone of every unit
	domains  map[string][]uint16 // named domains' maps
	pins     map[string]int
	frozen   map[string]UnitSet
	channels []*Channel // by name
	// The freeze of a channel change in progress (nil between changes).
	channelFreeze *ChannelFreeze
	raw           []byte
}

// ChannelFreeze gives the freeze of the loss-less channel change in progress, or nil.
func (t *Table) ChannelFreeze() *ChannelFreeze { return t.channelFreeze }

// Raw is the JSON the table was decoded from (what the disk cache keeps).
func (t *Table) Raw() []byte { return t.raw }

// Pins gives the pinned users and their lanes.
func (t *Table) Pins() map[string]string {
	out := make(map[string]string, len(t.pins))
	for u, z := range t.pins {
		out[u] = t.Zones[z].Lane
	}
	return out
}

// Frozen gives the frozen units by domain (empty between moves).
func (t *Table) Frozen() map[string]UnitSet {
	out := make(map[string]UnitSet, len(t.frozen))
	for d, s := range t.frozen {
		out[d] = s
	}
	return out
}

// Channels gives the release channels, by name order.
func (t *Table) Channels() []*Channel { return t.channels }

// Domains gives the names of the routing domains, `default` first.
func (t *Table) Domains() []string {
	out := []string{DefaultDomain}
	for name := range t.domains {
		out = append(out, name)
	}
	sort.Strings(out[1:])
	return out
}

// ZoneByLane gives the index of the zone whose lane is lane.
func (t *Table) ZoneByLane(lane string) (int, bool) {
	for i, z := range t.Zones {
		if z.Lane == lane {
			return i, true
		}
	}
	return 0, false
}

// ZoneByName gives the index of the zone called name.
func (t *Table) ZoneByName(name string) (int, bool) {
	for i, z := range t.Zones {
		if z.Name == name {
			return i, true
		}
	}
	return 0, false
}

// ResolveZone gives a zone by its lane or its name, as the HTTP API accepts either.
func (t *Table) ResolveZone(laneOrName string) (int, bool) {
	if i, ok := t.ZoneByLane(laneOrName); ok {
		return i, true
	}
	return t.ZoneByName(laneOrName)
}

// UnitOwners gives the zone index of every unit in domain ("" or "default": the default one).
func (t *Table) UnitOwners(domain string) ([]int, bool) {
	m, ok := t.mapOf(domain)
	if !ok {
		return nil, false
	}
	out := make([]int, len(m))
	for i, z := range m {
		out[i] = int(z)
	}
	return out, true
}

func (t *Table) mapOf(domain string) ([]uint16, bool) {
	if domain == "" || domain == DefaultDomain {
		return t.owners, true
	}
	m, ok := t.domains[domain]
	return m, ok
}

// ValidateUserID checks a user ID as the server does: 1 to 256 bytes, no control character
// (U+0000-U+001F, U+007F-U+009F).
func ValidateUserID(user string) error {
	if user == "" {
		return fmt.Errorf("%w: user_id is empty", ErrInvalidUserID)
	}
	if len(user) > MaxUserIDBytes {
		return fmt.Errorf("%w: user_id is %d bytes long; at most %d bytes are allowed", ErrInvalidUserID, len(user), MaxUserIDBytes)
	}
	for i := 0; i < len(user); i++ {
		b := user[i]
		if b < 0x20 || b == 0x7f || (b == 0xc2 && i+1 < len(user) && user[i+1] >= 0x80 && user[i+1] <= 0x9f) {
			return fmt.Errorf("%w: user_id contains a control character", ErrInvalidUserID)
		}
	}
	return nil
}

// HashUserID is the published hash: XXH3-64, seed 0, over the UTF-8 bytes of the ID.
func HashUserID(user string) uint64 { return xxh3.HashString(user) }

// UnitOf gives the user's unit under the table's scheme (the ID is validated first).
func (t *Table) UnitOf(user string) (uint32, error) {
	if err := ValidateUserID(user); err != nil {
		return 0, err
	}
	return t.unitOf(user)
}

func (t *Table) unitOf(user string) (uint32, error) {
	if t.UnitMode == "hash" {
		return uint32(HashUserID(user) % uint64(t.Units)), nil
	}
	return digitsUnit(user, t.width, int(t.DigitsSkip), t.Units)
}

func digitsUnit(user string, width, skip int, units uint32) (uint32, error) {
	bad := func() error {
		return fmt.Errorf("%w: user_id must be numeric with at least %d digits in digits mode (the unit is digits %d..%d counted from the end)",
			ErrInvalidUserID, width+skip, skip+width, skip+1)
	}
	if len(user) < width+skip {
		return 0, bad()
	}
	for i := 0; i < len(user); i++ {
		if user[i] < '0' || user[i] > '9' {
			return 0, bad()
		}
	}
	end := len(user) - skip
	var v uint32
	for i := end - width; i < end; i++ {
		v = v*10 + uint32(user[i]-'0')
	}
	return v % units, nil
}

// Tag is a user's tag, evaluated locally.
type Tag struct {
	// Lane is the colour users and headers see (`blue`, `green`, or a further zone's lane):
	// the server's `color`, propagated in x-tidegate-color.
	Lane string
	// Zone is the name of the zone (`az-a`), ZoneIndex its index in the table's zone list.
	Zone      string
	ZoneIndex int
	Unit      uint32
	Version   uint64
	Pinned    bool
	// Reason is the rule that decided: `pin`, `unit` or `channel:<name>`.
	Reason string
}

// Tag tags a user with the global rule in the default domain: a pin wins, else the owner of
// their unit.
func (t *Table) Tag(user string) (Tag, error) { return t.TagForServiceIn("", user, "") }

// TagIn tags a user in the routing domain domain ("" or "default": the default domain).
func (t *Table) TagIn(domain, user string) (Tag, error) { return t.TagForServiceIn(domain, user, "") }

// TagForService tags a call of service for user in the default domain: a pin wins, then the
// service's release channel when it selects the user, then the map.
func (t *Table) TagForService(user, service string) (Tag, error) {
	return t.TagForServiceIn("", user, service)
}

// TagForServiceIn is TagForService in a routing domain; service "" is the global rule.
func (t *Table) TagForServiceIn(domain, user, service string) (Tag, error) {
	if err := ValidateUserID(user); err != nil {
		return Tag{}, err
	}
	m, ok := t.mapOf(domain)
	if !ok {
		return Tag{}, fmt.Errorf("%w: the routing table has no domain `%s`", ErrUnknownDomain, domain)
	}
	unit, err := t.unitOf(user)
	if err != nil {
		return Tag{}, err
	}
	if zone, pinned := t.pins[user]; pinned {
		return t.tag(zone, unit, true, "pin"), nil
	}
	if service != "" {
		if c := t.channelFor(domain, service); c != nil && c.selects(user, unit) {
			if !c.Suspended {
				return t.tag(c.Zone, unit, false, "channel:"+c.Name), nil
			}
			if c.Fallback == "reject" {
				return Tag{}, fmt.Errorf("%w: release channel `%s` is suspended and its fallback is `reject`", ErrChannelUnavailable, c.Name)
			}
		}
	}
	return t.tag(int(m[unit]), unit, false, "unit"), nil
}

func (t *Table) tag(zone int, unit uint32, pinned bool, reason string) Tag {
	return Tag{Lane: t.Zones[zone].Lane, Zone: t.Zones[zone].Name, ZoneIndex: zone, Unit: unit,
		Version: t.Version, Pinned: pinned, Reason: reason}
}

func (t *Table) channelFor(domain, service string) *Channel {
	if domain == "" {
		domain = DefaultDomain
	}
	for _, c := range t.channels {
		if c.Domain == domain && c.serves(service) {
			return c
		}
	}
	return nil
}

// ---- decoding ----

type obj map[string]json.RawMessage

func parseObject(raw json.RawMessage, what string) (obj, error) {
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, decodeErr("%s is not an object", what)
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (o obj) has(key string) bool { _, ok := o[key]; return ok }

func (o obj) field(key string) (json.RawMessage, error) {
	v, ok := o[key]
	if !ok {
		return nil, decodeErr("missing `%s`", key)
	}
	return v, nil
}

func (o obj) number(key string) (uint64, error) {
	v, err := o.field(key)
	if err != nil {
		return 0, err
	}
	n, ok := asU64(v)
	if !ok {
		return 0, decodeErr("`%s` is not a whole number", key)
	}
	return n, nil
}

func asU64(raw json.RawMessage) (uint64, bool) {
	s := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func (o obj) text(key string) (string, error) {
	v, err := o.field(key)
	if err != nil {
		return "", err
	}
	s, ok := asString(v)
	if !ok {
		return "", decodeErr("`%s` is not a string", key)
	}
	return s, nil
}

func asString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || bytes.TrimSpace(raw)[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func asBool(raw json.RawMessage, fallback bool) bool {
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return fallback
	}
	return b
}

// optional object: the value when present and an object, else nil (as serde's as_object).
func optObject(o obj, key string) obj {
	v, ok := o[key]
	if !ok || len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] != '{' {
		return nil
	}
	var out obj
	if json.Unmarshal(v, &out) != nil {
		return nil
	}
	return out
}

// DecodeTable decodes the wire form of GET /v1/routing and of the watch stream's routing
// events, as the Rust client's decode_table does, and refuses what it cannot trust: malformed
// JSON, a missing or mistyped field, an unknown unit mode, an unknown hash or precedence, a unit
// map with a gap or an overlap, an unknown lane or zone, an invalid pin, a frozen unit or
// channel out of range, two channels of one service in a domain.
func DecodeTable(data []byte) (*Table, error) {
	if !json.Valid(data) {
		return nil, decodeErr("not valid JSON")
	}
	o, err := parseObject(data, "the table")
	if err != nil {
		return nil, err
	}
	// Stricter than the Rust client: a table naming another hash or precedence is a rule this
	// client does not implement (a newer wire format), so it is refused rather than misapplied.
	if v, ok := o["hash"]; ok && !isNull(v) {
		if h, _ := asString(v); h != HashAlgorithm {
			return nil, decodeErr("unknown `hash` %s: this client implements %q", strings.TrimSpace(string(v)), HashAlgorithm)
		}
	}
	if v, ok := o["precedence"]; ok && !isNull(v) {
		var p []string
		if json.Unmarshal(v, &p) != nil || strings.Join(p, ",") != strings.Join(Precedence, ",") {
			return nil, decodeErr("unknown `precedence` %s: this client implements %v", strings.TrimSpace(string(v)), Precedence)
		}
	}
	units64, err := o.number("units")
	if err != nil {
		return nil, err
	}
	if units64 > 1<<32-1 {
		return nil, decodeErr("`units` too large")
	}
	units := uint32(units64)
	mode, err := o.text("unit_mode")
	if err != nil {
		return nil, err
	}
	t := &Table{Units: units, UnitMode: mode, raw: append([]byte(nil), data...)}
	switch mode {
	case "hash":
	case "digits":
		if v, ok := o["digits_skip"]; ok {
			if n, ok := asU64(v); ok {
				t.DigitsSkip = uint8(n) // as the Rust client's `as u8`
			}
		}
	default:
		return nil, decodeErr("unknown unit_mode `%s`", mode)
	}
	if units < MinUnits || units > MaxUnits {
		return nil, decodeErr("must be between %d and %d, got %d", MinUnits, MaxUnits, units)
	}
	if mode == "digits" {
		switch units {
		case 10:
			t.width = 1
		case 100:
			t.width = 2
		case 1000:
			t.width = 3
		case 10000:
			t.width = 4
		default:
			return nil, decodeErr("digits mode needs a power of ten (10, 100, 1000 or 10000) as the unit count, got %d", units)
		}
	}
	if t.Version, err = o.number("version"); err != nil {
		return nil, err
	}
	if v, ok := o["log_id"]; ok {
		t.LogID, _ = asString(v)
	}
	zonesRaw, hasZones := o["zones"]
	mapRaw, hasMap := o["unit_map"]
	if hasZones && hasMap {
		if t.Zones, err = decodeZones(zonesRaw); err != nil {
			return nil, err
		}
		if t.owners, err = t.decodeMap(mapRaw); err != nil {
			return nil, err
		}
	} else {
		// The first releases sent only `colors` and `blue_units` (a two-zone dial table).
		blue64, err := o.number("blue_units")
		if err != nil {
			return nil, err
		}
		if blue64 > 1<<32-1 {
			return nil, decodeErr("`blue_units` too large")
		}
		if blue64 > uint64(units) {
			return nil, decodeErr("`blue_units` %d exceeds %d units", blue64, units)
		}
		colorsRaw, err := o.field("colors")
		if err != nil {
			return nil, err
		}
		colors := optObject(obj{"c": colorsRaw}, "c")
		if colors == nil {
			return nil, decodeErr("missing `blue`")
		}
		blue, err := colors.text("blue")
		if err != nil {
			return nil, err
		}
		green, err := colors.text("green")
		if err != nil {
			return nil, err
		}
		t.Zones = []Zone{{Name: blue, Lane: "blue", Class: "rzone"}, {Name: green, Lane: "green", Class: "rzone"}}
		t.owners = make([]uint16, units)
		for u := uint32(0); u < units; u++ {
			if uint64(u) >= blue64 {
				t.owners[u] = 1
			}
		}
	}
	t.pins = map[string]int{}
	if pins := optObject(o, "pins"); pins != nil {
		for user, laneRaw := range pins {
			lane, ok := asString(laneRaw)
			if !ok {
				return nil, decodeErr("pin of `%s` is not a string", user)
			}
			zone, ok := t.ZoneByLane(lane)
			if !ok {
				return nil, decodeErr("pin of `%s` names unknown lane `%s`", user, lane)
			}
			if err := ValidateUserID(user); err != nil {
				return nil, decodeErr("pinned user id is invalid: %v", err)
			}
			t.pins[user] = zone
		}
	}
	t.Global = GlobalWriter{Zone: -1}
	if g := optObject(o, "global_writer"); g != nil {
		if name, ok := asString(g["zone"]); ok {
			zone, found := t.ZoneByName(name)
			if !found {
				return nil, decodeErr("`global_writer.zone` names unknown zone `%s`", name)
			}
			t.Global.Zone = zone
		}
		t.Global.ReadOnly = asBool(g["read_only"], false)
		t.Global.Frozen = asBool(g["frozen"], false)
	}
	t.domains = map[string][]uint16{}
	if named := optObject(o, "domains"); named != nil {
		for name, raw := range named {
			d, err := parseObject(raw, "domain `"+name+"`")
			if err != nil {
				return nil, decodeErr("missing `unit_map`")
			}
			runs, err := d.field("unit_map")
			if err != nil {
				return nil, err
			}
			m, err := t.decodeMap(runs)
			if err != nil {
				return nil, decodeErr("domain `%s`: %s", name, err.(*DecodeError).Msg)
			}
			t.domains[name] = m
		}
	}
	t.frozen = map[string]UnitSet{}
	if named := optObject(o, "frozen"); named != nil {
		for domain, raw := range named {
			text, ok := asString(raw)
			if !ok {
				return nil, decodeErr("`frozen.%s` is not a string", domain)
			}
			set, err := ParseUnitSet(text, units)
			if err != nil {
				return nil, decodeErr("`frozen.%s`: %v", domain, err)
			}
			if _, ok := t.mapOf(domain); !ok {
				return nil, decodeErr("frozen units name domain `%s`, which the table does not have", domain)
			}
			t.frozen[domain] = set
		}
	}
	if v, ok := o["channels"]; ok && len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, decodeErr("`channels` is not a list")
		}
		byName := map[string]*Channel{}
		for i, raw := range list {
			c, err := t.decodeChannel(raw)
			if err != nil {
				return nil, decodeErr("`channels[%d]`: %s", i, err.(*DecodeError).Msg)
			}
			byName[c.Name] = c
		}
		for _, c := range byName {
			t.channels = append(t.channels, c)
		}
		sort.Slice(t.channels, func(i, j int) bool { return t.channels[i].Name < t.channels[j].Name })
		for _, c := range t.channels {
			if _, ok := t.mapOf(c.Domain); !ok {
				return nil, decodeErr("channel `%s`: the routing table has no domain `%s`", c.Name, c.Domain)
			}
			for _, other := range t.channels {
				if other.Name == c.Name || other.Domain != c.Domain {
					continue
				}
				for _, s := range c.Services {
					if other.serves(s) {
						return nil, decodeErr("channel `%s`: service `%s` already has channel `%s` in domain `%s`", c.Name, s, other.Name, c.Domain)
					}
				}
			}
		}
	}
	if v, ok := o["channel_freeze"]; ok && !isNull(v) {
		f, err := t.decodeChannelFreeze(v)
		if err != nil {
			return nil, decodeErr("`channel_freeze`: %s", err.(*DecodeError).Msg)
		}
		t.channelFreeze = f
	}
	return t, nil
}

// stringList is the list of strings at key (nil when absent or null).
func stringList(c obj, key string) ([]string, error) {
	v, ok := c[key]
	if !ok || isNull(v) {
		return nil, nil
	}
	var list []json.RawMessage
	if bytes.TrimSpace(v)[0] != '[' || json.Unmarshal(v, &list) != nil {
		return nil, decodeErr("`%s` is not a list", key)
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := asString(item)
		if !ok {
			return nil, decodeErr("`%s` holds a non-string", key)
		}
		out = append(out, s)
	}
	return out, nil
}

func (t *Table) decodeChannelFreeze(raw json.RawMessage) (*ChannelFreeze, error) {
	c, err := parseObject(raw, "a channel freeze")
	if err != nil {
		return nil, err
	}
	name, err := c.text("channel")
	if err != nil {
		return nil, err
	}
	domain, err := c.text("domain")
	if err != nil {
		return nil, err
	}
	if _, ok := t.mapOf(domain); !ok {
		return nil, decodeErr("the routing table has no domain `%s`", domain)
	}
	services, err := stringList(c, "services")
	if err != nil {
		return nil, err
	}
	set, err := c.text("units")
	if err != nil {
		return nil, err
	}
	f := &ChannelFreeze{Channel: name, Domain: domain, Services: services}
	if set != "" {
		if f.Units, err = ParseUnitSet(set, t.Units); err != nil {
			return nil, decodeErr("`units`: %v", err)
		}
	}
	users, err := stringList(c, "users")
	if err != nil {
		return nil, err
	}
	f.Users = make(map[string]bool, len(users))
	for _, u := range users {
		f.Users[u] = true
	}
	return f, nil
}

func (t *Table) decodeChannel(raw json.RawMessage) (*Channel, error) {
	c, err := parseObject(raw, "a channel")
	if err != nil {
		return nil, err
	}
	strs := func(key string) ([]string, error) { return stringList(c, key) }
	services, err := strs("services")
	if err != nil {
		return nil, err
	}
	lane, err := c.text("lane")
	if err != nil {
		return nil, err
	}
	set, err := c.text("units")
	if err != nil {
		return nil, err
	}
	fallback, err := c.text("fallback")
	if err != nil {
		return nil, err
	}
	name, err := c.text("name")
	if err != nil {
		return nil, err
	}
	ch := &Channel{Name: name, Domain: DefaultDomain, Services: services, Fallback: fallback}
	if d, ok := asString(c["domain"]); ok {
		ch.Domain = d
	}
	zone, ok := t.ZoneByLane(lane)
	if !ok {
		return nil, decodeErr("`lane` names unknown lane `%s`", lane)
	}
	ch.Zone = zone
	if set != "" {
		if ch.Units, err = ParseUnitSet(set, t.Units); err != nil {
			return nil, decodeErr("`units`: %v", err)
		}
	}
	users, err := strs("users")
	if err != nil {
		return nil, err
	}
	ch.Users = make(map[string]bool, len(users))
	for _, u := range users {
		ch.Users[u] = true
	}
	if fallback != "global" && fallback != "reject" {
		return nil, decodeErr("unknown `fallback` `%s`", fallback)
	}
	if n, ok := asU64(c["expires_at_ms"]); ok {
		ch.ExpiresAtMs = &n
	}
	ch.Suspended = asBool(c["suspended"], false)
	return ch, nil
}

func validZoneName(name string) bool {
	if name == "" || len(name) > MaxZoneNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}

func decodeZones(raw json.RawMessage) ([]Zone, error) {
	var list []json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, decodeErr("`zones` is not a list")
	}
	zones := make([]Zone, 0, len(list))
	for i, item := range list {
		z, err := parseObject(item, fmt.Sprintf("`zones[%d]`", i))
		if err != nil {
			return nil, err
		}
		index, err := z.number("index")
		if err != nil {
			return nil, err
		}
		if index != uint64(i) {
			return nil, decodeErr("`zones[%d].index` is not %d", i, i)
		}
		class, err := z.text("class")
		if err != nil {
			return nil, err
		}
		if class != "rzone" && class != "gzone" && class != "czone" {
			return nil, decodeErr("zone class `%s` is unknown: expected `rzone`, `gzone` or `czone`", class)
		}
		name, err := z.text("name")
		if err != nil {
			return nil, err
		}
		lane, err := z.text("lane")
		if err != nil {
			return nil, err
		}
		zones = append(zones, Zone{Name: name, Lane: lane, Class: class, Retired: asBool(z["retired"], false)})
	}
	if len(zones) < 2 || zones[0].Lane != "blue" || zones[1].Lane != "green" {
		return nil, decodeErr("`zones`: the first two zones must have the lanes `blue` and `green`")
	}
	if len(zones) > MaxZones {
		return nil, decodeErr("`zones`: a table lists at most %d zones", MaxZones)
	}
	for i, z := range zones {
		for _, name := range []string{z.Name, z.Lane} {
			if !validZoneName(name) {
				return nil, decodeErr("`zones`: `%s` is not a valid zone or lane name", name)
			}
			for _, before := range zones[:i] {
				if before.Name == name || before.Lane == name {
					return nil, decodeErr("`zones`: `%s` is listed twice", name)
				}
			}
		}
	}
	return zones, nil
}

func (t *Table) decodeMap(raw json.RawMessage) ([]uint16, error) {
	var list []json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, decodeErr("`unit_map` is not a list")
	}
	owners := make([]uint16, 0, t.Units)
	for i, item := range list {
		run, err := parseObject(item, fmt.Sprintf("`unit_map[%d]`", i))
		if err != nil {
			return nil, err
		}
		rng, err := run.text("units")
		if err != nil {
			return nil, err
		}
		bad := decodeErr("`unit_map[%d].units` is not `from-to`: `%s`", i, rng)
		from, to, ok := strings.Cut(rng, "-")
		if !ok {
			return nil, bad
		}
		first, err1 := parseU32(from)
		last, err2 := parseU32(to)
		if err1 != nil || err2 != nil {
			return nil, bad
		}
		lane, err := run.text("lane")
		if err != nil {
			return nil, err
		}
		zone, ok := t.ZoneByLane(lane)
		if !ok {
			return nil, decodeErr("`unit_map[%d].lane` `%s` is not a zone's lane", i, lane)
		}
		if first != uint32(len(owners)) || last < first || last >= t.Units {
			return nil, decodeErr("`unit_map`: the unit map has a gap or an overlap at unit %d of %d", len(owners), t.Units)
		}
		for u := first; u <= last; u++ {
			owners = append(owners, uint16(zone))
		}
	}
	if uint32(len(owners)) != t.Units {
		return nil, decodeErr("`unit_map`: the unit map has a gap or an overlap at unit %d of %d", len(owners), t.Units)
	}
	return owners, nil
}

// parseU32 parses as Rust's `str::parse::<u32>` (digits, an optional leading '+').
func parseU32(s string) (uint32, error) {
	s = strings.TrimPrefix(s, "+")
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, errors.New("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}
