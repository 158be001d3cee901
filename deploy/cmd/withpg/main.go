// Command withpg runs a command with a private PostgreSQL: it starts one from Debian's server
// binaries in a temporary folder, exports TEST_PG_URL (the maintenance database's URL), runs the
// command, stops the server and exits with the command's status. `make test` runs the test
// suite through it so every test package shares one server.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"slidecells/shared/pgserver"
)

func main() {
	os.Exit(run())
}

func run() int {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withpg -- command [args…]")
		return 2
	}
	tmp, err := os.MkdirTemp("", "slidecells-testpg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "withpg:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	_ = os.Chmod(tmp, 0o755)
	srv, err := pgserver.Start(context.Background(), pgserver.Options{Dir: filepath.Join(tmp, "pg"),
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "withpg: "+f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "withpg:", err)
		return 1
	}
	defer func() { _ = srv.Stop() }()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "TEST_PG_URL="+srv.URL("postgres"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "withpg:", err)
		return 1
	}
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}
