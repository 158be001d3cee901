package api_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReadyzAnswersWhileThePoolIsBusy holds every connection of the cell's pool, as requests do
// on a cell under overload: /readyz still answers 200, because readiness pings over a connection
// of its own. Were it to queue behind the requests, the router's probe would time out and take
// the busiest cell out of routing for every tenant on it.
func TestReadyzAnswersWhileThePoolIsBusy(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	pool := b.api.DB.Pool
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := pool.Ping(short); err == nil {
		t.Fatal("a ping through the pool answered: the test holds no connection")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Get(b.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz with the pool busy: %d %s", res.StatusCode, body)
	}
}
