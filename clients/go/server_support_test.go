package tidegate

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tokens of the test servers: an operator for routing changes, a service token for the
// Routers (registering as a subscriber and acknowledging).
const (
	operatorToken = "tg_test_operator_alice"
	serviceToken  = "tg_test_service"
)

// tidegateBin is the real binary, from TIDEGATE_TEST_BIN. Tests that need it fail (never skip)
// without it.
func tidegateBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("TIDEGATE_TEST_BIN")
	if bin == "" {
		t.Fatal("TIDEGATE_TEST_BIN is not set: point it at a tidegate binary (e.g. target/debug/tidegate); these tests run against the real coordinator")
	}
	if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		t.Fatalf("TIDEGATE_TEST_BIN=%s is not an executable file: %v", bin, err)
	}
	return bin
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// configTOML is a configuration with an operator token and a service token; top holds
// top-level keys and sections further sections (both may be empty). Unless sections has its
// own [freeze] table, moves are at once (by_default = false): these tests count one version per
// dial and hold Routers that do not acknowledge on purpose, while a move frozen by the server's
// default is three versions and waits for every live subscriber (as the Rust suites'
// tests/common/mod.rs config_toml does).
func configTOML(top, sections string) string {
	atOnce := "[freeze]\nby_default = false\n"
	if strings.Contains(sections, "[freeze]") {
		atOnce = ""
	}
	return fmt.Sprintf(`service_tokens_sha256 = ["%s"]
%s

%s

%s
[[operators]]
name = "alice"
token_sha256 = "%s"
role = "operator"
`, sha256Hex(serviceToken), top, sections, atOnce, sha256Hex(operatorToken))
}

// cleanEnv is the environment without TIDEGATE_* variables (the server reads them as
// configuration keys), plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIDEGATE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// server is a real `tidegate serve` on a free port.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	URL    string
	dir    string
	config string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
}

func startServer(t testing.TB, toml string) *server {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "tidegate.toml")
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerAt(t, dir, config, 0)
}

func startServerAt(t testing.TB, dir, config string, port int) *server {
	t.Helper()
	s := &server{t: t, dir: dir, config: config}
	s.launch([]string{"serve", "--address", "127.0.0.1", "--port", fmt.Sprint(port),
		"--config", config, "--data-dir", filepath.Join(dir, "data")}, nil, "tidegate listening on ")
	return s
}

// startEdge is a real `tidegate edge` on a free port, fed by coordinators.
func startEdge(t testing.TB, config, coordinators string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{t: t, dir: dir, config: config}
	s.launch([]string{"edge", "--address", "127.0.0.1", "--port", "0", "--coordinator", coordinators, "--config", config},
		[]string{"TIDEGATE_EDGE__CACHE_PATH=" + filepath.Join(dir, "edge.json")}, "tidegate edge listening on ")
	return s
}

func (s *server) launch(args, env []string, announce string) {
	t := s.t
	t.Helper()
	bin := tidegateBin(t)
	s.exited = make(chan struct{})
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = cleanEnv(env...)
	stdout, _ := s.cmd.StdoutPipe()
	stderr, _ := s.cmd.StderrPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := stderr.Read(buf)
			s.mu.Lock()
			s.stderr.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	found := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if url, ok := strings.CutPrefix(scanner.Text(), announce); ok {
				found <- url
			}
		}
	}()
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.kill)
	select {
	case s.URL = <-found:
	case <-s.exited:
		t.Fatalf("tidegate %s exited at start; stderr:\n%s", args[0], s.stderrText())
	case <-time.After(30 * time.Second):
		s.kill()
		t.Fatalf("tidegate %s did not announce its port; stderr:\n%s", args[0], s.stderrText())
	}
}

func (s *server) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// kill is kill -9 of this server's own process, and waits for it.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.exited
}

func (s *server) port() string { return s.URL[strings.LastIndex(s.URL, ":")+1:] }

var httpClient = &http.Client{Timeout: 20 * time.Second}

// call sends a request with the operator token and decodes the JSON answer.
func (s *server) call(method, path string, body any) (int, map[string]any) {
	s.t.Helper()
	var reader io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		reader = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, s.URL+path, reader)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		s.t.Fatalf("%s %s: HTTP %d, not JSON: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (s *server) ok(method, path string, body any) map[string]any {
	s.t.Helper()
	status, out := s.call(method, path, body)
	if status/100 != 2 {
		s.t.Fatalf("%s %s: HTTP %d %v", method, path, status, out)
	}
	return out
}

func num(v any) uint64 {
	n, _ := v.(json.Number).Int64()
	return uint64(n)
}

func (s *server) version() uint64 { return num(s.ok("GET", "/v1/routing", nil)["version"]) }

// dial moves the dial and returns the new version and when the answer arrived.
func (s *server) dial(percent int) (uint64, time.Time) {
	v, _, answered := s.dialTimed(percent)
	return v, answered
}

// dialTimed is dial, also returning when the PUT was sent.
func (s *server) dialTimed(percent int) (uint64, time.Time, time.Time) {
	expected := s.version()
	sent := time.Now()
	out := s.ok("PUT", "/v1/dial", map[string]any{"blue_percent": percent, "expected_version": expected, "reason": "go client test"})
	return num(out["version"]), sent, time.Now()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(float64(len(sorted)-1)*p+0.5)]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

func serviceOptions() Options {
	return Options{Token: serviceToken, StallTimeout: 3 * time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
}
