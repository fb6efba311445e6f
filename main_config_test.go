package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/server"
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

// With the opt-in the binary reports unsupported keys once, and reloads on --signal reload
// (SIGHUP) without dropping clients; a rejected reload is logged with nats-server's text.
func TestBinaryConfigReload(t *testing.T) {
	bin := natsdBin(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "natsd.pid")
	base := "listen: 127.0.0.1:-1\npid_file: \"" + pidFile + "\"\nallow_unsupported: true\nserver_tags: [\"a\"]\nping_interval: \"2m\"\n"
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
				if strings.Contains(l, `[WRN] config key "server_tags"`) && strings.Contains(l, "is not supported by natsd yet, ignored") {
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

// The cluster flags land where nats-server's ConfigureOptions puts them, over the file's
// cluster block, and fail with its texts.
func TestConfigClusterFlags(t *testing.T) {
	conf := tempConf(t, `cluster {
  name: file
  listen: 127.0.0.1:6333
  routes: ["nats://127.0.0.1:7000"]
  authorization { user: fu, password: fp }
  no_advertise: true
  connect_retries: 2
  advertise: "a:1"
}
`)
	bare := tempConf(t, "cluster { name: nolisten }\n")
	hostOnly := tempConf(t, "cluster { host: 127.0.0.1 }\n")
	cases := []struct {
		args []string
		err  string
	}{
		{args: []string{"--cluster", "nats://u:p@127.0.0.2:-1"}},
		{args: []string{"--cluster", "nats://127.0.0.2:6444"}},
		{args: []string{"--cluster_listen", "nats://127.0.0.2:6444", "-c", conf}}, // the file's user goes
		{args: []string{"--cluster", "nats://u2:p2@[::1]:6444", "-c", conf}},
		{args: []string{"--cluster", "", "-c", conf}}, // no cluster
		{args: []string{"-c", conf}},
		{args: []string{"--routes", "nats://a:1, nats://u:p@b:2", "-c", conf}},
		{args: []string{"--routes", "", "-c", conf}},
		{args: []string{"--routes", "nats://a:1", "--cluster", "nats://127.0.0.1:-1"}},
		{args: []string{"--routes", "nats://a:1", "-c", hostOnly}},
		{args: []string{"--cluster_name", "flag", "--cluster_advertise", "b:2", "--no_advertise=false", "--connect_retries", "9", "-c", conf}},
		{args: []string{"--cluster_name", "x", "--no_advertise", "--connect_retries", "3"}},
		{args: []string{"--cluster_name", "a b"}}, // refused when the server is created
		{args: []string{"--routes", "nats://a:1"}, err: "solicited routes require cluster capabilities, e.g. --cluster"},
		{args: []string{"--routes", "nats://a:1", "--cluster", ""}, err: "solicited routes require cluster capabilities, e.g. --cluster"},
		{args: []string{"--routes", "nats://a:1", "-c", bare}, err: "solicited routes require cluster capabilities, e.g. --cluster"},
		{args: []string{"--cluster", "nats://u@127.0.0.1:1"}, err: "expected cluster password to be set"},
		{args: []string{"--cluster", "bad"}, err: "missing port in address"},
		{args: []string{"--cluster", "nats://127.0.0.1:x"}, err: `parse "nats://127.0.0.1:x": invalid port ":x" after host`},
		{args: []string{"--cluster", "127.0.0.1:5555"}, err: `parse "127.0.0.1:5555": first path segment in URL cannot contain colon`},
		{args: []string{"--cluster", ":-1"}, err: `parse ":0": missing protocol scheme`},
	}
	type view struct {
		Name, Host, Advertise, User, Pass string
		Port, Retries                     int
		NoAdvertise                       bool
		Routes                            []string
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, _, err := parseFlags(tc.args)
			fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			noop := func() {}
			no, nerr := natsserver.ConfigureOptions(fs, tc.args, noop, noop, noop)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("natsd: %v, want %q", err, tc.err)
				}
				if nerr == nil || nerr.Error() != tc.err {
					t.Fatalf("nats-server: %v, want %q", nerr, tc.err)
				}
				return
			}
			if err != nil || nerr != nil {
				t.Fatalf("natsd: %v, nats-server: %v", err, nerr)
			}
			c, nc := o.Cluster, no.Cluster
			got := view{c.Name, c.Host, c.Advertise, c.Username, c.Password, c.Port, c.ConnectRetries, c.NoAdvertise, nil}
			want := view{nc.Name, nc.Host, nc.Advertise, nc.Username, nc.Password, nc.Port, nc.ConnectRetries, nc.NoAdvertise, nil}
			for _, u := range c.Routes {
				got.Routes = append(got.Routes, u.String())
			}
			for _, u := range no.Routes {
				want.Routes = append(want.Routes, u.String())
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("natsd:       %+v\nnats-server: %+v", got, want)
			}
		})
	}
	// Names are checked when the server is created, as in nats-server's NewServer.
	for name, want := range map[string]string{"a b": "cluster name cannot contain spaces", "_": "cluster name is reserved"} {
		o, _, err := parseFlags([]string{"--cluster", "nats://127.0.0.1:-1", "--cluster_name", name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := server.New(o); err == nil || err.Error() != want {
			t.Errorf("--cluster_name %q: %v, want %q", name, err, want)
		}
		fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
		noop := func() {}
		no, err := natsserver.ConfigureOptions(fs, []string{"--cluster", "nats://127.0.0.1:-1", "--cluster_name", name}, noop, noop, noop)
		if err != nil {
			t.Fatal(err)
		}
		no.NoSigs, no.NoLog = true, true
		if _, err := natsserver.NewServer(no); err == nil || err.Error() != want {
			t.Errorf("nats-server --cluster_name %q: %v, want %q", name, err, want)
		}
	}
	// nats-server keeps --routes entries that do not parse as nil URLs and crashes dialling
	// them; natsd refuses them.
	for _, r := range []string{"nats://a:1,,nats://b:2", "%zz", "nats://a:1,"} {
		if _, _, err := parseFlags([]string{"--cluster", "nats://127.0.0.1:-1", "--routes", r}); err == nil || !strings.Contains(err.Error(), "error parsing route url [") {
			t.Errorf("--routes %q: %v", r, err)
		}
	}
	// The flags stay on top of a reloaded file.
	_, cmd, err := parseFlags([]string{"-c", conf, "--cluster", "nats://127.0.0.3:6555", "--routes", "nats://r:1", "--cluster_name", "flag"})
	if err != nil {
		t.Fatal(err)
	}
	n := &server.Options{}
	if _, err := n.ProcessConfigFile(conf); err != nil {
		t.Fatal(err)
	}
	if err := cmd.reapply(n); err != nil {
		t.Fatal(err)
	}
	if c := n.Cluster; c.Host != "127.0.0.3" || c.Port != 6555 || c.Username != "" || c.Name != "flag" || len(c.Routes) != 1 || c.Routes[0].Host != "r:1" {
		t.Fatalf("re-applied: %+v", c)
	}
}

// The binary starts with a cluster configured, runs alone and says so once; -t reports a bad
// cluster block as nats-server -t does.
func TestBinaryClusterFlags(t *testing.T) {
	p := startBinary(t, "--cluster", "nats://127.0.0.1:-1", "--cluster_name", "c1", "--routes", "nats://127.0.0.1:1")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.log.String(), "Server is ready") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The flags make a cluster: the name and the route listener, and the route dialled.
	for _, want := range []string{"[INF] Cluster name is c1", "[INF] Listening for route connections on 127.0.0.1:",
		"Error trying to connect to route (attempt 1): dial tcp 127.0.0.1:1"} {
		for !strings.Contains(p.log.String(), want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(p.log.String(), want) {
			t.Fatalf("no %q in:\n%s", want, p.log)
		}
	}
	nc, err := nats.Connect(p.url())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()

	bin := natsdBin(t)
	ns, _ := filepath.Abs(".cache/tools/nats-server")
	if _, err := os.Stat(ns); err != nil {
		t.Skip("no nats-server binary in .cache/tools")
	}
	for _, body := range []string{
		"cluster {\n  port: -1\n  name: \"a b\"\n}\n",
		"cluster {\n  authorization { token: x }\n}\n",
		"cluster {\n  permissions { export: \"q.> grp\" }\n}\n",
		"cluster {\n  write_timeout: never\n}\n",
		"cluster {\n  port: -1\n  bogus: 1\n}\n",
		"cluster {\n  port: -1\n  ping_interval: \"1m\"\n}\n",
		"cluster {\n  port: -1\n  routes: [\"nats://a:1\", \"nats://a:1\"]\n}\n",
		"cluster {\n  port: -1\n  routes: [\"nats://a:1\"]\n  compression: s2_fast\n}\n",
	} {
		conf := tempConf(t, body)
		out, err := exec.Command(bin, "-t", "-c", conf).CombinedOutput()
		nout, nerr := exec.Command(ns, "-t", "-c", conf).CombinedOutput()
		if exitCode(err) != exitCode(nerr) {
			t.Fatalf("%s: natsd exit %d %q, nats-server exit %d %q", body, exitCode(err), out, exitCode(nerr), nout)
		}
		if err == nil {
			continue
		}
		// Same located reasons, in the same order (nats-server prefixes "nats-server: ").
		strip := func(b []byte) string {
			s, _, _ := strings.Cut(string(b), "\nUsage:") // natsd adds the usage text
			s = strings.TrimSpace(s)
			s = strings.TrimPrefix(strings.TrimPrefix(s, "natsd: "), "nats-server: ")
			return s
		}
		if strip(out) != strip(nout) {
			t.Fatalf("%s\nnatsd:       %q\nnats-server: %q", body, strip(out), strip(nout))
		}
	}
}
