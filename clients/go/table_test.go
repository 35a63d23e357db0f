package tidegate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fixture reads a file of the repository's tests/fixtures.
func fixture(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "fixtures", name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
}

// dialTable is a two-zone table in the current wire form: blue owns units [0, blue).
func dialTable(version uint64, units, blue int, extra map[string]any) map[string]any {
	runs := []map[string]any{}
	if blue > 0 {
		runs = append(runs, map[string]any{"units": fmt.Sprintf("0-%d", blue-1), "zone": "az-b", "lane": "blue"})
	}
	if blue < units {
		runs = append(runs, map[string]any{"units": fmt.Sprintf("%d-%d", blue, units-1), "zone": "az-a", "lane": "green"})
	}
	table := map[string]any{
		"version": version, "log_id": "log-1", "units": units, "blue_units": blue,
		"colors": map[string]any{"blue": "az-b", "green": "az-a"}, "pins": map[string]any{},
		"unit_mode": "hash", "digits_skip": nil, "hash": HashAlgorithm,
		"zones": []map[string]any{
			{"index": 0, "name": "az-b", "lane": "blue", "class": "rzone", "retired": false},
			{"index": 1, "name": "az-a", "lane": "green", "class": "rzone", "retired": false},
		},
		"unit_map": runs, "domains": map[string]any{}, "precedence": Precedence,
		"channels": []any{}, "frozen": map[string]any{},
	}
	for k, v := range extra {
		table[k] = v
	}
	return table
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decode(t *testing.T, v map[string]any) *Table {
	t.Helper()
	table, err := DecodeTable(mustJSON(t, v))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return table
}

// The golden vectors of tests/fixtures/unit_hash_vectors.json (made by Python's xxhash, not by
// tidegate code): every hash and every unit for every unit count.
func TestHashVectorsMatchTheFixture(t *testing.T) {
	var file struct {
		Vectors []struct {
			UserID  string            `json:"user_id"`
			UTF8Len int               `json:"utf8_len"`
			Hash    string            `json:"xxh3_64"`
			Units   map[string]uint32 `json:"units"`
		} `json:"vectors"`
	}
	fixture(t, "unit_hash_vectors.json", &file)
	checked := 0
	for _, v := range file.Vectors {
		if len(v.UserID) != v.UTF8Len {
			t.Fatalf("%q: %d bytes, fixture says %d", v.UserID, len(v.UserID), v.UTF8Len)
		}
		want, _ := strconv.ParseUint(v.Hash, 10, 64)
		if got := HashUserID(v.UserID); got != want {
			t.Fatalf("%q: hash %d, fixture %d", v.UserID, got, want)
		}
		for count, unit := range v.Units {
			n, _ := strconv.Atoi(count)
			table := decode(t, dialTable(1, n, n/2, nil))
			got, err := table.UnitOf(v.UserID)
			if err != nil || got != unit {
				t.Fatalf("%q mod %d: unit %d (%v), fixture %d", v.UserID, n, got, err, unit)
			}
			checked++
		}
	}
	if len(file.Vectors) < 10 || checked < 50 {
		t.Fatalf("only %d vectors, %d units", len(file.Vectors), checked)
	}
	t.Logf("FIGURE hash_vectors=%d unit_checks=%d", len(file.Vectors), checked)
}

func TestDigitsCasesMatchTheFixture(t *testing.T) {
	var file struct {
		Cases []struct {
			Units  int     `json:"units"`
			Skip   int     `json:"skip"`
			UserID string  `json:"user_id"`
			Unit   *uint32 `json:"unit"`
			Error  string  `json:"error"`
		} `json:"cases"`
	}
	fixture(t, "digits_cases.json", &file)
	for _, c := range file.Cases {
		table := decode(t, dialTable(1, c.Units, c.Units/2, map[string]any{"unit_mode": "digits", "digits_skip": c.Skip}))
		unit, err := table.UnitOf(c.UserID)
		if c.Unit != nil {
			if err != nil || unit != *c.Unit {
				t.Fatalf("%+v: got %d, %v", c, unit, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "must be numeric") {
			t.Fatalf("%+v: want not_numeric, got %d, %v", c, unit, err)
		}
	}
	if len(file.Cases) < 10 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
}

// tests/fixtures/write_checks.json, as crates/tidegate-core/tests/freeze.rs runs it on the Rust core.
func TestWriteChecksMatchTheFixture(t *testing.T) {
	var file struct {
		Cases []struct {
			Name         string  `json:"name"`
			TableVersion uint64  `json:"table_version"`
			BlueUnits    int     `json:"blue_units"`
			Frozen       *string `json:"frozen"`
			User         string  `json:"user"`
			Pin          *string `json:"pin"`
			Local        string  `json:"local"`
			Incoming     *uint64 `json:"incoming"`
			Expect       string  `json:"expect"`
			Owner        *string `json:"owner"`
		} `json:"cases"`
	}
	fixture(t, "write_checks.json", &file)
	for _, c := range file.Cases {
		extra := map[string]any{}
		var frozen UnitSet
		if c.Frozen != nil {
			extra["frozen"] = map[string]any{"default": *c.Frozen}
			frozen, _ = ParseUnitSet(*c.Frozen, 100)
		}
		base := decode(t, dialTable(c.TableVersion, 100, c.BlueUnits, extra))
		var user string
		for i := 0; user == ""; i++ {
			id := fmt.Sprintf("user-%d", i)
			u, _ := base.UnitOf(id)
			in := c.Frozen != nil && frozen.Contains(u)
			if (c.User == "blue" && int(u) < c.BlueUnits && !in) || (c.User == "green" && int(u) >= c.BlueUnits && !in) || (c.User == "frozen" && in) {
				user = id
			}
		}
		table := base
		if c.Pin != nil {
			extra["pins"] = map[string]any{user: *c.Pin}
			table = decode(t, dialTable(c.TableVersion, 100, c.BlueUnits, extra))
		}
		var incoming uint64
		if c.Incoming != nil {
			incoming = *c.Incoming
		}
		answer, err := table.CheckWrite(user, c.Local, incoming)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if answer.Check != c.Expect {
			t.Fatalf("%s: got %s, want %s", c.Name, answer.Check, c.Expect)
		}
		if c.Owner != nil && answer.OwnerLane != *c.Owner {
			t.Fatalf("%s: owner %s, want %s", c.Name, answer.OwnerLane, *c.Owner)
		}
	}
	if len(file.Cases) < 10 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
}

// tests/fixtures/global_write_checks.json: every row against tests/fixtures/routing_base.json
// with `global_writer` replaced by the row's and `version` set to its table_version.
func TestGlobalWriteChecksMatchTheFixture(t *testing.T) {
	var file struct {
		Cases []struct {
			Name         string  `json:"name"`
			TableVersion uint64  `json:"table_version"`
			Writer       *string `json:"writer"`
			ReadOnly     bool    `json:"read_only"`
			Frozen       bool    `json:"frozen"`
			Local        string  `json:"local"`
			Incoming     *uint64 `json:"incoming"`
			Expect       string  `json:"expect"`
			Owner        *string `json:"owner"`
		} `json:"cases"`
	}
	fixture(t, "global_write_checks.json", &file)
	seen := map[string]int{}
	for _, c := range file.Cases {
		var raw map[string]any
		fixture(t, "routing_base.json", &raw)
		raw["version"] = c.TableVersion
		var writer, lane any
		if c.Writer != nil {
			writer = *c.Writer
			for _, z := range raw["zones"].([]any) {
				if z.(map[string]any)["name"] == *c.Writer {
					lane = z.(map[string]any)["lane"]
				}
			}
		}
		raw["global_writer"] = map[string]any{"zone": writer, "lane": lane, "read_only": c.ReadOnly, "frozen": c.Frozen}
		table := decode(t, raw)
		if table.Global.Frozen != c.Frozen || table.Global.ReadOnly != c.ReadOnly {
			t.Fatalf("%s: decoded %+v", c.Name, table.Global)
		}
		var incoming uint64
		if c.Incoming != nil {
			incoming = *c.Incoming
		}
		answer, err := table.CheckGlobalWrite(c.Local, incoming)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if answer.Check != c.Expect {
			t.Fatalf("%s: got %s, want %s", c.Name, answer.Check, c.Expect)
		}
		want := ""
		if c.Owner != nil {
			want = *c.Owner
		}
		if answer.OwnerZone != want {
			t.Fatalf("%s: owner %q, want %q", c.Name, answer.OwnerZone, want)
		}
		if answer.Version != c.TableVersion || answer.Incoming != incoming {
			t.Fatalf("%s: %+v", c.Name, answer)
		}
		seen[answer.Check]++
	}
	if len(file.Cases) < 16 || len(seen) != 5 {
		t.Fatalf("only %d cases, answers %v", len(file.Cases), seen)
	}
	t.Logf("FIGURE global_write_checks %d rows agree %v", len(file.Cases), seen)
}

// An unknown local zone is an error, not an answer; `frozen` absent decodes as false; a lane
// names the writer too; 421 for misrouted, 503 (no retry) for read-only.
func TestGlobalWriteCheckEdges(t *testing.T) {
	var raw map[string]any
	fixture(t, "routing_base.json", &raw)
	raw["global_writer"] = map[string]any{"zone": "az-c", "read_only": false}
	table := decode(t, raw)
	if table.Global.Frozen {
		t.Fatal("an absent `frozen` decoded as true")
	}
	if _, err := table.CheckGlobalWrite("az-q", 0); err == nil {
		t.Fatal("an unknown local zone was answered")
	}
	a, err := table.CheckGlobalWrite("red", 0)
	if err != nil || !a.IsOwned() || a.OwnerZone != "az-c" || a.OwnerLane != "red" || a.Status() != 0 {
		t.Fatalf("%+v %v", a, err)
	}
	a, _ = table.CheckGlobalWrite("blue", 0)
	if a.Check != Misrouted || a.Status() != 421 || a.RetryAfter() != 0 {
		t.Fatalf("%+v", a)
	}
	raw["global_writer"] = map[string]any{"zone": "az-c", "read_only": true}
	a, _ = decode(t, raw).CheckGlobalWrite("az-c", 0)
	if a.Check != ReadOnly || a.Status() != 503 || a.RetryAfter() != 0 {
		t.Fatalf("%+v", a)
	}
	raw["global_writer"] = map[string]any{"zone": "az-c", "read_only": true, "frozen": true}
	a, _ = decode(t, raw).CheckGlobalWrite("az-a", 0)
	if a.Check != Frozen || a.Status() != 503 || a.RetryAfter() != WriteRetryAfter {
		t.Fatalf("%+v", a)
	}
}

func TestForwardOnceForwardsAMisroutedWriteOnceAndRefusesTheSecondHop(t *testing.T) {
	misrouted := WriteAnswer{Check: Misrouted, Version: 12, OwnerZone: "az-b", OwnerLane: "blue"}
	route := ForwardOnce(misrouted, "")
	if route.Action != RouteForward || route.Zone != "az-b" || route.Headers[HopHeader] != "1" ||
		route.Headers[ColorHeader] != "blue" || route.Headers[VersionHeader] != "12" {
		t.Fatalf("%+v", route)
	}
	if r := ForwardOnce(misrouted, "0"); r.Action != RouteForward {
		t.Fatalf("hop 0 is no hop: %+v", r)
	}
	if r := ForwardOnce(misrouted, " 1 "); r.Action != RouteRefuse || r.Status != 421 || !strings.Contains(r.Detail, "already forwarded once") {
		t.Fatalf("%+v", r)
	}
	behind := ForwardOnce(WriteAnswer{Check: Behind, Version: 7, Incoming: 8}, "")
	if behind.Status != 503 || behind.RetryAfter != WriteRetryAfter || !strings.Contains(behind.Detail, "version 8") {
		t.Fatalf("%+v", behind)
	}
	frozen := ForwardOnce(WriteAnswer{Check: Frozen, Unit: 45}, "1")
	if frozen.Status != 503 || !strings.Contains(frozen.Detail, "unit 45 is frozen") {
		t.Fatalf("%+v", frozen)
	}
	if r := ForwardOnce(WriteAnswer{Check: Owned}, "1"); r.Action != RouteWrite {
		t.Fatalf("%+v", r)
	}
}

// Vectors computed by an independent Python transcription of the Rust first_choice.
func TestFirstChoiceMatchesTheRustFunctionAndSpreads(t *testing.T) {
	for _, c := range []struct {
		id         string
		n2, n3, n5 int
	}{{"edge-0", 0, 0, 1}, {"edge-1", 0, 2, 1}, {"orders-az-a-7", 1, 2, 1}, {"anything", 0, 1, 2}, {"用户", 1, 0, 1}} {
		if got := [3]int{FirstChoice(c.id, 2), FirstChoice(c.id, 3), FirstChoice(c.id, 5)}; got != [3]int{c.n2, c.n3, c.n5} {
			t.Fatalf("%s: %v", c.id, got)
		}
	}
	for _, count := range []int{2, 3, 5} {
		seen := make([]int, count)
		for n := 0; n < 3000; n++ {
			seen[FirstChoice(fmt.Sprintf("edge-host-%d-8081", n), count)]++
		}
		even := 3000 / count
		for i, n := range seen {
			if n*10 <= even*8 || n*10 >= even*12 {
				t.Fatalf("%d coordinators: index %d got %d", count, i, n)
			}
		}
	}
	if FirstChoice("x", 1) != 0 {
		t.Fatal("one coordinator")
	}
}

func TestPrecedenceAcrossPinsChannelsDomainsAndThreeZones(t *testing.T) {
	raw := dialTable(9, 100, 50, map[string]any{
		"zones": []map[string]any{
			{"index": 0, "name": "az-b", "lane": "blue", "class": "rzone"},
			{"index": 1, "name": "az-a", "lane": "green", "class": "rzone"},
			{"index": 2, "name": "az-c", "lane": "red", "class": "gzone"},
		},
		"unit_map": []map[string]any{{"units": "0-29", "lane": "blue"}, {"units": "30-59", "lane": "red"}, {"units": "60-99", "lane": "green"}},
		"domains":  map[string]any{"search": map[string]any{"unit_map": []map[string]any{{"units": "0-99", "lane": "green"}}}},
		"pins":     map[string]any{"user-3": "red"},
		"channels": []map[string]any{
			{"name": "orders-v2", "domain": "default", "services": []string{"orders"}, "lane": "blue", "units": "30-99", "users": []string{"user-9"}, "fallback": "global", "suspended": false},
			{"name": "gone", "domain": "search", "services": []string{"ranker"}, "lane": "red", "units": "0-99", "users": nil, "fallback": "reject", "suspended": true},
		},
	})
	table := decode(t, raw)
	pinned, _ := table.TagForService("user-3", "orders")
	if pinned.Lane != "red" || !pinned.Pinned || pinned.Reason != "pin" || pinned.Zone != "az-c" {
		t.Fatalf("%+v", pinned)
	}
	counts := map[string]int{}
	for i := 0; i < 2000; i++ {
		id := fmt.Sprintf("u%d", i)
		global, _ := table.Tag(id)
		want := "green"
		if global.Unit < 30 {
			want = "blue"
		} else if global.Unit < 60 {
			want = "red"
		}
		if global.Lane != want || global.Reason != "unit" || global.Version != 9 {
			t.Fatalf("%s: %+v", id, global)
		}
		svc, _ := table.TagForService(id, "orders")
		if (global.Unit >= 30) != (svc.Reason == "channel:orders-v2") || (svc.Reason != "unit" && svc.Lane != "blue") {
			t.Fatalf("%s: %+v", id, svc)
		}
		counts[svc.Reason]++
		if inSearch, _ := table.TagIn("search", id); inSearch.Lane != "green" {
			t.Fatalf("%s: %+v", id, inSearch)
		}
		if _, err := table.TagForServiceIn("search", id, "ranker"); err == nil || !strings.Contains(err.Error(), "suspended") {
			t.Fatalf("%s: a suspended reject channel refuses: %v", id, err)
		}
	}
	if counts["unit"] == 0 || counts["channel:orders-v2"] == 0 {
		t.Fatalf("%v", counts)
	}
	if byUser, _ := table.TagForService("user-9", "orders"); byUser.Reason != "channel:orders-v2" {
		t.Fatalf("a channel selects its listed users: %+v", byUser)
	}
	if _, err := table.TagIn("nope", "u1"); err == nil || !strings.Contains(err.Error(), "no domain `nope`") {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 257), "a\nb", "a\u0085b"} {
		if _, err := table.Tag(bad); err == nil {
			t.Fatalf("%q was tagged", bad)
		}
	}
}

// Each malformed or unknown form is refused with a message naming what is wrong.
func TestMalformedTablesAreRefusedWithAClearError(t *testing.T) {
	cases := []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"unknown unit mode", func(m map[string]any) { m["unit_mode"] = "prefix" }, "unknown unit_mode `prefix`"},
		{"unknown hash", func(m map[string]any) { m["hash"] = "xxh128" }, "unknown `hash`"},
		{"unknown precedence", func(m map[string]any) { m["precedence"] = []string{"unit", "pin"} }, "unknown `precedence`"},
		{"no version", func(m map[string]any) { delete(m, "version") }, "missing `version`"},
		{"negative version", func(m map[string]any) { m["version"] = -1 }, "`version` is not a whole number"},
		{"fractional units", func(m map[string]any) { m["units"] = 100.5 }, "`units` is not a whole number"},
		{"too few units", func(m map[string]any) { m["units"] = 1 }, "between 2 and 10000"},
		{"digits without a power of ten", func(m map[string]any) { m["unit_mode"] = "digits"; m["units"] = 50 }, "power of ten"},
		{"a gap", func(m map[string]any) {
			m["unit_map"] = []map[string]any{{"units": "0-49", "lane": "blue"}, {"units": "51-99", "lane": "green"}}
		}, "gap or an overlap"},
		{"short map", func(m map[string]any) { m["unit_map"] = []map[string]any{{"units": "0-49", "lane": "blue"}} }, "gap or an overlap"},
		{"unknown lane", func(m map[string]any) {
			m["unit_map"] = []map[string]any{{"units": "0-99", "lane": "purple"}}
		}, "`purple` is not a zone's lane"},
		{"bad run", func(m map[string]any) { m["unit_map"] = []map[string]any{{"units": "0..99", "lane": "blue"}} }, "is not `from-to`"},
		{"zones index", func(m map[string]any) {
			m["zones"].([]map[string]any)[1]["index"] = 5
		}, "`zones[1].index` is not 1"},
		{"zone class", func(m map[string]any) { m["zones"].([]map[string]any)[0]["class"] = "xzone" }, "zone class `xzone` is unknown"},
		{"pin lane", func(m map[string]any) { m["pins"] = map[string]any{"u1": "purple"} }, "pin of `u1` names unknown lane `purple`"},
		{"pin type", func(m map[string]any) { m["pins"] = map[string]any{"u1": 3} }, "pin of `u1` is not a string"},
		{"frozen domain", func(m map[string]any) { m["frozen"] = map[string]any{"search": "1-2"} }, "domain `search`"},
		{"frozen range", func(m map[string]any) { m["frozen"] = map[string]any{"default": "90-100"} }, "`frozen.default`"},
		{"channel fallback", func(m map[string]any) {
			m["channels"] = []map[string]any{{"name": "c", "services": []string{"s"}, "lane": "blue", "units": "1", "fallback": "maybe"}}
		}, "unknown `fallback` `maybe`"},
		{"channel overlap", func(m map[string]any) {
			m["channels"] = []map[string]any{
				{"name": "a", "services": []string{"s"}, "lane": "blue", "units": "1", "fallback": "global"},
				{"name": "b", "services": []string{"s"}, "lane": "green", "units": "2", "fallback": "global"}}
		}, "service `s` already has channel"},
		{"global writer", func(m map[string]any) { m["global_writer"] = map[string]any{"zone": "az-q"} }, "`global_writer.zone` names unknown zone `az-q`"},
		{"domain map", func(m map[string]any) {
			m["domains"] = map[string]any{"search": map[string]any{"unit_map": []map[string]any{{"units": "0-98", "lane": "blue"}}}}
		}, "domain `search`"},
	}
	for _, c := range cases {
		m := dialTable(3, 100, 50, nil)
		c.change(m)
		_, err := DecodeTable(mustJSON(t, m))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "routing table JSON: ") {
			t.Fatalf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	for _, text := range []string{"", "{", "[]", "null", `{"version": 1}`} {
		if _, err := DecodeTable([]byte(text)); err == nil {
			t.Fatalf("%q was decoded", text)
		}
	}
	// The first releases' form (colors and blue_units, no zones): still decoded.
	legacy := map[string]any{"version": 4, "units": 100, "blue_units": 30, "colors": map[string]any{"blue": "az-a", "green": "az-b"},
		"pins": map[string]any{}, "unit_mode": "hash", "digits_skip": nil}
	table := decode(t, legacy)
	for i := 0; i < 500; i++ {
		tag, _ := table.Tag(fmt.Sprintf("u%d", i))
		if (tag.Unit < 30) != (tag.Lane == "blue") || (tag.Lane == "blue") != (tag.Zone == "az-a") {
			t.Fatalf("%+v", tag)
		}
	}
	t.Logf("FIGURE decode_refusals=%d", len(cases)+5)
}

// The golden vectors of the whole published rule (tests/fixtures/routing_vectors.json, written by
// scripts/routing_vectors.py from scripts/reference_tag.py): three zones, a non-dial map, pins, a
// second domain and release channels, as published and suspended; tests/routing_vectors.rs checks
// the Rust core against the same rows.
// routingVectorsFile is tests/fixtures/routing_vectors.json: published tables and their rows.
type routingVectorsFile struct {
	Tables []struct {
		Name  string          `json:"name"`
		Table json.RawMessage `json:"table"`
		Rows  [][]any         `json:"rows"`
	} `json:"tables"`
}

func routingVectors(t *testing.T) routingVectorsFile {
	var file routingVectorsFile
	fixture(t, "routing_vectors.json", &file)
	return file
}

func TestRoutingVectorsMatchTheFixture(t *testing.T) {
	file := routingVectors(t)
	str := func(v any) string { s, _ := v.(string); return s }
	checked := map[string]int{}
	for _, f := range file.Tables {
		table, err := DecodeTable(f.Table)
		if err != nil {
			t.Fatalf("%s: decode: %v", f.Name, err)
		}
		for _, row := range f.Rows {
			user, domain, service := str(row[0]), str(row[1]), str(row[2])
			name := fmt.Sprintf("%s: user %q, domain %q, service %q", f.Name, user, domain, service)
			got, err := table.TagForServiceIn(domain, user, service)
			if want := str(row[8]); want != "" {
				if want != "channel_unavailable" || !errors.Is(err, ErrChannelUnavailable) {
					t.Fatalf("%s: want %s, got %+v, %v", name, want, got, err)
				}
				checked[want]++
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.Lane != str(row[3]) || got.Zone != str(row[4]) || got.Pinned != row[6].(bool) || got.Reason != str(row[7]) {
				t.Fatalf("%s: got %+v, want %v", name, got, row)
			}
			if unit, ok := row[5].(float64); ok && uint32(unit) != got.Unit {
				t.Fatalf("%s: unit %d, want %v", name, got.Unit, unit)
			}
			checked[got.Reason]++
		}
	}
	total := 0
	for _, n := range checked {
		total += n
	}
	for _, reason := range []string{"pin", "unit", "channel:orders-v2", "channel:billing-v3", "channel_unavailable"} {
		if checked[reason] == 0 {
			t.Fatalf("no row decided by %s: %v", reason, checked)
		}
	}
	if total != 2080 {
		t.Fatalf("%d rows, want 2080", total)
	}
	t.Logf("FIGURE routing_vectors=%d %v", total, checked)
}

// The write check of a write by a service on the routing vectors' tables, as published and with
// units 0-49 frozen in both domains: a release channel that selects the user owns their writes of
// that service (owned in its zone, misrouted elsewhere), a suspended `reject` channel leaves them
// without an owner, a newer caller is behind, and every other write is the map's check; a freeze
// (the map's units 0-49, or a channel change's) makes the writes it covers frozen, whichever rule
// routes them (pin, channel or map). Rows of tests/fixtures/routing_vectors.json;
// the same rule as tests/routing_vectors.rs and the Java FixturesTest.
func TestServiceWriteChecksFollowTheRoutingVectors(t *testing.T) {
	file := routingVectors(t)
	str := func(v any) string { s, _ := v.(string); return s }
	seen := map[string]int{}
	for _, f := range file.Tables {
		for _, variant := range []string{"published", "frozen", "channel freeze"} {
			frozen := variant == "frozen"
			var raw map[string]any
			if err := json.Unmarshal(f.Table, &raw); err != nil {
				t.Fatal(err)
			}
			if frozen {
				raw["frozen"] = map[string]any{"default": "0-49", "search": "0-49"}
			}
			if variant == "channel freeze" {
				// As tests/routing_vectors.rs: orders and billing writes in the default domain
				// of units 0-49 and of alice; the map freeze every write of units 0-49 in both
				// domains; either whichever rule routes the user.
				raw["channel_freeze"] = map[string]any{"channel": "orders-v2", "domain": "default",
					"services": []string{"billing", "orders"}, "units": "0-49", "users": []string{"alice"}}
			}
			body, _ := json.Marshal(raw)
			table, err := DecodeTable(body)
			if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			for _, row := range f.Rows {
				user, domain, service := str(row[0]), str(row[1]), str(row[2])
				if service == "" {
					continue
				}
				name := fmt.Sprintf("%s (%s): user %q, domain %q, service %q", f.Name, variant, user, domain, service)
				unit, _ := table.UnitOf(user)
				reason := str(row[7])
				covered := (variant == "channel freeze" && domain == "" && (service == "orders" || service == "billing") &&
					(unit < 50 || user == "alice")) ||
					(frozen && unit < 50 && (domain == "" || domain == "default" || domain == "search"))
				for _, z := range table.Zones {
					got, err := table.CheckWriteFor(domain, service, user, z.Name, table.Version)
					switch {
					case str(row[8]) != "":
						if !errors.Is(err, ErrChannelUnavailable) {
							t.Fatalf("%s in %s: want channel_unavailable, got %+v, %v", name, z.Name, got, err)
						}
						seen["channel_unavailable"]++
						continue
					case err != nil:
						t.Fatalf("%s in %s: %v", name, z.Name, err)
					case covered:
						if got.Check != Frozen || got.OwnerZone != str(row[4]) {
							t.Fatalf("%s in %s: got %+v, want frozen owner %s", name, z.Name, got, str(row[4]))
						}
						rule := "map"
						if strings.HasPrefix(reason, "channel:") {
							rule = "channel"
						} else if reason == "pin" {
							rule = "pin"
						}
						seen[variant+"/"+rule]++
					case strings.HasPrefix(reason, "channel:"):
						want := Misrouted
						if z.Name == str(row[4]) {
							want = Owned
						}
						if got.Check != want || got.OwnerZone != str(row[4]) {
							t.Fatalf("%s in %s: got %+v, want %s owner %s", name, z.Name, got, want, str(row[4]))
						}
						seen["channel/"+got.Check]++
					default:
						byMap, _ := table.CheckWriteIn(domain, user, z.Name, table.Version)
						if got != byMap {
							t.Fatalf("%s in %s: got %+v, the map's check %+v", name, z.Name, got, byMap)
						}
						if got.Check == Frozen {
							t.Fatalf("%s in %s: got %+v, frozen outside the freeze", name, z.Name, got)
						}
						seen["map/"+got.Check]++
					}
				}
				if str(row[8]) == "" {
					got, err := table.CheckWriteFor(domain, service, user, table.Zones[0].Name, table.Version+1)
					if err != nil || got.Check != Behind {
						t.Fatalf("%s: a newer caller: %+v, %v", name, got, err)
					}
				}
			}
		}
	}
	for _, k := range []string{"channel/owned", "channel/misrouted", "map/owned", "map/misrouted", "channel_unavailable",
		"frozen/map", "frozen/channel", "channel freeze/channel", "channel freeze/map", "channel freeze/pin"} {
		if seen[k] == 0 {
			t.Fatalf("no check answered %s: %v", k, seen)
		}
	}
	t.Logf("FIGURE service_write_checks %v", seen)
}
