package keyholder

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A safe deadline that has passed while its timer has not fired yet (a process frozen or starved past it):
// Err reports the loss at once and Lost() is closed, not after the timer's turn.
func TestAPassedSafeDeadlineIsALossBeforeItsTimerFires(t *testing.T) {
	g := &Grant{Key: "k", OwnerToken: "o", FencingToken: 1, TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}
	lease := newLease(nil, lockKind, g, time.Now(), LeaseOptions{DisableAutoRenew: true})
	defer lease.stop()
	// The deadline timer is armed for an hour from now; move the deadline into the past without it firing.
	lease.mu.Lock()
	lease.safeDeadline = time.Now().Add(-time.Millisecond)
	lease.mu.Unlock()
	var lost *LeaseLostError
	if !errors.As(lease.Err(), &lost) || lost.Reason != LostDeadline {
		t.Fatalf("Err() = %v, want a LeaseLostError with reason %q", lease.Err(), LostDeadline)
	}
	select {
	case <-lease.Lost():
	default:
		t.Fatal("Lost() is not closed")
	}
}

// Release with the safe deadline passed while its timer has not fired (a process frozen past it): the
// lease is lost (Err() says so, Lost() is closed) and no release is sent, as the TS and Python clients do.
func TestReleaseAfterAPassedDeadlineIsALoss(t *testing.T) {
	var releases atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		releases.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"key":"k","released":true}`))
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	g := &Grant{Key: "k", OwnerToken: "o", FencingToken: 1, TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}
	lease := newLease(kh, lockKind, g, time.Now(), LeaseOptions{DisableAutoRenew: true})
	lease.mu.Lock()
	lease.safeDeadline = time.Now().Add(-time.Millisecond)
	lease.mu.Unlock()
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	var lost *LeaseLostError
	if !errors.As(lease.Err(), &lost) || lost.Reason != LostDeadline {
		t.Errorf("after Release past the safe deadline, Err() = %v, want a LeaseLostError (deadline)", lease.Err())
	}
	select {
	case <-lease.Lost():
	default:
		t.Error("after Release past the safe deadline, Lost() is not closed")
	}
	if n := releases.Load(); n != 0 {
		t.Errorf("%d release requests sent for a lease past its safe deadline, want none", n)
	}
}
