package keyholder

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"time"
)

// Backoff is the wait between retries: BaseDelay doubling up to MaxDelay, plus up to half a step of
// jitter, and never less than the server's Retry-After.
type Backoff struct {
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// defaultBackoff: 100 ms is a few healthy round trips; 2 s caps the step so a recovered server is seen soon.
var defaultBackoff = Backoff{BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}

// jitterRand is seeded here because Go 1.19's global math/rand starts from the same seed in every
// process, which would give clients started together the same "random" delays.
var (
	jitterMu   sync.Mutex
	jitterRand = rand.New(rand.NewSource(time.Now().UnixNano()))
)

func randomFraction() float64 {
	jitterMu.Lock()
	defer jitterMu.Unlock()
	return jitterRand.Float64()
}

// RetryEvent is what Config.OnRetry is told before a retry: which attempt failed, with what, and how long
// the client waits now.
type RetryEvent struct {
	Op      string
	Attempt int
	Delay   time.Duration
	Err     *Error
}

// delay is how long to wait before attempt+1: never less than retryAfter, never less than the exponential
// step, plus up to half a step of random jitter, so that callers told "retry in 1 s" at the same moment do
// not all come back at the same moment.
func (b Backoff) delay(retryAfter time.Duration, attempt int) time.Duration {
	step := b.BaseDelay
	for i := 1; i < attempt && step < b.MaxDelay; i++ {
		step *= 2
	}
	if step > b.MaxDelay {
		step = b.MaxDelay
	}
	wait := step
	if retryAfter > wait {
		wait = retryAfter
	}
	return wait + time.Duration(randomFraction()*float64(step)/2)
}

// withRetries runs attempt until it succeeds, fails with an error that is not retryable, ctx ends, or the
// next try would start after deadline (then the last error is returned rather than sleeping for nothing).
// A zero deadline means one try. onRetry, if set, is told of each retry before its wait.
func withRetries[T any](ctx context.Context, b Backoff, deadline time.Time, onRetry func(RetryEvent), attempt func() (T, error)) (T, error) {
	for n := 1; ; n++ {
		result, err := attempt()
		var kerr *Error
		if err == nil || !errors.As(err, &kerr) || !kerr.Retryable() {
			return result, err
		}
		wait := b.delay(kerr.RetryAfter, n)
		if deadline.IsZero() || time.Now().Add(wait).After(deadline) {
			return result, err
		}
		if onRetry != nil {
			onRetry(RetryEvent{Attempt: n, Delay: wait, Err: kerr})
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return result, ctx.Err()
		case <-timer.C:
		}
	}
}
