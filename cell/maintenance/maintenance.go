// Package maintenance runs a cell's periodic housekeeping: purging idempotency records past
// their retention and sweeping blob upload temporaries left by a crash mid-upload. cmd/cell
// only wires it; the rounds (run by shared/loop with an injectable ticker), the batching and the
// clock are here so that tests can drive them.
//
// It does no business work and must not grow any: a task here only removes what retention
// rules already say is dead.
package maintenance

import (
	"context"
	"time"

	"go.uber.org/zap"

	"slidecells/shared/loop"
)

// Defaults of Config.
const (
	DefaultInterval  = 10 * time.Minute
	DefaultPurgeMax  = 500
	DefaultTempAfter = time.Hour
)

// Purger deletes up to limit expired idempotency records and says how many it deleted
// (*idempotency.Store).
type Purger interface {
	Purge(ctx context.Context, limit int) (int, error)
}

// Sweeper deletes upload temporaries older than cutoff and says how many it deleted
// (*blob.Store).
type Sweeper interface {
	SweepTemp(ctx context.Context, cutoff time.Time) (int, error)
}

// Config configures a Runner. Idempotency and Temps may be nil (that task is skipped).
type Config struct {
	Idempotency Purger
	Temps       Sweeper
	// Log receives failures and counts; nil discards them.
	Log *zap.Logger
	// Interval between two rounds (default DefaultInterval). The first round runs one
	// Interval after Run starts.
	Interval time.Duration
	// PurgeBatch is the most idempotency records one Purge call deletes; a round calls it
	// again while batches come back full (default DefaultPurgeMax).
	PurgeBatch int
	// TempAfter is the age after which an upload temporary is abandoned (default
	// DefaultTempAfter).
	TempAfter time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Ticker makes the round ticker; nil is time.NewTicker's (loop.Real). Tests pass a
	// channel they feed themselves.
	Ticker loop.Ticker
}

// Runner runs the rounds.
type Runner struct{ cfg Config }

// New returns a Runner for cfg with defaults applied.
func New(cfg Config) *Runner {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.PurgeBatch <= 0 {
		cfg.PurgeBatch = DefaultPurgeMax
	}
	if cfg.TempAfter <= 0 {
		cfg.TempAfter = DefaultTempAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg}
}

// Run runs a round every Interval until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	loop.Every(ctx, r.cfg.Interval, r.cfg.Ticker, r.Round)
}

// Round runs every task once.
func (r *Runner) Round(ctx context.Context) {
	if r.cfg.Idempotency != nil {
		r.purge(ctx)
	}
	if r.cfg.Temps != nil {
		r.sweep(ctx)
	}
}

// purge deletes expired idempotency records in batches until a batch comes back short, an
// error occurs or ctx ends.
func (r *Runner) purge(ctx context.Context) {
	total := 0
	for ctx.Err() == nil {
		n, err := r.cfg.Idempotency.Purge(ctx, r.cfg.PurgeBatch)
		total += n
		if err != nil {
			r.cfg.Log.Warn("idempotency purge failed", zap.Error(err))
			break
		}
		if n < r.cfg.PurgeBatch {
			break
		}
	}
	if total > 0 {
		r.cfg.Log.Info("idempotency records purged", zap.Int("count", total))
	}
}

func (r *Runner) sweep(ctx context.Context) {
	n, err := r.cfg.Temps.SweepTemp(ctx, r.cfg.Now().Add(-r.cfg.TempAfter))
	switch {
	case err != nil:
		r.cfg.Log.Warn("temporary blob sweep failed", zap.Error(err))
	case n > 0:
		r.cfg.Log.Info("temporary blobs swept", zap.Int("count", n))
	}
}
