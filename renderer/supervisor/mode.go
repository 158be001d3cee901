package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mode is how the supervisor builds an attempt's isolation. It follows from
// the control process's privileges; both modes give the child the same
// boundary (its own user, PID, network, mount and IPC namespaces, a cgroup,
// the same file view and egress path), and neither falls back to less.
type Mode string

const (
	// ModeRoot: the control process is root, on the host or in a user
	// namespace of its own (Kubernetes: hostUsers: false). It creates the
	// attempt's namespaces and switches the child to the leased user
	// itself.
	ModeRoot Mode = "root"
	// ModeUserNamespace: the control process is an unprivileged user.
	// Each attempt also gets a user namespace of its own in which exactly
	// one ID is mapped: the leased one, to itself. The mapping is written
	// by the set-user-ID helpers newuidmap and newgidmap (Debian's uidmap
	// package), which allow it only inside the user's /etc/subuid and
	// /etc/subgid ranges; the attempt's cgroups come from a cgroup the
	// host delegated to the user.
	ModeUserNamespace Mode = "user-namespace"
)

// CurrentMode is the mode of this process: root when its effective user ID
// is 0 (in its own user namespace), user-namespace otherwise.
func CurrentMode() Mode {
	if os.Geteuid() == 0 {
		return ModeRoot
	}
	return ModeUserNamespace
}

// Host files the user-namespace mode reads; variables so tests can point
// them elsewhere.
var (
	subUIDFile = "/etc/subuid"
	subGIDFile = "/etc/subgid"
	procSys    = "/proc/sys"
)

// checkUserNamespaceMode checks what an unprivileged control process needs
// to give attempts users from [first, last]: the helpers, a passwd entry,
// subordinate ID ranges covering the whole range, its own IDs outside it,
// and set-user-ID execution not disabled for it. Every failure says what is
// missing and how a host provides it.
func checkUserNamespaceMode(first, last uint32) error {
	var problems []string
	for _, h := range []string{"newuidmap", "newgidmap"} {
		if err := checkHelper(h); err != nil {
			problems = append(problems, err.Error())
		}
	}
	uid, gid := os.Getuid(), os.Getgid()
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		problems = append(problems, fmt.Sprintf("user ID %d has no passwd entry (newuidmap looks the caller up by name)", uid))
	} else {
		if u.Gid != strconv.Itoa(gid) {
			problems = append(problems, fmt.Sprintf("the real group ID %d is not user %s's primary group %s (newuidmap requires it)", gid, u.Username, u.Gid))
		}
		for _, f := range []struct{ path, kind, flag string }{{subUIDFile, "user", "--add-subuids"}, {subGIDFile, "group", "--add-subgids"}} {
			ok, err := subordinateCovers(f.path, u.Username, uid, first, last)
			if err != nil {
				problems = append(problems, err.Error())
			} else if !ok {
				problems = append(problems, fmt.Sprintf("%s gives user %s no subordinate %s IDs covering %d-%d (usermod %s %d-%d %s)",
					f.path, u.Username, f.kind, first, last, f.flag, first, last, u.Username))
			}
		}
	}
	if uint32(uid) >= first && uint32(uid) <= last {
		problems = append(problems, fmt.Sprintf("the control process's own user ID %d lies in the child range %d-%d", uid, first, last))
	}
	if uint32(gid) >= first && uint32(gid) <= last {
		problems = append(problems, fmt.Sprintf("the control process's own group ID %d lies in the child range %d-%d", gid, first, last))
	}
	if noNewPrivs() {
		problems = append(problems, "no_new_privs is set on the control process (systemd NoNewPrivileges=yes, Kubernetes allowPrivilegeEscalation: false), so newuidmap and newgidmap cannot act")
	}
	for _, c := range []struct {
		cap  uintptr
		name string
	}{{unix.CAP_SETUID, "CAP_SETUID"}, {unix.CAP_SETGID, "CAP_SETGID"}} {
		if v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, c.cap, 0, 0, 0); err == nil && v == 0 {
			problems = append(problems, c.name+" is not in the control process's capability bounding set (systemd CapabilityBoundingSet=, Kubernetes capabilities add), so the set-user-ID helpers cannot use it")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("running unprivileged (user-namespace mode): %s", strings.Join(problems, "; "))
	}
	return nil
}

// checkHelper finds a helper in PATH and checks it can act for an
// unprivileged caller: set-user-ID root or file capabilities.
func checkHelper(name string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("%s not found in PATH (install Debian's uidmap package)", name)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if st.Mode()&os.ModeSetuid != 0 && sys != nil && sys.Uid == 0 {
		return nil
	}
	if _, err := unix.Getxattr(path, "security.capability", nil); err == nil {
		return nil
	}
	return fmt.Errorf("%s is neither set-user-ID root nor has file capabilities", path)
}

func noNewPrivs() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// subordinateCovers reports whether the entries of name (or of the numeric
// uid, which shadow's helpers also accept) in a subuid/subgid file cover
// [first, last] together.
func subordinateCovers(path, name string, uid int, first, last uint32) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %v", path, err)
	}
	defer f.Close()
	type span struct{ lo, hi uint64 }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 || (parts[0] != name && parts[0] != strconv.Itoa(uid)) {
			continue
		}
		start, err1 := strconv.ParseUint(parts[1], 10, 32)
		count, err2 := strconv.ParseUint(parts[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 {
			continue
		}
		spans = append(spans, span{start, start + count - 1})
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("%s: %v", path, err)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	next := uint64(first)
	for _, s := range spans {
		if s.lo > next {
			break
		}
		if s.hi >= next {
			next = s.hi + 1
		}
		if next > uint64(last) {
			return true, nil
		}
	}
	return false, nil
}

// mapIDs writes the user and group ID maps of the attempt's user namespace
// (the shim, pid, is its first process): id inside is id outside, nothing
// else is mapped. Only the set-user-ID helpers may do this for an
// unprivileged caller, and only inside its subordinate ranges.
func mapIDs(pid int, id uint32) error {
	p, n := strconv.Itoa(pid), strconv.FormatUint(uint64(id), 10)
	for _, h := range []string{"newuidmap", "newgidmap"} {
		out, err := exec.Command(h, p, n, n, "1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("supervisor: %s %s %s %s 1: %v: %s", h, p, n, n, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// CheckKernel reports what the kernel lacks for the attempts' browsers to
// keep their own sandbox inside the attempt's namespaces (Chromium creates
// unprivileged user namespaces for its renderers), and, in the
// user-namespace mode, for the attempts' own user namespaces.
func CheckKernel() error {
	b, err := os.ReadFile(procSys + "/user/max_user_namespaces")
	if err != nil {
		return fmt.Errorf("supervisor: user namespaces unavailable (no %s/user/max_user_namespaces): %w", procSys, err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n == 0 {
		return errors.New("supervisor: user namespaces are disabled (user.max_user_namespaces = 0); Chromium's sandbox and the attempts' user namespaces need them")
	}
	if b, err := os.ReadFile(procSys + "/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("supervisor: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); Chromium's sandbox and the attempts' user namespaces need them")
	}
	return nil
}

// userNamespaceHint explains a failed clone of the attempt's namespaces.
func userNamespaceHint(err error) string {
	if CurrentMode() != ModeUserNamespace || !(errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS)) {
		return ""
	}
	return " (an unprivileged process could not create a user namespace: check user.max_user_namespaces, kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns and the container's seccomp profile)"
}
