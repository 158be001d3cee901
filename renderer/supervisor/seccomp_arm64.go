package supervisor

import "golang.org/x/sys/unix"

const (
	nativeAuditArch = unix.AUDIT_ARCH_AARCH64
	foreignNrBit    = 0
)
