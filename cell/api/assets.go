package api

import "slidecells/cell/store"

// registerAssets adds the asset operations (upload, content, preview, copy, tags, metadata,
// archive).
func (s *Server) registerAssets(st *store.Store) {}
