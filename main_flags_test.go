package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// flagsUsed collects the flags a test passed, to check that every flag of nats-server 2.15.2
// was tried.
type flagsUsed map[string]bool

func (u flagsUsed) add(args ...string) []string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || len(a) < 2 || (a[1] >= '0' && a[1] <= '9') {
			continue // a value (-1 included)
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		u[name] = true
	}
	return args
}

// natsServerFlags lists every flag nats-server 2.15.2 defines (its ConfigureOptions).
func natsServerFlags(t *testing.T) []string {
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	noop := func() {}
	if _, err := natsserver.ConfigureOptions(fs, nil, noop, noop, noop); err != nil {
		t.Fatal(err)
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// field reads a dotted field path from an Options value (natsd's or nats-server's, whose
// field names natsd follows); a *tls.Config reads as whether it is set.
func field(v any, path string) any {
	rv := reflect.ValueOf(v).Elem()
	for _, name := range strings.Split(path, ".") {
		rv = rv.FieldByName(name)
		if !rv.IsValid() {
			return fmt.Sprintf("<no field %s>", path)
		}
	}
	if c, ok := rv.Interface().(*tls.Config); ok {
		return c != nil
	}
	return rv.Interface()
}

// getJSON reads a monitoring endpoint, waiting for the port to open (it may come up after the
// client port).
func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get(url); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return m
}

// readINFO reads the INFO a client gets first (in the clear, also with TLS on).
func readINFO(t *testing.T, port int) map[string]any {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBinaryEveryFlag runs natsd with every flag nats-server 2.15.2 defines: each lands in the
// same option as nats-server's ConfigureOptions puts it (compared field by field), the running
// binary shows it applied where that is cheap to see (/varz, INFO, the log, files, ports), and
// the one natsd does not build (-ms/--https_port) is refused with the sentence that names it,
// or ignored with a warning under --allow_unsupported. The test fails if nats-server gains a
// flag this test does not try.
func TestBinaryEveryFlag(t *testing.T) {
	bin := natsdBin(t)
	used := flagsUsed{}
	cert, key, ca := mustAbs(t, "server/testdata/certs/server-cert.pem"), mustAbs(t, "server/testdata/certs/server-key.pem"), mustAbs(t, "server/testdata/certs/ca.pem")

	// 1. Parsing: the option each flag sets, as nats-server sets it.
	cases := []struct {
		args   []string
		fields []string
	}{
		{[]string{"-a", "10.0.0.1"}, []string{"Host"}},
		{[]string{"--addr", "10.0.0.2"}, []string{"Host"}},
		{[]string{"--net", "10.0.0.3"}, []string{"Host"}},
		{[]string{"-p", "1234"}, []string{"Port"}},
		{[]string{"--port", "-1"}, []string{"Port"}},
		{[]string{"-n", "n1"}, []string{"ServerName"}},
		{[]string{"--name", "n2"}, []string{"ServerName"}},
		{[]string{"--server_name", "n3"}, []string{"ServerName"}},
		{[]string{"-P", "/run/a.pid"}, []string{"PidFile"}},
		{[]string{"--pid", "/run/b.pid"}, []string{"PidFile"}},
		{[]string{"-m", "8222"}, []string{"HTTPPort"}},
		{[]string{"--http_port", "-1"}, []string{"HTTPPort"}},
		{[]string{"-ms", "8443"}, []string{"HTTPSPort"}},
		{[]string{"--https_port", "8444"}, []string{"HTTPSPort"}},
		{[]string{"--client_advertise", "adv:1"}, []string{"ClientAdvertise"}},
		{[]string{"--ports_file_dir", "/tmp/pf"}, []string{"PortsFileDir"}},
		{[]string{"-l", "/tmp/a.log"}, []string{"LogFile"}},
		{[]string{"--log", "/tmp/b.log"}, []string{"LogFile"}},
		{[]string{"-T=false"}, []string{"Logtime"}},
		{[]string{"--logtime=false"}, []string{"Logtime"}},
		{[]string{"--logtime_utc"}, []string{"LogtimeUTC"}},
		{[]string{"-s"}, []string{"Syslog"}},
		{[]string{"--syslog"}, []string{"Syslog"}},
		{[]string{"-r", "udp://127.0.0.1:514"}, []string{"RemoteSyslog"}},
		{[]string{"--remote_syslog", "tcp://127.0.0.1:514"}, []string{"RemoteSyslog"}},
		{[]string{"-D"}, []string{"Debug", "Trace"}},
		{[]string{"--debug"}, []string{"Debug", "Trace"}},
		{[]string{"-V"}, []string{"Debug", "Trace"}},
		{[]string{"--trace"}, []string{"Debug", "Trace"}},
		{[]string{"-VV"}, []string{"Debug", "Trace"}}, // nats-server also traces its system account
		{[]string{"-DV"}, []string{"Debug", "Trace"}},
		{[]string{"-DVV"}, []string{"Debug", "Trace"}},
		{[]string{"--log_size_limit", "1000"}, []string{"LogSizeLimit"}},
		{[]string{"--max_traced_msg_len", "7"}, []string{"MaxTracedMsgLen"}},
		{[]string{"-js"}, []string{"JetStream"}},
		{[]string{"--jetstream"}, []string{"JetStream"}},
		{[]string{"-sd", "/tmp/s1"}, []string{"StoreDir"}},
		{[]string{"--store_dir", "/tmp/s2"}, []string{"StoreDir"}},
		{[]string{"--user", "u", "--pass", "p"}, []string{"Username", "Password"}},
		{[]string{"--auth", "tok"}, []string{"Authorization"}},
		{[]string{"--tls", "--tlscert", cert, "--tlskey", key}, []string{"TLSConfig", "TLSVerify"}},
		{[]string{"--tlsverify", "--tlscert", cert, "--tlskey", key, "--tlscacert", ca}, []string{"TLSConfig", "TLSVerify"}},
		{[]string{"--cluster", "nats://u:p@127.0.0.1:5555"}, []string{"Cluster.Host", "Cluster.Port", "Cluster.Username", "Cluster.Password"}},
		{[]string{"--cluster_listen", "nats://127.0.0.2:-1"}, []string{"Cluster.Host", "Cluster.Port"}},
		{[]string{"--cluster_name", "c1"}, []string{"Cluster.Name"}},
		{[]string{"--cluster_advertise", "adv:2"}, []string{"Cluster.Advertise"}},
		{[]string{"--no_advertise"}, []string{"Cluster.NoAdvertise"}},
		{[]string{"--connect_retries", "3"}, []string{"Cluster.ConnectRetries"}},
		{[]string{"--profile", "6060"}, []string{"ProfPort"}},
	}
	for _, tc := range cases {
		args := used.add(tc.args...)
		o, _, err := parseFlags(args)
		if err != nil {
			t.Errorf("natsd %v: %v", args, err)
			continue
		}
		fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		noop := func() {}
		n, err := natsserver.ConfigureOptions(fs, args, noop, noop, noop)
		if err != nil {
			t.Errorf("nats-server %v: %v", args, err)
			continue
		}
		for _, f := range tc.fields {
			if got, want := field(o, f), field(n, f); !reflect.DeepEqual(got, want) {
				t.Errorf("%v: %s = %v, nats-server %v", args, f, got, want)
			}
		}
	}
	// --routes needs a route listener, in both.
	args := used.add("--routes", "nats://a:1,nats://b:2", "--cluster", "nats://127.0.0.1:-1")
	o, _, err := parseFlags(args)
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	noop := func() {}
	n, nerr := natsserver.ConfigureOptions(fs, args, noop, noop, noop)
	if err != nil || nerr != nil || len(o.Cluster.Routes) != 2 || len(n.Routes) != 2 || o.Cluster.Routes[1].String() != n.Routes[1].String() {
		t.Errorf("--routes: natsd %v %v, nats-server %v %v", o.Cluster.Routes, err, n.Routes, nerr)
	}

	// 2. The commands: help, version, TLS help, -t, --signal.
	for _, a := range []string{"-h", "--help"} {
		out, code := runOut(t, bin, used.add(a)...)
		if code != 0 || !strings.Contains(out, "Usage: natsd") || !strings.Contains(out, "--allow_unsupported") || !strings.Contains(out, "--help_tls") {
			t.Errorf("%s: exit %d %q", a, code, out)
		}
	}
	for _, a := range []string{"-v", "--version"} {
		if out, code := runOut(t, bin, used.add(a)...); code != 0 || !strings.HasPrefix(out, "nats-server: v2.15.2\nnatsd: v") {
			t.Errorf("%s: exit %d %q", a, code, out)
		}
	}
	cmd := exec.Command(bin, used.add("--help_tls")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	help, err := cmd.Output()
	if err != nil || stderr.Len() != 0 || !strings.Contains(string(help), "tls {") {
		t.Errorf("--help_tls: %v %q (stderr %q)", err, help, stderr.String())
	}
	if ns, _ := filepath.Abs(".cache/tools/nats-server"); fileExists(ns) {
		// The same cipher suites and curves as nats-server's TLS help.
		nhelp, err := exec.Command(ns, "--help_tls").Output()
		if err != nil {
			t.Fatal(err)
		}
		names := func(b []byte) []string {
			var out []string
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.TrimSpace(l); regexp.MustCompile(`^(TLS_[A-Z0-9_]+|CurveP\d+|X25519\w*|SecP\w+)$`).MatchString(f) {
					out = append(out, f)
				}
			}
			slices.Sort(out)
			return out
		}
		if got, want := names(help), names(nhelp); !reflect.DeepEqual(got, want) || len(want) < 10 {
			t.Errorf("--help_tls lists %v, nats-server %v", got, want)
		}
	}
	good := tempConf(t, "port: -1\n")
	for _, args := range [][]string{{"-t", "-c", good}, {"-t", "--config", good}} {
		if out, code := runOut(t, bin, used.add(args...)...); code != 0 || !strings.Contains(out, "is valid (sha256:") {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}

	// 3. HTTPS monitoring is not built: refused, unless --allow_unsupported.
	refused := "natsd: flag -ms/--https_port (HTTPS monitoring) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it\n"
	for _, args := range [][]string{{"-ms", "8443"}, {"--https_port=8443"}, {"-ms", "8443", "-t", "-c", good}} {
		if out, code := runOut(t, bin, used.add(args...)...); code != 1 || out != refused {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}

	// 4. A server with most flags in their short forms.
	dir := t.TempDir()
	pidFile, logFile, sd := filepath.Join(dir, "natsd.pid"), filepath.Join(dir, "natsd.log"), filepath.Join(dir, "js")
	port, mport, pport := freePort(t), freePort(t), freePort(t)
	p := startProc(t, natsdBin(t), port, nil, used.add("-a", "127.0.0.1", "-p", strconv.Itoa(port), "-n", "flags-a",
		"-P", pidFile, "-m", strconv.Itoa(mport), "--client_advertise", "adv.example:4333",
		"--ports_file_dir", dir, "-l", logFile, "-T=false", "-D", "-V", "--log_size_limit", "10000000",
		"--max_traced_msg_len", "16", "-js", "-sd", sd, "--auth", "tok", "--profile", strconv.Itoa(pport))...)
	v := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/varz", mport))
	js, _ := v["jetstream"].(map[string]any)
	jsc, _ := js["config"].(map[string]any)
	if v["host"] != "127.0.0.1" || v["port"] != float64(port) || v["server_name"] != "flags-a" || v["http_port"] != float64(mport) ||
		v["auth_required"] != true || jsc["store_dir"] != filepath.Join(sd, "jetstream") {
		t.Errorf("/varz: host %v port %v name %v http_port %v auth %v jetstream %v", v["host"], v["port"], v["server_name"], v["http_port"], v["auth_required"], js)
	}
	if info := readINFO(t, port); info["host"] != "adv.example" || info["port"] != float64(4333) || info["auth_required"] != true {
		t.Errorf("INFO with --client_advertise and --auth: %v", info)
	}
	if b, err := os.ReadFile(pidFile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.cmd.Process.Pid) {
		t.Errorf("pid file: %q %v", b, err)
	}
	if !fileExists(filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), p.cmd.Process.Pid))) {
		t.Errorf("no ports file in %s", dir)
	}
	var resp *http.Response
	waitFor(t, "the profiling port", func() bool {
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pport))
		return err == nil
	})
	if resp.Body.Close(); resp.StatusCode != 200 {
		t.Errorf("--profile: %v", resp.Status)
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.Token("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("flags", []byte("0123456789abcdefXYZ")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	nc.Close()
	readLog := func() string { b, _ := os.ReadFile(logFile); return string(b) }
	waitFor(t, "the traced payload", func() bool { return strings.Contains(readLog(), "0123456789abcdef") })
	logText := readLog()
	noTime := regexp.MustCompile(`^\[\d+\] \[(INF|WRN|ERR|DBG|TRC)\] `)
	for _, l := range strings.Split(strings.TrimSpace(logText), "\n") {
		if !noTime.MatchString(l) {
			t.Errorf("-T=false: log line %q", l)
			break
		}
	}
	if !strings.Contains(logText, "[DBG] ") || !strings.Contains(logText, "[TRC] ") || strings.Contains(logText, "XYZ") || p.log.Len() != 0 {
		t.Errorf("-l/-D/-V/--max_traced_msg_len: log file:\n%s\nstderr:\n%s", logText, p.log)
	}
	if out, code := runOut(t, bin, used.add("-sl", "quit="+pidFile)...); code != 0 {
		t.Fatalf("-sl quit: exit %d %q", code, out)
	}
	if err := p.waitExit(t, 10*time.Second); err != nil {
		t.Errorf("after -sl quit: %v", err)
	}

	// 5. Another with the long forms, TLS, a user, a cluster, -DVV, UTC timestamps and
	// -ms under --allow_unsupported.
	port, mport, hport := freePort(t), freePort(t), freePort(t)
	var env []string
	zi := filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip")
	if fileExists(zi) {
		env = []string{"TZ=Asia/Tokyo", "ZONEINFO=" + zi}
	}
	p = startProc(t, natsdBin(t), port, env, used.add("--addr", "127.0.0.1", "--port", strconv.Itoa(port), "--name", "flags-b",
		"--http_port", strconv.Itoa(mport), "--https_port", strconv.Itoa(hport), "--allow_unsupported",
		"--tls", "--tlscert", cert, "--tlskey", key, "--tlsverify", "--tlscacert", ca, "--user", "u", "--pass", "p",
		"-DVV", "--logtime_utc", "--cluster", "nats://127.0.0.1:-1", "--cluster_name", "cfl", "--routes", "nats://127.0.0.1:1",
		"--cluster_advertise", "127.0.0.1:7777", "--no_advertise", "--connect_retries", "2")...)
	v = getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/varz", mport))
	cl, _ := v["cluster"].(map[string]any)
	if v["server_name"] != "flags-b" || v["https_port"] != float64(hport) || v["tls_required"] != true || v["tls_verify"] != true ||
		v["auth_required"] != true || cl["name"] != "cfl" || cl["addr"] != "127.0.0.1" || cl["cluster_port"] == nil ||
		!reflect.DeepEqual(cl["urls"], []any{"127.0.0.1:1"}) {
		t.Errorf("/varz: %v", v)
	}
	if info := readINFO(t, port); info["tls_required"] != true || info["tls_verify"] != true || info["auth_required"] != true {
		t.Errorf("INFO with --tlsverify and --user: %v", info)
	}
	waitFor(t, "the route dial", func() bool {
		return strings.Contains(p.log.String(), "Error trying to connect to route (attempt 1): dial tcp 127.0.0.1:1")
	})
	logText = p.log.String()
	if !strings.Contains(logText, "[WRN] flag -ms/--https_port (HTTPS monitoring) is not supported by natsd yet, ignored") ||
		!strings.Contains(logText, "[DBG] ") {
		t.Errorf("log:\n%s", logText)
	}
	if f := strings.Fields(logText); len(f) > 2 {
		ts, err := time.ParseInLocation("2006/01/02 15:04:05.000000", f[1]+" "+f[2], time.UTC)
		if d := time.Since(ts); err != nil || d < -time.Minute || d > time.Minute {
			t.Errorf("--logtime_utc: stamp %q is %v off UTC (%v)", f[1]+" "+f[2], d, err)
		}
	}
	if out, code := runOut(t, bin, used.add("--signal", "term="+strconv.Itoa(p.cmd.Process.Pid))...); code != 0 {
		t.Fatalf("--signal term: exit %d %q", code, out)
	}
	if err := p.waitExit(t, 10*time.Second); err != nil {
		t.Errorf("after --signal term: %v", err)
	}

	// Every nats-server flag was tried.
	for _, name := range natsServerFlags(t) {
		if !used[name] {
			t.Errorf("nats-server flag -%s is not tried by this test", name)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
