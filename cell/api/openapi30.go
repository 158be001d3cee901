package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/yaml"
)

// openAPI30 serves /openapi-3.0.json and /openapi-3.0.yaml: huma's down-conversion of the
// 3.1 document, corrected where it keeps 3.1 keywords. A binary body in 3.1 is
// {type: string, contentMediaType: …}; huma adds 3.0's format: binary but keeps
// contentMediaType, which 3.0's Schema Object does not have (a strict 3.0 tool rejects the
// document). The document is built once, at its first request, as huma builds its own.
type openAPI30 struct {
	api  func() huma.API
	once sync.Once
	json []byte
	yaml []byte
	err  error
}

func (o *openAPI30) build() {
	b, err := o.api().OpenAPI().Downgrade()
	if err != nil {
		o.err = err
		return
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		o.err = err
		return
	}
	drop30Keywords(doc)
	if o.json, o.err = json.Marshal(doc); o.err != nil {
		return
	}
	var y bytes.Buffer
	o.err = yaml.Convert(&y, bytes.NewReader(o.json))
	o.yaml = y.Bytes()
}

// drop30Keywords removes contentMediaType from every schema that says format: binary (3.0's
// way to say the same).
func drop30Keywords(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["contentMediaType"]; ok && v["format"] == "binary" {
			delete(v, "contentMediaType")
		}
		for _, e := range v {
			drop30Keywords(e)
		}
	case []any:
		for _, e := range v {
			drop30Keywords(e)
		}
	}
}

// serve answers the document; an error building it is an internal error, written (and
// logged) by the server's one error writer.
func (o *openAPI30) serve(s *Server, asYAML bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o.once.Do(o.build)
		if o.err != nil {
			s.fail(r.Context(), w, fmt.Errorf("api: build the OpenAPI 3.0 document: %w", o.err))
			return
		}
		if asYAML {
			w.Header().Set("Content-Type", "application/openapi+yaml")
			_, _ = w.Write(o.yaml)
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(o.json)
	}
}
