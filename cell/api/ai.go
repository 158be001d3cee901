package api

import "slidecells/cell/store"

// registerAI adds the AI agent catalogue and per-workspace agent configs.
func (s *Server) registerAI(st *store.Store) {}
