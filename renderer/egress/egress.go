// Package egress is the attempt's only way out of its network namespace: a
// small HTTP forward proxy the supervisor serves on a listener inside the
// namespace (the socket belongs to the control process, which dials out
// from the host's namespace). It admits exactly the configured origins:
//
//   - absolute-form HTTP requests (GET http://host:port/path) whose origin
//     is allowed are forwarded; redirects are passed back to the browser,
//     whose next request comes here again and is checked again;
//   - CONNECT only to host:port of an allowed https origin (TLS stays end to
//     end; the browser cannot reach anything else through it);
//   - protocol upgrades (WebSocket) are refused on every origin: the
//     specification allows none;
//   - everything else — other hosts, other ports of an allowed host, IP
//     literals such as 169.254.169.254, names the configuration does not
//     list — is answered 403 and never dialled.
//
// Names are resolved by the supervisor for allowed hosts only; the
// namespace itself has no DNS and no route.
//
// Each attempt's use of the path is bounded (Limits): the bytes through it,
// both directions and every connection together (requests, responses,
// tunnels), and the connections the browser holds open to it at once. A
// connection past the connection limit is answered 429 and closed; once the
// byte limit is used up every connection closes and new ones are answered
// 403 and closed, none reaching an origin. LimitHit tells which limit an
// attempt met.
//
// It must not: carry credentials, follow redirects, cache, or read bodies.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Addr is where the proxy listens inside every attempt's network
// namespace. Each attempt has a namespace of its own, so one fixed address
// serves all.
const Addr = "127.0.0.1:3128"

// Limits bound one attempt's use of the egress path.
type Limits struct {
	// MaxBytes bounds the bytes between the browser and the proxy, both
	// directions and all connections together; zero means
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxConnections bounds the connections the browser holds open to
	// the proxy at once (a tunnel is one); zero means
	// DefaultMaxConnections. Chromium opens at most 32 to one proxy.
	MaxConnections int
}

// Defaults of Limits.
const (
	DefaultMaxBytes       = 256 << 20
	DefaultMaxConnections = 64
)

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// The limits an attempt can meet (LimitHit).
const (
	LimitBytes       = "bytes"
	LimitConnections = "connections"
)

// Policy is what every attempt's proxy admits, and its limits: built once
// from the configuration, shared by every attempt.
type Policy struct {
	allowed map[string]bool // "scheme://host:port"
	connect map[string]bool // "host:port" of allowed https origins
	limits  Limits
}

// NewPolicy admits origins (scheme://host[:port]) within limits.
func NewPolicy(origins []string, limits Limits) (*Policy, error) {
	p := &Policy{allowed: map[string]bool{}, connect: map[string]bool{}, limits: limits.WithDefaults()}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("egress: %q is not an http(s) origin", o)
		}
		p.allowed[Origin(u)] = true
		if u.Scheme == "https" {
			hp := strings.TrimPrefix(Origin(u), "https://")
			p.connect[hp] = true
		}
	}
	return p, nil
}

// Limits are the policy's limits (defaults filled in).
func (p *Policy) Limits() Limits { return p.limits }

// Proxy serves one attempt.
type Proxy struct {
	policy   *Policy
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	blocked  atomic.Int64
	admitted atomic.Int64
	// bytes counts what went through; limitHit is the limit met, if any.
	bytes    atomic.Int64
	limitHit atomic.Value // string
	refusing atomic.Int64 // connections being answered a refusal
	mu       sync.Mutex
	conns    map[net.Conn]bool // open browser connections
	tunnels  map[net.Conn]bool // upstream ends of tunnels
	closed   bool
}

// Origin normalises an http(s) URL to scheme://host:port.
func Origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// New builds a proxy admitting origins (scheme://host[:port]) with the
// default limits.
func New(origins []string) (*Proxy, error) {
	pol, err := NewPolicy(origins, Limits{})
	if err != nil {
		return nil, err
	}
	return pol.Proxy(), nil
}

// Proxy builds one attempt's proxy.
func (pol *Policy) Proxy() *Proxy {
	p := &Proxy{policy: pol, conns: map[net.Conn]bool{}, tunnels: map[net.Conn]bool{}}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	p.tr = &http.Transport{
		Proxy:                 nil, // never another proxy from the environment
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   8,
		MaxConnsPerHost:       pol.limits.MaxConnections,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		DisableCompression:    true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = r.In.URL
			r.Out.Host = r.In.URL.Host
			r.Out.Header.Del("Proxy-Authorization")
			r.Out.Header.Del("Proxy-Connection")
		},
		Transport:     p.tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "egress: upstream unreachable", http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, rp) }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	return p
}

// Serve serves the listener until Close.
func (p *Proxy) Serve(ln net.Listener) {
	p.ln = &limitListener{Listener: ln, p: p}
	go func() { _ = p.srv.Serve(p.ln) }()
}

// Blocked and Admitted count refused and forwarded requests.
func (p *Proxy) Blocked() int64  { return p.blocked.Load() }
func (p *Proxy) Admitted() int64 { return p.admitted.Load() }

// Bytes is what went through the proxy so far, both directions.
func (p *Proxy) Bytes() int64 { return p.bytes.Load() }

// LimitHit is the first limit the attempt met: LimitBytes, LimitConnections
// or "".
func (p *Proxy) LimitHit() string {
	s, _ := p.limitHit.Load().(string)
	return s
}

func (p *Proxy) hit(limit string) { p.limitHit.CompareAndSwap(nil, limit) }

// Close stops the proxy, its tunnels and idle upstream connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	tunnels := make([]net.Conn, 0, len(p.tunnels))
	for c := range p.tunnels {
		tunnels = append(tunnels, c)
	}
	p.mu.Unlock()
	for _, c := range tunnels {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = p.srv.Close()
	}
	p.tr.CloseIdleConnections()
	return err
}

func (p *Proxy) refuse(w http.ResponseWriter, why string) {
	p.blocked.Add(1)
	w.Header().Set("Connection", "close")
	http.Error(w, "egress: "+why, http.StatusForbidden)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	if r.Method == http.MethodConnect {
		host := strings.ToLower(r.Host)
		if !p.policy.connect[host] {
			p.refuse(w, "tunnel refused")
			return
		}
		p.tunnel(w, host)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" || !p.policy.allowed[Origin(r.URL)] {
		p.refuse(w, "destination not allowed")
		return
	}
	if r.Header.Get("Upgrade") != "" || strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		p.refuse(w, "protocol upgrades are not allowed")
		return
	}
	p.admitted.Add(1)
	rp.ServeHTTP(w, r)
}

func (p *Proxy) tunnel(w http.ResponseWriter, host string) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		p.refuse(w, "tunnel unsupported")
		return
	}
	up, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		http.Error(w, "egress: upstream unreachable", http.StatusBadGateway)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		up.Close()
		down.Close()
		return
	}
	p.tunnels[up], p.tunnels[down] = true, true
	p.mu.Unlock()
	p.admitted.Add(1)
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, buf); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	go func() {
		<-done
		up.Close()
		down.Close()
		p.mu.Lock()
		delete(p.tunnels, up)
		delete(p.tunnels, down)
		p.mu.Unlock()
	}()
}

// limitListener accepts the browser's connections within the limits: past
// MaxConnections open at once, or once the byte budget is used up, a
// connection gets a short refusal (429 or 403 with Connection: close,
// without reading its request) and is closed. An answer, not a bare close:
// the browser fails the request at once instead of retrying the proxy.
type limitListener struct {
	net.Listener
	p *Proxy
}

// maxRefusing bounds the connections being refused at once (each for at
// most a second).
const maxRefusing = 64

const (
	refusalConnections = "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 42\r\n\r\negress: too many connections for attempt\r\n"
	refusalBytes       = "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 44\r\n\r\negress: the attempt's byte limit is used up\n"
)

func (l *limitListener) Accept() (net.Conn, error) {
	p := l.p
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		full := len(p.conns) >= p.policy.limits.MaxConnections
		spent := p.LimitHit() == LimitBytes || p.bytes.Load() >= p.policy.limits.MaxBytes
		if !full && !spent && !p.closed {
			cc := &countingConn{Conn: c, p: p}
			p.conns[cc] = true
			p.mu.Unlock()
			return cc, nil
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			c.Close()
			continue
		}
		refusal := refusalBytes
		if !spent {
			p.hit(LimitConnections)
			refusal = refusalConnections
		}
		p.blocked.Add(1)
		if p.refusing.Add(1) > maxRefusing {
			// Refusals are answered by at most maxRefusing
			// goroutines at once; beyond that, a bare close.
			p.refusing.Add(-1)
			c.Close()
			continue
		}
		go func() {
			defer p.refusing.Add(-1)
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, refusal)
			// Let the browser's request arrive before closing, so
			// the close does not reset the answer away.
			_, _ = c.Read(make([]byte, 4096))
			c.Close()
		}()
	}
}

// countingConn charges every byte read from and written to the browser to
// the attempt's budget. A write is cut at the budget (it reserves its bytes
// before sending them); a read asks for no more than the budget has left
// (concurrent reads may together pass it by at most one read buffer each).
// Once the budget is used up, every connection of the attempt is closed.
type countingConn struct {
	net.Conn
	p    *Proxy
	once sync.Once
}

// errBudget is returned once the byte budget is used up.
var errBudget = errors.New("egress: the attempt's byte limit is used up")

// take reserves up to n bytes of the budget and returns how many it got.
func (c *countingConn) take(n int) int {
	max := c.p.policy.limits.MaxBytes
	for {
		used := c.p.bytes.Load()
		room := max - used
		if room <= 0 {
			return 0
		}
		if int64(n) > room {
			n = int(room)
		}
		if c.p.bytes.CompareAndSwap(used, used+int64(n)) {
			return n
		}
	}
}

// refund gives back what was reserved but not transferred.
func (c *countingConn) refund(n int) {
	if n > 0 {
		c.p.bytes.Add(-int64(n))
	}
}

func (c *countingConn) Read(b []byte) (int, error) {
	// No reservation: an idle keep-alive connection waits in Read, and
	// must not hold budget meanwhile.
	room := c.p.policy.limits.MaxBytes - c.p.bytes.Load()
	if room <= 0 || c.p.LimitHit() == LimitBytes {
		c.p.spent()
		return 0, errBudget
	}
	if int64(len(b)) > room {
		b = b[:room]
	}
	n, err := c.Conn.Read(b)
	c.p.bytes.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		got := c.take(len(b) - done)
		if got == 0 {
			c.p.spent()
			return done, errBudget
		}
		n, err := c.Conn.Write(b[done : done+got])
		c.refund(got - n)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (c *countingConn) Close() error {
	c.once.Do(func() {
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
	return c.Conn.Close()
}

// spent records the byte limit and closes every connection of the attempt.
func (p *Proxy) spent() {
	p.hit(LimitBytes)
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns)+len(p.tunnels))
	for c := range p.conns {
		conns = append(conns, c)
	}
	for c := range p.tunnels {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
