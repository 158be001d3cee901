// Package pgserver runs a private PostgreSQL from Debian's server binaries for `make run` and
// the tests: initdb into a folder of ours, a free loopback port, serializable by default (so
// transaction retry paths run as they would on CockroachDB), and the server as a child process
// that dies with its parent.
//
// It is for development and tests only; production points DATABASE_URL settings at a real
// CockroachDB cluster.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/proc"
)

// Server is a running PostgreSQL.
type Server struct {
	Dir  string
	Port int
	proc *proc.Group
}

// Options configure Start.
type Options struct {
	// Dir holds the data folder; an existing cluster there is reused.
	Dir string
	// Port to listen on; 0 picks a free one.
	Port int
	// Durable keeps fsync on. Tests turn it off for speed.
	Durable bool
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// BinDir finds the PostgreSQL server binaries, installing Debian's postgresql package when they
// are missing and we are root.
func BinDir(log func(string, ...any)) (string, error) {
	if d := findBinDir(); d != "" {
		return d, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("PostgreSQL server binaries not found: install Debian's postgresql package, or set the database URLs")
	}
	log("installing Debian's postgresql package")
	cmd := exec.Command("apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get install postgresql: %v: %s", err, tail(out))
	}
	if d := findBinDir(); d != "" {
		return d, nil
	}
	return "", errors.New("postgresql installed but initdb not found")
}

func findBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises (once) and starts the server, waiting until it accepts connections.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	bin, err := BinDir(o.Log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		o.Log("initdb %s", data)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
			"--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %v: %s", err, tail(out))
		}
	}
	if o.Port == 0 {
		if o.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	fsync := "off"
	if o.Durable {
		fsync = "on"
	}
	args := []string{"-D", data, "-p", strconv.Itoa(o.Port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "default_transaction_isolation=serializable",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
		"-c", "fsync=" + fsync,
		"-c", "synchronous_commit=" + fsync,
		"-c", "full_page_writes=" + fsync,
		"-c", "log_min_messages=warning",
	}
	logf, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	g, err := proc.Start(cmd)
	logf.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{Dir: dir, Port: o.Port, proc: g}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	o.Log("postgres listening on 127.0.0.1:%d (data %s)", o.Port, data)
	return s, nil
}

// credential returns the user the server runs as: PostgreSQL refuses root, so as root we run it
// as the postgres system user (created by Debian's package) and hand it the folder.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		u, err = user.Lookup("nobody")
		if err != nil {
			return nil, errors.New("running as root and no postgres or nobody user to run PostgreSQL as")
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s.proc.Exited() {
			return fmt.Errorf("postgres exited at start (%v); see %s", s.proc.Err(), filepath.Join(s.Dir, "postgres.log"))
		}
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL returns the connection URL of a database on this server.
func (s *Server) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, dbname)
}

// CreateDatabase creates dbname if it does not exist.
func (s *Server) CreateDatabase(ctx context.Context, dbname string) error {
	return CreateDatabase(ctx, s.URL("postgres"), dbname)
}

// CreateDatabase creates dbname on the server of adminURL if it does not exist.
func CreateDatabase(ctx context.Context, adminURL, dbname string) error {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dbname).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbname}.Sanitize())
	return err
}

// Stop asks for a fast shutdown (SIGINT) and waits for the server to exit; after 30 s the
// server's process group is killed.
func (s *Server) Stop() error {
	if s == nil || s.proc == nil {
		return nil
	}
	return s.proc.Stop(syscall.SIGINT, 30*time.Second)
}

// Pause stops (SIGSTOP) or resumes (SIGCONT) the server process group, for fault tests.
func (s *Server) Pause(stop bool) error { return s.proc.Pause(stop) }

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
