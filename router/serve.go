package router

import (
	"log"
	"net"
	"net/http"
	"time"

	"slidecells/router/h1"
	"slidecells/shared/httpserve"
)

// Defaults of the public listener (ServerConfig) and of the body-rate rule (Config.BodyTimeout,
// Config.BodyMinRate).
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers: a connection that sends
	// nothing, or its headers byte by byte, is closed after it.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that sends no new request for this long.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxConns caps the public listener's connections served, so a flood of held
	// connections cannot exhaust the router's memory or file descriptors. At the cap a new
	// connection is served once a waiting one is closed for it (router/h1: a head stalled for
	// 2 s, else the connection idle the longest, among a sample of 64); only while every
	// connection is busy does it wait, accepted, and the next in the kernel's accept queue.
	DefaultMaxConns = 4096
	// DefaultSendTimeout bounds one write of an answer to a client (at most the proxy's 32 KiB
	// copy buffer): a client that takes less than 32 KiB of its answer in this long while the
	// write waits (it stopped reading) is disconnected, which ends the request and frees its
	// place at the cell.
	DefaultSendTimeout = 30 * time.Second
	// DefaultBodyTimeout is the grace a request body gets before DefaultBodyMinRate applies.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultBodyMinRate is the slowest average a request body may arrive at after the grace
	// (bytes per second; 8 KiB/s is 64 kbit/s). A slower body is cut with 408.
	DefaultBodyMinRate = 8 << 10
	// maxHeaderBytes caps a request's header block (431 beyond).
	maxHeaderBytes = 64 << 10
)

// ServerConfig configures the public server (NewPublicServer). Zero values take the Default…
// constants.
type ServerConfig struct {
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	SendTimeout       time.Duration
	MaxConns          int
	// ErrorLog receives the server's own complaints (panics, accept errors); nil is the log
	// package's default logger.
	ErrorLog *log.Logger
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	return c
}

// NewPublicServer is the server of the router's public listener (package router/h1: its own
// HTTP/1.1 loop for plain requests, net/http's server for the rest): headers within
// ReadHeaderTimeout and 64 KiB, idle keep-alive connections closed after IdleTimeout, a
// client that stops reading its answer disconnected after SendTimeout (quietConn), at most
// MaxConns connections served (at the cap a waiting connection, a stalled head or the one idle
// the longest, is closed for a new one; new ones wait only while every connection is busy), so
// a flood of held connections cannot exhaust the router's memory or file descriptors. Request
// bodies are bounded by the Router itself (Config.BodyTimeout and BodyMinRate, 408 beyond), not
// by a server-wide read timeout, so that a large upload on a good link is never cut. Its
// connections read and write with raw system calls (quietConn). Serve it on a plain TCP
// listener.
func NewPublicServer(h http.Handler, c ServerConfig) *h1.Server {
	c = c.withDefaults()
	return &h1.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		MaxConns:          c.MaxConns,
		WrapConn:          func(nc net.Conn) net.Conn { return newQuietConn(nc, c.SendTimeout) },
		ErrorLog:          c.ErrorLog,
	}
}

// NewInternalServer is the http.Server of the internal listener (/livez, /readyz, /metrics),
// which must never be the public one.
func NewInternalServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// guardBody puts the body-rate rule (Config.BodyTimeout as the grace, Config.BodyMinRate) on
// r's body, if it has one: the rule and its mechanism are the cell's too (httpserve.BodyRate).
func (rt *Router) guardBody(w http.ResponseWriter, r *http.Request) *httpserve.BodyGuard {
	return httpserve.BodyRate{Grace: rt.cfg.BodyTimeout, MinRate: rt.cfg.BodyMinRate}.Guard(w, r)
}
