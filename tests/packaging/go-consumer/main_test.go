package main

import "testing"

func TestConsumer(t *testing.T) {
	if err := run("../../fixtures/routing_base.json"); err != nil {
		t.Fatal(err)
	}
}
