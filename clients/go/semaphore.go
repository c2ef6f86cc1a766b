package keyholder

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PermitOptions are one semaphore acquire's.
type PermitOptions struct {
	// Limit is the most permits held at once (1 to 10,000); every caller of one semaphore sends the same
	// one (another is ErrLimitMismatch while permits are held).
	Limit int
	// TTL is the permit's lease length, in whole milliseconds.
	TTL time.Duration
	// Wait, if every permit is held, is how long to wait in the server's FIFO queue (0: fail at once).
	Wait time.Duration
	// Holder is a label others see. Not a secret.
	Holder string
	// RetryBudget overrides the client's for this call (a negative value: a single attempt).
	RetryBudget time.Duration
	LeaseOptions
}

// AcquirePermit takes one permit of the semaphore and returns a Lease that renews itself until released.
// Every permit held is a *LockHeldError (errors.Is ErrSemaphoreFull) with RetryAfter.
//
// The server keeps no Idempotency-Key for semaphores, so a retried acquire whose first answer was lost
// may leave one extra permit held until its TTL ends: capacity lost for a while, never more permits than
// the limit.
func (c *Client) AcquirePermit(ctx context.Context, key string, opts PermitOptions) (*Lease, error) {
	sentAt := time.Now()
	grant, err := c.AcquirePermitGrant(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	lease := newLease(c, permitKind, grant, sentAt, opts.LeaseOptions)
	if err := lease.start(false); err != nil {
		return nil, err
	}
	return lease, nil
}

// WithPermit is WithLock for one permit of a semaphore.
func (c *Client) WithPermit(ctx context.Context, key string, opts PermitOptions, fn func(ctx context.Context, lease *Lease) error) error {
	lease, err := c.AcquirePermit(ctx, key, opts)
	if err != nil {
		return err
	}
	return runWithLease(ctx, lease, fn)
}

// AcquirePermitGrant is one permit acquire (retried while retryable), with no Lease around it.
func (c *Client) AcquirePermitGrant(ctx context.Context, key string, opts PermitOptions) (*Grant, error) {
	started := time.Now()
	body := grantBody{permit: true}
	err := c.call(ctx, request{
		op: "acquirePermit", method: http.MethodPost, path: permitKind.prefix + url.PathEscape(key) + "/acquire",
		body:     acquireBody(started, opts.TTL, opts.Wait, opts.Holder, opts.Limit),
		timeout:  c.requestTimeout + opts.Wait,
		deadline: c.deadline(started, opts.Wait, opts.RetryBudget),
	}, &body)
	if err != nil {
		return nil, err
	}
	return askedFor("acquirePermit", body.grant(), key, opts.TTL)
}

// RenewPermit extends one permit's lease to end ttl from now; ErrNotOwner when the token no longer holds it.
func (c *Client) RenewPermit(ctx context.Context, key, ownerToken string, ttl time.Duration) (*Renewal, error) {
	return c.renewLease(ctx, permitKind, key, ownerToken, ttl, c.requestTimeout, c.deadline(time.Now(), 0, 0))
}

// ReleasePermit gives one permit back; ErrNotOwner when the token no longer holds it.
func (c *Client) ReleasePermit(ctx context.Context, key, ownerToken string) error {
	return c.releaseLease(ctx, permitKind, key, ownerToken, c.deadline(time.Now(), 0, 0))
}

// ForceReleaseSemaphore frees every permit of the semaphore whoever holds them (an admin key when the server
// checks keys); each evicted holder's next renewal is refused with not_owner. Nobody holding one is ErrNotFound.
func (c *Client) ForceReleaseSemaphore(ctx context.Context, key, namespace string) (*PermitsForceReleased, error) {
	return c.forceReleasePermits(ctx, key, url.Values{"namespace": {namespace}})
}

// ForceReleasePermit frees only the permit whose lease has fencingToken, a stuck holder seen by
// InspectSemaphore; the other permits stay their holders'. If no permit has that token now (it ended, or
// was released), nothing changes and the error is ErrHolderChanged (409 holder_changed); nobody holding
// one is ErrNotFound.
func (c *Client) ForceReleasePermit(ctx context.Context, key, namespace string, fencingToken int64) (*PermitsForceReleased, error) {
	return c.forceReleasePermits(ctx, key, url.Values{"namespace": {namespace}, "fencingToken": {strconv.FormatInt(fencingToken, 10)}})
}

func (c *Client) forceReleasePermits(ctx context.Context, key string, query url.Values) (*PermitsForceReleased, error) {
	var out PermitsForceReleased
	if err := c.deleteKey(ctx, "forceReleasePermits", permitKind, key, query, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RequestPermitRelease is RequestRelease for a semaphore permit: it asks the holder of the permit with
// fencingToken to let go, and that permit's renewals carry the request (the other permits' do not).
func (c *Client) RequestPermitRelease(ctx context.Context, key, namespace string, fencingToken int64, reason string) (*ReleaseAsked, error) {
	return c.requestRelease(ctx, permitKind, "requestPermitRelease", key, namespace, fencingToken, reason)
}

// InspectSemaphore says who holds the semaphore's permits right now (never owner tokens).
func (c *Client) InspectSemaphore(ctx context.Context, key string) (*SemaphoreStatus, error) {
	return c.inspectSemaphore(ctx, key, nil)
}

// InspectSemaphoreQueue is InspectSemaphore with the callers waiting for a permit in Queue, head first.
func (c *Client) InspectSemaphoreQueue(ctx context.Context, key string) (*SemaphoreStatus, error) {
	return c.inspectSemaphore(ctx, key, url.Values{"queue": {"true"}})
}

func (c *Client) inspectSemaphore(ctx context.Context, key string, query url.Values) (*SemaphoreStatus, error) {
	var status SemaphoreStatus
	err := c.call(ctx, request{
		op: "inspectSemaphore", method: http.MethodGet, path: permitKind.prefix + url.PathEscape(key), query: query,
		timeout: c.requestTimeout, deadline: c.deadline(time.Now(), 0, 0),
	}, &status)
	if err != nil {
		return nil, err
	}
	return &status, nil
}
