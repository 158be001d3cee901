package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoaderCollectsErrors(t *testing.T) {
	env := map[string]string{"A_DUR": "soon", "A_INT": "99", "A_OK": "3s"}
	l := &Loader{Getenv: func(k string) string { return env[k] }}
	l.String("A_REQ", "", true)
	l.Duration("A_DUR", time.Second)
	l.Int("A_INT", 1, 0, 10)
	if d := l.Duration("A_OK", 0); d != 3*time.Second {
		t.Fatalf("A_OK = %v", d)
	}
	err := l.Err()
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{"A_REQ", "A_DUR", "A_INT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestTypedSettings(t *testing.T) {
	env := map[string]string{
		"GOOD_ADDR": "127.0.0.1:80", "GOOD_URLS": " http://a:1/ ,, https://b ", "GOOD_DUR": "2s",
		"LOG_LEVEL": "debug", "GOOD_ONE": "b",
	}
	l := &Loader{Getenv: func(k string) string { return env[k] }}
	if got := l.Addr("GOOD_ADDR", "", true); got != "127.0.0.1:80" {
		t.Errorf("Addr = %q", got)
	}
	if got := l.Addr("UNSET_ADDR", "", false); got != "" {
		t.Errorf("unset optional Addr = %q", got)
	}
	if got := l.URLs("GOOD_URLS", "http", "https"); len(got) != 2 || got[0] != "http://a:1" || got[1] != "https://b" {
		t.Errorf("URLs = %q", got)
	}
	if got := l.PositiveDuration("GOOD_DUR", time.Hour); got != 2*time.Second {
		t.Errorf("PositiveDuration = %v", got)
	}
	if got := l.PositiveDuration("UNSET_DUR", time.Hour); got != time.Hour {
		t.Errorf("PositiveDuration default = %v", got)
	}
	if got := l.LogLevel(); got != "debug" {
		t.Errorf("LogLevel = %q", got)
	}
	if got := l.OneOf("GOOD_ONE", "a", "a", "b"); got != "b" {
		t.Errorf("OneOf = %q", got)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("good settings rejected: %v", err)
	}

	bad := map[string]string{"B_ADDR": "nowhere", "B_URLS": "http://ok,ftp://x,not a url", "B_DUR": "0s",
		"LOG_LEVEL": "loud", "B_ONE": "c"}
	l = &Loader{Getenv: func(k string) string { return bad[k] }}
	l.Addr("B_ADDR", "", false)
	if got := l.URLs("B_URLS", "http"); len(got) != 1 {
		t.Errorf("bad URLs kept %q, want only the good one", got)
	}
	l.PositiveDuration("B_DUR", time.Second)
	if got := l.LogLevel(); got != "info" {
		t.Errorf("bad LOG_LEVEL gave %q, want the default", got)
	}
	l.OneOf("B_ONE", "a", "a", "b")
	err := l.Err()
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, want := range []string{`B_ADDR: "nowhere"`, `B_URLS: "ftp://x"`, `B_URLS: "not a url"`, "B_DUR", "LOG_LEVEL", "B_ONE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cur, next := strings.Repeat("c", 16), strings.Repeat("n", 20)
	env := map[string]string{
		"ONE": file("one", "  "+cur+"  \n"), "TWO": file("two", "\n"+cur+"\n\n"+next+"\n"),
		"SHORT": file("short", cur+"\nshort\n"), "THREE": file("three", cur+"\n"+next+"\n"+next+"\n"),
		"EMPTY": file("empty", "\n \n"), "MISSING": filepath.Join(dir, "missing"),
	}
	l := &Loader{Getenv: func(k string) string { return env[k] }}
	if got := l.Credentials("ONE", true); len(got) != 1 || got[0] != cur {
		t.Errorf("ONE = %q", got)
	}
	if got := l.Credentials("TWO", true); len(got) != 2 || got[0] != cur || got[1] != next {
		t.Errorf("TWO = %q", got)
	}
	if got := l.Credentials("UNSET", false); got != nil {
		t.Errorf("UNSET = %q", got)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("good files rejected: %v", err)
	}
	for _, name := range []string{"SHORT", "THREE", "EMPTY", "MISSING", "UNSET"} {
		t.Run(name, func(t *testing.T) {
			l := &Loader{Getenv: func(k string) string { return env[k] }}
			if got := l.Credentials(name, true); got != nil {
				t.Errorf("%s = %q", name, got)
			}
			err := l.Err()
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %v does not name %s", err, name)
			}
			if strings.Contains(err.Error(), cur) || strings.Contains(err.Error(), next) {
				t.Fatalf("a credential in the error: %v", err)
			}
		})
	}
}
