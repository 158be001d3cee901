package api

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"slidecells/cell/auth"
	"slidecells/shared/problem"
)

// DefaultTrustedProxies are the networks whose X-Forwarded-For the cell believes when
// Config.TrustedProxies is not given by cell/cmd/cell: loopback and the private ranges of an
// internal network (the router reaches the cell there; clients never do).
var DefaultTrustedProxies = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fc00::/7"),
}

// clientAddress is the address the request came from: the connection's peer, or, when the peer
// is a trusted proxy (the router), the last X-Forwarded-For entry (the one the router added;
// the router drops whatever a client sent). A client's own X-Forwarded-For, sent straight to
// the cell from an untrusted address, is never read.
func (s *Server) clientAddress(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !peer.IsValid() || !s.trusted(peer) {
		return peer
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		return peer
	}
	last := xff[len(xff)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	a, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return peer
	}
	return a.Unmap()
}

func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.trustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// admit is the pipeline's door for every authenticated operation. Before authentication it
// charges only what an outsider owns: its address's failed authentications (refused from
// memory once over the limit, unless the credential authenticated recently) and the presented
// credential's bucket. A failed authentication is counted against the address. The
// workspace's bucket is charged later, in authorize, once the caller is known to be a member.
func (s *Server) admit(ctx context.Context, r *http.Request) (auth.Principal, error) {
	authorization := r.Header.Get("Authorization")
	addr := s.clientAddress(r)
	if err := s.Limiter.CheckAddress(addr, authorization); err != nil {
		return auth.Principal{}, err
	}
	if err := s.Limiter.AllowToken(authorization); err != nil {
		return auth.Principal{}, err
	}
	p, err := s.Auth.Authenticate(ctx, authorization)
	if err != nil {
		if problem.As(err).Code == problem.Unauthenticated {
			s.Limiter.AuthFailed(addr, authorization)
		}
		return auth.Principal{}, err
	}
	s.Limiter.Authenticated(authorization)
	return p, nil
}
