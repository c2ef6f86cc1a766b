package keyholder

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// HistoryOptions narrows History; the zero value is the lock's own recent events in the caller's namespace.
type HistoryOptions struct {
	// Since and Until keep the events in the range (and every event of a lease live in it); zero: unbounded.
	Since, Until time.Time
	// Limit is the most events answered (0: the server's default).
	Limit int
	// Primitive is "locks" (the default), "semaphores" or "rwlocks".
	Primitive string
	// Namespace reads any namespace's key (an admin key when the server checks keys); "": the caller's own.
	Namespace string
}

// HistoryEvent is one lease event: granted, handed_over, renewed, release_requested (with By and Reason),
// released, expired, force_released (with By), lock_delay (with Until). Never an owner token.
type HistoryEvent struct {
	Type string
	At   time.Time
	// FencingToken is nil for an event of no lease (a lock-delay).
	FencingToken *int64
	// Holder is "" when the lease had no label.
	Holder    string
	ExpiresAt time.Time
	WaitedMs  *int64
	HeldMs    *int64
	By        string
	// Reason is a release request's reason ("" when none was given).
	Reason string
	Until  time.Time
	// Mode is "read" or "write" for a read/write lock's lease.
	Mode    string
	LockSet bool
}

// KeyHistory is a key's recent lease events, oldest first; Truncated when older ones of the range were left
// out. Recording is false when the server's history is off (then there are no events, rather than none
// happened).
type KeyHistory struct {
	Key       string
	Recording bool
	Events    []HistoryEvent
	Truncated bool
}

type historyEventBody struct {
	Type         *string `json:"type"`
	At           *string `json:"at"`
	FencingToken *int64  `json:"fencingToken"`
	Holder       *string `json:"holder"`
	ExpiresAt    *string `json:"expiresAt"`
	WaitedMs     *int64  `json:"waitedMs"`
	HeldMs       *int64  `json:"heldMs"`
	By           *string `json:"by"`
	Reason       *string `json:"reason"`
	Until        *string `json:"until"`
	Mode         *string `json:"mode"`
	LockSet      *bool   `json:"lockSet"`
}

type keyHistoryBody struct {
	Key       *string            `json:"key"`
	Events    []historyEventBody `json:"events"`
	Truncated *bool              `json:"truncated"`
	Recording *bool              `json:"recording"`
}

func (h *keyHistoryBody) validate() error {
	if h.Key == nil || h.Truncated == nil || h.Events == nil || h.Recording == nil {
		return errors.New("history without key, recording, events or truncated")
	}
	for _, e := range h.Events {
		if e.Type == nil {
			return errors.New("history event without type")
		}
		if _, err := parseTime(e.At); err != nil {
			return err
		}
		for _, optional := range []*string{e.ExpiresAt, e.Until} {
			if optional != nil {
				if _, err := parseTime(optional); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (h *keyHistoryBody) history() *KeyHistory {
	out := &KeyHistory{Key: *h.Key, Recording: *h.Recording, Truncated: *h.Truncated, Events: make([]HistoryEvent, 0, len(h.Events))}
	text := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	instant := func(s *string) time.Time {
		if s == nil {
			return time.Time{}
		}
		t, _ := parseTime(s)
		return t
	}
	for _, e := range h.Events {
		out.Events = append(out.Events, HistoryEvent{
			Type: *e.Type, At: instant(e.At), FencingToken: e.FencingToken, Holder: text(e.Holder),
			ExpiresAt: instant(e.ExpiresAt), WaitedMs: e.WaitedMs, HeldMs: e.HeldMs, By: text(e.By), Reason: text(e.Reason),
			Until: instant(e.Until), Mode: text(e.Mode), LockSet: e.LockSet != nil && *e.LockSet,
		})
	}
	return out
}

// History is the key's recent lease events, oldest first (as the TypeScript and Python clients' history()).
// With the server's history off, the answer has no events.
func (c *Client) History(ctx context.Context, key string, opts HistoryOptions) (*KeyHistory, error) {
	primitive := opts.Primitive
	if primitive == "" {
		primitive = "locks"
	}
	if primitive != "locks" && primitive != "semaphores" && primitive != "rwlocks" {
		// A caller's mistake, not an answer: nothing is sent.
		return nil, errors.New(`keyholder: History: Primitive must be "locks", "semaphores" or "rwlocks"`)
	}
	query := url.Values{}
	if !opts.Since.IsZero() {
		query.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
	}
	if !opts.Until.IsZero() {
		query.Set("until", opts.Until.UTC().Format(time.RFC3339Nano))
	}
	if opts.Limit > 0 {
		query.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "/v1/" + primitive + "/" + url.PathEscape(key) + "/history"
	if opts.Namespace != "" {
		query.Set("namespace", opts.Namespace)
		path = "/v1/history/" + primitive + "/" + url.PathEscape(key)
	}
	var body keyHistoryBody
	err := c.call(ctx, request{
		op: "history", method: http.MethodGet, path: path, query: query,
		timeout: c.requestTimeout, deadline: c.deadline(time.Now(), 0, 0),
	}, &body)
	if err != nil {
		return nil, err
	}
	return body.history(), nil
}
