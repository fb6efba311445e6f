package bench

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// clockTicks is USER_HZ, 100 on every Linux this rig runs on (getconf CLK_TCK).
const clockTicks = 100

// ProcCPU returns user+system CPU time consumed so far by process pid (all threads).
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces: fields are counted after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat times", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// ProcRSS returns the resident set size of process pid in bytes (VmRSS).
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("VmRSS:")) {
			f := bytes.Fields(line[len("VmRSS:"):])
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err != nil {
					return 0, err
				}
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// StopProcess ends a server this rig started: SIGTERM to its PID, then SIGKILL if it has not
// exited within grace. It reports whether the kill was needed.
func StopProcess(cmd *exec.Cmd, grace time.Duration) (killed bool) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return true
	}
}

// Quantile is the q-quantile (0..1, 1 the maximum) of ds, which it leaves as it is; 0 when
// ds is empty.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a server the rigs
// start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MustFreePort is FreePort for rigs that cannot go on without one.
func MustFreePort() int {
	p, err := FreePort()
	if err != nil {
		panic(err)
	}
	return p
}

// ConnectStarting connects to a server the rig has just started, retrying every 20 ms
// until it answers or within has passed (the last error then).
func ConnectStarting(url string, within time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	deadline := time.Now().Add(within)
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil || time.Now().After(deadline) {
			return nc, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// JSServer is a server binary a rig started with JetStream on a store of its own.
type JSServer struct {
	Cmd *exec.Cmd
	URL string // nats://127.0.0.1:<port>
	dir string
}

// StartJS starts bin on a free 127.0.0.1 port with -js and its store in a fresh directory
// under $JS_TMPDIR (the system's temporary directory when unset) whose name starts with
// prefix, followed by extra arguments. It does not wait for the server to listen
// (ConnectStarting does).
func StartJS(bin, prefix string, extra ...string) (*JSServer, error) {
	dir, err := os.MkdirTemp(os.Getenv("JS_TMPDIR"), prefix)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir + "/store"}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &JSServer{Cmd: cmd, URL: fmt.Sprintf("nats://127.0.0.1:%d", port), dir: dir}, nil
}

// Stop ends the server (StopProcess, 10 s grace) and removes its store.
func (s *JSServer) Stop() {
	StopProcess(s.Cmd, 10*time.Second)
	os.RemoveAll(s.dir)
}
