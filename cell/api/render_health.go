package api

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ProbeRenderers reports render capability from the renderers' readiness: ok when at least one
// renderer answers /readyz, unavailable otherwise. It never reports a renderer address.
// credential is the renderers' service credential (every renderer endpoint but /livez needs it).
func ProbeRenderers(urls []string, credential string) RenderHealth {
	client := &http.Client{Timeout: time.Second}
	return func(ctx context.Context) Health {
		ready := 0
		for _, u := range urls {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/readyz", nil)
			if err != nil {
				continue
			}
			req.Header.Set("Authorization", "Bearer "+credential)
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready++
			}
		}
		if ready == 0 {
			return Health{Status: "unavailable", Detail: "no renderer of this cell is ready"}
		}
		return Health{Status: "ok", Detail: fmt.Sprintf("%d of %d renderers ready", ready, len(urls))}
	}
}
