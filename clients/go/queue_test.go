package keyholder

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// granted is a waiting acquire's outcome, handed back to the test's goroutine: a waiter must not call t
// once the test may have ended (a failed test cancels the context those acquires wait with).
type granted struct {
	grant *Grant
	err   error
}

// queueOf is a queue as position:holder pairs, e.g. "1:w1 2:w2".
func queueOf(q []QueuedCaller) string {
	out := ""
	for i, c := range q {
		holder := "<none>"
		if c.Holder != nil {
			holder = *c.Holder
		}
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%d:%s", c.Position, holder)
		if c.Weight != 0 || c.Mode != "" {
			out += fmt.Sprintf("(%d%s)", c.Weight, c.Mode)
		}
	}
	return out
}

func TestInspectQueueListsTheWaitersHeadFirst(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	holder, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 10 * time.Second, Holder: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	// Each waiter starts once the one before is queued, so the order is known.
	grants := make(chan granted, 2)
	for i, label := range []string{"w1", "w2"} {
		go func(label string) {
			g, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 10 * time.Second, Wait: 20 * time.Second, Holder: label})
			grants <- granted{g, err}
		}(label)
		waitFor(t, 20*time.Second, label+" queued", func() bool {
			s, err := kh.Inspect(ctx, key)
			return err == nil && s.Waiters == i+1
		})
	}
	status, err := kh.InspectQueue(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := queueOf(status.Queue); got != "1:w1 2:w2" {
		t.Fatalf("queue %q, want 1:w1 2:w2", got)
	}
	for _, c := range status.Queue {
		if _, err := time.Parse(time.RFC3339Nano, c.WaitingSince); err != nil {
			t.Fatalf("waitingSince %q: %v", c.WaitingSince, err)
		}
	}
	if plain, err := kh.Inspect(ctx, key); err != nil || plain.Queue != nil {
		t.Fatalf("Inspect without the queue: %+v, %v", plain, err)
	}

	// The holder goes: the head is granted, the other moves up.
	if err := kh.Release(ctx, key, holder.OwnerToken); err != nil {
		t.Fatal(err)
	}
	got := <-grants
	first := got.grant
	if got.err != nil || first.Holder != "w1" {
		t.Fatalf("granted first: %+v, %v; want w1", first, got.err)
	}
	after, err := kh.InspectQueue(ctx, key)
	if err != nil || after.Holder == nil || *after.Holder != "w1" || queueOf(after.Queue) != "1:w2" {
		t.Fatalf("after the release: %+v, %v; want w1 holding and 1:w2 queued", after, err)
	}
	if err := kh.Release(ctx, key, first.OwnerToken); err != nil {
		t.Fatal(err)
	}
	last := <-grants
	if last.err != nil {
		t.Fatal(last.err)
	}
	if err := kh.Release(ctx, key, last.grant.OwnerToken); err != nil {
		t.Fatal(err)
	}
}

func TestInspectSemaphoreQueueGivesEachWaitersWeight(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	held, err := kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 1, TTL: 10 * time.Second, Holder: "permit"})
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan granted, 1)
	go func() {
		g, err := kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 1, TTL: 10 * time.Second, Wait: 20 * time.Second, Holder: "s1"})
		waiter <- granted{g, err}
	}()
	waitFor(t, 20*time.Second, "s1 queued", func() bool {
		s, err := kh.InspectSemaphore(ctx, key)
		return err == nil && s.Waiters == 1
	})
	status, err := kh.InspectSemaphoreQueue(ctx, key)
	if err != nil || queueOf(status.Queue) != "1:s1(1)" {
		t.Fatalf("semaphore queue: %+v, %v; want 1:s1(1)", status, err)
	}
	if err := kh.ReleasePermit(ctx, key, held.OwnerToken); err != nil {
		t.Fatal(err)
	}
	got := <-waiter
	if got.err != nil {
		t.Fatal(got.err)
	}
	if err := kh.ReleasePermit(ctx, key, got.grant.OwnerToken); err != nil {
		t.Fatal(err)
	}
}

func TestForceReleaseLeaseLeavesANewerHolderAlone(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	old, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := kh.Release(ctx, key, old.OwnerToken); err != nil {
		t.Fatal(err)
	}
	current, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 5 * time.Second, Holder: "current"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kh.ForceReleaseLease(ctx, key, "default", old.FencingToken)
	var kerr *Error
	if !errors.Is(err, ErrHolderChanged) || !errors.As(err, &kerr) || kerr.Status != 409 || kerr.Code != "holder_changed" {
		t.Fatalf("evicting a lease that is gone: want 409 holder_changed, got %v", err)
	}
	if s, err := kh.Inspect(ctx, key); err != nil || !s.Held || s.FencingToken != current.FencingToken {
		t.Fatalf("the newer holder must be left alone: %+v, %v", s, err)
	}
	evicted, err := kh.ForceReleaseLease(ctx, key, "default", current.FencingToken)
	if err != nil || evicted.Evicted.FencingToken != current.FencingToken {
		t.Fatalf("evicting the lease named: %+v, %v", evicted, err)
	}
	if s, err := kh.Inspect(ctx, key); err != nil || s.Held {
		t.Fatalf("after the force release: %+v, %v", s, err)
	}
	if _, err := kh.ForceReleaseLease(ctx, key, "default", current.FencingToken); !errors.Is(err, ErrNotFound) {
		t.Fatalf("nobody holding it: want ErrNotFound, got %v", err)
	}
}

func TestReleaseRequestReachesTheLeaseItNames(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	lease, err := kh.Acquire(ctx, key, AcquireOptions{TTL: 3 * time.Second, Holder: "asked"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()
	var mu sync.Mutex
	var heard []ReleaseRequested
	lease.OnReleaseRequested(func(r ReleaseRequested) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, r)
	})
	if lease.ReleaseRequested() != nil {
		t.Fatal("a release request before anyone asked")
	}
	asked, err := kh.RequestRelease(ctx, key, "default", lease.FencingToken, "deploy")
	if err != nil || asked.ReleaseRequested.Reason != "deploy" || asked.ReleaseRequested.By != "anonymous" {
		t.Fatalf("asking: %+v, %v", asked, err)
	}
	waitFor(t, 10*time.Second, "a renewal carrying the request", func() bool { return lease.ReleaseRequested() != nil })
	// A later renewal carries the same request: the listener is not called again.
	expires := lease.ExpiresAt()
	waitFor(t, 10*time.Second, "another renewal", func() bool { return !lease.ExpiresAt().Equal(expires) })
	mu.Lock()
	count := len(heard)
	mu.Unlock()
	if got := lease.ReleaseRequested(); count != 1 || got.Reason != "deploy" || !got.At.Equal(asked.ReleaseRequested.At) {
		t.Fatalf("heard %d requests, lease has %+v", count, got)
	}
	select {
	case <-lease.Lost():
		t.Fatal("a release request is not a loss")
	default:
	}
	if _, err := kh.RequestRelease(ctx, key, "default", lease.FencingToken+1, ""); !errors.Is(err, ErrHolderChanged) {
		t.Fatalf("another lease named: want ErrHolderChanged, got %v", err)
	}
}

func TestInspectShowsTheReleaseRequest(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	lock, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 10 * time.Second, Holder: "asked"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kh.Release(ctx, key, lock.OwnerToken) }()
	if s, err := kh.Inspect(ctx, key); err != nil || !s.Held || s.ReleaseRequested != nil {
		t.Fatalf("before anyone asked: %+v, %v", s, err)
	}
	asked, err := kh.RequestRelease(ctx, key, "default", lock.FencingToken, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	s, err := kh.Inspect(ctx, key)
	if err != nil || s.ReleaseRequested == nil || s.ReleaseRequested.Reason != "deploy" || s.ReleaseRequested.By != "anonymous" ||
		!s.ReleaseRequested.At.Equal(asked.ReleaseRequested.At) {
		t.Fatalf("inspect after the request: %+v, %v; want %+v", s, err, asked.ReleaseRequested)
	}
	// A permit's holder, asked without a reason: its entry in holders says so.
	key = key + "-permits"
	permit, err := kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 2, TTL: 10 * time.Second, Holder: "permit"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kh.ReleasePermit(ctx, key, permit.OwnerToken) }()
	if st, err := kh.InspectSemaphore(ctx, key); err != nil || len(st.Holders) != 1 || st.Holders[0].ReleaseRequested != nil {
		t.Fatalf("permit before anyone asked: %+v, %v", st, err)
	}
	if _, err := kh.RequestPermitRelease(ctx, key, "default", permit.FencingToken, ""); err != nil {
		t.Fatal(err)
	}
	st, err := kh.InspectSemaphore(ctx, key)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].ReleaseRequested == nil ||
		st.Holders[0].ReleaseRequested.Reason != "" || st.Holders[0].ReleaseRequested.By != "anonymous" {
		t.Fatalf("permit after the request: %+v, %v", st, err)
	}
}

func TestForceReleasePermitLeavesTheOtherPermitsAlone(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	opts := PermitOptions{Limit: 2, TTL: 10 * time.Second}
	first, err := kh.AcquirePermitGrant(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := kh.AcquirePermitGrant(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A lock of the same name holds nothing: the call must go to the semaphore.
	evicted, err := kh.ForceReleasePermit(ctx, key, "default", second.FencingToken)
	if err != nil || len(evicted.Evicted) != 1 || evicted.Evicted[0].FencingToken != second.FencingToken {
		t.Fatalf("evicting the permit named: %+v, %v", evicted, err)
	}
	if st, err := kh.InspectSemaphore(ctx, key); err != nil || len(st.Holders) != 1 || st.Holders[0].FencingToken != first.FencingToken {
		t.Fatalf("the other permit must stay its holder's: %+v, %v", st, err)
	}
	if _, err := kh.ForceReleasePermit(ctx, key, "default", second.FencingToken); !errors.Is(err, ErrHolderChanged) {
		t.Fatalf("a permit that is gone: want ErrHolderChanged, got %v", err)
	}
	all, err := kh.ForceReleaseSemaphore(ctx, key, "default")
	if err != nil || len(all.Evicted) != 1 || all.Evicted[0].FencingToken != first.FencingToken {
		t.Fatalf("evicting every permit: %+v, %v", all, err)
	}
	if _, err := kh.ForceReleaseSemaphore(ctx, key, "default"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("nobody holding one: want ErrNotFound, got %v", err)
	}
}

func TestHistoryListsTheLeaseEventsOldestFirst(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	grant, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 5 * time.Second, Holder: "historian"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kh.Release(ctx, key, grant.OwnerToken); err != nil {
		t.Fatal(err)
	}
	// History is written in batches off the request path: wait for both events.
	var h *KeyHistory
	waitFor(t, 10*time.Second, "the grant and the release in the history", func() bool {
		h, err = kh.History(ctx, key, HistoryOptions{})
		return err == nil && len(h.Events) >= 2
	})
	first, last := h.Events[0], h.Events[len(h.Events)-1]
	if h.Key != key || !h.Recording || first.Type != "granted" || last.Type != "released" || first.Holder != "historian" ||
		first.FencingToken == nil || *first.FencingToken != grant.FencingToken || first.At.After(last.At) || last.HeldMs == nil {
		t.Fatalf("history: %+v", h)
	}
	// An admin's read of any namespace's key: the same events.
	other, err := kh.History(ctx, key, HistoryOptions{Namespace: "default", Limit: 1})
	if err != nil || len(other.Events) != 1 || other.Events[0].Type != "released" || !other.Truncated {
		t.Fatalf("by namespace, limit 1: %+v, %v", other, err)
	}
	if _, err := kh.History(ctx, key, HistoryOptions{Primitive: "queues"}); err == nil {
		t.Fatal("an unknown primitive must be refused before sending")
	}
}
