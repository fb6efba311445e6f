package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/server"
)

// logProc is a server binary whose stderr is read while it runs.
type logProc struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan error
	url  string
}

// startLogged runs bin with args and waits until it listens for clients (the log names the
// address: the tests below use random ports).
func startLogged(t *testing.T, bin string, args ...string) *logProc {
	t.Helper()
	p := &logProc{cmd: exec.Command(bin, args...), log: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	m, _ := p.waitLog(t, 0, `Listening for client connections on (\S+)`)
	p.url = "nats://" + m[1]
	return p
}

// waitLog waits for a log line matching re after offset from; it returns the submatches and
// the offset past the line.
func (p *logProc) waitLog(t *testing.T, from int, re string) ([]string, int) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.log.String()
		if loc := rx.FindStringSubmatchIndex(s[from:]); loc != nil {
			var m []string
			for i := 0; i < len(loc); i += 2 {
				if loc[i] >= 0 {
					m = append(m, s[from+loc[i]:from+loc[i+1]])
				} else {
					m = append(m, "")
				}
			}
			end := from + loc[1]
			if nl := strings.IndexByte(s[end:], '\n'); nl >= 0 {
				end += nl + 1
			}
			return m, end
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server exited (%v) waiting for %q:\n%s", err, re, s)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", re, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *logProc) reload(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

func runOut(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), exitCode(err)
}

const unsupportedConf = `port: -1
gateway {
  name: A
  port: 7222
}
server_tags: ["a"]
jetstream {
  key: s3cret
}
`

// A setting natsd does not implement stops -t and start-up, every one named with its
// file:line:col, unless the operator opts in (--allow_unsupported, or allow_unsupported: true
// in the file; the flag wins); then -t passes and start-up goes ahead, each one warned about.
func TestBinaryUnsupportedConfigCheck(t *testing.T) {
	bin := natsdBin(t)
	conf := tempConf(t, unsupportedConf)
	refused := fmt.Sprintf(`natsd: config key "gateway" (%[1]s:2:1) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it
natsd: config key "server_tags" (%[1]s:6:1) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it
natsd: config key "jetstream.key" (%[1]s:8:3) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it
`, conf)
	for _, args := range [][]string{{"-t", "-c", conf}, {"-a", "127.0.0.1", "-c", conf}} {
		out, code := runOut(t, bin, args...)
		if code != 1 || out != refused {
			t.Fatalf("%v: exit %d\n%s\nwant:\n%s", args, code, out, refused)
		}
	}
	ignored := fmt.Sprintf(`natsd: config key "gateway" (%[1]s:2:1) is not supported by natsd yet, ignored
natsd: config key "server_tags" (%[1]s:6:1) is not supported by natsd yet, ignored
natsd: config key "jetstream.key" (%[1]s:8:3) is not supported by natsd yet, ignored
natsd: configuration file %[1]s is valid (sha256:`, conf)
	out, code := runOut(t, bin, "-t", "-c", conf, "--allow_unsupported")
	if code != 0 || !strings.HasPrefix(out, ignored) {
		t.Fatalf("-t --allow_unsupported: exit %d\n%s", code, out)
	}
	// The key does the same; the flag wins over it.
	keyed := tempConf(t, "allow_unsupported: true\n"+unsupportedConf)
	if out, code := runOut(t, bin, "-t", "-c", keyed); code != 0 || !strings.Contains(out, `"gateway" (`+keyed+`:3:1) is not supported by natsd yet, ignored`) {
		t.Fatalf("-t with allow_unsupported: true: exit %d\n%s", code, out)
	}
	if out, code := runOut(t, bin, "-t", "-c", keyed, "--allow_unsupported=false"); code != 1 || !strings.Contains(out, `is not supported by natsd yet; remove it`) {
		t.Fatalf("-t --allow_unsupported=false: exit %d\n%s", code, out)
	}
	// A file without such settings needs no opt-in, and one that is not a boolean is an error.
	if out, code := runOut(t, bin, "-t", "-c", tempConf(t, "allow_unsupported: 1\n")); code != 1 || !strings.Contains(out, `expected a boolean for "allow_unsupported", got integer`) {
		t.Fatalf("allow_unsupported: 1: exit %d\n%s", code, out)
	}
	// Started with the opt-in: the server serves and has said what it ignores.
	p := startLogged(t, bin, "-a", "127.0.0.1", "-c", keyed)
	for _, k := range []string{"gateway", "server_tags", "jetstream.key"} {
		if !strings.Contains(p.log.String(), fmt.Sprintf(`[WRN] config key %q (%s:`, k, keyed)) {
			t.Fatalf("no warning for %s:\n%s", k, p.log)
		}
	}
	nc, err := nats.Connect(p.url)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

// A reload that adds a setting natsd does not implement is refused and the server keeps
// serving with the configuration it had: with nats-server's text where nats-server refuses to
// reload that option too (compared with nats-server 2.15.2 when its binary is there), with
// natsd's sentence where nats-server would reload it. With allow_unsupported: true the reload
// goes ahead and warns about what it ignores, once.
func TestBinaryUnsupportedReload(t *testing.T) {
	bin := natsdBin(t)
	base := "listen: 127.0.0.1:-1\nmax_payload: 1MB\n"
	changed := "listen: 127.0.0.1:-1\nmax_payload: 2MB\n"
	gateway := "gateway {\n  name: A\n  port: 7222\n}\n"
	conf := tempConf(t, base)
	p := startLogged(t, bin, "-c", conf)
	nc, err := nats.Connect(p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	roundTrip := func() {
		t.Helper()
		sub, err := nc.SubscribeSync("rt")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.Publish("rt", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("the server stopped serving: %v", err)
		}
	}
	maxPayload := func() int64 {
		t.Helper()
		c, err := nats.Connect(p.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.MaxPayload()
	}
	off := 0
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write(changed + gateway)
	p.reload(t)
	m, end := p.waitLog(t, off, `\[ERR\] Failed to reload server configuration: (.*)`)
	off = end
	natsdRefusal := m[1]
	want := fmt.Sprintf(`config reload not supported for Gateway: config key "gateway" (%s:3:1) is not supported by natsd yet; remove it, or set allow_unsupported: true to ignore it`, conf)
	if natsdRefusal != want {
		t.Fatalf("refusal:\n%s\nwant:\n%s", natsdRefusal, want)
	}
	roundTrip()
	if mp := maxPayload(); mp != 1<<20 {
		t.Fatalf("max_payload %d after a refused reload", mp)
	}

	// server_tags nats-server reloads: natsd's own sentence.
	write(changed + "server_tags: [\"a\"]\n")
	p.reload(t)
	m, off = p.waitLog(t, off, `\[ERR\] Failed to reload server configuration: (.*)`)
	if want := fmt.Sprintf(`config key "server_tags" (%s:3:1) is not supported by natsd yet; remove it, or set allow_unsupported: true to ignore it`, conf); m[1] != want {
		t.Fatalf("refusal:\n%s\nwant:\n%s", m[1], want)
	}
	roundTrip()

	// With the opt-in: applied, the gateway ignored with a warning, once.
	write(changed + "allow_unsupported: true\n" + gateway)
	p.reload(t)
	m, off = p.waitLog(t, off, `\[(WRN|ERR)\] (.*)`)
	if want := fmt.Sprintf(`config key "gateway" (%s:4:1) is not supported by natsd yet, ignored`, conf); m[1] != "WRN" || m[2] != want {
		t.Fatalf("reload with the opt-in: %q", m[0])
	}
	_, off = p.waitLog(t, off, `\[INF\] Reloaded server configuration`)
	if mp := maxPayload(); mp != 2<<20 {
		t.Fatalf("max_payload %d after the reload", mp)
	}
	write(changed + "allow_unsupported: true\n\n" + gateway) // moved, not changed
	p.reload(t)
	m, _ = p.waitLog(t, off, `\[(WRN|ERR)\] .*|\[INF\] Reloaded server configuration`)
	if m[1] != "" {
		t.Fatalf("an unchanged gateway block warned again: %q", m[0])
	}
	roundTrip()

	// nats-server refuses the same reload with the same words up to its old/new values.
	ns, _ := filepath.Abs(".cache/tools/nats-server")
	if _, err := os.Stat(ns); err != nil {
		t.Skip("no nats-server binary in .cache/tools")
	}
	nconf := tempConf(t, base)
	np := startLogged(t, ns, "-c", nconf)
	if err := os.WriteFile(nconf, []byte(changed+gateway), 0o600); err != nil {
		t.Fatal(err)
	}
	np.reload(t)
	m, _ = np.waitLog(t, 0, `\[ERR\] Failed to reload server configuration: (.*)`)
	const prefix = "config reload not supported for Gateway: "
	if !strings.HasPrefix(m[1], prefix) || !strings.HasPrefix(natsdRefusal, prefix) {
		t.Fatalf("nats-server: %q\nnatsd:       %q", m[1], natsdRefusal)
	}
}

// -ms/--https_port replaces the file's https_port: only the flag is a setting to refuse, and
// -ms 0 leaves none; the flag is re-applied at reload.
func TestHTTPSFlagOverFile(t *testing.T) {
	conf := tempConf(t, "port: -1\nhttps_port: 8443\n")
	keys := func(args ...string) []string {
		t.Helper()
		o, cmd, err := parseFlags(append([]string{"-c", conf}, args...))
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, u := range o.Unsupported {
			ks = append(ks, u.String())
		}
		// The same after a reload.
		n := &server.Options{}
		if _, err := n.ProcessConfigFile(conf); err != nil {
			t.Fatal(err)
		}
		if err := cmd.reapply(n); err != nil {
			t.Fatal(err)
		}
		if len(n.Unsupported) != len(o.Unsupported) {
			t.Fatalf("%v: re-applied %q, at start %q", args, n.Unsupported, o.Unsupported)
		}
		return ks
	}
	if got := keys(); len(got) != 1 || got[0] != fmt.Sprintf(`config key "https_port" (%s:2:1)`, conf) {
		t.Fatalf("file: %q", got)
	}
	if got := keys("-ms", "9443"); len(got) != 1 || got[0] != "flag -ms/--https_port (HTTPS monitoring)" {
		t.Fatalf("-ms 9443: %q", got)
	}
	if got := keys("-ms", "0"); len(got) != 0 {
		t.Fatalf("-ms 0: %q", got)
	}
}
