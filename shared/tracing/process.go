package tracing

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
)

// ForProcess is Setup for a binary's main: it reads the process environment, logs whether
// spans are exported, and returns the function to defer, which flushes what is left (for at
// most five seconds) and logs a failure to.
func ForProcess(ctx context.Context, service string, log *zap.Logger, resourceAttrs ...attribute.KeyValue) (func(), error) {
	shutdown, err := Setup(ctx, service, os.Getenv, resourceAttrs...)
	if err != nil {
		return func() {}, err
	}
	if Enabled() {
		log.Info("tracing: exporting spans", zap.String("exporters", os.Getenv("OTEL_TRACES_EXPORTER")))
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed", zap.Error(err))
		}
	}, nil
}
