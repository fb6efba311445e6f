package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/natsd/natsd/server"
)

// The operator's day-one toolkit: the nats CLI's system-account commands, run against natsd
// and nats-server with the same configuration, must give the same answers.
const sysConf = `
listen: "127.0.0.1:-1"
accounts {
  SYS { users: [{user: sys, password: pass}] }
  A { users: [{user: a, password: a}] }
}
system_account: SYS
`

// natsCLI is the nats CLI the Makefile installs (make tools): NATS_CLI, or .cache/tools/nats.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NATS_CLI"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../.cache/tools/nats")
	if _, err := os.Stat(p); err != nil {
		t.Skip("the nats CLI is not installed: run `make tools` (make test does)")
	}
	return p
}

// startConfigured starts target name from a config file body; it returns the client URL.
func startConfigured(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	switch name {
	case "nats-server":
		o, err := natsserver.ProcessConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		o.NoSigs, o.NoLog = true, true
		s, err := natsserver.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(5 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s.ClientURL()
	default:
		o := &server.Options{}
		if _, err := o.ProcessConfigFile(path); err != nil {
			t.Fatal(err)
		}
		o.NoSigs, o.NoLog = true, true
		o.Engine = os.Getenv("NATSD_ENGINE")
		s, err := server.New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		return s.ClientURL()
	}
}

// cli runs the nats CLI against url as user; it fails the test if the command does.
func cli(t *testing.T, url, user, pass string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append([]string{"--server", url, "--user", user, "--password", pass, "--timeout", "1s"}, args...)
	cmd := exec.CommandContext(ctx, natsCLI(t), all...)
	cmd.Env = append(os.Environ(), "NATS_CONTEXT=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// labels are the "Label: value" lines of the CLI's text output, with values that differ
// between any two servers (ids, times, addresses, sizes) blanked.
func labels(out string, keep ...string) []string {
	var ls []string
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || strings.Contains(k, " ") && len(k) > 40 || natsdOnly[k] {
			continue
		}
		if kept[k] {
			ls = append(ls, k+": "+strings.TrimSpace(v))
		} else {
			ls = append(ls, k+":")
		}
	}
	return ls
}

// natsdOnly are fields natsd adds on purpose: its own build (nats-server built from the
// module proxy has no commit), and nats-server's JetStream feature flags natsd does not have.
var natsdOnly = map[string]bool{"Git Commit": true, "git_commit": true, "feature_flags": true}

func TestCLISystemAccount(t *testing.T) {
	type answers struct {
		ping                    string
		accountSys, accountUser []string
		info                    []string
		list, conns, accounts   []string
		request                 map[string][]string
		events                  []string
	}
	got := map[string]*answers{}
	for _, name := range []string{"nats-server", "natsd"} {
		if !targetSelected(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			u := startConfigured(t, name, sysConf)
			// nats events prints what happens from here on.
			ectx, ecancel := context.WithCancel(context.Background())
			var evOut bytes.Buffer
			ev := exec.CommandContext(ectx, natsCLI(t), "--server", u, "--user", "sys", "--password", "pass", "events", "--json")
			ev.Env = append(os.Environ(), "NATS_CONTEXT=", "HOME="+t.TempDir())
			ev.Stdout, ev.Stderr = &evOut, &evOut
			if err := ev.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { ecancel(); _ = ev.Wait() }()
			time.Sleep(500 * time.Millisecond)

			nc, err := nats.Connect(u, nats.UserInfo("a", "a"), nats.Name("app"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.SubscribeSync("orders.>"); err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish("orders.1", []byte("x")); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()

			a := &answers{request: map[string][]string{}}
			got[name] = a
			a.ping = regexp.MustCompile(`(?m)^\d+ replies.*$`).FindString(cli(t, u, "sys", "pass", "server", "ping"))
			keepAcct := []string{"User", "Account", "System Account", "Expires", "Headers Supported", "Maximum Payload", "TLS Connection"}
			a.accountSys = labels(cli(t, u, "sys", "pass", "account", "info"), keepAcct...)
			a.accountUser = labels(cli(t, u, "a", "a", "account", "info"), keepAcct...)
			a.info = labels(cli(t, u, "sys", "pass", "server", "info"), "Version", "Auth Required", "TLS Required",
				"Maximum Connections", "Maximum Payload", "Write Deadline", "Cluster", "JetStream")

			var list []natsserver.ServerStatsMsg
			decode(t, cli(t, u, "sys", "pass", "server", "list", "--json"), &list)
			for _, m := range list {
				// The CLI's own connection is in SYS, the app's in A.
				a.list = append(a.list, "connections="+itoa(m.Stats.Connections), "active_accounts="+itoa(m.Stats.ActiveAccounts))
			}
			var conns []*natsserver.ConnInfo
			decode(t, cli(t, u, "sys", "pass", "server", "report", "connections", "--json"), &conns)
			for _, c := range conns {
				a.conns = append(a.conns, c.Account+"/"+c.Name+"/subs="+itoa(int(c.NumSubs)))
			}
			sort.Strings(a.conns)
			var accs []map[string]any
			decode(t, cli(t, u, "sys", "pass", "server", "report", "accounts", "--json"), &accs)
			for _, ac := range accs {
				a.accounts = append(a.accounts, keysOf(ac)...)
			}
			for _, kind := range []string{"variables", "connections", "subscriptions", "accounts", "routes", "gateways", "leafnodes"} {
				var resp []map[string]any
				out := cli(t, u, "sys", "pass", "server", "request", kind)
				decode(t, "["+strings.ReplaceAll(strings.TrimSpace(out), "}\n{", "},{")+"]", &resp)
				for _, r := range resp {
					if d, ok := r["data"].(map[string]any); ok {
						for _, k := range keysOf(d) {
							if !natsdOnly[k] {
								a.request[kind] = append(a.request[kind], k)
							}
						}
					}
				}
			}
			nc.Close()
			time.Sleep(500 * time.Millisecond)
			ecancel()
			_ = ev.Wait()
			// Every connection of the test's own (the app, each CLI command) comes and goes,
			// in the order the servers report them.
			dec := json.NewDecoder(strings.NewReader(evOut.String()))
			for {
				var e struct {
					Type   string `json:"type"`
					Client struct {
						Acc, User, Name string
						ID              uint64
					} `json:"client"`
				}
				if err := dec.Decode(&e); err != nil {
					break
				}
				if strings.HasPrefix(e.Type, "io.nats.server.advisory.v1.client_") {
					c := e.Client
					a.events = append(a.events, strings.TrimPrefix(e.Type, "io.nats.server.advisory.v1.")+" "+c.Acc+"/"+c.User+"/"+c.Name)
				}
			}
			// Whether the events command hears its own connection announced is a race in
			// either server: start from the app's.
			for i, e := range a.events {
				if e == "client_connect A/a/app" {
					a.events = a.events[i:]
					break
				}
			}
			if len(a.events) == 0 || a.events[0] != "client_connect A/a/app" {
				t.Fatalf("nats events did not print the app's connection:\n%s", evOut.String())
			}
			sort.Strings(a.events) // connections that close together are reported in either order
		})
	}
	ref, nd := got["nats-server"], got["natsd"]
	if ref == nil || nd == nil {
		return
	}
	check := func(what string, want, have any) {
		t.Helper()
		wb, _ := json.Marshal(want)
		hb, _ := json.Marshal(have)
		if string(wb) != string(hb) {
			t.Errorf("%s:\nnats-server %s\nnatsd       %s", what, wb, hb)
		}
	}
	check("server ping", ref.ping != "", nd.ping != "")
	check("account info (system user)", ref.accountSys, nd.accountSys)
	check("account info (user)", ref.accountUser, nd.accountUser)
	check("server info", ref.info, nd.info)
	check("server list", ref.list, nd.list)
	check("server report connections", ref.conns, nd.conns)
	check("server report accounts", ref.accounts, nd.accounts)
	for kind := range ref.request {
		check("server request "+kind, ref.request[kind], nd.request[kind])
	}
	check("nats events", ref.events, nd.events)
}

func decode(t *testing.T, out string, v any) {
	t.Helper()
	i := strings.IndexAny(out, "[{")
	if i < 0 || json.Unmarshal([]byte(out[i:]), v) != nil {
		t.Fatalf("not JSON: %q", out)
	}
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestCLIServerAccountPurge: `nats server account purge` from the system account deletes an
// account's streams, on both servers alike, and the account can make streams again.
func TestCLIServerAccountPurge(t *testing.T) {
	var ref []string
	for _, name := range []string{"nats-server", "natsd"} {
		t.Run(name, func(t *testing.T) {
			conf := `
listen: "127.0.0.1:-1"
jetstream { store_dir: ` + strconv.Quote(t.TempDir()) + ` }
accounts {
  SYS { users: [{user: sys, password: pass}] }
  A { jetstream: enabled, users: [{user: a, password: a}] }
}
system_account: SYS
`
			u := startConfigured(t, name, conf)
			cli(t, u, "a", "a", "stream", "add", "X", "--subjects", "x", "--defaults")
			cli(t, u, "a", "a", "stream", "add", "Y", "--subjects", "y", "--defaults", "--storage", "memory")
			got := []string{
				strings.TrimSpace(cli(t, u, "sys", "pass", "server", "account", "purge", "A", "--force")),
				strings.TrimSpace(cli(t, u, "a", "a", "stream", "ls", "--names")),
			}
			cli(t, u, "a", "a", "stream", "add", "X", "--subjects", "x", "--defaults")
			got = append(got, strings.TrimSpace(cli(t, u, "a", "a", "stream", "ls", "--names")))
			if ref == nil {
				ref = got
			} else if !slices.Equal(got, ref) {
				t.Errorf("got %q, nats-server said %q", got, ref)
			}
			t.Logf("%q", got)
		})
	}
}
