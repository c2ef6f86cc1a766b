package keyholder

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// maxBodyBytes bounds what one answer may make the client read: the largest keyholder answer (a page
// of a list) is far smaller, and a misbehaving proxy cannot make the client buffer without limit.
const maxBodyBytes = 1 << 20

// request is one operation as sent, retried by call while the answer says a retry may succeed.
type request struct {
	op     string
	method string
	path   string
	query  url.Values
	// body is built again for each attempt (a retried waiting acquire asks only for what is left of its wait).
	body    func() interface{}
	header  http.Header
	timeout time.Duration
	// deadline: no attempt starts after it; zero means a single attempt.
	deadline time.Time
}

// validator is a success body that can say it is not what it claims (a grant without its tokens).
type validator interface{ validate() error }

// call runs r with retries and decodes a 200 answer into out.
func (c *Client) call(ctx context.Context, r request, out interface{}) error {
	var onRetry func(RetryEvent)
	if c.onRetry != nil {
		onRetry = func(e RetryEvent) {
			e.Op = r.op
			c.onRetry(e)
		}
	}
	_, err := withRetries(ctx, c.backoff, r.deadline, onRetry, func() (struct{}, error) {
		return struct{}{}, c.once(ctx, r, out)
	})
	return err
}

// once is one attempt bounded by r.timeout.
func (c *Client) once(ctx context.Context, r request, out interface{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	attemptCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	target := c.baseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var payload io.Reader
	if r.body != nil {
		encoded, err := json.Marshal(r.body())
		if err != nil {
			return err
		}
		payload = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(attemptCtx, r.method, target, payload)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	for name, values := range r.header {
		req.Header[name] = values
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return &Error{Op: r.op, Code: CodeUnreachable, Err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBodyBytes))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		// The answer was cut short: its outcome is unknown, as if none had come.
		return &Error{Op: r.op, Code: CodeUnreachable, Status: res.StatusCode, Err: err}
	}
	switch {
	case res.StatusCode == http.StatusOK:
		return decodeSuccess(r.op, res.StatusCode, body, out)
	case res.StatusCode >= 300 && res.StatusCode < 400:
		// Never followed: the request carries the API key and owner tokens, which must not go elsewhere.
		return &Error{Op: r.op, Code: CodeBadResponse, Status: res.StatusCode,
			Err: fmt.Errorf("redirect to %q not followed", res.Header.Get("Location"))}
	case res.StatusCode < 300:
		return &Error{Op: r.op, Code: CodeBadResponse, Status: res.StatusCode,
			Err: fmt.Errorf("HTTP %d where keyholder answers 200", res.StatusCode)}
	default:
		return errorFromResponse(r.op, res.StatusCode, res.Header, body)
	}
}

func decodeSuccess(op string, status int, body []byte, out interface{}) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Op: op, Code: CodeBadResponse, Status: status, Err: err}
	}
	if v, ok := out.(validator); ok {
		if err := v.validate(); err != nil {
			return &Error{Op: op, Code: CodeBadResponse, Status: status, Err: err}
		}
	}
	return nil
}

// newIdempotencyKey is a random UUID (version 4), fresh for each logical acquire.
func newIdempotencyKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on the systems Go supports; a fixed key would merge unrelated acquires.
		panic(fmt.Sprintf("keyholder: no randomness for an Idempotency-Key: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// millis is a duration as the API's whole milliseconds.
func millis(d time.Duration) int64 { return d.Milliseconds() }
