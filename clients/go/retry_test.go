package keyholder

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const rateLimitedURLEnv = "KEYHOLDER_TEST_RATE_LIMITED_URL"

// A server limited to one counted request per window answers the second with 429 and Retry-After; the
// client waits at least that long, then gets its answer.
func TestA429IsRetriedNoSoonerThanRetryAfter(t *testing.T) {
	var events []RetryEvent
	kh := newClient(t, Config{BaseURL: serverURL(t, rateLimitedURLEnv), OnRetry: func(e RetryEvent) { events = append(events, e) }})
	ctx, key := testContext(t), testKey(t)
	// Fill the window (acquire and inspect are counted; a 429 may already come here).
	if _, err := kh.Inspect(ctx, key); err != nil {
		t.Fatal(err)
	}
	events = nil
	started := time.Now()
	if _, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: time.Second}); err != nil {
		t.Fatalf("an acquire retried past the rate limit: %v", err)
	}
	elapsed := time.Since(started)
	if len(events) == 0 {
		t.Fatal("the second counted request in the window was not refused: is the server rate-limited?")
	}
	var waited time.Duration
	for _, e := range events {
		if !errors.Is(e.Err, ErrRateLimited) || e.Err.Status != 429 || e.Err.RetryAfter <= 0 {
			t.Fatalf("retry after %+v, want a 429 rate_limited with Retry-After", e.Err)
		}
		if e.Delay < e.Err.RetryAfter {
			t.Fatalf("retry %d waited %v, sooner than Retry-After %v", e.Attempt, e.Delay, e.Err.RetryAfter)
		}
		waited += e.Err.RetryAfter
	}
	if elapsed < waited {
		t.Fatalf("answered after %v, before the %v the server asked for", elapsed, waited)
	}
}

// A 503 from a proxy in front of keyholder (what a real server cannot be made to send on cue): retried
// after Retry-After with the same Idempotency-Key, so the retried acquire is the same logical acquire.
func TestA503IsRetriedWithTheSameIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var times []time.Time
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		times = append(times, time.Now())
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"type":"urn:keyholder:problem:store_unavailable","title":"Store unavailable","status":503,"detail":"down","code":"store_unavailable"}`))
			return
		}
		writeGrant(w, `{"key":"k","ownerToken":"q3HbVfYJm3cS1kQxv7x8XA","fencingToken":7,"ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`)
	}))
	defer server.Close()
	kh := newClient(t, Config{BaseURL: server.URL})
	grant, err := kh.AcquireGrant(testContext(t), "k", AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if grant.FencingToken != 7 || len(keys) != 2 {
		t.Fatalf("grant %+v after %d tries", grant, len(keys))
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(keys[0]) || keys[0] != keys[1] {
		t.Fatalf("Idempotency-Keys %q, want one random UUID sent on both tries", keys)
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Fatalf("retried after %v, sooner than Retry-After: 1", gap)
	}
}

// The retry budget ends the retrying: no try starts after it, and the last error comes back.
func TestRetriesStopAtTheDeadline(t *testing.T) {
	var tries int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&tries, 1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(503)
	}))
	defer server.Close()
	kh := newClient(t, Config{BaseURL: server.URL, RetryBudget: 1500 * time.Millisecond})
	started := time.Now()
	err := kh.Release(testContext(t), "k", "q3HbVfYJm3cS1kQxv7x8XA")
	var kerr *Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &kerr) || kerr.RetryAfter != time.Second {
		t.Fatalf("want the last 503 back, got %v", err)
	}
	if n := atomic.LoadInt32(&tries); n != 2 || time.Since(started) > 1500*time.Millisecond {
		t.Fatalf("%d tries in %v, want 2 within the 1.5 s budget", n, time.Since(started))
	}
}

// A redirect is never followed: the API key and owner token stay with the server they were meant for.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var elsewhere int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { atomic.AddInt32(&elsewhere, 1) }))
	defer other.Close()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer server.Close()
	kh := newClient(t, Config{BaseURL: server.URL, APIKey: "secret", HTTPClient: &http.Client{}})
	_, err := kh.Renew(testContext(t), "k", "q3HbVfYJm3cS1kQxv7x8XA", time.Second)
	var kerr *Error
	if !errors.Is(err, ErrBadResponse) || !errors.As(err, &kerr) || kerr.Status != 307 {
		t.Fatalf("want ErrBadResponse for a 307, got %v", err)
	}
	if n := atomic.LoadInt32(&elsewhere); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}

// A grant is accepted only from a 200 whose body parses with its tokens present.
func TestAGrantNeedsA200WithTokens(t *testing.T) {
	full := `{"key":"k","ownerToken":"q3HbVfYJm3cS1kQxv7x8XA","fencingToken":7,"ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`
	cases := []struct {
		name   string
		status int
		body   string
	}{
		{"no owner token", 200, `{"key":"k","fencingToken":7,"ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`},
		{"no fencing token", 200, `{"key":"k","ownerToken":"q3HbVfYJm3cS1kQxv7x8XA","ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`},
		{"not JSON", 200, `<html>ok</html>`},
		{"a 201", 201, full},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer server.Close()
			kh := newClient(t, Config{BaseURL: server.URL})
			lease, err := kh.Acquire(testContext(t), "k", AcquireOptions{TTL: time.Second})
			if lease != nil || !errors.Is(err, ErrBadResponse) {
				t.Fatalf("want no lease and ErrBadResponse, got %v, %v", lease, err)
			}
		})
	}
}

// Retry-After in whole seconds (what keyholder sends) or as an HTTP date; the body's retryAfterMs wins.
func TestRetryAfterIsRead(t *testing.T) {
	problem := func(ms string) []byte {
		b, _ := json.Marshal(map[string]interface{}{"type": "t", "title": "t", "status": 409, "detail": "d", "code": "lock_held"})
		if ms != "" {
			b = append(b[:len(b)-1], []byte(`,"retryAfterMs":`+ms+`}`)...)
		}
		return b
	}
	for _, c := range []struct {
		header, ms string
		want       time.Duration
	}{
		{"2", "", 2 * time.Second},
		{"2", "1234", 1234 * time.Millisecond},
		{"", "", 0},
	} {
		err := errorFromResponse("acquire", 409, http.Header{"Retry-After": {c.header}}, problem(c.ms))
		var held *LockHeldError
		if !errors.As(err, &held) || held.RetryAfter != c.want {
			t.Fatalf("Retry-After %q, retryAfterMs %q: got %v, want %v", c.header, c.ms, err, c.want)
		}
	}
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	if d := parseRetryAfter(date); d < 25*time.Second || d > 30*time.Second {
		t.Fatalf("Retry-After %q read as %v", date, d)
	}
}

func writeGrant(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write([]byte(body))
}

// A huge Retry-After (header or retryAfterMs) is clamped, never overflowed into a negative duration that a
// caller sleeping RetryAfter would not wait at all.
func TestAHugeRetryAfterIsNotNegative(t *testing.T) {
	for _, c := range []struct{ header, ms string }{{"1e20", ""}, {"", "9000000000000000"}} {
		body := `{"type":"t","title":"t","status":409,"detail":"d","code":"lock_held"}`
		if c.ms != "" {
			body = `{"type":"t","title":"t","status":409,"detail":"d","code":"lock_held","retryAfterMs":` + c.ms + `}`
		}
		err := errorFromResponse("acquire", 409, http.Header{"Retry-After": {c.header}}, []byte(body))
		var held *LockHeldError
		if !errors.As(err, &held) || held.RetryAfter != maxRetryAfter {
			t.Errorf("Retry-After %q, retryAfterMs %q: %v, want RetryAfter %v", c.header, c.ms, err, maxRetryAfter)
		}
	}
}

// A renewal answered with a negative fencing token is not a renewal (the contract's minimum is 0).
func TestARenewalWithANegativeFencingTokenIsRefused(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeGrant(w, `{"key":"k","fencingToken":-5,"ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z"}`)
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL, RetryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := kh.Renew(context.Background(), "k", "o", time.Second); !errors.Is(err, ErrBadResponse) {
		t.Errorf("renewal with fencingToken -5: got %+v, %v; want ErrBadResponse", r, err)
	}
}

// A release-request listener that blocks (waits for the work before letting go) does not hold up the
// renewals: on a healthy server the lease is not lost meanwhile.
func TestABlockingReleaseRequestListenerDoesNotStopRenewals(t *testing.T) {
	var renews atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/locks/k/acquire":
			writeGrant(w, `{"key":"k","ownerToken":"o","fencingToken":7,"ttlMs":600,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`)
		case "/v1/locks/k/renew":
			renews.Add(1)
			writeGrant(w, `{"key":"k","fencingToken":7,"ttlMs":600,"expiresAt":"2026-11-30T10:00:30.000Z","releaseRequested":{"at":"2026-11-30T10:00:00.000Z","by":"admin","reason":"deploy"}}`)
		default:
			writeGrant(w, `{"key":"k","released":true}`)
		}
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := kh.Acquire(context.Background(), "k", AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	workDone := make(chan struct{})
	defer close(workDone)
	lease.OnReleaseRequested(func(ReleaseRequested) { <-workDone })
	// Three renewal periods (about 200 ms each) with the listener blocked from the first.
	waitFor(t, 5*time.Second, "three renewals", func() bool { return renews.Load() >= 3 })
	if err := lease.Err(); err != nil {
		t.Fatalf("a lease on a healthy server was lost while its release-request listener waited: %v (renewals: %d)", err, renews.Load())
	}
}

// A grant or renewal longer than the TTL asked is refused as a bad response: trusted, the Lease counted its
// safe deadline from it (an hour for a 1 s lease) and asked its renewals for an hour.
func TestATTLLongerThanAskedIsABadResponse(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/locks/k/acquire":
			writeGrant(w, `{"key":"k","ownerToken":"o","fencingToken":7,"ttlMs":3600000,"expiresAt":"2026-11-30T11:00:00.000Z","holder":null}`)
		case "/v1/semaphores/k/acquire":
			writeGrant(w, `{"key":"k","ownerToken":"o","fencingToken":7,"ttlMs":3600000,"expiresAt":"2026-11-30T11:00:00.000Z","holder":null,"limit":2}`)
		case "/v1/locks/k/renew":
			writeGrant(w, `{"key":"k","fencingToken":7,"ttlMs":3600000,"expiresAt":"2026-11-30T11:00:00.000Z"}`)
		default:
			writeGrant(w, `{"key":"k","released":true}`)
		}
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL, RetryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if g, err := kh.AcquireGrant(ctx, "k", AcquireOptions{TTL: time.Second}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("a 1 s acquire answered with an hour: %+v, %v; want ErrBadResponse", g, err)
	}
	if g, err := kh.AcquirePermitGrant(ctx, "k", PermitOptions{TTL: time.Second, Limit: 2}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("a 1 s permit answered with an hour: %+v, %v; want ErrBadResponse", g, err)
	}
	if r, err := kh.Renew(ctx, "k", "o", time.Second); !errors.Is(err, ErrBadResponse) {
		t.Errorf("a 1 s renewal answered with an hour: %+v, %v; want ErrBadResponse", r, err)
	}
}

// A 200 that is not a keyholder answer ({} from a proxy) is refused by Inspect, InspectSemaphore,
// ForceRelease, ForceReleaseLease, ForceReleaseSemaphore and ForceReleasePermit, not read as a free lock,
// an empty semaphore or a force release.
func TestInspectAndForceReleaseRefuseMalformedAnswers(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeGrant(w, `{}`)
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL, RetryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if s, err := kh.Inspect(ctx, "k"); !errors.Is(err, ErrBadResponse) {
		t.Errorf("Inspect of {}: %+v, %v; want ErrBadResponse", s, err)
	}
	if s, err := kh.InspectSemaphore(ctx, "k"); !errors.Is(err, ErrBadResponse) {
		t.Errorf("InspectSemaphore of {}: %+v, %v; want ErrBadResponse", s, err)
	}
	if f, err := kh.ForceRelease(ctx, "k", "ns"); !errors.Is(err, ErrBadResponse) {
		t.Errorf("ForceRelease of {}: %+v, %v; want ErrBadResponse", f, err)
	}
	if f, err := kh.ForceReleaseLease(ctx, "k", "ns", 7); !errors.Is(err, ErrBadResponse) {
		t.Errorf("ForceReleaseLease of {}: %+v, %v; want ErrBadResponse", f, err)
	}
	if f, err := kh.ForceReleaseSemaphore(ctx, "k", "ns"); !errors.Is(err, ErrBadResponse) {
		t.Errorf("ForceReleaseSemaphore of {}: %+v, %v; want ErrBadResponse", f, err)
	}
	if f, err := kh.ForceReleasePermit(ctx, "k", "ns", 7); !errors.Is(err, ErrBadResponse) {
		t.Errorf("ForceReleasePermit of {}: %+v, %v; want ErrBadResponse", f, err)
	}
}

// A history answer without `recording` is refused: without it, history off (no events) reads as a key to
// which nothing happened.
func TestAHistoryWithoutRecordingIsRefused(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeGrant(w, `{"key":"k","events":[],"truncated":false}`)
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL, RetryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := kh.History(context.Background(), "k", HistoryOptions{}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("history without recording: %+v, %v; want ErrBadResponse", h, err)
	}
}

// A grant of another key than the one asked is refused (renewed and released under the key it names, it
// would hold that one); a grant of the key asked is taken.
func TestAGrantOfAnotherKeyIsABadResponse(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeGrant(w, `{"key":"k","ownerToken":"o","fencingToken":7,"ttlMs":1000,"expiresAt":"2026-11-30T11:00:00.000Z","holder":null,"limit":2}`)
	}))
	defer server.Close()
	kh, err := New(Config{BaseURL: server.URL, RetryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if g, err := kh.AcquireGrant(ctx, "x", AcquireOptions{TTL: time.Second}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("a grant of k for x: %+v, %v; want ErrBadResponse", g, err)
	}
	if g, err := kh.AcquirePermitGrant(ctx, "x", PermitOptions{TTL: time.Second, Limit: 2}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("a permit of k for x: %+v, %v; want ErrBadResponse", g, err)
	}
	if g, err := kh.AcquireGrant(ctx, "k", AcquireOptions{TTL: time.Second}); err != nil || g.Key != "k" {
		t.Errorf("a grant of k for k: %+v, %v", g, err)
	}
}

// A load balancer's 502 or 504 page (an instance restarting behind it) says no more about the call than a
// lost connection: retried, with the same Idempotency-Key, and an Unavailable error when it persists.
func TestABalancersGatewayPageIsRetried(t *testing.T) {
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout} {
		var tries atomic.Int32
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tries.Add(1) == 1 {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(status)
				_, _ = w.Write([]byte("<html><body>gateway</body></html>"))
				return
			}
			writeGrant(w, `{"key":"k","ownerToken":"q3HbVfYJm3cS1kQxv7x8XA","fencingToken":7,"ttlMs":1000,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`)
		}))
		kh := newClient(t, Config{BaseURL: server.URL})
		grant, err := kh.AcquireGrant(testContext(t), "k", AcquireOptions{TTL: time.Second})
		server.Close()
		if err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		if grant.FencingToken != 7 || tries.Load() != 2 {
			t.Fatalf("%d: grant %+v after %d tries", status, grant, tries.Load())
		}
		page := &Error{Status: status, Code: "store_unavailable"}
		if !page.Retryable() {
			t.Fatalf("%d is not retryable", status)
		}
	}
}
