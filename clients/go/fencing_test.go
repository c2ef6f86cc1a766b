package keyholder

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// tokenSwapper answers like a keyholder that mixed two leases up: a well-formed grant with fencing token
// 7 and the TTL asked, then well-formed renewals that carry fencing token 8.
func tokenSwapper(t *testing.T) string {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var asked struct {
			TTLMs int64 `json:"ttlMs"`
		}
		_ = json.NewDecoder(r.Body).Decode(&asked)
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1, kind, key, action
		if len(parts) != 4 {
			http.NotFound(w, r)
			return
		}
		key, action := parts[2], parts[3]
		lease := map[string]interface{}{
			"key": key, "ttlMs": asked.TTLMs,
			"expiresAt": time.Now().Add(time.Duration(asked.TTLMs) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z"),
		}
		switch action {
		case "acquire":
			lease["fencingToken"], lease["ownerToken"], lease["holder"] = 7, "swapped-owner-token-0001", nil
			if parts[1] == "semaphores" {
				lease["limit"] = 1
			}
		case "renew":
			lease["fencingToken"] = 8
		case "release":
			lease = map[string]interface{}{"key": key, "released": true}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(lease)
	}))
	t.Cleanup(server.Close)
	return server.URL
}

// wantLostToAnotherToken checks that err is the loss of a lease to a renewal that named another token.
func wantLostToAnotherToken(t *testing.T, err error) {
	t.Helper()
	var lost *LeaseLostError
	if !errors.As(err, &lost) || lost.Reason != LostRenewFailed {
		t.Fatalf("got %v, want a lease lost with reason %s", err, LostRenewFailed)
	}
	var kerr *Error
	if !errors.As(err, &kerr) || kerr.Code != CodeBadResponse || !strings.Contains(kerr.Error(), "fencingToken 8") {
		t.Fatalf("got %v, want the renewal's other fencing token refused as a bad response", err)
	}
}

// A renewal never changes the fencing token: a lease whose renewal answer carries another one is lost
// (Lost() closes), for a lock and a semaphore permit alike, and is not carried on.
func TestARenewalWithAnotherFencingTokenLosesTheLease(t *testing.T) {
	kh := newClient(t, Config{BaseURL: tokenSwapper(t)})
	ctx := testContext(t)
	lock, err := kh.Acquire(ctx, "k", AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := kh.AcquirePermit(ctx, "s", PermitOptions{Limit: 1, TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []*Lease{lock, permit} {
		// The first renewal comes at about a third of the TTL; the lease may not outlive the TTL it was granted.
		select {
		case <-lease.Lost():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still held after 5 s of renewals that carry fencing token 8", lease.Key)
		}
		wantLostToAnotherToken(t, lease.Err())
		if lease.FencingToken != 7 {
			t.Fatalf("%s: FencingToken %d, want the grant's 7", lease.Key, lease.FencingToken)
		}
		_ = lease.Release(context.Background())
	}
}

// The renewal before a replayed grant is handed out (the caller's own IdempotencyKey) carries another
// fencing token: no lease is returned.
func TestAReplayedGrantWhoseRenewalCarriesAnotherTokenIsNoLease(t *testing.T) {
	kh := newClient(t, Config{BaseURL: tokenSwapper(t)})
	lease, err := kh.Acquire(testContext(t), "k", AcquireOptions{TTL: 10 * time.Second, IdempotencyKey: "replayed"})
	if err == nil {
		_ = lease.Release(context.Background())
		t.Fatalf("a lease was returned with fencing token %d", lease.FencingToken)
	}
	wantLostToAnotherToken(t, err)
}
