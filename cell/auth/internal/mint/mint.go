// Package mint holds the key that makes a scope.Scope. Being internal to cell/auth, only
// cell/auth can name it, so only authorization can make a Scope.
package mint

// Key is passed to scope.New; it cannot be written outside cell/auth.
type Key struct{ _ [0]func() }
