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

// Proxy serves one attempt.
type Proxy struct {
	allowed  map[string]bool // "scheme://host:port"
	connect  map[string]bool // "host:port" of allowed https origins
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	blocked  atomic.Int64
	admitted atomic.Int64
	mu       sync.Mutex
	tunnels  map[net.Conn]bool
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

// New builds a proxy admitting origins (scheme://host[:port]).
func New(origins []string) (*Proxy, error) {
	p := &Proxy{allowed: map[string]bool{}, connect: map[string]bool{}, tunnels: map[net.Conn]bool{}}
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
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	p.tr = &http.Transport{
		Proxy:                 nil, // never another proxy from the environment
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   8,
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
	return p, nil
}

// Serve serves the listener until Close.
func (p *Proxy) Serve(ln net.Listener) {
	p.ln = ln
	go func() { _ = p.srv.Serve(ln) }()
}

// Blocked and Admitted count refused and forwarded requests.
func (p *Proxy) Blocked() int64  { return p.blocked.Load() }
func (p *Proxy) Admitted() int64 { return p.admitted.Load() }

// Close stops the proxy, its tunnels and idle upstream connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
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
		if !p.connect[host] {
			p.refuse(w, "tunnel refused")
			return
		}
		p.tunnel(w, host)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" || !p.allowed[Origin(r.URL)] {
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
