package db

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// probe is the connection Ping keeps for itself.
type probe struct {
	once sync.Once
	sem  chan struct{} // one Ping at a time holds the connection
	conn *pgx.Conn     // nil until the first Ping, and after a failed one
}

// Ping checks that the database answers, over a connection of its own that it opens on first
// use and keeps, not one of the pool's. A readiness probe must not queue behind the requests
// holding every pool connection: a busy pool is not an unreachable database, and a cell that
// answers its probe late under load would be taken out of routing just when it is busiest.
// Concurrent calls take turns (each bounded by its ctx). A failed Ping closes the connection;
// the next opens a new one.
func (d *DB) Ping(ctx context.Context) error {
	p := &d.probe
	p.once.Do(func() { p.sem = make(chan struct{}, 1) })
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	// A kept connection may have been closed while idle (a server restart, an idle timeout):
	// one that fails is replaced once, within the same ctx.
	for fresh := p.conn == nil; ; fresh = true {
		if p.conn == nil {
			conn, err := pgx.ConnectConfig(ctx, d.Pool.Config().ConnConfig.Copy())
			if err != nil {
				return err
			}
			p.conn = conn
		}
		err := p.conn.Ping(ctx)
		if err == nil {
			return nil
		}
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.conn.Close(closeCtx)
		cancel()
		p.conn = nil
		if fresh || ctx.Err() != nil {
			return err
		}
	}
}

// closeProbe closes Ping's connection, waiting for a Ping in flight.
func (d *DB) closeProbe() {
	p := &d.probe
	p.once.Do(func() { p.sem = make(chan struct{}, 1) })
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	if p.conn != nil {
		_ = p.conn.Close(context.Background())
		p.conn = nil
	}
}
