package keyholder

import (
	"errors"
	"fmt"
	"time"
)

// Grant is a granted lease (a lock, or one permit of a semaphore), as the server confirmed it.
type Grant struct {
	Key          string
	OwnerToken   string
	FencingToken int64
	TTL          time.Duration
	// ExpiresAt is when the lease ends on the store's clock; time it on your own clock with TTL instead.
	ExpiresAt time.Time
	Holder    string
	// Limit is the semaphore's limit (0 for a lock).
	Limit int
}

// grantBody is a grant as sent; pointers tell a field that is absent from one that is zero.
type grantBody struct {
	Key          *string `json:"key"`
	OwnerToken   *string `json:"ownerToken"`
	FencingToken *int64  `json:"fencingToken"`
	TTLMs        *int64  `json:"ttlMs"`
	ExpiresAt    *string `json:"expiresAt"`
	Holder       *string `json:"holder"`
	Limit        *int    `json:"limit"`
	// permit: a semaphore grant must carry its limit too.
	permit bool
}

// validate accepts a grant only with its tokens present: a 200 whose body says less grants nothing usable.
func (g *grantBody) validate() error {
	switch {
	case g.Key == nil || *g.Key == "":
		return errors.New("grant without key")
	case g.OwnerToken == nil || *g.OwnerToken == "":
		return errors.New("grant without ownerToken")
	case g.FencingToken == nil || *g.FencingToken < 0:
		return errors.New("grant without fencingToken")
	case g.TTLMs == nil || *g.TTLMs <= 0:
		return errors.New("grant without ttlMs")
	case g.permit && (g.Limit == nil || *g.Limit <= 0):
		return errors.New("permit without limit")
	}
	_, err := parseTime(g.ExpiresAt)
	return err
}

func (g *grantBody) grant() *Grant {
	expiresAt, _ := parseTime(g.ExpiresAt)
	out := &Grant{Key: *g.Key, OwnerToken: *g.OwnerToken, FencingToken: *g.FencingToken,
		TTL: time.Duration(*g.TTLMs) * time.Millisecond, ExpiresAt: expiresAt}
	if g.Holder != nil {
		out.Holder = *g.Holder
	}
	if g.Limit != nil {
		out.Limit = *g.Limit
	}
	return out
}

// Renewal is a renewed lease; the fencing token is the one granted at acquire.
type Renewal struct {
	Key          string
	FencingToken int64
	TTL          time.Duration
	ExpiresAt    time.Time
	// ReleaseRequested is set once an operator asked the holder to let go (nil while nobody has).
	ReleaseRequested *ReleaseRequested
}

// ReleaseRequested is an operator's request that a lease's holder let go: not an eviction, the lease stays
// held until it is released or no longer renewed.
type ReleaseRequested struct {
	At time.Time `json:"at"`
	// By is the id of the API key that asked.
	By string `json:"by"`
	// Reason is "" when none was given.
	Reason string `json:"reason"`
}

type releaseRequestedBody struct {
	At     *string `json:"at"`
	By     *string `json:"by"`
	Reason *string `json:"reason"`
}

func (r *releaseRequestedBody) validate() error {
	if r.By == nil {
		return errors.New("releaseRequested without by")
	}
	_, err := parseTime(r.At)
	return err
}

func (r *releaseRequestedBody) value() *ReleaseRequested {
	at, _ := parseTime(r.At)
	out := &ReleaseRequested{At: at, By: *r.By}
	if r.Reason != nil {
		out.Reason = *r.Reason
	}
	return out
}

type renewalBody struct {
	Key              *string               `json:"key"`
	FencingToken     *int64                `json:"fencingToken"`
	TTLMs            *int64                `json:"ttlMs"`
	ExpiresAt        *string               `json:"expiresAt"`
	ReleaseRequested *releaseRequestedBody `json:"releaseRequested"`
}

func (r *renewalBody) validate() error {
	if r.Key == nil || r.FencingToken == nil || *r.FencingToken < 0 || r.TTLMs == nil || *r.TTLMs <= 0 {
		return errors.New("renewal without key, fencingToken >= 0 or ttlMs")
	}
	if r.ReleaseRequested != nil {
		if err := r.ReleaseRequested.validate(); err != nil {
			return err
		}
	}
	_, err := parseTime(r.ExpiresAt)
	return err
}

func (r *renewalBody) renewal() *Renewal {
	expiresAt, _ := parseTime(r.ExpiresAt)
	out := &Renewal{Key: *r.Key, FencingToken: *r.FencingToken, TTL: time.Duration(*r.TTLMs) * time.Millisecond, ExpiresAt: expiresAt}
	if r.ReleaseRequested != nil {
		out.ReleaseRequested = r.ReleaseRequested.value()
	}
	return out
}

// ReleaseAsked is the answer to RequestRelease: the request as stored with the lease.
type ReleaseAsked struct {
	Namespace        string
	Key              string
	FencingToken     int64
	ReleaseRequested ReleaseRequested
}

type releaseAskedBody struct {
	Namespace        *string               `json:"namespace"`
	Key              *string               `json:"key"`
	FencingToken     *int64                `json:"fencingToken"`
	ReleaseRequested *releaseRequestedBody `json:"releaseRequested"`
}

func (r *releaseAskedBody) validate() error {
	if r.Namespace == nil || r.Key == nil || r.FencingToken == nil || r.ReleaseRequested == nil {
		return errors.New("release request answer without namespace, key, fencingToken or releaseRequested")
	}
	return r.ReleaseRequested.validate()
}

// LockStatus is who holds a lock right now (never the owner token).
type LockStatus struct {
	Key  string `json:"key"`
	Held bool   `json:"held"`
	// Index changes on every grant, release, expiry and force release; compare for inequality only.
	Index          int64   `json:"index"`
	Holder         *string `json:"holder"`
	FencingToken   int64   `json:"fencingToken"`
	ExpiresAt      string  `json:"expiresAt"`
	TTLRemainingMs int64   `json:"ttlRemainingMs"`
	// ReleaseRequested is set once an operator asked the holder to let go (nil while nobody has).
	ReleaseRequested *ReleaseRequested `json:"releaseRequested"`
	Waiters          int               `json:"waiters"`
	// Queue is filled by InspectQueue only: the callers waiting for a held lock, head first (at most 100).
	Queue []QueuedCaller `json:"queue,omitempty"`
}

// QueuedCaller is one caller waiting in a key's queue (never its owner token).
type QueuedCaller struct {
	// Position is 1 for the head of the queue.
	Position int     `json:"position"`
	Holder   *string `json:"holder"`
	// WaitingSince is when the caller joined the queue (RFC 3339, the store's clock).
	WaitingSince string `json:"waitingSince"`
	// Weight is what a semaphore's or read/write lock's waiter asks for (0 for a lock).
	Weight int `json:"weight,omitempty"`
	// Mode is "read" or "write" for a read/write lock's waiter ("" otherwise).
	Mode string `json:"mode,omitempty"`
}

// SemaphoreStatus is who holds a semaphore's permits right now (never owner tokens).
type SemaphoreStatus struct {
	Key   string `json:"key"`
	Index int64  `json:"index"`
	// Limit is the live permits' limit; nil when no permit is held.
	Limit       *int `json:"limit"`
	PermitsHeld int  `json:"permitsHeld"`
	Holders     []struct {
		Holder         *string `json:"holder"`
		FencingToken   int64   `json:"fencingToken"`
		ExpiresAt      string  `json:"expiresAt"`
		TTLRemainingMs int64   `json:"ttlRemainingMs"`
		// ReleaseRequested is set once an operator asked this permit's holder to let go (nil while nobody has).
		ReleaseRequested *ReleaseRequested `json:"releaseRequested"`
	} `json:"holders"`
	Waiters int `json:"waiters"`
	// Queue is filled by InspectSemaphoreQueue only: the callers waiting for a permit, head first.
	Queue []QueuedCaller `json:"queue,omitempty"`
}

// ForceReleased is what a force release evicted.
type ForceReleased struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Released  bool   `json:"released"`
	Evicted   struct {
		Holder *string `json:"holder"`
		// FencingToken is the evicted lease's; every later grant has a higher one.
		FencingToken int64 `json:"fencingToken"`
	} `json:"evicted"`
}

// PermitsForceReleased is what a force release of a semaphore evicted: every permit, or the one named.
type PermitsForceReleased struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Released  bool   `json:"released"`
	Evicted   []struct {
		Holder *string `json:"holder"`
		// FencingToken is the evicted lease's.
		FencingToken int64 `json:"fencingToken"`
	} `json:"evicted"`
}

func parseTime(s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, errors.New("without expiresAt")
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, fmt.Errorf("expiresAt: %w", err)
	}
	return t, nil
}

// The answers below are public structs the caller reads as they are, so what validate can check is what a
// keyholder answer always has: a key, and for each lease shown a fencing token >= 0 and an expiresAt. A
// proxy's `{}` is then refused (ErrBadResponse) rather than read as a free lock, an empty semaphore or a
// force release that evicted nobody.

func (s *LockStatus) validate() error {
	if s.Key == "" {
		return errors.New("lock status without key")
	}
	if s.Held {
		if s.FencingToken < 0 {
			return errors.New("held lock status with a negative fencingToken")
		}
		if _, err := parseTime(&s.ExpiresAt); err != nil {
			return err
		}
	}
	return nil
}

func (s *SemaphoreStatus) validate() error {
	if s.Key == "" || s.Holders == nil {
		return errors.New("semaphore status without key or holders")
	}
	for _, h := range s.Holders {
		if h.FencingToken < 0 {
			return errors.New("semaphore holder with a negative fencingToken")
		}
		if _, err := parseTime(&h.ExpiresAt); err != nil {
			return err
		}
	}
	return nil
}

func (f *PermitsForceReleased) validate() error {
	if f.Key == "" || !f.Released || f.Evicted == nil {
		return errors.New("force release answer without key, released: true or evicted")
	}
	return nil
}

func (f *ForceReleased) validate() error {
	if f.Key == "" || !f.Released {
		return errors.New("force release answer without key or released: true")
	}
	return nil
}
