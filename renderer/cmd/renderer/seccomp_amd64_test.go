package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"slidecells/shared/testenv"

	"golang.org/x/sys/unix"

	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/unpriv"
	"slidecells/renderer/supervisor"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// profilePath is the container profile, relative to this package.
const profilePath = "../../../deploy/seccomp/renderer.json"

// Environment of the test binary started as a wrapper that installs the
// profile and executes the rest of its arguments.
const (
	envWrapProfile = "RENDERER_TEST_SECCOMP_PROFILE"
	envWrapArgv    = "RENDERER_TEST_SECCOMP_ARGV"
)

func TestMain(m *testing.M) {
	if p := os.Getenv(envWrapProfile); p != "" {
		os.Exit(wrapWithProfile(p, os.Getenv(envWrapArgv)))
	}
	os.Exit(m.Run())
}

// ociProfile is the part of the OCI seccomp format the profile uses.
type ociProfile struct {
	DefaultAction   string   `json:"defaultAction"`
	DefaultErrnoRet *uint    `json:"defaultErrnoRet"`
	Architectures   []string `json:"architectures"`
	Syscalls        []struct {
		Names  []string `json:"names"`
		Action string   `json:"action"`
		Args   []struct {
			Index    uint   `json:"index"`
			Value    uint64 `json:"value"`
			ValueTwo uint64 `json:"valueTwo"`
			Op       string `json:"op"`
		} `json:"args"`
	} `json:"syscalls"`
}

func loadProfile(path string) (*ociProfile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p ociProfile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// allowed are the names the profile allows, with or without conditions.
func (p *ociProfile) allowed() map[string]bool {
	out := map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action == "SCMP_ACT_ALLOW" {
			for _, n := range r.Names {
				out[n] = true
			}
		}
	}
	return out
}

// filter compiles the profile to classic BPF the way libseccomp applies it
// on amd64: other architectures refused, each allowed call (with its
// argument conditions: EQ on the whole value, NE on its low word) allowed,
// everything else refused with the default errno.
func (p *ociProfile) filter() ([]unix.SockFilter, error) {
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil {
		return nil, fmt.Errorf("default action %s: want SCMP_ACT_ERRNO with an errno", p.DefaultAction)
	}
	deny := unix.SECCOMP_RET_ERRNO | uint32(*p.DefaultErrnoRet)
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	prog := []unix.SockFilter{ld(4), jeq(unix.AUDIT_ARCH_X86_64, 1, 0), ret(deny), ld(0)}
	for _, r := range p.Syscalls {
		if r.Action != "SCMP_ACT_ALLOW" {
			return nil, fmt.Errorf("action %s: the test knows ALLOW rules only", r.Action)
		}
		for _, n := range r.Names {
			nr, ok := profileSysnums[n]
			if !ok {
				return nil, fmt.Errorf("system call %q of the profile is unknown (typo, or add it to profileSysnums)", n)
			}
			if len(r.Args) == 0 {
				prog = append(prog, jeq(uint32(nr), 0, 1), ret(unix.SECCOMP_RET_ALLOW))
				continue
			}
			// jeq nr; per condition: load, compare (fail → reload nr);
			// allow; reload nr.
			var block []unix.SockFilter
			for _, a := range r.Args {
				off := 16 + 8*uint32(a.Index)
				switch a.Op {
				case "SCMP_CMP_EQ":
					block = append(block, ld(off), jeq(uint32(a.Value), 0, 255), ld(off+4), jeq(uint32(a.Value>>32), 0, 255))
				case "SCMP_CMP_NE":
					block = append(block, ld(off), jeq(uint32(a.Value), 255, 0))
				default:
					return nil, fmt.Errorf("argument operator %s unknown to the test", a.Op)
				}
			}
			block = append(block, ret(unix.SECCOMP_RET_ALLOW))
			// Point every 255 (failure) at the reload after the block.
			for i := range block {
				if block[i].Jt == 255 {
					block[i].Jt = uint8(len(block) - i - 1)
				}
				if block[i].Jf == 255 {
					block[i].Jf = uint8(len(block) - i - 1)
				}
			}
			prog = append(prog, jeq(uint32(nr), 0, uint8(len(block))))
			prog = append(prog, block...)
			prog = append(prog, ld(0))
		}
	}
	return append(prog, ret(deny)), nil
}

// wrapWithProfile installs the profile on every thread (as root: no
// no_new_privs needed, as a container runtime does it) and executes argv.
func wrapWithProfile(path, argvJSON string) int {
	var argv []string
	if err := json.Unmarshal([]byte(argvJSON), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "wrapper: bad argv:", err)
		return 111
	}
	p, err := loadProfile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrapper:", err)
		return 111
	}
	prog, err := p.filter()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrapper:", err)
		return 111
	}
	runtime.LockOSThread()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Fprintln(os.Stderr, "wrapper: seccomp:", e)
		return 111
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envWrapProfile+"=") && !strings.HasPrefix(kv, envWrapArgv+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(argv[0], argv, env)
	fmt.Fprintln(os.Stderr, "wrapper: exec:", err)
	return 111
}

// underProfile makes cmd run under the container profile.
func underProfile(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(profilePath)
	argv, _ := json.Marshal(append([]string{cmd.Path}, cmd.Args[1:]...))
	w := exec.Command(self)
	w.Env = append(append([]string(nil), cmd.Env...), envWrapProfile+"="+abs, envWrapArgv+"="+string(argv))
	return w
}

// TestContainerSeccompProfile: deploy/seccomp/renderer.json is a well-formed
// OCI profile (refusing by default, 64-bit architectures only, no unknown
// field or name), refuses every call the child's own filter refuses plus
// the ones the renderer never needs (setns, pivot_root, kcmp, pidfd_getfd),
// allows what the isolation needs, and is enough: the renderer binary runs
// under it, as root and unprivileged, and captures a page.
func TestContainerSeccompProfile(t *testing.T) {
	p, err := loadProfile(profilePath)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Architectures, []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"}) {
		t.Fatalf("architectures %v: the 32-bit ABIs must stay refused", p.Architectures)
	}
	if _, err := p.filter(); err != nil {
		t.Fatal(err)
	}
	allowed := p.allowed()
	for name := range supervisor.ChildDeniedSyscalls {
		if name == "mount" || name == "umount2" {
			continue // the shim builds the file view with them; the child's filter refuses them
		}
		if allowed[name] {
			t.Errorf("the profile allows %s, which the child's filter refuses", name)
		}
	}
	for _, name := range []string{"setns", "pivot_root", "kcmp", "pidfd_getfd", "open_by_handle_at", "get_mempolicy"} {
		if allowed[name] {
			t.Errorf("the profile allows %s, which the renderer does not need", name)
		}
	}
	for _, name := range []string{"clone", "clone3", "unshare", "mount", "umount2", "chroot", "seccomp", "prctl", "capset",
		"setresuid", "setresgid", "setgroups", "execveat", "socketpair", "sendmsg", "recvmsg", "pidfd_open", "prlimit64"} {
		if !allowed[name] {
			t.Errorf("the profile refuses %s, which the isolation needs", name)
		}
	}
	if t.Failed() {
		return
	}
	requireBrowser(t)
	testenv.MustHaveRoot(t, "installing a seccomp filter without no_new_privs, as a container runtime does")
	h, bin := unprivHost(t)
	fx := fixture.Start(token)
	defer fx.Close()
	signer, _ := ticket.GenerateSigner("k1")
	for _, mode := range []string{"root", "unprivileged"} {
		t.Run(mode, func(t *testing.T) {
			env, _ := unprivEnv(t, h, fx.BaseURL(), signer)
			cmd := exec.Command(bin)
			if mode == "unprivileged" {
				cmd = h.Command(bin)
			} else {
				env = without(without(without(env, "RENDER_CHILD_UID_RANGE"), "RENDER_CHILD_UID_LOCK_DIR"), unpriv.EnvMarker)
			}
			cmd.Env = env
			base, rcmd, logs, exited := startBinary(t, underProfile(t, cmd))
			defer func() {
				_ = rcmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					t.Errorf("renderer did not stop\n%s", logs.String())
				}
			}()
			waitReady(t, base)
			var caps rc.Capabilities
			getJSON(t, base+rc.APIRoot+"/capabilities", &caps)
			submit(t, base, signer, caps, "profile", fixture.Ready, 1)
			rec := waitReceipt(t, base, "profile", func(r rc.Receipt) bool { return r.State == rc.StateTerminal })
			if rec.Outcome != rc.OutcomeSucceeded {
				t.Fatalf("capture under the profile = %+v %+v\n%s", rec, rec.Error, logs.String())
			}
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", rcmd.Process.Pid)); !strings.Contains(string(st), "Seccomp:\t2") {
				t.Fatalf("the renderer does not run under a filter:\n%s", st)
			}
		})
	}
}
