package load

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ReadEnvFile reads the `export NAME=value` lines `make run` writes to .run/env.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return env, sc.Err()
}

// loopbackHost says whether host (a name or an address, without port) is on this machine's
// loopback: 127.0.0.0/8, ::1 or localhost.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckLoopback refuses an HTTP target that is not a loopback address: load is only ever sent
// to this machine.
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("target %q is not an http(s) URL", rawURL)
	}
	if !loopbackHost(u.Hostname()) {
		return fmt.Errorf("target %s is not a loopback address (127.0.0.0/8, ::1, localhost): load is only sent to this machine", u.Host)
	}
	return nil
}

// CheckLoopbackDatabase refuses a database URL whose host is neither a loopback address nor a
// Unix socket.
func CheckLoopbackDatabase(dbURL string) error {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("directory database URL: %w", err)
	}
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h, "/") && !loopbackHost(h) {
			return fmt.Errorf("the directory database is at %s, not on loopback: the load generator only works on this machine's deployment", h)
		}
	}
	return nil
}
