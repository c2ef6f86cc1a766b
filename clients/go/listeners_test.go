package keyholder

import (
	"sync"
	"testing"
	"time"
)

// listenerLog records the requests a listener hears; the first one's call blocks until unblock is closed.
type listenerLog struct {
	mu      sync.Mutex
	heard   []string
	second  chan struct{} // closed when a second call starts
	started chan struct{} // closed when the first call starts
	unblock chan struct{}
}

func newListenerLog() *listenerLog {
	return &listenerLog{second: make(chan struct{}), started: make(chan struct{}), unblock: make(chan struct{})}
}

func (g *listenerLog) listen(r ReleaseRequested) {
	g.mu.Lock()
	g.heard = append(g.heard, r.Reason)
	n := len(g.heard)
	g.mu.Unlock()
	switch n {
	case 1:
		close(g.started)
		<-g.unblock
	case 2:
		close(g.second)
	}
}

func (g *listenerLog) calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.heard...)
}

func (g *listenerLog) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the first request was not heard within 5 s")
	}
}

// expectInTurn checks that the second request is not heard while the first one's call runs, then that it
// is heard once that call returns.
func (g *listenerLog) expectInTurn(t *testing.T) {
	t.Helper()
	select {
	case <-g.second:
		t.Fatalf("the second request was heard while the first one's call still ran: %v", g.calls())
	case <-time.After(300 * time.Millisecond):
	}
	close(g.unblock)
	waitFor(t, 5*time.Second, "the second request heard", func() bool { return len(g.calls()) == 2 })
	if got := g.calls(); got[0] != "first" || got[1] != "second" {
		t.Fatalf("heard %v, want [first second]", got)
	}
}

func askedLease(t *testing.T) (*Lease, func(reason string)) {
	g := &Grant{Key: "k", OwnerToken: "o", FencingToken: 1, TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}
	lease := newLease(nil, lockKind, g, time.Now(), LeaseOptions{DisableAutoRenew: true})
	t.Cleanup(lease.Keep)
	at := time.Now()
	ask := func(reason string) {
		at = at.Add(time.Second)
		lease.confirm(time.Now(), &Renewal{Key: "k", FencingToken: 1, TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour),
			ReleaseRequested: &ReleaseRequested{At: at, By: "admin", Reason: reason}})
	}
	return lease, ask
}

// Listeners hear two successive release requests one after the other, in the order the renewals carried
// them, as in the TS and Python clients: not at once, nor the later first.
func TestReleaseRequestListenersHearRequestsInTurn(t *testing.T) {
	lease, ask := askedLease(t)
	log := newListenerLog()
	lease.OnReleaseRequested(log.listen)
	ask("first")
	log.waitStarted(t)
	ask("second")
	log.expectInTurn(t)
}

// A listener added after a request was seen hears it at once, and a request made while it does so next.
func TestAListenerAddedAfterARequestHearsTheNextOneAfterIt(t *testing.T) {
	lease, ask := askedLease(t)
	ask("first")
	log := newListenerLog()
	go lease.OnReleaseRequested(log.listen)
	log.waitStarted(t)
	ask("second")
	log.expectInTurn(t)
}

// A panic in a listener told at once (a request was already seen) is recovered, as in one told later.
func TestAPanicInAListenerToldAtOnceIsRecovered(t *testing.T) {
	lease, ask := askedLease(t)
	ask("first")
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("a listener's panic reached OnReleaseRequested's caller: %v", p)
		}
	}()
	lease.OnReleaseRequested(func(ReleaseRequested) { panic("listener") })
}
