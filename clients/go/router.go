package tidegate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is the default stall bound: the coordinators' default heartbeat (5 s)
// and 3 s of margin.
const DefaultStallTimeout = 8 * time.Second

// HeartbeatHeader is the response header of the watch stream announcing the coordinator's
// heartbeat interval in milliseconds.
const HeartbeatHeader = "x-tidegate-heartbeat-ms"

// heartbeatMargin: the stall bound is at least the announced heartbeat plus this.
const heartbeatMargin = time.Second

// ackTimeout bounds one acknowledgement (and at most the stall bound).
const ackTimeout = 5 * time.Second

// Identity is how the client names itself to the coordinator.
type Identity struct {
	SubscriberID string
	Zone         string
	Kind         string
}

// Options are the Router's connection and behaviour settings; the zero value suits tests,
// and Token and CachePath are what a service sets.
type Options struct {
	// Token is a service token, sent as `Authorization: Bearer` on the watch and on every
	// ack. Registering as a subscriber and acknowledging are writes: without a token the
	// Router follows the table anonymously and does not acknowledge.
	Token string
	// CachePath is where to keep the last routing event (written atomically on every new
	// version); a Router started while every coordinator is down serves it.
	CachePath string
	// StallTimeout is the stall bound (DefaultStallTimeout when 0): when neither an event nor
	// a heartbeat arrives within it (nor, on a new connection, the answer), the coordinator is
	// judged stalled and the Router moves to the next one. Raised to the coordinator's
	// announced heartbeat plus a second when shorter.
	StallTimeout time.Duration
	// ConnectTimeout bounds a TCP connect (3 s when 0).
	ConnectTimeout time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff after a whole round of the list
	// failed (100 ms and 5 s when 0); it doubles, with full jitter.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// NoAck turns acknowledgements off (only to simulate a stuck subscriber in tests).
	NoAck bool
	// Fallback is what an untagged read gets: FallbackRandom (default) or FallbackReject.
	Fallback string
	// CAFile: for https:// coordinators, trust only the certificates in this PEM file instead
	// of the system's roots. Defaults to TIDEGATE_CA_FILE when that is set.
	CAFile string
	// Transport, when set, is the HTTP transport (and CAFile is not used); by default a
	// transport with ConnectTimeout, CAFile and no compression.
	Transport http.RoundTripper
}

// CAFileEnv names the environment variable CAFile defaults to.
const CAFileEnv = "TIDEGATE_CA_FILE"

// Fallbacks of an untagged request.
const (
	FallbackRandom = "random"
	FallbackReject = "reject"
)

// Origin says where the served table came from.
type Origin string

const (
	OriginNothing     Origin = "nothing"
	OriginDiskCache   Origin = "the disk cache"
	OriginCoordinator Origin = "the coordinator"
	OriginFixed       Origin = "a fixed table"
)

// Status is the Router's state, for health checks and logs.
type Status struct {
	Connected   bool
	Origin      Origin
	Version     uint64 // 0: no table
	UpdatedAt   time.Time
	LastError   string
	Reconnects  uint64
	Coordinator string // the coordinator of the open (or last tried) stream
	// Stalled: the last coordinator sent neither an event nor a heartbeat within the bound.
	Stalled   bool
	LastHeard time.Time
	// Refused: a table from another command log than the held one's was refused.
	Refused string
	// Rejected counts routing events refused as malformed or of an unknown format.
	Rejected             uint64
	CoordinatorHeartbeat time.Duration
	StallBound           time.Duration
	// Lease is the lease the open (or last) stream announced (x-tidegate-lease-ms); 0: none, and
	// write checks answer as without leases.
	Lease time.Duration
	// LeaseConfirmed is the coordinator's time of the last confirmation received (zero: none).
	LeaseConfirmed time.Time
	// LeaseLeft is how long the lease still runs; LeaseExpired: it has run out (or no
	// confirmation came yet), and write checks answer `unconfirmed` instead of `owned`.
	LeaseLeft    time.Duration
	LeaseExpired bool
}

func (s Status) String() string {
	version := "no table"
	if s.Version > 0 {
		version = fmt.Sprintf("version %d", s.Version)
	}
	out := fmt.Sprintf("serving %s from %s", version, s.Origin)
	if s.Refused != "" {
		out += "; " + s.Refused
	}
	if s.LeaseExpired {
		out += fmt.Sprintf("; no coordinator confirmed the table within its lease (%v): writes answer unconfirmed", s.Lease)
	}
	if !s.Connected && s.Origin != OriginFixed {
		if s.Stalled {
			out += "; coordinator stalled"
		} else {
			out += "; coordinator unreachable"
		}
		if s.LastError != "" {
			out += " (" + s.LastError + ")"
		}
	}
	return out
}

// ErrNoTable: no table yet (coordinator unreachable and no disk cache).
var ErrNoTable = errors.New("no routing table yet (coordinator unreachable and no disk cache)")

// ErrUntagged: a request without tag or user ID under the `reject` fallback.
var ErrUntagged = errors.New("the request carries no tag and no user ID, and the fallback is `reject`")

// Router keeps a local copy of the routing table up to date over the watch stream of a list of
// coordinators, acknowledges each applied version, keeps a disk cache, and tags locally.
// Tagging never waits for the network. Safe for concurrent use; Close stops it.
type Router struct {
	table    atomic.Pointer[Table]
	acked    atomic.Uint64
	mu       sync.Mutex // guards status and the log id of the held table
	status   Status
	fallback string

	// Write scopes open, by the table version current when each opened; the acker waits for
	// every scope opened under an older version than the one it acknowledges.
	scopeMu sync.Mutex
	scopes  map[uint64]int
	ended   *sync.Cond
	// The newest version to acknowledge and the coordinator that sent it.
	ackMu      sync.Mutex
	ackVersion uint64
	ackBase    string
	ackWanted  chan struct{}
	lease      lease

	endpoints []string
	identity  Identity
	opts      Options
	client    *http.Client
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
}

// FirstChoice is which of count coordinators a client with this subscriber ID tries first
// (FNV-1a 64 with a final mix, as the Rust client's first_choice), so clients spread over the
// replicas and one hung coordinator at the head of every list holds only its share of them.
func FirstChoice(subscriberID string, count int) int {
	if count <= 1 {
		return 0
	}
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(subscriberID); i++ {
		h ^= uint64(subscriberID[i])
		h *= 0x00000100000001b3
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return int(h % uint64(count))
}

// Connect starts watching urls (one coordinator, or several comma-separated, tried in turn
// whenever the stream breaks, starting at FirstChoice). It returns at once: with the disk
// cache's table if there is one, else with no table until the first event (WaitForVersion).
func Connect(urls string, identity Identity, opts Options) (*Router, error) {
	var endpoints []string
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		parsed, err := url.Parse(u)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return nil, fmt.Errorf("invalid coordinator URL: `%s` must be http:// or https:// with a host", u)
		}
		endpoints = append(endpoints, parsed.Scheme+"://"+parsed.Host)
	}
	if len(endpoints) == 0 {
		return nil, errors.New("invalid coordinator URL: no coordinator URL given")
	}
	if opts.StallTimeout < 0 {
		return nil, errors.New("invalid router option: StallTimeout (the stall bound) must not be negative")
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 3 * time.Second
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = 100 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 5 * time.Second
	}
	if opts.Fallback == "" {
		opts.Fallback = FallbackRandom
	}
	if opts.Fallback != FallbackRandom && opts.Fallback != FallbackReject {
		return nil, fmt.Errorf("invalid router option: Fallback `%s` (expected `random` or `reject`)", opts.Fallback)
	}
	if opts.CAFile == "" {
		opts.CAFile = os.Getenv(CAFileEnv)
	}
	transport := opts.Transport
	if transport == nil {
		var tlsConfig *tls.Config
		if opts.CAFile != "" {
			pem, err := os.ReadFile(opts.CAFile)
			if err != nil {
				return nil, fmt.Errorf("cannot read the CA file %s: %v", opts.CAFile, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("the CA file %s holds no PEM certificate", opts.CAFile)
			}
			tlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		transport = &http.Transport{
			TLSClientConfig:     tlsConfig,
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router{
		fallback:  opts.Fallback,
		endpoints: endpoints,
		identity:  identity,
		opts:      opts,
		client:    &http.Client{Transport: transport},
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		status:    Status{Origin: OriginNothing},
	}
	r.lease.epoch = time.Now()
	r.initScopes()
	if opts.CachePath != "" {
		if data, err := os.ReadFile(opts.CachePath); err == nil {
			if t, err := DecodeTable(data); err == nil {
				r.table.Store(t)
				r.status.Origin = OriginDiskCache
				r.status.Version = t.Version
				if info, err := os.Stat(opts.CachePath); err == nil {
					r.status.UpdatedAt = info.ModTime()
				}
			} else {
				r.status.LastError = fmt.Sprintf("ignored the disk cache %s: %v", opts.CachePath, err)
			}
		}
	}
	go r.watchLoop()
	go r.ackLoop()
	return r, nil
}

// Fixed is a Router over a fixed table, with no network: for tests and offline tools.
func Fixed(t *Table) *Router {
	r := &Router{fallback: FallbackRandom, done: make(chan struct{}),
		status: Status{Origin: OriginFixed, Version: t.Version, UpdatedAt: time.Now()}}
	r.initScopes()
	r.table.Store(t)
	close(r.done)
	return r
}

func (r *Router) initScopes() {
	r.scopes = map[uint64]int{}
	r.ended = sync.NewCond(&r.scopeMu)
	r.ackWanted = make(chan struct{}, 1)
}

// Close stops the watcher and waits for it.
func (r *Router) Close() {
	if r.cancel != nil {
		r.cancel()
	}
	<-r.done
}

// Table is the current table (nil before the first).
func (r *Router) Table() *Table { return r.table.Load() }

// Version is the current table's version (0: no table).
func (r *Router) Version() uint64 {
	if t := r.table.Load(); t != nil {
		return t.Version
	}
	return 0
}

// AckedVersion is the newest version this client acknowledged to a coordinator.
func (r *Router) AckedVersion() uint64 { return r.acked.Load() }

// LogID is the command log the held table came from ("" when unknown).
func (r *Router) LogID() string {
	if t := r.table.Load(); t != nil {
		return t.LogID
	}
	return ""
}

// Status gives the Router's state.
func (r *Router) Status() Status {
	r.mu.Lock()
	s := r.status
	r.mu.Unlock()
	s.Lease = time.Duration(r.lease.announced.Load())
	if c := r.lease.confirmedAt.Load(); c > 0 {
		s.LeaseConfirmed = time.UnixMilli(c)
	}
	if left, ok := r.lease.remaining(); ok {
		s.LeaseLeft = max(left, 0)
		s.LeaseExpired = left <= 0
	}
	return s
}

// WaitForVersion blocks until the table is at version or newer, or timeout passes.
func (r *Router) WaitForVersion(version uint64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if r.Version() >= version && r.Version() > 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *Router) current() (*Table, error) {
	t := r.table.Load()
	if t == nil {
		return nil, ErrNoTable
	}
	return t, nil
}

// Tag tags a user locally with the global rule: the same answer as the server's GET /v1/tag.
func (r *Router) Tag(user string) (Tag, error) { return r.TagForServiceIn("", user, "") }

// TagIn tags a user in a routing domain.
func (r *Router) TagIn(domain, user string) (Tag, error) { return r.TagForServiceIn(domain, user, "") }

// TagForService tags a call of service for user (pin > the service's release channel > map),
// as GET /v1/tag?service= does; Tag.Reason says which rule decided.
func (r *Router) TagForService(user, service string) (Tag, error) {
	return r.TagForServiceIn("", user, service)
}

// TagForServiceIn is TagForService in a routing domain.
func (r *Router) TagForServiceIn(domain, user, service string) (Tag, error) {
	t, err := r.current()
	if err != nil {
		return Tag{}, err
	}
	return t.TagForServiceIn(domain, user, service)
}

// CheckWrite is the write check with the current table (see Table.CheckWrite). Open a
// WriteScope before it and keep it until the write is committed. When the watch stream announced
// a lease (x-tidegate-lease-ms) and it has run out, Owned becomes Unconfirmed (503 and retry, like
// Frozen): no coordinator has confirmed lately that this table is current. The other answers stay.
func (r *Router) CheckWrite(user, localZone string, incoming uint64) (WriteAnswer, error) {
	return r.CheckWriteIn("", user, localZone, incoming)
}

// CheckWriteIn is CheckWrite in a routing domain.
func (r *Router) CheckWriteIn(domain, user, localZone string, incoming uint64) (WriteAnswer, error) {
	t, err := r.current()
	if err != nil {
		return WriteAnswer{}, err
	}
	return r.confirm(t.CheckWriteIn(domain, user, localZone, incoming))
}

// CheckWriteFor is the write check of a write by service with the current table (see
// Table.CheckWriteFor): that service's release channel owns the writes of the users it selects.
// Under a lease that has run out, Owned becomes Unconfirmed, as in CheckWrite.
func (r *Router) CheckWriteFor(domain, service, user, localZone string, incoming uint64) (WriteAnswer, error) {
	t, err := r.current()
	if err != nil {
		return WriteAnswer{}, err
	}
	return r.confirm(t.CheckWriteFor(domain, service, user, localZone, incoming))
}

// CheckGlobalWrite is the global write check with the current table (see
// Table.CheckGlobalWrite). Open a WriteScope before it and keep it until the write is committed,
// as for CheckWrite. Under a lease that has run out, Owned becomes Unconfirmed, as in CheckWrite:
// a zone cut off from the coordinators may no longer be the global writer.
func (r *Router) CheckGlobalWrite(localZone string, incoming uint64) (GlobalWriteAnswer, error) {
	t, err := r.current()
	if err != nil {
		return GlobalWriteAnswer{}, err
	}
	a, err := t.CheckGlobalWrite(localZone, incoming)
	if err == nil && a.Check == Owned && r.lease.expired() {
		a.Check = Unconfirmed
	}
	return a, err
}

// WriteScope is a write in flight: the Router acknowledges no table newer than the one
// current when the scope opened until End.
type WriteScope struct {
	once    sync.Once
	r       *Router
	version uint64
}

// WriteScope opens a write's scope: hold it from before CheckWrite until the write is
// committed or refused. While it is open the Router applies newer tables (checks made meanwhile
// use them) but does not acknowledge them, so when a move's freeze barrier sees every subscriber
// acknowledge, no write judged with an older table is still being committed here. Scopes opened
// later are not held up by it. Keep a scope to one write: an open one holds moves like a stuck
// subscriber.
func (r *Router) WriteScope() *WriteScope {
	r.scopeMu.Lock()
	v := r.Version()
	r.scopes[v]++
	r.scopeMu.Unlock()
	return &WriteScope{r: r, version: v}
}

// End closes the scope (idempotent).
func (s *WriteScope) End() {
	s.once.Do(func() {
		s.r.scopeMu.Lock()
		if s.r.scopes[s.version]--; s.r.scopes[s.version] == 0 {
			delete(s.r.scopes, s.version)
		}
		s.r.ended.Broadcast()
		s.r.scopeMu.Unlock()
	})
}

// scopesBefore reports whether a write scope opened under a version older than v is open.
func (r *Router) scopesBefore(v uint64) bool {
	for opened := range r.scopes {
		if opened < v {
			return true
		}
	}
	return false
}

// Untagged is the zone index of a request without a user ID, by the fallback: weighted by the
// units each zone owns, or ErrUntagged under `reject`.
func (r *Router) Untagged() (int, error) {
	t, err := r.current()
	if err != nil {
		return 0, err
	}
	if r.fallback == FallbackReject {
		return 0, ErrUntagged
	}
	draw := rand.Float64()
	units := float64(t.Units)
	counts := make([]int, len(t.Zones))
	for _, z := range t.owners {
		counts[z]++
	}
	below, last := 0.0, 1
	for zone, owned := range counts {
		if owned == 0 {
			continue
		}
		below += float64(owned) / units
		last = zone
		if draw < below {
			return zone, nil
		}
	}
	return last, nil
}

// ---- the watcher ----

func (r *Router) setStatus(f func(s *Status)) {
	r.mu.Lock()
	f(&r.status)
	r.mu.Unlock()
}

func (r *Router) sleep(d time.Duration) {
	select {
	case <-r.ctx.Done():
	case <-time.After(d):
	}
}

func (r *Router) watchLoop() {
	defer close(r.done)
	backoff := r.opts.BackoffMin
	next := FirstChoice(r.identity.SubscriberID, len(r.endpoints))
	tried := 0
	for r.ctx.Err() == nil {
		endpoint := r.endpoints[next%len(r.endpoints)]
		next++
		tried++
		r.setStatus(func(s *Status) { s.Coordinator = endpoint })
		ended := r.watchOnce(endpoint, &backoff)
		if r.ctx.Err() != nil {
			r.setStatus(func(s *Status) { s.Connected = false })
			return
		}
		r.setStatus(func(s *Status) {
			s.Connected = false
			s.Stalled = ended.stalled
			if ended.err != "" {
				s.LastError = ended.err
			}
			s.Reconnects++
		})
		if ended.opened {
			tried = 1
		}
		if tried < len(r.endpoints) {
			continue
		}
		tried = 0
		jittered := time.Duration(rand.Float64() * float64(backoff))
		r.sleep(max(jittered, 10*time.Millisecond))
		backoff = min(backoff*2, r.opts.BackoffMax)
	}
}

type ended struct {
	opened  bool
	stalled bool
	err     string
}

type sseEvent struct {
	event string
	id    string
	data  string
}

// item is an event (comment == false) or a comment (a heartbeat; text is what follows its colon).
type item struct {
	ev      sseEvent
	comment bool
	text    string
	err     error
}

func (r *Router) watchOnce(base string, backoff *time.Duration) ended {
	// One snapshot of the held table: the version resumed from and the log it belongs to.
	held := r.table.Load()
	q := url.Values{}
	if r.opts.Token != "" {
		q.Set("subscriber_id", r.identity.SubscriberID)
		q.Set("zone", r.identity.Zone)
		q.Set("kind", r.identity.Kind)
	}
	// The log the resumed version belongs to: a coordinator on another log ignores
	// Last-Event-ID and sends its current table (which apply refuses, loudly) instead of
	// nothing while its version is not newer than ours.
	if held != nil && held.LogID != "" {
		q.Set("log_id", held.LogID)
	}
	path := "/v1/routing/watch"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return ended{err: fmt.Sprintf("cannot watch %s: %v", base, err)}
	}
	req.Header.Set("Accept", "text/event-stream")
	// Resume: a server on the log named by log_id sends nothing until something newer exists,
	// and counts this as our acknowledgement of it. So a registered subscriber names the version
	// it acknowledged (not merely applied: a write scope may still hold that back), and gets the
	// held table again otherwise, to acknowledge through the acker.
	var resume uint64
	if held != nil {
		resume = held.Version
	}
	if r.opts.Token != "" {
		resume = r.acked.Load()
	}
	if resume > 0 && !r.opts.NoAck {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(resume, 10))
	}
	if r.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.opts.Token)
	}
	bound := r.opts.StallTimeout
	var silent atomic.Bool
	timer := time.AfterFunc(bound, func() { silent.Store(true); cancel() })
	defer timer.Stop()
	resp, err := r.client.Do(req)
	if err != nil {
		timer.Stop()
		if silent.Load() {
			return ended{stalled: true, err: fmt.Sprintf("%s is stalled: it took the connection but did not answer the watch within %v", base, bound)}
		}
		return ended{err: fmt.Sprintf("cannot watch %s: %v", base, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		timer.Stop()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return ended{err: fmt.Sprintf("cannot watch %s: HTTP %d %s", base, resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	var heartbeat time.Duration
	if ms, err := strconv.ParseUint(resp.Header.Get(HeartbeatHeader), 10, 64); err == nil {
		heartbeat = time.Duration(ms) * time.Millisecond
		bound = max(bound, heartbeat+heartbeatMargin)
	}
	timer.Reset(bound)
	// A coordinator that announces a lease and confirms none for a whole lease cannot read its
	// log: it is left as a stalled one is, for one that can.
	lease := announcedLease(resp.Header)
	r.lease.announce(lease)
	var unconfirmed atomic.Bool
	var confirmBound *time.Timer
	if lease > 0 {
		confirmBound = time.AfterFunc(lease, func() { unconfirmed.Store(true); cancel() })
		defer confirmBound.Stop()
	}
	r.setStatus(func(s *Status) {
		s.Connected = true
		s.Stalled = false
		s.LastError = ""
		s.LastHeard = time.Now()
		s.CoordinatorHeartbeat = heartbeat
		s.StallBound = bound
	})
	*backoff = r.opts.BackoffMin
	items := make(chan item, 1)
	go readEvents(ctx, resp.Body, items)
	broke := func(msg string) ended { return ended{opened: true, err: msg} }
	// foreign: this stream's last table was refused as another log's, so its confirmations are
	// of that log and do not renew the lease of the held table.
	foreign := false
	for {
		var it item
		select {
		case it = <-items:
		case <-ctx.Done():
		}
		if silent.Load() {
			return ended{opened: true, stalled: true, err: fmt.Sprintf(
				"%s is stalled: neither an event nor a heartbeat within %v; moving to the next coordinator", base, bound)}
		}
		if unconfirmed.Load() {
			return broke(fmt.Sprintf("%s has not confirmed its table for %v: moving to the next coordinator", base, lease))
		}
		if r.ctx.Err() != nil {
			return ended{opened: true}
		}
		if it.err != nil {
			if it.err == io.EOF {
				return broke("the coordinator closed the watch stream")
			}
			return broke(fmt.Sprintf("watch stream broke: %v", it.err))
		}
		timer.Reset(bound)
		r.setStatus(func(s *Status) { s.LastHeard = time.Now() })
		if it.comment {
			// In stream order: a confirmation covers the events before it, all applied by now.
			if c, ok := confirmation(it.text); ok && lease > 0 && r.lease.renew(c, time.Now().UnixMilli(), !foreign) {
				confirmBound.Reset(lease)
			}
			continue
		}
		if it.ev.event != "routing" {
			continue
		}
		msg, refused := r.apply(base, []byte(it.ev.data))
		if msg != "" {
			return broke(msg)
		}
		foreign = refused
	}
}

// announcedLease is the lease a watch stream's head announces (0: none, or not a positive
// whole number of milliseconds).
func announcedLease(head http.Header) time.Duration {
	ms, err := strconv.ParseUint(strings.TrimSpace(head.Get(LeaseHeader)), 10, 64)
	if err != nil || ms == 0 || ms > uint64(time.Duration(1<<62)/time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// readEvents parses the SSE stream into items until an error, sending each on out.
func readEvents(ctx context.Context, body io.Reader, out chan<- item) {
	send := func(it item) bool {
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	reader := bufio.NewReaderSize(body, 64*1024)
	var ev sseEvent
	var data []string
	dataSeen := false
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			send(item{err: err})
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if dataSeen || ev.event != "" {
				ev.data = strings.Join(data, "\n")
				if ev.event == "" {
					ev.event = "message"
				}
				if !send(item{ev: ev}) {
					return
				}
			}
			ev, data, dataSeen = sseEvent{}, nil, false
			continue
		}
		if text, ok := strings.CutPrefix(line, ":"); ok {
			if !send(item{comment: true, text: text}) {
				return
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			ev.event = value
		case "id":
			ev.id = value
		case "data":
			data = append(data, value)
			dataSeen = true
		}
	}
}

// apply takes a routing event: decodes it, refuses a table of another log (refused), stores and
// saves a newer one, and acknowledges. A non-empty msg breaks the stream (a malformed event).
func (r *Router) apply(base string, data []byte) (msg string, refused bool) {
	t, err := DecodeTable(data)
	if err != nil {
		msg = fmt.Sprintf("refused a routing event from %s: %v; keeping version %d", base, err, r.Version())
		r.setStatus(func(s *Status) { s.Rejected++; s.LastError = msg })
		return msg, false
	}
	held := r.table.Load()
	switch {
	case held != nil && held.LogID != "" && t.LogID != "" && held.LogID != t.LogID:
		why := fmt.Sprintf("refused the table at version %d of command log %s: the held table is at version %d of another log (%s)",
			t.Version, t.LogID, held.Version, held.LogID)
		if r.opts.CachePath != "" {
			why += fmt.Sprintf("; if the coordinators' log was replaced on purpose, remove the disk cache %s and restart the client to follow it", r.opts.CachePath)
		} else {
			why += "; if the coordinators' log was replaced on purpose, restart the client to follow it"
		}
		// Neither taken, nor saved, nor acknowledged: the convergence shows this client stuck.
		r.setStatus(func(s *Status) { s.LastError = why; s.Refused = why })
		return "", true
	case held == nil || t.Version > held.Version:
		r.table.Store(t)
		r.setStatus(func(s *Status) {
			s.Origin = OriginCoordinator
			s.Version = t.Version
			s.UpdatedAt = time.Now()
			s.Refused = ""
		})
		if r.opts.CachePath != "" {
			if err := saveCache(r.opts.CachePath, data); err != nil {
				r.setStatus(func(s *Status) { s.LastError = fmt.Sprintf("cannot save %s: %v", r.opts.CachePath, err) })
			}
		}
	}
	if !r.opts.NoAck && r.opts.Token != "" {
		// The acker sends it once the writes judged with an older table have ended; the stream
		// goes on meanwhile, so a newer table (a freeze) is applied even while a write is open.
		r.ackMu.Lock()
		r.ackVersion, r.ackBase = r.Version(), base
		r.ackMu.Unlock()
		select {
		case r.ackWanted <- struct{}{}:
		default:
		}
	}
	return "", false
}

// ackLoop acknowledges the newest applied version once no write scope opened under an older
// version is open: the table is already stored, so every scope opened since judges with it.
func (r *Router) ackLoop() {
	stop := context.AfterFunc(r.ctx, func() {
		r.scopeMu.Lock()
		r.ended.Broadcast()
		r.scopeMu.Unlock()
	})
	defer stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.ackWanted:
		}
		r.ackMu.Lock()
		version, base := r.ackVersion, r.ackBase
		r.ackMu.Unlock()
		r.scopeMu.Lock()
		for r.scopesBefore(version) && r.ctx.Err() == nil {
			r.ended.Wait()
		}
		r.scopeMu.Unlock()
		if r.ctx.Err() != nil {
			return
		}
		if version > r.acked.Load() {
			r.acknowledge(base, version)
		}
	}
}

func (r *Router) acknowledge(base string, version uint64) {
	body, _ := json.Marshal(map[string]any{"version": version, "zone": r.identity.Zone, "kind": r.identity.Kind})
	ctx, cancel := context.WithTimeout(r.ctx, min(ackTimeout, r.opts.StallTimeout))
	defer cancel()
	u := base + "/v1/subscribers/" + url.PathEscape(r.identity.SubscriberID) + "/ack"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.opts.Token)
	resp, err := r.client.Do(req)
	if err != nil {
		r.setStatus(func(s *Status) { s.LastError = fmt.Sprintf("ack of v%d failed: %v", version, err) })
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		r.setStatus(func(s *Status) { s.LastError = fmt.Sprintf("ack of v%d got HTTP %d", version, resp.StatusCode) })
		return
	}
	for {
		old := r.acked.Load()
		if old >= version || r.acked.CompareAndSwap(old, version) {
			return
		}
	}
}

// saveCache writes the event atomically: data fsynced before the rename, the directory after.
func saveCache(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
