// Package content holds the content domain, free of HTTP and SQL: the asset service (uploads
// into the content-addressed blob store, content replacement locked by hash, names, tags and
// metadata rules), the project structure (configuration, route tree and build assets with their
// rules) and the composed project writes that must judge references inside one transaction.
// The content objects themselves (objects.go) are read and written by cell/store through the
// interfaces of stores.go; this package links no database driver and no HTTP framework.
// Field errors name request paths so the API answers them as they are.
package content
