package supervisor

import "golang.org/x/sys/unix"

const (
	nativeAuditArch = unix.AUDIT_ARCH_X86_64
	// foreignNrBit marks x32 system call numbers.
	foreignNrBit = 0x40000000
)
