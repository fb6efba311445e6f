// Package packaging tests what the repository ships besides the code: the Docker image's
// contents (built by the Dockerfile's own step, docker/build-rootfs.sh, since a Docker daemon
// is often unavailable), the systemd unit (with systemd-analyze verify where it exists) and
// make install.
package packaging

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	stampVersion = "9.9.9-pkgtest"
	stampCommit  = "c0ffee1"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if rootDir != "" {
		os.RemoveAll(rootDir)
	}
	os.Exit(code)
}

// rootfs runs the Dockerfile's build step into a temporary directory, once per test run,
// with a version and commit stamped as `make docker` stamps them.
func rootfs(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natsd-rootfs")
		if err != nil {
			rootErr = err
			return
		}
		rootDir = dir
		cmd := exec.Command("sh", "docker/build-rootfs.sh", dir)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "VERSION="+stampVersion, "COMMIT="+stampCommit)
		if out, err := cmd.CombinedOutput(); err != nil {
			rootErr = fmt.Errorf("docker/build-rootfs.sh: %v\n%s", err, out)
		}
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

// dockerfileArgs reads the JSON form of a Dockerfile instruction (ENTRYPOINT, CMD).
func dockerfileArgs(t *testing.T, instr string) []string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, instr+" "); ok {
			var args []string
			if err := json.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("%s is not in JSON form: %q", instr, line)
			}
			return args
		}
	}
	t.Fatalf("Dockerfile has no %s", instr)
	return nil
}

func TestImageLayout(t *testing.T) {
	dir := rootfs(t)
	if got := dockerfileArgs(t, "ENTRYPOINT"); len(got) != 1 || got[0] != "/nats-server" {
		t.Errorf("ENTRYPOINT %q, the official image's is [\"/nats-server\"]", got)
	}
	if got := dockerfileArgs(t, "CMD"); strings.Join(got, " ") != "--config nats-server.conf" {
		t.Errorf("CMD %q, the official image's is [\"--config\", \"nats-server.conf\"]", got)
	}
	for _, f := range []string{"nats-server", "nats-server.conf", "etc/nats/nats-server.conf"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("image lacks /%s: %v", f, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "natsd")); err != nil || l != "nats-server" {
		t.Errorf("/natsd should link to nats-server: %q %v", l, err)
	}

	// Static: no program interpreter, no shared libraries, so it runs on scratch.
	f, err := elf.Open(filepath.Join(dir, "nats-server"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has a PT_INTERP segment: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestImageServes runs the image's ENTRYPOINT and CMD as docker would (working directory /,
// here the build's root), with the ports moved off 4222/8222 so it can share the machine,
// then exercises the systemd unit's reload (SIGHUP) and stop (SIGUSR2, lame duck).
func TestImageServes(t *testing.T) {
	dir := rootfs(t)
	entry, cmdArgs := dockerfileArgs(t, "ENTRYPOINT"), dockerfileArgs(t, "CMD")
	port, mport := freePort(t), freePort(t)
	args := append(append(entry[1:], cmdArgs...), "-p", strconv.Itoa(port), "-m", strconv.Itoa(mport),
		"--lame_duck_duration", "3s", "--lame_duck_grace_period", "500ms")
	srv := exec.Command(filepath.Join(dir, entry[0]), args...)
	srv.Dir = dir
	var logs strings.Builder
	var logMu sync.Mutex
	srv.Stdout, srv.Stderr = lockedWriter{&logs, &logMu}, lockedWriter{&logs, &logMu}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer func() {
		_ = srv.Process.Kill()
		if t.Failed() {
			logMu.Lock()
			t.Logf("server output:\n%s", logs.String())
			logMu.Unlock()
		}
	}()

	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	ldm := make(chan struct{}, 1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		nc, err = nats.Connect(url, nats.NoReconnect(), nats.LameDuckModeHandler(func(*nats.Conn) {
			select {
			case ldm <- struct{}{}:
			default:
			}
		}))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("could not connect to the image's server: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()

	roundTrip := func() {
		t.Helper()
		sub, err := nc.SubscribeSync("pkg.test")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.Publish("pkg.test", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hello" {
			t.Fatalf("round trip: %v", err)
		}
	}
	roundTrip()

	// The stamped build identity, where monitoring tools read it.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/varz", mport))
	if err != nil {
		t.Fatal(err)
	}
	var varz struct {
		Version   string `json:"version"`
		GitCommit string `json:"git_commit"`
	}
	err = json.NewDecoder(resp.Body).Decode(&varz)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := "natsd-v" + stampVersion + "+" + stampCommit; varz.GitCommit != want || varz.Version != "2.15.2" {
		t.Errorf("/varz version %q git_commit %q, want 2.15.2 and %q", varz.Version, varz.GitCommit, want)
	}

	// ExecReload: SIGHUP reloads the config file and the server carries on.
	if err := srv.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	roundTrip()

	// KillSignal: SIGUSR2 is lame duck; the client is told, closed, and the server exits 0.
	if err := srv.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ldm:
	case <-time.After(5 * time.Second):
		t.Error("the client was not told of lame duck mode")
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("server exit after lame duck: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server still running 15 s after SIGUSR2 with a 3 s lame duck duration")
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "Git:      ["+stampCommit+"]") {
		t.Errorf("start-up log does not name the commit:\n%s", out)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestInstallAndUnit runs make install into a temporary PREFIX (so the installed unit's
// ExecStart names a binary that exists) and verifies the installed unit with systemd-analyze.
func TestInstallAndUnit(t *testing.T) {
	unit, err := os.ReadFile("natsd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/natsd -c ", "ExecReload=/bin/kill -s HUP $MAINPID",
		"KillSignal=SIGUSR2", "LimitNOFILE=", "Restart=on-failure", "User="} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("natsd.service lacks %q", want)
		}
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	prefix := filepath.Join(t.TempDir(), "prefix")
	cmd := exec.Command("make", "install", "PREFIX="+prefix, "BIN="+t.TempDir())
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "bin", "natsd")
	if out, err := exec.Command(bin, "-v").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "nats-server: v") {
		t.Fatalf("installed natsd -v: %q %v", out, err)
	}
	installed := filepath.Join(prefix, "lib", "systemd", "system", "natsd.service")
	b, err := os.ReadFile(installed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nExecStart="+bin+" -c ") {
		t.Fatalf("installed unit's ExecStart does not name %s:\n%s", bin, b)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit was not verified")
	}
	out, err := exec.Command(analyze, "verify", installed).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
