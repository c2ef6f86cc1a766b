package keyholder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config says where the server is and how patient the client is.
type Config struct {
	// BaseURL is where the server listens, e.g. http://127.0.0.1:3000.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>"; leave it empty for a server running open.
	APIKey string
	// HTTPClient is copied and used instead of a new one; redirects are never followed either way.
	HTTPClient *http.Client
	// RequestTimeout bounds one answer (a waiting acquire adds its Wait). Zero: 10 s, far above a healthy
	// round trip.
	RequestTimeout time.Duration
	// RetryBudget is how long one call keeps retrying 503, 429 and lost connections (a waiting acquire
	// adds its Wait). Zero: 15 s, which rides out a store restart or failover and is short enough that a
	// caller learns of an outage.
	RetryBudget time.Duration
	// Backoff between retries; zero fields: 100 ms doubling up to 2 s. Retry-After is always honoured.
	Backoff Backoff
	// OnRetry is called before each retry (for logs and metrics); it must not block.
	OnRetry func(RetryEvent)
}

// AcquireOptions are one lock acquire's.
type AcquireOptions struct {
	// TTL is the lease length, in whole milliseconds; the server bounds it (by default 100 ms to 1 h).
	TTL time.Duration
	// Wait, if the lock is held, is how long to wait in the server's FIFO queue (0: fail at once).
	Wait time.Duration
	// Holder is a label others see (inspect, ls), e.g. a worker name. Not a secret.
	Holder string
	// IdempotencyKey makes retries of this acquire safe: while the grant it made is live, the same key gets
	// that same grant back instead of 409. Empty: a fresh random one, the same on every retry of this call.
	// Given, Acquire renews the grant before returning the Lease (it may be an earlier call's, replayed
	// with its end unchanged).
	IdempotencyKey string
	// RetryBudget overrides the client's for this call (a negative value: a single attempt).
	RetryBudget time.Duration
	LeaseOptions
}

// Client calls a keyholder server. It is safe for concurrent use.
type Client struct {
	baseURL        string
	apiKey         string
	http           *http.Client
	requestTimeout time.Duration
	retryBudget    time.Duration
	backoff        Backoff
	onRetry        func(RetryEvent)
}

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("keyholder: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	// A redirect is answered as an error, never followed: requests carry the API key and owner tokens,
	// which must reach keyholder only.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{
		baseURL:        strings.TrimRight(cfg.BaseURL, "/"),
		apiKey:         cfg.APIKey,
		http:           hc,
		requestTimeout: orDefault(cfg.RequestTimeout, 10*time.Second),
		retryBudget:    orDefault(cfg.RetryBudget, 15*time.Second),
		backoff: Backoff{
			BaseDelay: orDefault(cfg.Backoff.BaseDelay, defaultBackoff.BaseDelay),
			MaxDelay:  orDefault(cfg.Backoff.MaxDelay, defaultBackoff.MaxDelay),
		},
		onRetry: cfg.OnRetry,
	}
	return c, nil
}

func orDefault(d, fallback time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return fallback
}

// deadline is when retries of a call started at start stop (zero, a single attempt, for a negative budget).
func (c *Client) deadline(start time.Time, wait, budget time.Duration) time.Time {
	if budget < 0 {
		return time.Time{}
	}
	return start.Add(wait + orDefault(budget, c.retryBudget))
}

// Acquire takes the lock and returns a Lease that renews itself at about a third of its TTL until
// released. ctx bounds the acquire only. A lock held past Wait is a *LockHeldError (errors.Is ErrLockHeld)
// with RetryAfter.
func (c *Client) Acquire(ctx context.Context, key string, opts AcquireOptions) (*Lease, error) {
	sentAt := time.Now()
	grant, err := c.AcquireGrant(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	lease := newLease(c, lockKind, grant, sentAt, opts.LeaseOptions)
	// With the caller's own Idempotency-Key the grant may be an earlier call's lease, replayed as it was
	// (its end unchanged): its age is unknown, so it is renewed before it is handed out.
	if err := lease.start(opts.IdempotencyKey != ""); err != nil {
		return nil, err
	}
	return lease, nil
}

// WithLock takes the lock, runs fn with a context that is cancelled when the lease is lost, and releases
// the lock whatever happens. fn's error is returned. When the lease was lost while fn ran, WithLock returns
// the *LeaseLostError (errors.Is ErrLeaseLost) even if fn returned nil: its work may have run without the
// lock. A fn that stops on ctx.Done() and returns ctx.Err() gets the *LeaseLostError back too.
func (c *Client) WithLock(ctx context.Context, key string, opts AcquireOptions, fn func(ctx context.Context, lease *Lease) error) error {
	lease, err := c.Acquire(ctx, key, opts)
	if err != nil {
		return err
	}
	return runWithLease(ctx, lease, fn)
}

// AcquireGrant is one acquire, retried with the same Idempotency-Key: the grant with no Lease around it
// (nothing renews it).
func (c *Client) AcquireGrant(ctx context.Context, key string, opts AcquireOptions) (*Grant, error) {
	started := time.Now()
	idempotencyKey := opts.IdempotencyKey
	if idempotencyKey == "" {
		idempotencyKey = newIdempotencyKey()
	}
	body := grantBody{}
	err := c.call(ctx, request{
		op: "acquire", method: http.MethodPost, path: lockKind.prefix + url.PathEscape(key) + "/acquire",
		header:   http.Header{"Idempotency-Key": {idempotencyKey}},
		body:     acquireBody(started, opts.TTL, opts.Wait, opts.Holder, 0),
		timeout:  c.requestTimeout + opts.Wait,
		deadline: c.deadline(started, opts.Wait, opts.RetryBudget),
	}, &body)
	if err != nil {
		return nil, err
	}
	return askedFor("acquire", body.grant(), key, opts.TTL)
}

// askedFor refuses a grant of another key than the one asked (renewed and released under the key it
// names, it would hold that one) or longer than the TTL asked: the server grants exactly the TTL asked,
// or refuses, and a Lease trusting a longer one would count its safe deadline, and ask its renewals, from it.
func askedFor(op string, g *Grant, key string, asked time.Duration) (*Grant, error) {
	if g.Key != key {
		return nil, &Error{Op: op, Code: CodeBadResponse, Status: http.StatusOK, Err: fmt.Errorf("a grant of %q, asked for %q", g.Key, key)}
	}
	if err := longerThanAsked(op, g.TTL, asked); err != nil {
		return nil, err
	}
	return g, nil
}

// longerThanAsked is the bad response a grant's or renewal's TTL longer than the one asked is, else nil.
func longerThanAsked(op string, got, asked time.Duration) error {
	if millis(got) > millis(asked) {
		return &Error{Op: op, Code: CodeBadResponse, Status: http.StatusOK, Err: fmt.Errorf("ttlMs %d is longer than the %d asked", millis(got), millis(asked))}
	}
	return nil
}

// acquireBody builds an acquire's body for each attempt: a retry waits only for what is left of wait.
func acquireBody(started time.Time, ttl, wait time.Duration, holder string, limit int) func() interface{} {
	return func() interface{} {
		b := map[string]interface{}{"ttlMs": millis(ttl)}
		if holder != "" {
			b["holder"] = holder
		}
		if limit != 0 {
			b["limit"] = limit
		}
		if wait > 0 {
			left := wait - time.Since(started)
			if left < 0 {
				left = 0
			}
			b["waitMs"] = millis(left)
		}
		return b
	}
}

// Renew extends a lease to end ttl from now (retried while retryable). A token that no longer holds the
// lock is ErrNotOwner.
func (c *Client) Renew(ctx context.Context, key, ownerToken string, ttl time.Duration) (*Renewal, error) {
	return c.renewLease(ctx, lockKind, key, ownerToken, ttl, c.requestTimeout, c.deadline(time.Now(), 0, 0))
}

// Release gives the lock back (retried while retryable). A token that no longer holds it is ErrNotOwner.
func (c *Client) Release(ctx context.Context, key, ownerToken string) error {
	return c.releaseLease(ctx, lockKind, key, ownerToken, c.deadline(time.Now(), 0, 0))
}

// Inspect says who holds the lock right now (never the owner token).
func (c *Client) Inspect(ctx context.Context, key string) (*LockStatus, error) {
	return c.inspect(ctx, key, nil)
}

// InspectQueue is Inspect with the callers waiting for the lock in Queue, head first (at most 100): who
// waits, since when. A free lock has none.
func (c *Client) InspectQueue(ctx context.Context, key string) (*LockStatus, error) {
	return c.inspect(ctx, key, url.Values{"queue": {"true"}})
}

func (c *Client) inspect(ctx context.Context, key string, query url.Values) (*LockStatus, error) {
	var status LockStatus
	err := c.call(ctx, request{
		op: "inspect", method: http.MethodGet, path: lockKind.prefix + url.PathEscape(key), query: query,
		timeout: c.requestTimeout, deadline: c.deadline(time.Now(), 0, 0),
	}, &status)
	if err != nil {
		return nil, err
	}
	return &status, nil
}

// ForceRelease frees a lock whoever holds it (an admin key when the server checks keys); the evicted
// holder's next renewal is refused with not_owner. Nobody holding it is ErrNotFound.
func (c *Client) ForceRelease(ctx context.Context, key, namespace string) (*ForceReleased, error) {
	return c.forceRelease(ctx, key, url.Values{"namespace": {namespace}})
}

// ForceReleaseLease frees the lock only if the lease with fencingToken still holds it: a stuck holder
// seen by Inspect is evicted, never one that took the lock since. If another lease holds it now, nothing
// changes and the error is ErrHolderChanged (409 holder_changed); nobody holding it is ErrNotFound.
func (c *Client) ForceReleaseLease(ctx context.Context, key, namespace string, fencingToken int64) (*ForceReleased, error) {
	return c.forceRelease(ctx, key, url.Values{"namespace": {namespace}, "fencingToken": {strconv.FormatInt(fencingToken, 10)}})
}

// RequestRelease asks the holder of the lock's lease with fencingToken to let go, without evicting it (an
// admin key when the server checks keys); reason may be "". The holder's renewals carry the request from
// then on (Lease.ReleaseRequested, Lease.OnReleaseRequested). If another lease holds the lock now, nothing
// is asked and the error is ErrHolderChanged; nobody holding it is ErrNotFound.
func (c *Client) RequestRelease(ctx context.Context, key, namespace string, fencingToken int64, reason string) (*ReleaseAsked, error) {
	return c.requestRelease(ctx, lockKind, "requestRelease", key, namespace, fencingToken, reason)
}

func (c *Client) requestRelease(ctx context.Context, kind leaseKind, op, key, namespace string, fencingToken int64, reason string) (*ReleaseAsked, error) {
	body := map[string]interface{}{"fencingToken": fencingToken}
	if reason != "" {
		body["reason"] = reason
	}
	var out releaseAskedBody
	err := c.call(ctx, request{
		op: op, method: http.MethodPost, path: kind.prefix + url.PathEscape(key) + "/release-request",
		query:   url.Values{"namespace": {namespace}},
		body:    func() interface{} { return body },
		timeout: c.requestTimeout, deadline: c.deadline(time.Now(), 0, 0),
	}, &out)
	if err != nil {
		return nil, err
	}
	return &ReleaseAsked{Namespace: *out.Namespace, Key: *out.Key, FencingToken: *out.FencingToken, ReleaseRequested: *out.ReleaseRequested.value()}, nil
}

func (c *Client) forceRelease(ctx context.Context, key string, query url.Values) (*ForceReleased, error) {
	var out ForceReleased
	if err := c.deleteKey(ctx, "forceRelease", lockKind, key, query, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// deleteKey sends a force release (DELETE on the key) of a lock or a semaphore, its answer read into out.
func (c *Client) deleteKey(ctx context.Context, op string, kind leaseKind, key string, query url.Values, out interface{}) error {
	return c.call(ctx, request{
		op: op, method: http.MethodDelete, path: kind.prefix + url.PathEscape(key),
		query:   query,
		timeout: c.requestTimeout, deadline: c.deadline(time.Now(), 0, 0),
	}, out)
}

func (c *Client) renewLease(ctx context.Context, kind leaseKind, key, ownerToken string, ttl, timeout time.Duration, deadline time.Time) (*Renewal, error) {
	var body renewalBody
	err := c.call(ctx, request{
		op: kind.renewOp, method: http.MethodPost, path: kind.prefix + url.PathEscape(key) + "/renew",
		body:    func() interface{} { return map[string]interface{}{"ownerToken": ownerToken, "ttlMs": millis(ttl)} },
		timeout: timeout, deadline: deadline,
	}, &body)
	if err != nil {
		return nil, err
	}
	r := body.renewal()
	if err := longerThanAsked(kind.renewOp, r.TTL, ttl); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *Client) releaseLease(ctx context.Context, kind leaseKind, key, ownerToken string, deadline time.Time) error {
	var body struct {
		Released bool `json:"released"`
	}
	err := c.call(ctx, request{
		op: kind.releaseOp, method: http.MethodPost, path: kind.prefix + url.PathEscape(key) + "/release",
		body:    func() interface{} { return map[string]interface{}{"ownerToken": ownerToken} },
		timeout: c.requestTimeout, deadline: deadline,
	}, &body)
	if err == nil && !body.Released {
		return &Error{Op: kind.releaseOp, Code: CodeBadResponse, Status: http.StatusOK, Err: errors.New("release answer without released: true")}
	}
	return err
}
