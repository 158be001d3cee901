package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"slidecells/router"
	"slidecells/router/placement"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
	"slidecells/shared/pgserver"
	"slidecells/shared/proc"
)

// versionBody is the backend's answer: about the size of a real version document.
var versionBody = []byte(`{"service":"slidecells","version":"1.0.0-bench","api":"v1","build":"routerbench"}` + "\n")

// runBackend serves the backend on a free loopback port and prints the address on stdout.
func runBackend() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(versionBody)
	})
	// Exit when the parent closes our stdin, so no backend outlives a benchmark.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	_ = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

type backend struct {
	addr, url string
	cpu       func() cpuTime
	stop      func()
}

// startBackend re-executes this binary as the backend and reads its address.
func startBackend() (*backend, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-backend")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	g, err := proc.Start(cmd)
	if err != nil {
		return nil, err
	}
	stop := func() {
		stdin.Close() // the backend exits when its stdin closes
		select {
		case <-g.Done():
		case <-time.After(5 * time.Second):
			_ = g.Stop(syscall.SIGTERM, 5*time.Second)
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("no address from the backend: %w", err)
	}
	addr := strings.TrimSpace(line)
	pid := g.Pid()
	return &backend{addr: addr, url: "http://" + addr, stop: stop, cpu: func() cpuTime { return procCPU(pid) }}, nil
}

// staticDirectory places the benchmark workspace on the one benchmark cell.
type staticDirectory struct {
	url string
	wss []string
}

func (d staticDirectory) Placement(_ context.Context, ws string) (placement.Placement, error) {
	if !slices.Contains(d.wss, ws) {
		return placement.Placement{}, placement.ErrNotFound
	}
	return placement.Placement{CellID: "cell-bench", Epoch: 1}, nil
}

func (d staticDirectory) Cells(context.Context) ([]router.Cell, error) {
	return []router.Cell{{ID: "cell-bench", URL: d.url, State: router.CellActive}}, nil
}

type served struct {
	url  string
	wss  []string // the workspaces placed on the benchmark cell (the router only)
	cpu  func() cpuTime
	stop func()
}

// startRouter runs the router in this process, configured as in production (default settings,
// probes and breaker on) except for its directory, with the production logger (JSON,
// redacting) writing to a file instead of stderr.
func startRouter(ctx context.Context, backendURL, dir string, accessLog bool, workspaces int) (*served, error) {
	var wss []string
	for range workspaces {
		wss = append(wss, ids.New(ids.Workspace))
	}
	src := staticDirectory{url: backendURL, wss: wss}
	cfg := router.Config{Placements: src, Cells: src}
	if accessLog {
		f, err := os.Create(filepath.Join(dir, "router-access.log"))
		if err != nil {
			return nil, err
		}
		// The same loggers the router binary builds, writing to the file.
		log, access, err := logging.NewWithAccess("router", logging.Options{Output: f, Buffered: true})
		if err != nil {
			return nil, err
		}
		cfg.Logger, cfg.AccessLog = log, access
	}
	rt, err := router.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rt.Close()
		return nil, err
	}
	// The router binary's public server and listener, default settings.
	srv := router.NewPublicServer(rt.Handler(), router.ServerConfig{ErrorLog: log.New(io.Discard, "", 0)})
	addr := ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	return &served{url: "http://" + addr, wss: wss, cpu: selfCPU, stop: func() {
		_ = srv.Close()
		rt.Close()
	}}, nil
}

// startBareProxy serves a plain httputil.ReverseProxy with the router's copy-buffer pool and
// nothing else (no routing, breaker, logs or metrics), so the report separates the router's own
// cost from the proxy machinery's. With lean it uses the router's own transport
// (router.CellTransport, default settings); without, an http.Transport alone: the floor for any Go proxy built on the
// standard transport.
func startBareProxy(backendURL string, lean bool) (*served, error) {
	u, err := url.Parse(backendURL)
	if err != nil {
		return nil, err
	}
	std := &http.Transport{
		MaxIdleConnsPerHost: router.DefaultMaxIdleConnsPerCell,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	var tr http.RoundTripper = std
	closeIdle := std.CloseIdleConnections
	if lean {
		h := router.CellTransport(u, router.Config{})
		tr, closeIdle = h, h.Close
	}
	p := &httputil.ReverseProxy{Transport: tr, BufferPool: &buffers{}, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.SetXForwarded()
	}, ErrorLog: log.New(io.Discard, "", 0)} // wrk closing connections at the end is not news
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &served{url: "http://" + ln.Addr().String(), cpu: selfCPU, stop: func() {
		_ = srv.Close()
		closeIdle()
	}}, nil
}

// buffers lends the bare proxy 32 KiB copy buffers, as the router does.
type buffers struct{ p sync.Pool }

func (b *buffers) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *buffers) Put(buf []byte) { b.p.Put(&buf) }

const nginxConf = `# routerbench reference proxy; generated, do not edit.
daemon off;
worker_processes auto;
pid {{DIR}}/nginx.pid;
error_log {{DIR}}/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log {{ACCESS_LOG}};
  client_body_temp_path {{DIR}}/client_body;
  proxy_temp_path {{DIR}}/proxy;
  fastcgi_temp_path {{DIR}}/fastcgi;
  uwsgi_temp_path {{DIR}}/uwsgi;
  scgi_temp_path {{DIR}}/scgi;
  keepalive_requests 1000000;
  upstream backend {
    server {{BACKEND}};
    keepalive 256;
  }
  server {
    listen {{LISTEN}};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Request-ID $request_id;
    }
  }
}
`

// startNginx writes a configuration into dir and runs nginx in the foreground as a child
// process, on a free loopback port, proxying to the backend over keep-alive connections.
func startNginx(bin, dir, backendAddr string, accessLog bool) (*served, error) {
	port, err := pgserver.FreePort() // nginx binds it: reserved, below the ephemeral range
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	access := "off"
	if accessLog {
		access = filepath.Join(dir, "nginx-access.log")
	}
	conf := strings.NewReplacer("{{DIR}}", dir, "{{BACKEND}}", backendAddr, "{{LISTEN}}", addr,
		"{{ACCESS_LOG}}", access).Replace(nginxConf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "nginx-error.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	g, err := proc.Start(cmd)
	if err != nil {
		return nil, err
	}
	// SIGQUIT: nginx's graceful shutdown; its workers go with the process group if it hangs.
	stop := func() { _ = g.Stop(syscall.SIGQUIT, 5*time.Second) }
	master := g.Pid()
	cpu := func() cpuTime {
		total := procCPU(master)
		for _, pid := range children(master) {
			total = total.plus(procCPU(pid))
		}
		return total
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return &served{url: "http://" + addr, cpu: cpu, stop: stop}, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("nginx did not start listening; see nginx-error.log (run with -keep)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check makes one request and insists on a 200, so a misconfigured target is not measured.
// headers are "Name: value".
func check(u string, headers ...string) error {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Add(k, strings.TrimSpace(v))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", u, res.StatusCode)
	}
	return nil
}

// cpuTime is a process's CPU time as the kernel accounts it: in user space and in the kernel
// (system calls, and the network stack's work done on their behalf).
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) total() time.Duration { return c.user + c.sys }

func (c cpuTime) plus(d cpuTime) cpuTime { return cpuTime{c.user + d.user, c.sys + d.sys} }

// selfCPU is the CPU time of this process (the in-process router or bare proxy).
func selfCPU() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTime{}
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time of another process, from /proc.
func procCPU(pid int) cpuTime {
	f := statFields(pid)
	if len(f) < 15 {
		return cpuTime{}
	}
	u, _ := strconv.ParseInt(f[13], 10, 64)
	s, _ := strconv.ParseInt(f[14], 10, 64)
	return cpuTime{time.Duration(u) * clockTick, time.Duration(s) * clockTick}
}

// statFields splits /proc/<pid>/stat, whose second field (the command) may hold spaces.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return append([]string{s[:strings.IndexByte(s, ' ')], s[:i+1]}, strings.Fields(s[i+1:])...)
}

// children lists the processes whose parent is pid (nginx's workers).
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(n); len(f) > 3 && f[3] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
