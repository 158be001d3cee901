package api

import "slidecells/cell/store"

// registerDesign adds themes, styles, and workspace fonts (families, faces, bundle).
func (s *Server) registerDesign(st *store.Store) {}
