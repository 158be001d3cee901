package api

import (
	"context"

	"slidecells/cell/render"
)

// coordinatorHealth reports render capability honestly: ok only while a dispatch could use a
// renderer now (a ready worker whose environment matches the release's profile), with the
// queue depth. It never reports a renderer address. nil means no renderer is configured.
func coordinatorHealth(c *render.Coordinator) RenderHealth {
	if c == nil {
		return nil
	}
	return func(ctx context.Context) Health {
		h := c.Health(ctx)
		if !h.Available {
			return Health{Status: "unavailable", Detail: h.Detail}
		}
		return Health{Status: "ok", Detail: h.Detail}
	}
}
