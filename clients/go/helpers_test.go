package keyholder

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// serverURL is a running keyholder's URL (test/clients/go.test.ts starts one); without it the test skips.
func serverURL(t *testing.T, env string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		t.Skipf("%s is not set: run these tests through `npx vitest run test/clients/go.test.ts`", env)
	}
	return u
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testKey is a key no other test (or run) uses.
func testKey(t *testing.T) string {
	return fmt.Sprintf("go-%s-%s", t.Name(), newIdempotencyKey()[:8])
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or timeout passes: tests wait on conditions, never on fixed sleeps.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// partitionProxy forwards TCP to a server until partition() is called; from then on it drops every
// connection it has and holds new ones open without an answer, as a network partition does.
type partitionProxy struct {
	listener net.Listener
	target   string
	mu       sync.Mutex
	cut      bool
	conns    []net.Conn
}

func startProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionProxy{listener: l, target: target}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *partitionProxy) url() string { return "http://" + p.listener.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, client)
		cut := p.cut
		p.mu.Unlock()
		if cut {
			continue // held open, never answered
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, server)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(server, client); server.Close() }()
		go func() { _, _ = io.Copy(client, server); client.Close() }()
	}
}

func (p *partitionProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *partitionProxy) close() {
	p.listener.Close()
	p.partition()
}
