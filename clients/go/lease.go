package keyholder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

const (
	// renewFraction: renew at about a third of the TTL, so two more tries fit before the lease would end.
	renewFraction = 1.0 / 3
	// renewJitter: ±10%, so that many leases taken at once do not renew in lockstep.
	renewJitter = 0.1
	// minRetryGap keeps a server that refuses at once near the deadline from being called in a tight loop.
	minRetryGap = 10 * time.Millisecond
)

// LeaseOptions are how a lease is kept once granted.
type LeaseOptions struct {
	// DisableAutoRenew leaves renewing to the caller; the lease is still lost at its safe deadline.
	DisableAutoRenew bool
	// DriftMargin is taken off the safe deadline to cover a client clock running slow against the store's
	// and a goroutine scheduled late on a busy machine. Zero: 50 ms + 2% of the TTL.
	DriftMargin time.Duration
}

// leaseKind is the vocabulary a lease renews and releases in: a lock or a semaphore permit.
type leaseKind struct {
	prefix    string // "/v1/locks/" or "/v1/semaphores/"
	renewOp   string
	releaseOp string
}

var (
	lockKind   = leaseKind{prefix: "/v1/locks/", renewOp: "renew", releaseOp: "release"}
	permitKind = leaseKind{prefix: "/v1/semaphores/", renewOp: "renewPermit", releaseOp: "releasePermit"}
)

// Lease is a held lock or semaphore permit. It renews itself in the background and closes Lost() the moment
// it can no longer be trusted: a renewal refused (not_owner, e.g. force-released) or answered with another
// fencing token than the lease's (an answer about another lease), or its safe deadline
// reached without a confirmed renewal. The safe deadline is the send time of the last confirmed acquire or
// renewal on this process's monotonic clock, plus the TTL, minus the drift margin: the server started the
// lease no earlier than that send time, so the lease cannot end there before. It is NOT safe to assume the
// lock is held after Lost() closes; pass FencingToken to the protected resource, which closes that window.
type Lease struct {
	// Key is the lock's or semaphore's name.
	Key string
	// OwnerToken proves this lease to the server; keep it secret.
	OwnerToken string
	// FencingToken goes with every write to the protected resource, which rejects tokens lower than it has seen.
	FencingToken int64
	// Holder is the label others see ("" when none was given).
	Holder string
	// Limit is the semaphore's limit (0 for a lock).
	Limit int

	client      *Client
	kind        leaseKind
	driftMargin time.Duration
	autoRenew   bool
	lost        chan struct{}
	// stopCtx ends the renew loop and cancels a renewal in flight (on release or loss).
	stopCtx context.Context
	stop    context.CancelFunc

	mu            sync.Mutex
	ttl           time.Duration
	expiresAt     time.Time
	safeDeadline  time.Time
	deadlineTimer *time.Timer
	// releasing counts the Release calls under way: the lease is neither renewed nor watched meanwhile (work
	// done before the release is not made a loss by a slow answer). One that fails puts the watch back.
	releasing int
	// releaseSettled: a Release gave the lease back or found nothing to give (or Keep was called).
	releaseSettled bool
	lostErr        *LeaseLostError
	// asked is the last release request a renewal carried; listeners hear each new one once.
	asked     *ReleaseRequested
	listeners []func(ReleaseRequested)
	// tells are the release requests still to be told, oldest first, each with the listeners it goes to;
	// telling: a goroutine is telling them, one after another.
	tells   []pendingTell
	telling bool
}

// pendingTell is one release request to tell to the listeners there were when it was seen.
type pendingTell struct {
	listeners []func(ReleaseRequested)
	asked     ReleaseRequested
}

func newLease(c *Client, kind leaseKind, g *Grant, sentAt time.Time, opts LeaseOptions) *Lease {
	drift := opts.DriftMargin
	if drift <= 0 {
		drift = 50*time.Millisecond + g.TTL/50
	}
	stopCtx, stop := context.WithCancel(context.Background())
	l := &Lease{
		Key: g.Key, OwnerToken: g.OwnerToken, FencingToken: g.FencingToken, Holder: g.Holder, Limit: g.Limit,
		client: c, kind: kind, driftMargin: drift, autoRenew: !opts.DisableAutoRenew,
		lost: make(chan struct{}), stopCtx: stopCtx, stop: stop,
		ttl: g.TTL, expiresAt: g.ExpiresAt, safeDeadline: sentAt.Add(g.TTL - drift),
	}
	// The deadline is armed by start: until then the caller has not got the lease.
	return l
}

// ReleaseRequested is an operator's request that this lease's holder let go, as the last renewal said; nil
// while nobody has asked. It is not a loss: the lease stays held until released or no longer renewed.
func (l *Lease) ReleaseRequested() *ReleaseRequested {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asked == nil {
		return nil
	}
	asked := *l.asked
	return &asked
}

// OnReleaseRequested calls fn (on a goroutine of its own, never the renewing one: fn may block) when a
// renewal first carries a release request, and again when it is asked anew; at once (on this goroutine) if
// one was already seen. Requests are told one after another, in the order the renewals carried them: fn is
// not called for a request before its call for the one before has returned (a blocked fn holds up the
// later ones, never the renewals). A panic in fn is recovered.
func (l *Lease) OnReleaseRequested(fn func(ReleaseRequested)) {
	l.mu.Lock()
	known := l.asked
	if known == nil {
		l.listeners = append(l.listeners, fn)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	// Added only once told of the known request, so that a request seen meanwhile is not told to it first
	// (or at the same time) on the telling goroutine.
	tell(fn, *known)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listeners = append(l.listeners, fn)
	if l.asked != known {
		// Asked anew while fn heard the earlier request: it hears the latest next.
		l.tellLocked([]func(ReleaseRequested){fn}, *l.asked)
	}
}

// Lost is closed when the lease is lost; Err then says why. It stays open once the lease is given back or
// kept. After a Release that failed, the lease is no longer renewed but still watched: it is lost at its
// safe deadline unless a Release gives it back (or Keep keeps it) first.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease holds (or once released or kept), then a *LeaseLostError once Lost() is closed.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A safe deadline already passed is a loss at once, even before its timer has fired: a process frozen
	// or starved past it may run other code first when it wakes (fn's return, say), and must not report
	// that work as done under the lock.
	if !l.doneLocked() && !time.Now().Before(l.safeDeadline) {
		l.loseLocked(LostDeadline, nil)
	}
	if l.lostErr == nil {
		return nil
	}
	return l.lostErr
}

// TTL is the lease length as last granted or renewed.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// ExpiresAt is when the server says the lease ends (store clock), as of the last confirmed grant or renewal.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Remaining is the time left before the safe deadline (0 once passed).
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remainingLocked()
}

// Release gives the lease back and stops renewing. It returns nil once released, or when there is nothing
// to give back (the lease was lost or had expired). An unreachable server is retried until the lease would
// have ended anyway; ctx can end it sooner.
//
// A Release that returned an error (its ctx ended before the answer, the server refused) gave nothing back
// for sure: calling it again tries again, and Keep keeps the lease instead. Until then the lease is not
// renewed (it was let go of) but is still watched: it is lost (Lost, Err) at its safe deadline. Once a
// Release succeeded, or the lease was lost or kept, Release returns nil and sends nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.releaseSettled {
		l.mu.Unlock()
		return nil
	}
	// A safe deadline already passed is a loss even if its timer has not fired (a process frozen past it):
	// the work just done may have run unlocked, and Err() must say so.
	if !l.doneLocked() && !time.Now().Before(l.safeDeadline) {
		l.loseLocked(LostDeadline, nil)
	}
	if l.lostErr != nil {
		// Nothing to give back.
		l.releaseSettled = true
		l.mu.Unlock()
		return nil
	}
	l.releasing++
	l.stopLocked()
	safeDeadline := l.safeDeadline
	l.mu.Unlock()
	err := l.client.releaseLease(ctx, l.kind, l.Key, l.OwnerToken, safeDeadline.Add(l.driftMargin))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releasing--
	var kerr *Error
	switch {
	case err == nil, errors.Is(err, ErrNotOwner):
		// Not ours any more (expired, force-released, or an earlier attempt's answer was lost): nothing to give back.
		l.settleLocked()
		return nil
	case errors.As(err, &kerr) && kerr.Retryable() && !time.Now().Before(safeDeadline):
		// Unreachable until the lease's own end: the store frees it by TTL.
		l.settleLocked()
		return nil
	default:
		// Nothing given back for sure: the lease may still be held, so its safe deadline is watched again
		// (a loss reaches Err and Lost), though no longer renewed.
		l.armDeadlineLocked()
		return err
	}
}

// settleLocked marks the release done: a later Release has nothing left to try, and the lease is no longer
// watched.
func (l *Lease) settleLocked() {
	l.releaseSettled = true
	l.stopLocked()
}

// Keep stops renewing and leaves the lease to run out by itself, without releasing it: for work done once
// per period (a cron tick named in the key), so that a caller asking late cannot take the key again. After
// a Release that failed too: a later Release then sends nothing.
func (l *Lease) Keep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settleLocked()
}

// start is called once after the grant. A grant that took longer than a renewal period to arrive (a long
// wait in the queue, retries) is renewed at once, so the caller starts with a full safe window; so is one
// that may be older than the call that got it (grantMayBeOlder: a replay, for the caller's own
// Idempotency-Key, of a lease an earlier call was granted, whose end this call's safe deadline would
// overstate by up to a whole TTL).
//
// Nothing has run under the lease before start returns it, so a confirmed renewal starts its safe window
// afresh from its own send, even when the grant's window has passed already (a wait in the queue longer
// than the TTL: that grant was lost at once, and the lock left held by nobody until its TTL); the renewal
// waits up to the request timeout. A renewal that fails loses the lease, and the grant is given back (one
// attempt) rather than left held.
func (l *Lease) start(grantMayBeOlder bool) error {
	if grantMayBeOlder || l.Remaining() < time.Duration(float64(l.TTL())*(1-renewFraction)) {
		l.mu.Lock()
		l.safeDeadline = time.Now().Add(l.client.requestTimeout)
		l.mu.Unlock()
		if err := l.renewAttempt(); err != nil {
			l.lose(lostReasonOf(err), err)
		}
		if err := l.Err(); err != nil {
			var lost *LeaseLostError
			if !errors.As(err, &lost) || lost.Reason != LostNotOwner {
				ctx, cancel := context.WithTimeout(context.Background(), l.client.requestTimeout)
				_ = l.client.releaseLease(ctx, l.kind, l.Key, l.OwnerToken, time.Time{})
				cancel()
			}
			return err
		}
	} else {
		l.mu.Lock()
		l.armDeadlineLocked()
		l.mu.Unlock()
	}
	if err := l.Err(); err != nil {
		return err
	}
	if l.autoRenew {
		go l.renewLoop()
	}
	return nil
}

func (l *Lease) renewLoop() {
	failures := 0
	delay := l.renewDelay()
	for {
		timer := time.NewTimer(delay)
		select {
		case <-l.stopCtx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		err := l.renewAttempt()
		// Stopped (released, kept or lost): a renewal cut short by it is no failure of the lease's.
		if l.stopCtx.Err() != nil || l.done() {
			return
		}
		if err == nil {
			failures = 0
			delay = l.renewDelay()
			continue
		}
		var kerr *Error
		if errors.Is(err, ErrNotOwner) || !errors.As(err, &kerr) || !kerr.Retryable() {
			l.lose(lostReasonOf(err), err)
			return
		}
		failures++
		// Retry-After is honoured, but never past half of what is left before the safe deadline: a renewal
		// is the one call whose delay costs the lease, so one more attempt must still fit.
		delay = l.client.backoff.delay(kerr.RetryAfter, failures)
		if half := l.Remaining() / 2; delay > half {
			delay = half
		}
		if delay < minRetryGap {
			delay = minRetryGap
		}
	}
}

// renewAttempt is one renewal request, given up at the safe deadline (nothing it confirms is of use after).
func (l *Lease) renewAttempt() error {
	sentAt := time.Now()
	l.mu.Lock()
	ttl, timeout := l.ttl, l.safeDeadline.Sub(sentAt)
	l.mu.Unlock()
	if timeout > l.client.requestTimeout {
		timeout = l.client.requestTimeout
	}
	if timeout < time.Millisecond {
		timeout = time.Millisecond
	}
	renewal, err := l.client.renewLease(l.stopCtx, l.kind, l.Key, l.OwnerToken, ttl, timeout, time.Time{})
	if err != nil {
		return err
	}
	// A renewal never changes the fencing token: one that carries another is an answer about another lease
	// (a server or proxy that mixed leases up, or this one replaced), so this lease can no longer be
	// trusted. A bad response is not retried: the lease is lost (LostRenewFailed).
	if renewal.FencingToken != l.FencingToken {
		return &Error{Op: l.kind.renewOp, Code: CodeBadResponse, Status: http.StatusOK,
			Err: fmt.Errorf("fencingToken %d, the lease's is %d", renewal.FencingToken, l.FencingToken)}
	}
	l.confirm(sentAt, renewal)
	return nil
}

// confirm moves the safe deadline to sentAt + TTL - drift margin. A confirmation that arrives after the
// deadline does not revive the lease: the caller may already have been told to stop.
func (l *Lease) confirm(sentAt time.Time, r *Renewal) {
	l.mu.Lock()
	if l.doneLocked() {
		l.mu.Unlock()
		return
	}
	if !time.Now().Before(l.safeDeadline) {
		l.loseLocked(LostDeadline, nil)
		l.mu.Unlock()
		return
	}
	l.ttl = r.TTL
	l.expiresAt = r.ExpiresAt
	l.safeDeadline = sentAt.Add(r.TTL - l.driftMargin)
	l.armDeadlineLocked()
	asked := r.ReleaseRequested
	if asked != nil && (l.asked == nil || !l.asked.At.Equal(asked.At) || l.asked.By != asked.By || l.asked.Reason != asked.Reason) {
		l.asked = asked
		if len(l.listeners) > 0 {
			l.tellLocked(append([]func(ReleaseRequested){}, l.listeners...), *asked)
		}
	}
	l.mu.Unlock()
}

// tellLocked queues a release request for listeners. They are told outside the lock (a listener may read
// the lease), and on a goroutine other than the renewing one: a listener that blocks (waits for the work to
// finish before letting go) held up the renewals, and the lease was lost on a healthy server. One goroutine
// tells the queue in order: a goroutine for each request would let two run at once, the later one first.
func (l *Lease) tellLocked(listeners []func(ReleaseRequested), asked ReleaseRequested) {
	l.tells = append(l.tells, pendingTell{listeners: listeners, asked: asked})
	if !l.telling {
		l.telling = true
		go l.tellInTurn()
	}
}

// tellInTurn tells the queued requests, oldest first, until none is left.
func (l *Lease) tellInTurn() {
	for {
		l.mu.Lock()
		if len(l.tells) == 0 {
			l.telling = false
			l.mu.Unlock()
			return
		}
		next := l.tells[0]
		l.tells[0] = pendingTell{}
		l.tells = l.tells[1:]
		l.mu.Unlock()
		for _, fn := range next.listeners {
			tell(fn, next.asked)
		}
	}
}

// tell calls one listener; one that panics does not stop the others (nor the renewals).
func tell(fn func(ReleaseRequested), asked ReleaseRequested) {
	defer func() { _ = recover() }()
	fn(asked)
}

// renewDelay is about a third of the TTL, counted from the last confirmed send rather than from now, so a
// slow answer does not push the next renewal late.
func (l *Lease) renewDelay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := float64(l.ttl) * renewFraction * (1 - renewJitter + randomFraction()*2*renewJitter)
	sinceSend := l.ttl - l.driftMargin - l.remainingLocked()
	if d := time.Duration(period) - sinceSend; d > 0 {
		return d
	}
	return 0
}

func (l *Lease) armDeadlineLocked() {
	if l.deadlineTimer != nil {
		l.deadlineTimer.Stop()
	}
	if l.doneLocked() {
		return
	}
	left := time.Until(l.safeDeadline)
	if left <= 0 {
		l.loseLocked(LostDeadline, nil)
		return
	}
	l.deadlineTimer = time.AfterFunc(left, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.armDeadlineLocked()
	})
}

func (l *Lease) remainingLocked() time.Duration {
	if left := time.Until(l.safeDeadline); left > 0 {
		return left
	}
	return 0
}

func (l *Lease) done() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doneLocked()
}

// doneLocked: nothing is to be renewed or watched any more for now (released, being released, kept or lost).
func (l *Lease) doneLocked() bool { return l.releaseSettled || l.releasing > 0 || l.lostErr != nil }

func (l *Lease) lose(reason LeaseLostReason, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(reason, cause)
}

func (l *Lease) loseLocked(reason LeaseLostReason, cause error) {
	if l.doneLocked() {
		return
	}
	l.lostErr = &LeaseLostError{Key: l.Key, Reason: reason, Err: cause}
	l.stopLocked()
	close(l.lost)
}

func (l *Lease) stopLocked() {
	if l.deadlineTimer != nil {
		l.deadlineTimer.Stop()
	}
	l.stop()
}

func lostReasonOf(err error) LeaseLostReason {
	if errors.Is(err, ErrNotOwner) {
		return LostNotOwner
	}
	return LostRenewFailed
}

// runWithLease runs fn with a context that is cancelled when the lease is lost (or ctx ends), then
// releases the lease whatever happened. fn's error is returned; when the lease was lost, a nil error
// from fn, or the cancellation the loss caused, becomes the *LeaseLostError: the work may have run
// without the lock, and the caller should know.
func runWithLease(ctx context.Context, lease *Lease, fn func(ctx context.Context, lease *Lease) error) error {
	fnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Also when fn panics: a recovered panic must not leave a lease renewing itself for ever. (A second
	// Release returns at once.)
	defer func() { _ = lease.Release(context.Background()) }()
	go func() {
		select {
		case <-lease.Lost():
			cancel()
		case <-fnCtx.Done():
		}
	}()
	fnErr := fn(fnCtx, lease)
	// Asked before the release (which ends the lease's watch): a deadline that passed while fn ran counts
	// even if its timer has not fired yet.
	lostErr := lease.Err()
	// The caller's ctx may be done by now; the release is bounded by the lease's own end instead.
	releaseErr := lease.Release(context.Background())
	// A deadline the release found passed is a loss too. One that passed after a failed release is not:
	// fn had returned within it.
	if lostErr == nil && releaseErr == nil {
		lostErr = lease.Err()
	}
	switch {
	case fnErr != nil && lostErr != nil && errors.Is(fnErr, context.Canceled) && ctx.Err() == nil:
		return lostErr
	case fnErr != nil:
		return fnErr
	case lostErr != nil:
		return lostErr
	default:
		return releaseErr
	}
}
