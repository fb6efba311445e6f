package server

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/natsd/natsd/cluster"
)

// freePort is a TCP port nothing listens on (the moment it is returned).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A reload changes what nats-server lets it change in the cluster block and refuses the
// rest with its texts; both servers run each case from the same files.
func TestReloadClusterCompat(t *testing.T) {
	port, port2, dead := freePort(t), freePort(t), freePort(t)
	block := func(inner string) string {
		return fmt.Sprintf("accounts { A: {}, B: {} }\ncluster {\n  name: c1\n  host: 127.0.0.1\n  port: %d\n  routes: [\"nats://127.0.0.1:%d\"]\n  accounts: [A]\n%s}\n", port, dead, inner)
	}
	base := block("")
	cases := []struct {
		name, body, err string
	}{
		{"unchanged", base, ""},
		{"routes", strings.Replace(base, fmt.Sprintf("%d\"]", dead), fmt.Sprintf("%d\", \"nats://u:p@127.0.0.1:%d\"]", dead, dead), 1), ""},
		{"routes removed", strings.Replace(base, fmt.Sprintf("  routes: [\"nats://127.0.0.1:%d\"]\n", dead), "", 1), ""},
		{"permissions", block("  permissions { import: \"a.>\", export: \"b.>\" }\n"), ""},
		{"pool size", block("  pool_size: 5\n"), ""},
		{"compression", block("  compression: s2_fast\n"), ""},
		{"name", strings.Replace(base, "name: c1", "name: c2", 1), ""},
		{"advertise and others", block("  advertise: \"203.0.113.5:7000\"\n  no_advertise: true\n  connect_retries: 3\n  ping_interval: \"5s\"\n  write_deadline: \"2s\"\n  authorization { user: u, password: p }\n"), ""},
		{"pin an existing account", strings.Replace(base, "accounts: [A]", "accounts: [A, B]", 1), ""},
		{"unpin", strings.Replace(base, "  accounts: [A]\n", "", 1), ""},
		{"pin an unknown account", strings.Replace(base, "accounts: [A]", "accounts: [A, GONE]", 1),
			`unable to add account "GONE" to the list of dedicated routes: account missing`},
		{"pin an account added by the same reload", strings.Replace(strings.Replace(base, "accounts: [A]", "accounts: [A, NEW]", 1), "B: {} }", "B: {}, NEW: {} }", 1),
			`unable to add account "NEW" to the list of dedicated routes: account missing`},
		{"port", strings.Replace(base, fmt.Sprintf("port: %d", port), fmt.Sprintf("port: %d", port2), 1),
			fmt.Sprintf("config reload not supported for cluster port: old=%d, new=%d", port, port2)},
		{"host", strings.Replace(base, "host: 127.0.0.1", "host: 127.0.0.2", 1),
			"config reload not supported for cluster host: old=127.0.0.1, new=127.0.0.2"},
		{"cluster removed", "accounts { A: {}, B: {} }\n", "config reload not supported for cluster host: old=127.0.0.1, new="},
		{"bad advertise", block("  advertise: \"a:b:c\"\n"), "invalid Cluster.Advertise value of a:b:c, err=address a:b:c: too many colons"},
		{"negative pool with pinned", block("  pool_size: -1\n"), "pool_size cannot be negative if pinned accounts are specified"},
		{"name with spaces", strings.Replace(base, "name: c1", `name: "c 1"`, 1), "cluster name cannot contain spaces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forBoth(t, base, func(t *testing.T, cs *compatServer) {
				cs.write(tc.body)
				err := cs.reload()
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("reload refused: %v", err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("reload: %v, want %q", err, tc.err)
				}
			})
		})
	}
	// A cluster cannot be switched on by a reload either.
	t.Run("cluster added", func(t *testing.T) {
		forBoth(t, "", func(t *testing.T, cs *compatServer) {
			cs.write(fmt.Sprintf("cluster { host: 127.0.0.1, port: %d }\n", port))
			err := cs.reload()
			if want := "config reload not supported for cluster host: old=, new=127.0.0.1"; err == nil || err.Error() != want {
				t.Fatalf("reload: %v, want %q", err, want)
			}
		})
	})
}

// An accepted reload puts the new cluster options in place, adopts a new name, and hands the
// change to the route code's hook; without a hook nothing breaks. A refused one changes nothing.
func TestReloadClusterHook(t *testing.T) {
	base := "port: -1\naccounts { A: {} }\ncluster { name: c1, port: -1, routes: [\"nats://127.0.0.1:1\"] }\n"
	s, path := startFromConf(t, base, nil)
	if s.ClusterName() != "c1" {
		t.Fatalf("name %q", s.ClusterName())
	}
	// No hook yet: the options change all the same.
	rewrite(t, path, strings.Replace(base, "]", ", \"nats://127.0.0.1:2\"]", 1))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := s.Varz(); !slices.Equal(v.Cluster.URLs, []string{"127.0.0.1:1", "127.0.0.1:2"}) {
		t.Fatalf("varz urls %v", v.Cluster.URLs)
	}
	var calls []cluster.Change
	var oldName, newName string
	s.SetClusterReloadHook(func(old, new *cluster.Options, ch cluster.Change) {
		calls = append(calls, ch)
		oldName, newName = old.Name, new.Name
	})
	rewrite(t, path, "port: -1\naccounts { A: {} }\ncluster { name: c2, port: -1, routes: [\"nats://127.0.0.1:3\"], accounts: [A], pool_size: 2 }\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("hook called %d times", len(calls))
	}
	ch := calls[0]
	if oldName != "c1" || newName != "c2" || !ch.NameChanged || !ch.PoolSizeChanged ||
		!slices.Equal(ch.AccountsAdded, []string{"A"}) || len(ch.RoutesAdded) != 1 || len(ch.RoutesRemoved) != 2 {
		t.Fatalf("change %+v (%s -> %s)", ch, oldName, newName)
	}
	if s.ClusterName() != "c2" || s.getOpts().Cluster.PoolSize != 2 || s.Varz().Cluster.Name != "c2" {
		t.Fatalf("name %q pool %d", s.ClusterName(), s.getOpts().Cluster.PoolSize)
	}
	// Nothing changed: no call. A refused reload: no call, options kept.
	if err := s.Reload(); err != nil || len(calls) != 1 {
		t.Fatalf("unchanged reload: %v, %d calls", err, len(calls))
	}
	rewrite(t, path, "port: -1\ncluster { name: c3, port: 6999 }\n")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "config reload not supported for cluster port: old=-1, new=6999") {
		t.Fatalf("port change: %v", err)
	}
	if len(calls) != 1 || s.ClusterName() != "c2" {
		t.Fatalf("refused reload applied: %d calls, name %q", len(calls), s.ClusterName())
	}
}

// /varz "cluster" as nats-server fills it: only the name for a block without a port, the
// defaults for an enabled one, a made-up name when none is configured.
func TestVarzCluster(t *testing.T) {
	s, _ := startFromConf(t, "port: -1\ncluster { name: only }\n", nil)
	if v := s.Varz().Cluster; !(v.Name == "only" && v.Host == "" && v.Port == 0 && v.PoolSize == 0 && v.AuthTimeout == 0) {
		t.Fatalf("%+v", v)
	}
	s, _ = startFromConf(t, "port: -1\ncluster { port: -1, routes: [\"nats://u:secret@127.0.0.1:1\"], write_deadline: \"3s\", write_timeout: close, authorization { timeout: 1.5 } }\n", nil)
	v := s.Varz().Cluster
	// A random port shows as the one bound, as nats-server writes it back into its options.
	if len(v.Name) != 22 || v.Host != "0.0.0.0" || v.Port <= 0 || v.AuthTimeout != 1.5 || v.TLSTimeout != 2 ||
		v.TLSRequired || v.PoolSize != 3 || v.WriteDeadline.Seconds() != 3 || v.WriteTimeout != "close" ||
		!slices.Equal(v.URLs, []string{"127.0.0.1:1"}) {
		t.Fatalf("%+v", v)
	}
	s, _ = startFromConf(t, "port: -1\n", nil)
	if v := s.Varz().Cluster; v.Name != "" || v.Port != 0 || v.URLs != nil {
		t.Fatalf("%+v", v)
	}
}
