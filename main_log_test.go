package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// refServerBin is the reference nats-server v2.15.2 binary; tests that need it skip without.
func refServerBin(t *testing.T) string {
	t.Helper()
	p, _ := filepath.Abs(".cache/tools/nats-server")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no reference nats-server binary in .cache/tools")
	}
	return p
}

// runBoth runs natsd and nats-server with args and returns their stdout, stderr and exit codes.
func runBoth(t *testing.T, args ...string) (nd, ns [3]string) {
	t.Helper()
	run := func(bin string) [3]string {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return [3]string{out.String(), errb.String(), strconv.Itoa(exitCode(err))}
	}
	return run(natsdBin(t)), run(refServerBin(t))
}

// TestBinaryErrorsLikeNatsServer: a bad config file, or an unknown command, prints the error
// alone ("natsd: <error>", nats-server's "nats-server: <error>") and exits 1; a flag that does
// not parse is reported as Go's flag package words it, followed by the usage on stdout, and
// exits 0, as nats-server does.
func TestBinaryErrorsLikeNatsServer(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("port: 4222\nfoo {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-c", bad}, {"-c", filepath.Join(dir, "missing.conf")}, {"extra"}} {
		nd, ns := runBoth(t, args...)
		if nd[2] != "1" || ns[2] != "1" || nd[0] != "" || ns[0] != "" {
			t.Fatalf("%v: natsd exit %s stdout %q; nats-server exit %s stdout %q", args, nd[2], nd[0], ns[2], ns[0])
		}
		if !strings.HasPrefix(nd[1], "natsd: ") || strings.Count(nd[1], "\n") != 1 || strings.Contains(nd[1], "Usage") {
			t.Fatalf("%v: natsd stderr %q (nats-server: %q)", args, nd[1], ns[1])
		}
	}
	nd, ns := runBoth(t, "extra")
	if strings.TrimPrefix(nd[1], "natsd: ") != strings.TrimPrefix(ns[1], "nats-server: ") {
		t.Fatalf("natsd %q, nats-server %q", nd[1], ns[1])
	}
	for _, args := range [][]string{{"--bogus"}, {"-p", "abc"}} {
		nd, ns := runBoth(t, args...)
		if nd[2] != ns[2] || nd[1] != ns[1] {
			t.Fatalf("%v: natsd exit %s stderr %q; nats-server exit %s stderr %q", args, nd[2], nd[1], ns[2], ns[1])
		}
		if !strings.HasPrefix(nd[0], "\nUsage: natsd [options]\n") || !strings.HasPrefix(ns[0], "\nUsage: nats-server [options]\n") {
			t.Fatalf("%v: usage on stdout: natsd %.40q nats-server %.40q", args, nd[0], ns[0])
		}
	}
	nd, ns = runBoth(t, "-h")
	if nd[2] != "0" || ns[2] != "0" || nd[1] != "" || !strings.HasPrefix(nd[0], "\nUsage: natsd") {
		t.Fatalf("-h: natsd exit %s %.40q %q; nats-server exit %s", nd[2], nd[0], nd[1], ns[2])
	}
}

// TestBinarySignalLogsLikeNatsServer: with -D each trapped signal is logged once, at INFO, a
// reload logs nats-server's lines, and shutting down says "Initiating Shutdown...".
func TestBinarySignalLogsLikeNatsServer(t *testing.T) {
	conf := tempConf(t, "debug: false\n")
	head := regexp.MustCompile(`^\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} `)
	digest := regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	run := func(bin string) []string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		log := &lockedBuffer{}
		cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-D", "-c", conf)
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Kill()
			<-done
		}()
		wait := func(want string) {
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(log.String(), want) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: no %q in:\n%s", bin, want, log)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		wait("Server is ready")
		_ = cmd.Process.Signal(syscall.SIGHUP)
		wait("Reloaded server configuration")
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
			done <- nil
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit:\n%s", bin, log)
		}
		var out []string
		for _, line := range strings.Split(log.String(), "\n") {
			line = digest.ReplaceAllString(head.ReplaceAllString(line, ""), "sha256:X")
			for _, k := range []string{"Trapped", "Reload", "Initiating Shutdown", "Server Exiting"} {
				if strings.Contains(line, k) {
					out = append(out, line)
					break
				}
			}
		}
		return out
	}
	nd, ns := run(natsdBin(t)), run(refServerBin(t))
	if strings.Join(nd, "\n") != strings.Join(ns, "\n") {
		t.Fatalf("natsd:\n  %s\nnats-server:\n  %s", strings.Join(nd, "\n  "), strings.Join(ns, "\n  "))
	}
	if strings.Count(strings.Join(nd, "\n"), `Trapped "interrupt" signal`) != 1 {
		t.Fatalf("%q", nd)
	}
}
