package keyholder

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, one per kind of answer, for errors.Is. Every error a call returns is an *Error (or
// wraps one), so errors.As(err, &kerr) gives the problem's Code, Status, RetryAfter and body.
var (
	// ErrLockHeld: 409 lock_held, another owner holds the lock (or it stayed held for the whole wait).
	ErrLockHeld = errors.New("keyholder: lock held")
	// ErrSemaphoreFull: 409 semaphore_full, every permit is held (or others are queued).
	ErrSemaphoreFull = errors.New("keyholder: semaphore full")
	// ErrLimitMismatch: 409 limit_mismatch, the semaphore's live permits were granted with another limit.
	ErrLimitMismatch = errors.New("keyholder: semaphore limit mismatch")
	// ErrNotOwner: 409 not_owner, the owner token no longer holds the lease (expired, released, force-released).
	ErrNotOwner = errors.New("keyholder: not owner")
	// ErrUnavailable: 503 (store_unavailable, shutting_down, overloaded) or no answer at all (code "unreachable").
	// Nothing was granted for certain; the client already retried until its deadline.
	ErrUnavailable = errors.New("keyholder: unavailable")
	// ErrRateLimited: 429 rate_limited, quota_exceeded or too_many_waiters; retried until the deadline.
	ErrRateLimited = errors.New("keyholder: rate limited")
	// ErrInvalidRequest: 400 invalid_request, 413 payload_too_large, 415 unsupported_media_type, 422 idempotency_key_reused.
	ErrInvalidRequest = errors.New("keyholder: invalid request")
	// ErrUnauthenticated: 401, no API key or not a valid one.
	ErrUnauthenticated = errors.New("keyholder: unauthenticated")
	// ErrForbidden: 403, the API key lacks the route's scope.
	ErrForbidden = errors.New("keyholder: forbidden")
	// ErrNotFound: 404, e.g. a force release of a lock nobody holds.
	ErrNotFound = errors.New("keyholder: not found")
	// ErrHolderChanged: 409 holder_changed, a force release named a lease (its fencing token) that another
	// one has replaced; nothing was released.
	ErrHolderChanged = errors.New("keyholder: holder changed")
	// ErrBadResponse: an answer the client cannot trust (a redirect, a success without a well-formed body).
	// Not retried: a grant is accepted only from a 200 whose body parses with its tokens present.
	ErrBadResponse = errors.New("keyholder: bad response")
	// ErrLeaseLost: the lease can no longer be trusted; errors.As gives the *LeaseLostError.
	ErrLeaseLost = errors.New("keyholder: lease lost")
)

// Codes the client uses for errors that carry no problem from the server.
const (
	// CodeUnreachable: no answer came back (refused, reset, timed out).
	CodeUnreachable = "unreachable"
	// CodeBadResponse: see ErrBadResponse.
	CodeBadResponse = "bad_response"
)

// sentinelOf maps a problem code to the sentinel errors.Is matches; an unknown code matches none.
var sentinelOf = map[string]error{
	"lock_held":              ErrLockHeld,
	"semaphore_full":         ErrSemaphoreFull,
	"limit_mismatch":         ErrLimitMismatch,
	"not_owner":              ErrNotOwner,
	"store_unavailable":      ErrUnavailable,
	"shutting_down":          ErrUnavailable,
	"overloaded":             ErrUnavailable,
	CodeUnreachable:          ErrUnavailable,
	"rate_limited":           ErrRateLimited,
	"quota_exceeded":         ErrRateLimited,
	"too_many_waiters":       ErrRateLimited,
	"invalid_request":        ErrInvalidRequest,
	"payload_too_large":      ErrInvalidRequest,
	"unsupported_media_type": ErrInvalidRequest,
	"idempotency_key_reused": ErrInvalidRequest,
	"unauthenticated":        ErrUnauthenticated,
	"forbidden":              ErrForbidden,
	"not_found":              ErrNotFound,
	"holder_changed":         ErrHolderChanged,
	CodeBadResponse:          ErrBadResponse,
}

// Problem is an application/problem+json body (RFC 9457 plus keyholder's code).
type Problem struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail"`
	Code         string `json:"code"`
	Instance     string `json:"instance,omitempty"`
	RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`
	// Errors names each offending field of an invalid_request.
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors,omitempty"`
}

// Error is every error answer, and no answer at all (Code "unreachable").
type Error struct {
	// Op is the operation that failed, e.g. "acquire".
	Op string
	// Code is the problem's stable code, CodeUnreachable or CodeBadResponse.
	Code string
	// Status is the HTTP status, 0 when no answer came.
	Status int
	// Problem is the problem body as sent, nil when there was none.
	Problem *Problem
	// RetryAfter is the server's hint (retryAfterMs, else Retry-After), 0 when it gave none.
	RetryAfter time.Duration
	// Err is the transport error behind CodeUnreachable or CodeBadResponse.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Problem != nil && e.Problem.Detail != "":
		return fmt.Sprintf("keyholder %s: %s (%d %s)", e.Op, e.Problem.Detail, e.Status, e.Code)
	case e.Err != nil:
		return fmt.Sprintf("keyholder %s: %s: %v", e.Op, e.Code, e.Err)
	default:
		return fmt.Sprintf("keyholder %s: HTTP %d %s", e.Op, e.Status, e.Code)
	}
}

// Unwrap gives the transport error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	s, ok := sentinelOf[e.Code]
	return ok && s == target
}

// Retryable reports whether the same call may succeed later: no answer, 503, 429, 408 (the request did
// not arrive in time, so the server did nothing with it), or a load balancer's 502 or 504 (its own
// answer, which says no more about the call than a lost connection, e.g. while an instance restarts).
func (e *Error) Retryable() bool {
	return e.Code == CodeUnreachable || e.Status == http.StatusServiceUnavailable ||
		e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout ||
		e.Status == http.StatusBadGateway || e.Status == http.StatusGatewayTimeout
}

// LockHeldError is a 409 lock_held or semaphore_full: others hold what was asked for past the wait.
// RetryAfter says when the first lease in the way ends.
type LockHeldError struct {
	RetryAfter time.Duration
	Err        *Error
}

func (e *LockHeldError) Error() string { return e.Err.Error() }

// Unwrap gives the *Error, so errors.Is(err, ErrLockHeld) and errors.As(err, &kerr) work too.
func (e *LockHeldError) Unwrap() error { return e.Err }

// LeaseLostReason says why a lease was lost.
type LeaseLostReason string

const (
	// LostNotOwner: a renewal was refused with not_owner (expired on the server, force-released).
	LostNotOwner LeaseLostReason = "not_owner"
	// LostDeadline: the safe deadline passed without a confirmed renewal (server unreachable or slow).
	LostDeadline LeaseLostReason = "deadline"
	// LostRenewFailed: a renewal failed with an error that retrying cannot mend.
	LostRenewFailed LeaseLostReason = "renew_failed"
)

// LeaseLostError says a lease can no longer be trusted; Err is the renewal's error, if one caused it.
type LeaseLostError struct {
	Key    string
	Reason LeaseLostReason
	Err    error
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("keyholder: lease on %q was lost (%s)", e.Key, e.Reason)
}

func (e *LeaseLostError) Unwrap() error { return e.Err }

// Is matches ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// parseRetryAfter reads Retry-After in whole seconds (what the server sends) or as an HTTP date.
// maxRetryAfter bounds a server's hint (a day): above it, the answer is not a hint a caller should sleep on.
const maxRetryAfter = 24 * time.Hour

func parseRetryAfter(header string) time.Duration {
	header = strings.TrimSpace(header)
	if header == "" {
		return 0
	}
	if seconds, err := strconv.ParseFloat(header, 64); err == nil {
		if seconds < 0 {
			return 0
		}
		// Clamped before the conversion: a huge value (1e20 s) overflowed into a negative duration, and a
		// caller sleeping RetryAfter did not wait at all.
		if seconds > maxRetryAfter.Seconds() {
			return maxRetryAfter
		}
		return time.Duration(seconds * float64(time.Second))
	}
	if at, err := http.ParseTime(header); err == nil && time.Until(at) > 0 {
		return time.Until(at)
	}
	return 0
}

// errorFromResponse turns a non-200 answer into an *Error (a *LockHeldError for lock_held and
// semaphore_full).
func errorFromResponse(op string, status int, header http.Header, body []byte) error {
	e := &Error{Op: op, Status: status, RetryAfter: parseRetryAfter(header.Get("Retry-After"))}
	var problem Problem
	if json.Unmarshal(body, &problem) == nil && problem.Code != "" {
		e.Problem = &problem
		e.Code = problem.Code
		// The body's milliseconds are more precise than the header's whole seconds.
		if problem.RetryAfterMs != nil && *problem.RetryAfterMs >= 0 {
			e.RetryAfter = maxRetryAfter
			if *problem.RetryAfterMs < maxRetryAfter.Milliseconds() {
				e.RetryAfter = time.Duration(*problem.RetryAfterMs) * time.Millisecond
			}
		}
	} else if status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
		// A 502, 503 or 504 without a problem body (a proxy's page): the service behind it could not
		// answer, and a retry may succeed.
		e.Code = "store_unavailable"
	} else {
		e.Code = "internal_error"
	}
	if e.Code == "lock_held" || e.Code == "semaphore_full" {
		return &LockHeldError{RetryAfter: e.RetryAfter, Err: e}
	}
	return e
}
