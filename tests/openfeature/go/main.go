// Command ofrep-evaluate evaluates flags through the official OpenFeature Go SDK and the OFREP
// provider from go-sdk-contrib, for tests/edge_openfeature.rs (built by
// scripts/openfeature-sdks.sh).
//
// usage: ofrep-evaluate BASE_URL CASES_JSON
//
// CASES_JSON holds [{"flag": KEY, "targetingKey": USER or null}, ...]; prints one JSON line per
// case, in order, with the SDK's evaluation details (value, variant, reason, error_code,
// metadata).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/open-feature/go-sdk-contrib/providers/ofrep"
	"github.com/open-feature/go-sdk/openfeature"
)

type testCase struct {
	Flag         string  `json:"flag"`
	TargetingKey *string `json:"targetingKey"`
}

type answer struct {
	Value     string         `json:"value"`
	Variant   *string        `json:"variant"`
	Reason    *string        `json:"reason"`
	ErrorCode *string        `json:"error_code"`
	Metadata  map[string]any `json:"metadata"`
}

// Like a web application: several goroutines evaluating at once, through one provider.
const workers = 8

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: ofrep-evaluate BASE_URL CASES_JSON")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "ofrep-evaluate:", err)
		os.Exit(1)
	}
}

func run(baseURL, casesPath string) error {
	raw, err := os.ReadFile(casesPath)
	if err != nil {
		return err
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		return fmt.Errorf("reading %s: %w", casesPath, err)
	}
	// A client that keeps a connection per worker, as a service would configure it; the default
	// keeps two idle connections per host.
	httpClient := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: workers},
	}
	if err := openfeature.SetProviderAndWait(ofrep.NewProvider(baseURL, ofrep.WithClient(httpClient))); err != nil {
		return fmt.Errorf("setting the OFREP provider: %w", err)
	}
	defer openfeature.Shutdown()
	client := openfeature.NewDefaultClient()

	lines := make([][]byte, len(cases))
	errs := make([]error, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				lines[i], errs[i] = evaluate(client, cases[i])
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()

	out := bufio.NewWriter(os.Stdout)
	for i, line := range lines {
		if errs[i] != nil {
			return errs[i]
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Flush()
}

func evaluate(client *openfeature.Client, c testCase) ([]byte, error) {
	evalCtx := openfeature.NewTargetlessEvaluationContext(nil)
	if c.TargetingKey != nil {
		evalCtx = openfeature.NewEvaluationContext(*c.TargetingKey, nil)
	}
	// The error is the one in the details (ErrorCode, ErrorMessage): recorded, not fatal.
	d, _ := client.StringValueDetails(context.Background(), c.Flag, "no-colour", evalCtx)
	a := answer{Value: d.Value, Metadata: map[string]any(d.FlagMetadata)}
	if d.Variant != "" {
		a.Variant = &d.Variant
	}
	if d.Reason != "" {
		reason := string(d.Reason)
		a.Reason = &reason
	}
	if d.ErrorCode != "" {
		code := string(d.ErrorCode)
		a.ErrorCode = &code
	}
	if a.Metadata == nil {
		a.Metadata = map[string]any{}
	}
	return json.Marshal(a)
}
