package lambdahost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// serveGateway serves g through Serve on a loopback port and returns its
// address and the byte counter.
func serveGateway(t *testing.T, g *Gateway) (string, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, cl) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String(), cl
}

// closedWithin reports whether the server closes c within d (a read
// returns EOF or a reset; a read deadline passing means still open).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // e.g. a 408 the server wrote before closing
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

func allowToken(token string, calls *atomic.Int32) Authorizer {
	return func(_ context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		calls.Add(1)
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: req.Headers["authorization"] == "Bearer "+token}, nil
	}
}

// Issue 24, finding 7: slow and idle connections are cut off. 24 clients
// hold connections open three ways (headers trickling in, a declared body
// never sent, idle keep-alive after a request); every one is closed by the
// server within the deadline, and the gateway still serves afterwards.
func TestGatewayClosesSlowAndIdleConnections(t *testing.T) {
	var authz atomic.Int32
	rec := &recorder{}
	g := NewGateway(GatewayOptions{
		Logger:            quietLogger(),
		ReadHeaderTimeout: 300 * time.Millisecond,
		ReadTimeout:       600 * time.Millisecond,
		IdleTimeout:       400 * time.Millisecond,
	})
	g.Route("POST /v1/things", rec.handle, RouteOptions{Authorizer: allowToken("good", &authz)})
	addr, _ := serveGateway(t, g)

	const perKind = 8
	var conns []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		return c
	}
	for i := 0; i < perKind; i++ {
		// Headers that never finish.
		c := dial()
		fmt.Fprintf(c, "POST /v1/things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\n")
		// An authorised request whose declared body never arrives.
		c = dial()
		fmt.Fprintf(c, "POST /v1/things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a\":")
		// A finished request, then an idle keep-alive connection.
		c = dial()
		fmt.Fprintf(c, "POST /v1/things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("keep-alive request: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	start := time.Now()
	var wg sync.WaitGroup
	var open atomic.Int32
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			if !closedWithin(c, 5*time.Second) {
				open.Add(1)
			}
		}(c)
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d slow or idle connections still open after 5 s", n, len(conns))
	}
	t.Logf("%d slow/idle connections closed by the server within %v", len(conns), time.Since(start).Round(time.Millisecond))
	if rec.calls() != perKind {
		t.Errorf("handler called %d times, want %d (the completed requests only)", rec.calls(), perKind)
	}
	resp, _ := do(t, "POST", "http://"+addr+"/v1/things", strings.NewReader(`{}`), map[string][]string{"Authorization": {"Bearer good"}, "Content-Type": {"application/json"}})
	if resp.StatusCode != 200 {
		t.Errorf("after the slow clients: %d", resp.StatusCode)
	}
}

// The gateway serves at most MaxConns connections at once; the next waits
// until one closes.
func TestGatewayConnectionCap(t *testing.T) {
	rec := &recorder{}
	g := NewGateway(GatewayOptions{Logger: quietLogger(), MaxConns: 3, ReadHeaderTimeout: 30 * time.Second})
	g.Route("GET /v1/ping", rec.handle)
	addr, _ := serveGateway(t, g)
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/ping HTTP/1.1\r\nHost: x\r\n") // holds its slot
		held = append(held, c)
	}
	// Give the server the three connections before the fourth arrives.
	deadline := time.Now().Add(5 * time.Second)
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		_, err := client.Get("http://" + addr + "/v1/ping")
		if err != nil {
			break // not served: the cap holds
		}
		if time.Now().After(deadline) {
			t.Fatal("a fourth connection was served while three held the cap")
		}
	}
	held[0].Close()
	client.Timeout = 2 * time.Second
	for {
		resp, err := client.Get("http://" + addr + "/v1/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request served after a slot was freed: %v", err)
		}
	}
}

// Issue 24, finding 7: the authorizer runs on the headers; an unauthorised
// request declaring a 1 GiB body is refused without the server reading it,
// and an authorised one is read only up to the route's limit.
func TestGatewayAuthorisesBeforeReadingTheBody(t *testing.T) {
	var authz atomic.Int32
	rec := &recorder{}
	g := NewGateway(GatewayOptions{Logger: quietLogger()})
	g.Route("POST /v1/things", rec.handle, RouteOptions{Authorizer: allowToken("good", &authz), MaxBodyBytes: 1 << 10})
	addr, cl := serveGateway(t, g)

	const declared = 1 << 30
	for _, c := range []struct {
		name, auth string
		want       int
		authzCalls int32
	}{
		{"no token", "", http.StatusUnauthorized, 0},
		{"bad token", "Authorization: Bearer bad\r\n", http.StatusForbidden, 1},
		{"over the route limit", "Authorization: Bearer good\r\n", http.StatusRequestEntityTooLarge, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, authBefore := cl.read.Load(), authz.Load()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", c.auth, declared)
			// Keep sending body bytes until the server stops us.
			stop := make(chan struct{})
			var sent atomic.Int64
			go func() {
				chunk := []byte(strings.Repeat("x", 64<<10))
				for {
					select {
					case <-stop:
						return
					default:
					}
					_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
					n, err := conn.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			close(stop)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
			if got := authz.Load() - authBefore; got != c.authzCalls {
				t.Errorf("authorizer called %d times, want %d", got, c.authzCalls)
			}
			// Headers plus what bufio and the post-handler drain may pick
			// up: far below the 1 GiB declared.
			if read := cl.read.Load() - before; read > 512<<10 {
				t.Errorf("the server read %d bytes of a refused request (client sent %d)", read, sent.Load())
			}
		})
	}
	if rec.calls() != 0 {
		t.Fatalf("handler called %d times for refused requests", rec.calls())
	}
	resp, body := do(t, "POST", "http://"+addr+"/v1/things", strings.NewReader(`{"ok":1}`),
		map[string][]string{"Authorization": {"Bearer good"}, "Content-Type": {"application/json"}})
	if resp.StatusCode != 200 || rec.last(t).Body != `{"ok":1}` || rec.last(t).Headers["content-length"] != "8" {
		t.Fatalf("authorised request: %d %s, event body %q headers %v", resp.StatusCode, body, rec.last(t).Body, rec.last(t).Headers["content-length"])
	}
}

func TestGatewayDefaultsBoundEveryConnection(t *testing.T) {
	o := NewGateway(GatewayOptions{}).opts
	if o.ReadHeaderTimeout != DefaultReadHeaderTimeout || o.ReadTimeout != DefaultReadTimeout || o.IdleTimeout != DefaultIdleTimeout ||
		o.MaxConns != DefaultMaxConns || o.WriteTimeout <= o.IntegrationTimeout {
		t.Fatalf("defaults %+v", o)
	}
}
