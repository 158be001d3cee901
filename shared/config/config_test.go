package config

import (
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
