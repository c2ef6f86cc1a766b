package keyholder

import (
	"errors"
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
