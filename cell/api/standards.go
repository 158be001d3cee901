package api

import (
	"context"
	"net/http"

	"slidecells/cell/catalog"
	"slidecells/cell/design"
	"slidecells/shared/problem"
)

// StandardOutput is one standard.
type StandardOutput struct {
	Body Standard
}

// KitIndexOutput is the runtime kit index.
type KitIndexOutput struct {
	Body struct {
		Version string            `json:"version"`
		Items   []catalog.KitItem `json:"items"`
	}
}

// KitItemOutput is one runtime kit item.
type KitItemOutput struct {
	Body catalog.KitItem
}

// KitItemPath names a kit item.
type KitItemPath struct {
	Item string `path:"item" maxLength:"64" pattern:"^[a-z][a-z0-9-]*$"`
}

// FontsOutput lists the platform presets.
type FontsOutput struct {
	Body struct {
		Presets  []FontPreset      `json:"presets"`
		Defaults map[string]string `json:"defaults" doc:"preset used per role when a theme names none"`
	}
}

func (s *Server) registerStandards() {
	for _, kind := range []string{"page", "component"} {
		std := catalog.Standards[kind]
		Register(s, Operation{ID: "get-standard-" + kind, Method: http.MethodGet, Path: "/api/v1/standards/" + kind,
			Summary: "The " + kind + " standard published by the backend", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
			func(ctx context.Context, _ *struct{}) (*StandardOutput, error) {
				return &StandardOutput{Body: Standard(std)}, nil
			})
	}
	Register(s, Operation{ID: "get-runtime-kit", Method: http.MethodGet, Path: "/api/v1/runtime-kit",
		Summary: "Runtime kit index", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*KitIndexOutput, error) {
			out := &KitIndexOutput{}
			out.Body.Version, out.Body.Items = "1", catalog.RuntimeKit
			return out, nil
		})
	Register(s, Operation{ID: "get-runtime-kit-item", Method: http.MethodGet, Path: "/api/v1/runtime-kit/{item}",
		Summary: "One runtime kit item", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *KitItemPath) (*KitItemOutput, error) {
			for _, it := range catalog.RuntimeKit {
				if it.Name == in.Item {
					return &KitItemOutput{Body: it}, nil
				}
			}
			return nil, problem.ErrNotFound()
		})
	Register(s, Operation{ID: "list-platform-fonts", Method: http.MethodGet, Path: "/api/v1/fonts",
		Summary: "Platform font presets", Tags: []string{"fonts"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*FontsOutput, error) {
			out := &FontsOutput{}
			out.Body.Presets = mapSlice(design.FontPresets, func(p design.FontPreset) FontPreset { return FontPreset(p) })
			out.Body.Defaults = design.DefaultPresets()
			return out, nil
		})
}
