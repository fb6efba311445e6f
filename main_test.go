package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsdBin builds the binary once per test run; these tests drive it as users do.
func natsdBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natsd-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "natsd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		check   func(t *testing.T, host string, port int, name string, debug, trace, logtime bool)
		action  string
		wantErr string
	}{
		{args: []string{"-a", "127.0.0.1", "-p", "4333", "-n", "x"}, check: func(t *testing.T, h string, p int, n string, _, _, _ bool) {
			if h != "127.0.0.1" || p != 4333 || n != "x" {
				t.Fatalf("got %s %d %s", h, p, n)
			}
		}},
		{args: []string{"--addr=::1", "--port=-1", "--server_name", "y"}, check: func(t *testing.T, h string, p int, n string, _, _, _ bool) {
			if h != "::1" || p != -1 || n != "y" {
				t.Fatalf("got %s %d %s", h, p, n)
			}
		}},
		{args: []string{"-DV", "-T=false"}, check: func(t *testing.T, _ string, _ int, _ string, d, tr, lt bool) {
			if !d || !tr || lt {
				t.Fatalf("debug=%v trace=%v logtime=%v", d, tr, lt)
			}
		}},
		{args: []string{"-D"}, check: func(t *testing.T, _ string, _ int, _ string, d, tr, _ bool) {
			if !d || tr {
				t.Fatalf("debug=%v trace=%v", d, tr)
			}
		}},
		{args: []string{"-v"}, action: "version"},
		{args: []string{"version"}, action: "version"},
		{args: []string{"--help"}, action: "help"},
		{args: []string{"-h"}, action: "help"},
		{args: []string{"--signal", "ldm=1"}, action: "signal"},
		{args: []string{"--bogus"}, wantErr: "flag provided but not defined: -bogus"},
		{args: []string{"frob"}, wantErr: `unrecognized command: "frob"`},
		{args: []string{"--tls"}, wantErr: "TLS Server certificate must be present and valid"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, cmd, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cmd.action != tc.action {
				t.Fatalf("action %q, want %q", cmd.action, tc.action)
			}
			if tc.check != nil {
				tc.check(t, o.Host, o.Port, o.ServerName, o.Debug, o.Trace, o.Logtime)
			}
		})
	}
}

func TestBinaryUnknownFlagAndVersion(t *testing.T) {
	bin := natsdBin(t)
	// As nats-server: the flag error, the usage, and exit status 0.
	out, err := exec.Command(bin, "--nope").CombinedOutput()
	if err != nil {
		t.Fatalf("exit: %v", err)
	}
	if !bytes.Contains(out, []byte("flag provided but not defined: -nope")) || !bytes.Contains(out, []byte("Usage: natsd")) {
		t.Fatalf("output: %s", out)
	}
	// nats-server's own line first, which launchers parse; natsd's own after it.
	out, err = exec.Command(bin, "-v").CombinedOutput()
	first, second, _ := strings.Cut(string(out), "\n")
	if err != nil || first != "nats-server: v2.15.2" || !regexp.MustCompile(`^natsd: v\d+\.\d+\.\d+( \(\w+\))?\n$`).MatchString(second) {
		t.Fatalf("-v: %v %q", err, out)
	}
}

type proc struct {
	cmd  *exec.Cmd
	port int
	log  *lockedBuffer
	done chan error
}

// lockedBuffer is the server's stderr, written by exec's copier while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func startBinary(t *testing.T, args ...string) *proc {
	t.Helper()
	port := freePort(t)
	return startProc(t, natsdBin(t), port, nil, append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
}

// startProc runs bin with exactly args (and env added to the environment), stops it when the
// test ends, and waits for it to listen on its client port.
func startProc(t *testing.T, bin string, port int, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{port: port, log: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			c.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s %v exited: %v\n%s", filepath.Base(bin), args, err, p.log)
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s %v did not start:\n%s", filepath.Base(bin), args, p.log)
	return nil
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (p *proc) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", p.port) }

func (p *proc) waitExit(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		t.Fatalf("server did not exit in %v; log:\n%s", d, p.log)
		return nil
	}
}

func TestBinarySignals(t *testing.T) {
	t.Run("SIGTERM graceful, pid file removed", func(t *testing.T) {
		pid := filepath.Join(t.TempDir(), "natsd.pid")
		p := startBinary(t, "-P", pid)
		b, err := os.ReadFile(pid)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.cmd.Process.Pid) {
			t.Fatalf("pid file %q: %v", b, err)
		}
		nc, err := nats.Connect(p.url(), nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("exit: %v\n%s", err, p.log)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("client not disconnected")
		}
		if _, err := os.Stat(pid); !os.IsNotExist(err) {
			t.Fatalf("pid file still there: %v", err)
		}
	})
	t.Run("SIGUSR2 lame duck", func(t *testing.T) {
		p := startBinary(t, "--lame_duck_duration", "1s", "--lame_duck_grace_period", "100ms")
		var ncs []*nats.Conn
		told := make(chan struct{}, 4)
		for i := 0; i < 4; i++ {
			nc, err := nats.Connect(p.url(), nats.NoReconnect(),
				nats.LameDuckModeHandler(func(*nats.Conn) { told <- struct{}{} }))
			if err != nil {
				t.Fatal(err)
			}
			ncs = append(ncs, nc)
		}
		ldm := make(chan struct{}, 4)
		for _, nc := range ncs {
			nc.SetDisconnectErrHandler(func(*nats.Conn, error) { ldm <- struct{}{} })
		}
		start := time.Now()
		_ = p.cmd.Process.Signal(syscall.SIGUSR2)
		if err := p.waitExit(t, 15*time.Second); err != nil {
			t.Fatalf("exit: %v", err)
		}
		for range ncs {
			select {
			case <-ldm:
			case <-time.After(5 * time.Second):
				t.Fatal("client not closed by lame duck")
			}
		}
		if len(told) != len(ncs) {
			t.Fatalf("%d of %d clients got the lame duck INFO", len(told), len(ncs))
		}
		// 100 ms of grace, then 4 closes at least half of 900 ms / 4 apart.
		if el := time.Since(start); el < 400*time.Millisecond {
			t.Fatalf("lame duck closed everyone at once (%v)", el)
		}
		if !strings.Contains(p.log.String(), "Entering lame duck mode") || !strings.Contains(p.log.String(), "Closing existing clients") {
			t.Fatalf("log:\n%s", p.log)
		}
	})
	t.Run("lame duck with few clients", func(t *testing.T) {
		// As in nats-server, closes are at most a second apart: 3 clients do not keep the
		// server up for the 30 s duration (nats-server v2.15.2 exits after about 2 s here).
		p := startBinary(t, "--lame_duck_duration", "30s", "--lame_duck_grace_period", "100ms")
		for i := 0; i < 3; i++ {
			nc, err := nats.Connect(p.url(), nats.NoReconnect())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
		}
		start := time.Now()
		_ = p.cmd.Process.Signal(syscall.SIGUSR2)
		if err := p.waitExit(t, 20*time.Second); err != nil {
			t.Fatalf("exit: %v", err)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("3 clients kept lame duck mode up for %v", el)
		}
	})
	t.Run("SIGUSR1 reopens the log file", func(t *testing.T) {
		dir := t.TempDir()
		logf := filepath.Join(dir, "natsd.log")
		p := startBinary(t, "-l", logf)
		if err := os.Rename(logf, logf+".1"); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(logf)
			if bytes.Contains(b, []byte("File log re-opened")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("log not reopened: %q", b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		if err := p.waitExit(t, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(logf)
		defer f.Close()
		// nats-server's format: "[pid] YYYY/MM/DD hh:mm:ss.uuuuuu [INF] text"
		line := regexp.MustCompile(fmt.Sprintf(`^\[%d\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[(INF|WRN|ERR|DBG|TRC)\] `, p.cmd.Process.Pid))
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if !line.MatchString(sc.Text()) {
				t.Fatalf("log line format: %q", sc.Text())
			}
		}
	})
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestLimitFlagsUnknown: nats-server has no flags for the limits (cli-flags.md), only config
// keys; natsd refuses them the same way.
func TestLimitFlagsUnknown(t *testing.T) {
	for _, args := range [][]string{
		{"--max_connections", "0"}, {"--max_subscriptions=-5"}, {"--max_payload", "-1"},
		{"--ping_interval", "-1s"}, {"--write_deadline", "-1s"},
	} {
		want := "flag provided but not defined: -" + strings.TrimLeft(strings.SplitN(args[0], "=", 2)[0], "-")
		if _, _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("natsd %v: err = %v, want %q", args, err, want)
		}
		fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		noop := func() {}
		if _, err := natsserver.ConfigureOptions(fs, args, noop, noop, noop); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("nats-server %v: err = %v, want %q", args, err, want)
		}
	}
}

// TestBinaryPortsFile: --ports_file_dir writes <executable>_<pid>.ports with the listeners'
// URLs once the server listens (nats-server's names and layout; nats.js's test launcher finds
// servers this way) and removes it at shutdown.
func TestBinaryPortsFile(t *testing.T) {
	dir := t.TempDir()
	p := startBinary(t, "-m", "-1", "--ports_file_dir", dir)
	path := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(natsdBin(t)), p.cmd.Process.Pid))
	// The file may be caught between its creation and its write: read until it parses.
	var b []byte
	var ports map[string][]string
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if b, err = os.ReadFile(path); err == nil {
			if err = json.Unmarshal(b, &ports); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ports file %s: %v %q", path, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := ports["nats"]; len(got) != 1 || got[0] != p.url() {
		t.Fatalf("nats: %v, want [%s]", got, p.url())
	}
	if m := ports["monitoring"]; len(m) != 1 || !strings.HasPrefix(m[0], "http://127.0.0.1:") {
		t.Fatalf("monitoring: %v", m)
	}
	if len(ports) != 2 {
		t.Fatalf("keys: %v", ports)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.waitExit(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("ports file left behind: %v", err)
	}
}

// TestBinaryLogtimeUTC: log timestamps are local time unless --logtime_utc asks for UTC.
func TestBinaryLogtimeUTC(t *testing.T) {
	zi := filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip")
	if _, err := os.Stat(zi); err != nil {
		t.Skip("no zoneinfo.zip to set a time zone from")
	}
	stamp := func(args ...string) time.Time {
		cmd := exec.Command(natsdBin(t), append([]string{"-a", "127.0.0.1", "-p", "-1"}, args...)...)
		cmd.Env = append(os.Environ(), "TZ=Asia/Tokyo", "ZONEINFO="+zi)
		errOut, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		// "[pid] 2006/01/02 15:04:05.000000 [INF] ..."
		line, _ := bufio.NewReader(errOut).ReadString('\n')
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("no log line: %q", line)
		}
		ts, err := time.ParseInLocation("2006/01/02 15:04:05.000000", f[1]+" "+f[2], time.UTC)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return ts
	}
	now := time.Now().UTC()
	if d := stamp("--logtime_utc").Sub(now); d < -time.Minute || d > time.Minute {
		t.Fatalf("--logtime_utc stamp is %v off UTC", d)
	}
	if d := stamp().Sub(now); d < 8*time.Hour || d > 10*time.Hour {
		t.Fatalf("local (Asia/Tokyo) stamp is %v off UTC, want about 9h", d)
	}
}

// TestBinaryRemoteSyslog: with -r udp://host:port the log goes to that syslog server, tagged
// with the executable's name, each line at its level's severity and without natsd's own pid,
// time and label (syslog adds its own), as nats-server sends it.
func TestBinaryRemoteSyslog(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p := startBinary(t, "-r", "udp://"+pc.LocalAddr().String())
	tag := filepath.Base(natsdBin(t)) + "["
	buf := make([]byte, 4096)
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		_ = pc.SetReadDeadline(deadline)
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			break
		}
		line := string(buf[:n])
		got = append(got, line)
		if strings.Contains(line, "Server is ready") {
			// <priority>: LOG_DEBUG's facility (kern, 0) with Notice severity (5).
			if !strings.HasPrefix(line, "<5>") || !strings.Contains(line, tag) || strings.Contains(line, "[INF]") {
				t.Fatalf("syslog line: %q", line)
			}
			// Nothing goes to stderr meanwhile (read once the process is gone: the buffer is
			// written by exec's copier).
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			if err := p.waitExit(t, 10*time.Second); err != nil {
				t.Fatalf("exit: %v", err)
			}
			if p.log.Len() != 0 {
				t.Fatalf("also logged to stderr: %s", p.log)
			}
			return
		}
	}
	t.Fatalf("no 'Server is ready' over syslog; got %q", got)
}

// TestBinarySignalWithoutPid: --signal without a pid finds the running server by the
// executable's name as nats-server does (pgrep), refuses when several run, says when none
// does, and "pid*" signals every match. The binary runs under a name of its own so servers
// other tests start at the same time are never matched.
func TestBinarySignalWithoutPid(t *testing.T) {
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("no pgrep on this machine")
	}
	name := fmt.Sprintf("nsig%d", os.Getpid()%100000)
	bin := filepath.Join(t.TempDir(), name)
	src, err := os.ReadFile(natsdBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	signal := func(arg string) (string, error) {
		out, err := exec.Command(bin, "--signal", arg).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	start := func() *proc {
		port := freePort(t)
		return startProc(t, bin, port, nil, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	}

	if out, err := signal("reload"); err == nil || !strings.Contains(out, "no "+name+" processes running") {
		t.Fatalf("none running: %q %v", out, err)
	}
	if out, err := signal("reload=12x"); err == nil || !strings.Contains(out, "invalid pid: 12x") {
		t.Fatalf("bad pid: %q %v", out, err)
	}
	a, b := start(), start()
	out, err := signal("ldm")
	if err == nil || !strings.Contains(out, "multiple "+name+" processes running:") ||
		!strings.Contains(out, strconv.Itoa(a.cmd.Process.Pid)) || !strings.Contains(out, strconv.Itoa(b.cmd.Process.Pid)) {
		t.Fatalf("two running: %q %v", out, err)
	}
	// "pid*" with the whole pid matches just that server: lame duck with no clients exits.
	if out, err := signal("ldm=" + strconv.Itoa(a.cmd.Process.Pid) + "*"); err != nil {
		t.Fatalf("glob: %q %v", out, err)
	}
	if err := a.waitExit(t, 10*time.Second); err != nil {
		t.Fatalf("exit after ldm: %v\n%s", err, a.log)
	}
	// One left: no pid needed.
	if out, err := signal("quit"); err != nil {
		t.Fatalf("one running: %q %v", out, err)
	}
	if err := b.waitExit(t, 10*time.Second); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Fatalf("exit after quit: %v\n%s", err, b.log)
	}
}

// TestReplySpinSetting: --reply_spin and the reply_spin key give a duration, where 0 means
// never (Options' zero value is the default).
func TestReplySpinSetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		conf string
		want time.Duration
	}{
		{want: 0},
		{args: []string{"--reply_spin", "50us"}, want: 50 * time.Microsecond},
		{args: []string{"--reply_spin=0"}, want: -1},
		{conf: "reply_spin: 1ms\n", want: time.Millisecond},
		{conf: "reply_spin: 0s\n", want: -1},
		{args: []string{"--reply_spin", "0"}, conf: "reply_spin: 1ms\n", want: -1},
	} {
		args := tc.args
		if tc.conf != "" {
			f := filepath.Join(t.TempDir(), "c.conf")
			if err := os.WriteFile(f, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append([]string{"-c", f}, args...)
		}
		o, _, err := parseFlags(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if o.ReplySpin != tc.want {
			t.Errorf("%v %q: ReplySpin %v, want %v", tc.args, tc.conf, o.ReplySpin, tc.want)
		}
	}
	if _, _, err := parseFlags([]string{"--reply_spin", "soon"}); err == nil {
		t.Error("--reply_spin soon parsed")
	}
}
