// Command orders is the packaging check's consumer of the Go client: it decodes a fixed routing
// table (tests/fixtures/routing_base.json by default), tags users with it and runs the write
// check, printing what it found. It uses only the client's exported API.
package main

import (
	"fmt"
	"os"

	tidegate "github.com/tidegate/tidegate/clients/go"
)

func main() {
	path := "../../fixtures/routing_base.json"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := run(path); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// run tags a pinned user and an unpinned one with the table at path and checks writes: the
// pinned user's zone owns their writes, another zone is told the owner, and a caller that routed
// at a newer version than the table is answered behind.
func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	table, err := tidegate.DecodeTable(data)
	if err != nil {
		return err
	}
	router := tidegate.Fixed(table)
	alice, err := router.Tag("alice") // pinned to red (az-c) in the fixture
	if err != nil {
		return err
	}
	if !alice.Pinned || alice.Lane != "red" || alice.Zone != "az-c" {
		return fmt.Errorf("alice tagged %+v, want the pin red/az-c", alice)
	}
	user, err := router.Tag("user-42")
	if err != nil {
		return err
	}
	checks := []struct {
		user, zone string
		incoming   uint64
		want       string
	}{
		{"alice", "az-c", alice.Version, tidegate.Owned},
		{"alice", "az-a", alice.Version, tidegate.Misrouted},
		{"alice", "az-c", alice.Version + 1, tidegate.Behind},
		{"user-42", user.Zone, 0, tidegate.Owned},
	}
	for _, c := range checks {
		answer, err := router.CheckWrite(c.user, c.zone, c.incoming)
		if err != nil {
			return err
		}
		if answer.Check != c.want {
			return fmt.Errorf("write check of %s in %s at v%d: %s, want %s", c.user, c.zone, c.incoming, answer.Check, c.want)
		}
		if c.want == tidegate.Misrouted && answer.OwnerZone != "az-c" {
			return fmt.Errorf("misrouted write of alice names owner %q, want az-c", answer.OwnerZone)
		}
	}
	fmt.Printf("go consumer: version %d, alice -> %s/%s (pin), user-42 -> %s/%s unit %d, %d write checks as expected\n",
		alice.Version, alice.Lane, alice.Zone, user.Lane, user.Zone, user.Unit, len(checks))
	return nil
}
