package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func tempConf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flags are parsed, the config file is loaded, then flags are applied again: flags win.
func TestConfigFlagPrecedence(t *testing.T) {
	conf := tempConf(t, "port: 5222\nhost: 127.0.0.2\ndebug: false\nmax_payload: 2MB\nserver_name: from_file\nping_max: 9\n")
	o, cmd, err := parseFlags([]string{"-p", "6222", "-c", conf, "-D", "--user", "u", "--pass", "p"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 6222 || o.Host != "127.0.0.2" || !o.Debug || o.MaxPayload != 2<<20 || o.ServerName != "from_file" ||
		o.MaxPingsOut != 9 || o.Username != "u" || o.Password != "p" || o.ConfigFile != conf {
		t.Fatalf("options = %+v", o)
	}
	// The same flags re-applied over a reloaded file.
	n := *o
	n.Port, n.Debug, n.MaxPingsOut = 1, false, 3
	if err := cmd.reapply(&n); err != nil {
		t.Fatal(err)
	}
	if n.Port != 6222 || !n.Debug || n.MaxPingsOut != 3 || n.Username != "u" {
		t.Fatalf("re-applied: port %d debug %v ping_max %d", n.Port, n.Debug, n.MaxPingsOut)
	}
	// -DV=false after a file that turns debug on.
	conf2 := tempConf(t, "debug: true\ntrace: true\n")
	o, _, err = parseFlags([]string{"-c", conf2, "-DV=false"})
	if err != nil || o.Debug || o.Trace {
		t.Fatalf("-DV=false: %v %v %v", o.Debug, o.Trace, err)
	}
	// --auth maps to the token.
	o, _, err = parseFlags([]string{"--auth", "tok"})
	if err != nil || o.Authorization != "tok" {
		t.Fatalf("--auth: %q %v", o.Authorization, err)
	}
}

func TestConfigTLSFlags(t *testing.T) {
	cert, key, ca := "server/testdata/certs/server-cert.pem", "server/testdata/certs/server-key.pem", "server/testdata/certs/ca.pem"
	o, _, err := parseFlags([]string{"--tlscert", cert, "--tlskey", key, "--tlscacert", ca, "--tlsverify"})
	if err != nil || o.TLSConfig == nil || !o.TLSVerify || o.TLSConfig.ClientCAs == nil || len(o.TLSConfig.Certificates) != 1 {
		t.Fatalf("tls flags: %+v %v", o.TLSConfig, err)
	}
	if _, _, err := parseFlags([]string{"--tls", "--tlscert", cert}); err == nil || err.Error() != "TLS Server private key must be present and valid" {
		t.Fatalf("err = %v", err)
	}
	// --tls=false turns off the file's TLS.
	conf := tempConf(t, "tls {\n cert_file: \""+mustAbs(t, cert)+"\"\n key_file: \""+mustAbs(t, key)+"\"\n}\n")
	o, _, err = parseFlags([]string{"-c", conf})
	if err != nil || o.TLSConfig == nil {
		t.Fatalf("file tls: %v", err)
	}
	o, _, err = parseFlags([]string{"-c", conf, "--tls=false"})
	if err != nil || o.TLSConfig != nil {
		t.Fatalf("--tls=false: %v %v", o.TLSConfig, err)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// -t: nats-server's messages and exit codes, through the built binary.
func TestBinaryConfigCheck(t *testing.T) {
	bin := natsdBin(t)
	good := tempConf(t, "port: 4222\nmax_payload: 1MB\n")
	out, err := exec.Command(bin, "-t", "-c", good).CombinedOutput()
	if err != nil || !regexp.MustCompile(`^natsd: configuration file \S+ is valid \(sha256:[0-9a-f]{64}\)\n$`).Match(out) {
		t.Fatalf("-t good: %v %q", err, out)
	}
	bad := tempConf(t, "port: 4222\nbogus: 1\n")
	for _, args := range [][]string{{"-t", "-c", bad}, {"-c", bad}} {
		out, err = exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(err); code != 1 || !strings.Contains(string(out), bad+`:2:1: unknown field "bogus"`) {
			t.Fatalf("%v: exit %d %q", args, code, out)
		}
	}
	warn := tempConf(t, "ping_interval: 30\n")
	out, err = exec.Command(bin, "-t", "-c", warn).CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "ping_interval should be converted to a duration") {
		t.Fatalf("-t with warning: %v %q", err, out)
	}
	out, err = exec.Command(bin, "-t").CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "must specify [-c, --config] option to check configuration file syntax") {
		t.Fatalf("-t alone: %v %q", err, out)
	}
}

// -t accepts a valid file with accounts (users, exports, imports, mappings, a system
// account) and reports a bad one located; starting with users in accounts is refused until
// the routing core lands.
func TestBinaryConfigCheckAccounts(t *testing.T) {
	bin := natsdBin(t)
	good := tempConf(t, `system_account: SYS
no_auth_user: guest
mappings { "old.*": [{destination: "new.$1", weight: 50%}] }
accounts {
  A: {
    users: [{user: a, password: a}, {user: guest}]
    exports: [{service: "a.req"}, {stream: "a.events.>", accounts: [B]}]
  }
  B: {
    users: [{user: b, password: b}]
    imports: [{service: {account: A, subject: "a.req"}}, {stream: {account: A, subject: "a.events.>"}, prefix: from_a}]
  }
  SYS: {}
}
`)
	out, err := exec.Command(bin, "-t", "-c", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is valid") {
		t.Fatalf("-t good: %v %q", err, out)
	}
	// The built binary enforces it: B's user reaches A's service and A's stream through its
	// imports, and the guest (no_auth_user, in A) answers.
	p := startBinary(t, "-c", good)
	svc, err := nats.Connect(p.url())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.Subscribe("a.req", func(m *nats.Msg) { _ = m.Respond([]byte("from A")) }); err != nil {
		t.Fatal(err)
	}
	_ = svc.Flush()
	b, err := nats.Connect(p.url(), nats.UserInfo("b", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	events, err := b.SubscribeSync("from_a.a.events.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Flush()
	resp, err := b.Request("a.req", nil, 5*time.Second)
	if err != nil || string(resp.Data) != "from A" {
		t.Fatalf("service import: %v %v", resp, err)
	}
	if err := svc.Publish("a.events.1", []byte("e")); err != nil {
		t.Fatal(err)
	}
	if m, err := events.NextMsg(5 * time.Second); err != nil || m.Subject != "from_a.a.events.1" {
		t.Fatalf("stream import: %v %v", m, err)
	}
	bad := tempConf(t, "accounts {\n  A: { exports: [{stream: x}] }\n  B: { imports: [{stream: {account: A, subject: y}}] }\n}\n")
	out, err = exec.Command(bin, "-t", "-c", bad).CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), bad+`:3:`) || !strings.Contains(string(out), `Error adding stream import "y": stream import not authorized`) {
		t.Fatalf("-t bad: exit %d %q", exitCode(err), out)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// The binary reports unsupported keys once, and reloads on --signal reload (SIGHUP) without
// dropping clients; a rejected reload is logged with nats-server's text.
func TestBinaryConfigReload(t *testing.T) {
	bin := natsdBin(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "natsd.pid")
	base := "listen: 127.0.0.1:-1\npid_file: \"" + pidFile + "\"\nserver_tags: [\"a\"]\nping_interval: \"2m\"\n"
	conf := tempConf(t, base)
	cmd := exec.Command(bin, "-c", conf)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	var sawUnsupported int
	waitLine := func(re string) string {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("natsd exited waiting for %q", re)
				}
				if strings.Contains(l, `"server_tags"`) && strings.Contains(l, "not supported yet") {
					sawUnsupported++
				}
				if m := regexp.MustCompile(re).FindStringSubmatch(l); m != nil {
					return m[len(m)-1]
				}
			case <-deadline:
				t.Fatalf("timeout waiting for %q", re)
			}
		}
	}
	url = "nats://" + waitLine(`Listening for client connections on (\S+)`)
	if sawUnsupported != 1 {
		t.Fatalf("server_tags reported %d times", sawUnsupported)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	signal := func() {
		t.Helper()
		if out, err := exec.Command(bin, "--signal", "reload="+pidFile).CombinedOutput(); err != nil {
			t.Fatalf("signal: %v %s", err, out)
		}
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(base, `"2m"`, `"1m"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	signal()
	waitLine(`\[INF\] Reloaded server configuration \(sha256:[0-9a-f]+\)`)
	if err := os.WriteFile(conf, []byte(base+"server_name: renamed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	signal()
	waitLine(`\[ERR\] Failed to reload server configuration: config reload not supported for ServerName`)
	if err := nc.Flush(); err != nil || !nc.IsConnected() {
		t.Fatalf("client dropped: %v", err)
	}
	pid, _ := os.ReadFile(pidFile)
	if _, err := strconv.Atoi(string(pid)); err != nil {
		t.Fatalf("pid file %q", pid)
	}
}
