package tidegate

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// LeaseHeader is the response header of the watch stream announcing the coordinator's lease in
// milliseconds: how long a confirmation keeps the local table's `owned` answers good. Without
// it (an older coordinator) there is no lease and write checks answer as before.
const LeaseHeader = "x-tidegate-lease-ms"

// lease is the subscriber side of the watch stream's lease. A coordinator that announces one
// confirms, in its heartbeats (`:heartbeat c=<ms>`), the wall-clock time at which it had last read
// its whole command log; the table held then was current at that time, so it stays good for the
// lease after it. Once that runs out, Owned answers become Unconfirmed: a zone cut off from every
// coordinator stops writing users another zone may have taken over meanwhile.
//
// Only the watch goroutine writes it; write checks read it, so it is a few atomics, not a lock.
type lease struct {
	// epoch anchors until on the monotonic clock (time.Since never goes back with the wall clock).
	epoch time.Time
	// announced is the lease of the open or last stream (ns; 0: none announced).
	announced atomic.Int64
	// until is when the lease ends, in ns since epoch (0: never confirmed).
	until atomic.Int64
	// confirmedAt is the coordinator's time of the last confirmation received (Unix ms; 0: none).
	confirmedAt atomic.Int64
}

// announce records the lease of a stream just opened (0: it announced none). The expiry is
// kept: it was earned for the held table, which a new stream only replaces with newer ones.
func (l *lease) announce(d time.Duration) { l.announced.Store(int64(d)) }

// renew takes a confirmation made at cMs (the coordinator's clock, Unix ms) and reports whether
// it was fresh: something of the lease is left after cMs at nowMs. When it confirms the held table
// (ours: not one refused as another log's), the lease runs for what is left from now on the
// monotonic clock, never shortening an expiry already later.
func (l *lease) renew(cMs, nowMs int64, ours bool) bool {
	left := leaseLeft(time.Duration(l.announced.Load()), cMs, nowMs)
	if !ours {
		return left > 0
	}
	l.confirmedAt.Store(cMs)
	if left <= 0 {
		return false
	}
	until := int64(time.Since(l.epoch) + left)
	for {
		old := l.until.Load()
		if old >= until || l.until.CompareAndSwap(old, until) {
			return true
		}
	}
}

// leaseLeft is min(lease, c + lease - now): a confirmation from the coordinator's future (its
// clock ahead of ours) is worth the lease, never more.
func leaseLeft(lease time.Duration, cMs, nowMs int64) time.Duration {
	behind := min(cMs-nowMs, 0)
	return lease + time.Duration(behind)*time.Millisecond
}

// remaining is how long the lease still runs (0 or less: it has run out, or was never
// confirmed); ok is false when no lease is announced.
func (l *lease) remaining() (left time.Duration, ok bool) {
	if l.announced.Load() == 0 {
		return 0, false
	}
	return time.Duration(l.until.Load()) - time.Since(l.epoch), true
}

// expired reports whether an announced lease has run out (or not been confirmed yet). A Router
// over a fixed table, or started from the disk cache and not yet connected, has had no stream
// announce a lease: it answers as before leases, since nothing says its coordinators confirm
// them (and a service restarted while every coordinator is down keeps writing as it did).
func (l *lease) expired() bool {
	left, ok := l.remaining()
	return ok && left <= 0
}

// confirmation reads a watch-stream comment (the text after its leading colon) as a lease
// confirmation: `heartbeat c=<ms>`, the first word `heartbeat`, then space-separated key=value
// fields of which the first `c` counts and the others are ignored. ok is false for a bare
// heartbeat, another comment, or a `c` that is not a whole non-negative number.
func confirmation(comment string) (cMs int64, ok bool) {
	fields := strings.Fields(comment)
	if len(fields) == 0 || fields[0] != "heartbeat" {
		return 0, false
	}
	for _, field := range fields[1:] {
		key, value, _ := strings.Cut(field, "=")
		if key != "c" {
			continue
		}
		c, err := strconv.ParseInt(value, 10, 64)
		if err != nil || c < 0 {
			return 0, false
		}
		return c, true
	}
	return 0, false
}

// confirm turns an Owned answer into Unconfirmed when the lease has run out.
func (r *Router) confirm(a WriteAnswer, err error) (WriteAnswer, error) {
	if err == nil && a.Check == Owned && r.lease.expired() {
		a.Check = Unconfirmed
	}
	return a, err
}
