package test

// The cluster harness: N server processes (each nats-server or the built natsd) started from
// generated config files, on loopback ports the harness picks, joined by routes. The tests in
// cluster_test.go run the same checks over every topology: a node's kind is the only thing that
// differs between all-nats-server, all-natsd and the two mixed clusters.
//
// Processes are the harness's own: it starts them, knows them by PID, stops only them (SIGTERM,
// then SIGKILL) and, on Linux, has the kernel kill them if the test binary dies first. Every
// process writes its output to a log file in the cluster's temporary directory; a failing test
// prints the logs of the cluster it used.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Generous bounds. They only end a wait that would otherwise hang; nothing asserts on timing.
const (
	ctStartWait   = 20 * time.Second // a process listens on its client and monitoring ports
	ctClusterWait = 5 * time.Second  // ... and then on its cluster port
	ctFormWait    = 30 * time.Second // every route of a cluster is up
	ctDeliverWait = 15 * time.Second // a message, reply or monitoring change arrives
	ctStopWait    = 5 * time.Second  // a SIGTERM'd process exits before it gets SIGKILL
)

type nodeKind string

const (
	kindNatsServer nodeKind = "nats-server"
	kindNatsd      nodeKind = "natsd"
)

// topology says which implementation runs each node: node i is kinds[i % len(kinds)], so node 0
// (the seed every other node routes to) is kinds[0].
type topology struct {
	name  string
	kinds []nodeKind
}

func (tp topology) kind(i int) nodeKind { return tp.kinds[i%len(tp.kinds)] }

var allTopologies = []topology{
	{"all-nats-server", []nodeKind{kindNatsServer}},
	{"all-natsd", []nodeKind{kindNatsd}},
	{"mixed-natsd-seed", []nodeKind{kindNatsd, kindNatsServer}},       // natsd, nats-server, natsd, nats-server
	{"mixed-nats-server-seed", []nodeKind{kindNatsServer, kindNatsd}}, // nats-server, natsd, nats-server, natsd
}

// selectedTopologies honours NATSD_CLUSTER_TOPOLOGIES (comma-separated names). Without it, all
// four, narrowed by NATSD_TARGETS (the in-process suite's selector) to the topologies whose every
// node is a selected target: `make test`'s second pass (NATSD_TARGETS=natsd, netpoll engine)
// runs all-natsd only.
func selectedTopologies(t *testing.T) []topology {
	t.Helper()
	if env := strings.TrimSpace(os.Getenv("NATSD_CLUSTER_TOPOLOGIES")); env != "" {
		var out []topology
	names:
		for _, name := range strings.Split(env, ",") {
			name = strings.TrimSpace(name)
			for _, tp := range allTopologies {
				if tp.name == name {
					out = append(out, tp)
					continue names
				}
			}
			var valid []string
			for _, tp := range allTopologies {
				valid = append(valid, tp.name)
			}
			t.Fatalf("NATSD_CLUSTER_TOPOLOGIES: unknown topology %q (valid: %s)", name, strings.Join(valid, ", "))
		}
		return out
	}
	targets := strings.TrimSpace(os.Getenv("NATSD_TARGETS"))
	if targets == "" {
		return allTopologies
	}
	sel := map[nodeKind]bool{}
	for _, n := range strings.Split(targets, ",") {
		sel[nodeKind(strings.TrimSpace(n))] = true
	}
	var out []topology
	for _, tp := range allTopologies {
		ok := true
		for _, k := range tp.kinds {
			ok = ok && sel[k]
		}
		if ok {
			out = append(out, tp)
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Binaries

// ctBinaries finds or builds each kind's binary once per TestCluster run.
type ctBinaries struct {
	dir   string
	mu    sync.Mutex
	paths map[nodeKind]string
	errs  map[nodeKind]error
}

func newCtBinaries(t *testing.T) *ctBinaries {
	return &ctBinaries{dir: t.TempDir(), paths: map[nodeKind]string{}, errs: map[nodeKind]error{}}
}

// path is the binary for kind:
//   - natsd: NATSD_BIN, or `go build` of this module into a temporary directory, with -race when
//     the tests run with -race (a data race in a natsd process fails the test that saw it);
//   - nats-server: NATS_SERVER, or .cache/tools/nats-server (`make tools`), or `go build` of
//     github.com/nats-io/nats-server/v2 at the version go.mod requires (v2.15.2).
func (b *ctBinaries) path(t *testing.T, kind nodeKind) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.paths[kind]; ok {
		return p
	}
	if err, ok := b.errs[kind]; ok {
		t.Fatal(err)
	}
	p, err := b.find(kind)
	if err != nil {
		b.errs[kind] = err
		t.Fatal(err)
	}
	t.Logf("%s binary: %s", kind, p)
	b.paths[kind] = p
	return p
}

func (b *ctBinaries) find(kind nodeKind) (string, error) {
	var env, pkg string
	var args []string
	switch kind {
	case kindNatsd:
		env, pkg = "NATSD_BIN", "github.com/natsd/natsd"
		if raceBuild {
			args = append(args, "-race")
		}
	case kindNatsServer:
		env, pkg = "NATS_SERVER", "github.com/nats-io/nats-server/v2"
	default:
		return "", fmt.Errorf("unknown node kind %q", kind)
	}
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %v", env, p, err)
		}
		return p, nil
	}
	if kind == kindNatsServer {
		if p, err := filepath.Abs("../.cache/tools/nats-server"); err == nil {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	out := filepath.Join(b.dir, string(kind))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, args...), "-o", out, pkg)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out, nil
}

// ---------------------------------------------------------------------------------------------
// Ports

var (
	ctPortsMu sync.Mutex
	ctPorts   = map[int]bool{} // handed out in this run: never handed out twice
)

// ctFreePorts returns n distinct free loopback ports, held open together while picked.
func ctFreePorts(t *testing.T, n int) []int {
	t.Helper()
	ctPortsMu.Lock()
	defer ctPortsMu.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100 {
			t.Fatal("no free loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		p := l.Addr().(*net.TCPAddr).Port
		if ctPorts[p] {
			continue
		}
		ctPorts[p] = true
		ports = append(ports, p)
	}
	return ports
}

// ---------------------------------------------------------------------------------------------
// Clusters and nodes

// clusterSpec is what every node of a cluster shares.
type clusterSpec struct {
	nodes    int      // started with the cluster; addNode adds more
	poolSize int      // cluster.pool_size; 0 = not written (nats-server's default, 3)
	pinned   []string // cluster.accounts
	auth     bool     // cluster.authorization {user: ctRouteUser, password: ctRoutePass}
	tls      bool     // cluster.tls {cert_file, key_file, ca_file, verify: true}: the cluster's PKI (cluster_tls_test.go)
	extra    string   // top-level config appended to every node's file (accounts, system_account)
	// node, when set, adjusts node i's own settings (routes, no_advertise, credentials).
	node func(i int, ns *nodeSpec)
}

// nodeSpec is one node's own part of the config.
type nodeSpec struct {
	routes      []int // the nodes its cluster.routes lists; default: every earlier node
	noAdvertise bool
	routePass   string // password in its route URLs and authorization (auth clusters); "" = right one
	untrusted   bool   // tls clusters: its certificate is from a CA the others do not trust
	compression string // cluster.compression; "" = not written (nats-server's default, accept)
}

const (
	ctRouteUser = "ruser"
	ctRoutePass = "rpass"
)

type testCluster struct {
	env   *topoEnv
	tag   string // what the cluster is for: "base", "pool", "auth" ...
	name  string // cluster.name
	spec  clusterSpec
	dir   string
	nodes []*clusterNode
	pki   *ctPKI // tls clusters: the certificates' files

	mu     sync.Mutex
	dumped bool
}

type clusterNode struct {
	c     *testCluster
	idx   int
	kind  nodeKind
	name  string // server_name
	spec  nodeSpec
	ports struct{ client, cluster, http int }
	conf  string
	log   string
	runs  int // times started

	mu      sync.Mutex
	proc    *nodeProc // the running process; nil when stopped
	lastPID int
	races   int // data race reports in its log already reported
}

type nodeProc struct {
	cmd       *exec.Cmd
	pid       int
	logOffset int64 // where this run's output starts in the log file
	done      chan struct{}
	err       error // Wait's result, once done is closed
}

// topoEnv is one topology's run: the binaries, the shared base cluster (started by the first
// test that needs it, stopped when the topology's test ends), and what broke it.
type topoEnv struct {
	topo   topology
	bins   *ctBinaries
	owner  *testing.T // the topology's test: owns the base cluster
	base   *testCluster
	broken string // set when the base cluster cannot form: later clusters fail at once
}

// cluster starts a cluster of its own for test t (stopped when t ends).
func (env *topoEnv) cluster(t *testing.T, tag string, spec clusterSpec) *testCluster {
	t.Helper()
	if env.broken != "" {
		t.Fatalf("%s: not starting the %s cluster: %s", env.topo.name, tag, env.broken)
	}
	c := env.newCluster(t, t, tag, spec)
	for i := 0; i < spec.nodes; i++ {
		c.addNode(t)
	}
	c.waitFormed(t)
	return c
}

// baseSpec is the shared cluster: three nodes, nats-server's default pooling, two accounts with
// a stream and a service exported from A to B, and a system account.
var baseSpec = clusterSpec{nodes: 3, extra: ctAccounts}

const ctAccounts = `
accounts {
  A: {
    users: [{user: a, password: a}]
    exports: [{stream: "feed.>"}, {service: "svc.>"}]
  }
  B: {
    users: [{user: b, password: b}]
    imports: [
      {stream: {account: A, subject: "feed.>"}}
      {service: {account: A, subject: "svc.>"}}
    ]
  }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
`

// baseCluster returns the topology's shared cluster, started on first use; a node an earlier
// test stopped is started again, and every route is up before it returns.
func (env *topoEnv) baseCluster(t *testing.T) *testCluster {
	t.Helper()
	if env.broken != "" {
		t.Fatalf("%s: %s", env.topo.name, env.broken)
	}
	formed := false
	defer func() {
		if !formed && env.broken == "" {
			env.broken = fmt.Sprintf("the base cluster did not form (first failure: %s)", t.Name())
		}
	}()
	if env.base == nil {
		c := env.newCluster(t, env.owner, "base", baseSpec)
		env.base = c
		for i := 0; i < baseSpec.nodes; i++ {
			c.addNode(t)
		}
	} else {
		env.base.attach(t)
		for _, n := range env.base.nodes {
			if !n.running() {
				n.start(t)
			}
		}
	}
	env.base.waitFormed(t)
	formed = true
	return env.base
}

// newCluster makes an empty cluster whose processes owner's end stops; t's failure (and owner's)
// prints the logs.
func (env *topoEnv) newCluster(t, owner *testing.T, tag string, spec clusterSpec) *testCluster {
	c := &testCluster{env: env, tag: tag, spec: spec, dir: owner.TempDir(),
		name: "ctest-" + tag + "-" + nuid.Next()[16:]}
	if spec.tls {
		c.pki = newCtPKI(t, c.dir)
	}
	owner.Cleanup(func() { c.stop(owner) })
	c.attach(t)
	return c
}

// attach prints, if t fails, what every node of the cluster logged while t ran.
func (c *testCluster) attach(t *testing.T) {
	from := map[*clusterNode]int64{}
	for _, n := range c.nodes {
		if fi, err := os.Stat(n.log); err == nil {
			from[n] = fi.Size()
		}
	}
	t.Cleanup(func() {
		c.checkRaces(t)
		if !t.Failed() {
			return
		}
		c.mu.Lock()
		c.dumped = true
		c.mu.Unlock()
		for _, n := range c.nodes {
			c.dumpLog(t, n, from[n], fmt.Sprintf("while %s ran", t.Name()))
		}
	})
}

// addNode starts one more node (the next index) and waits for its ports, not for its routes;
// adjust, if given, changes its own settings after the cluster's spec.node did.
func (c *testCluster) addNode(t *testing.T, adjust ...func(*nodeSpec)) *clusterNode {
	t.Helper()
	i := len(c.nodes)
	n := &clusterNode{c: c, idx: i, kind: c.env.topo.kind(i), name: fmt.Sprintf("%s-n%d", c.tag, i)}
	for j := 0; j < i; j++ {
		n.spec.routes = append(n.spec.routes, j)
	}
	if c.spec.node != nil {
		c.spec.node(i, &n.spec)
	}
	for _, f := range adjust {
		f(&n.spec)
	}
	n.conf = filepath.Join(c.dir, n.name+".conf")
	n.log = filepath.Join(c.dir, n.name+".log")
	c.nodes = append(c.nodes, n)
	n.start(t)
	return n
}

func (n *clusterNode) String() string { return fmt.Sprintf("%s (%s)", n.name, n.kind) }

func (n *clusterNode) clientURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.ports.client) }

func (n *clusterNode) routeURL(user, pass string) string {
	if user == "" {
		return fmt.Sprintf("nats://127.0.0.1:%d", n.ports.cluster)
	}
	return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, pass, n.ports.cluster)
}

// config is the node's nats-server config file (natsd reads the same file).
func (n *clusterNode) config() string {
	c := n.c
	var b strings.Builder
	fmt.Fprintf(&b, "# %s of cluster %s, written by test/cluster_harness_test.go\n", n, c.name)
	fmt.Fprintf(&b, "server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n\n", n.name, n.ports.client, n.ports.http)
	fmt.Fprintf(&b, "cluster {\n  name: %s\n  listen: 127.0.0.1:%d\n", c.name, n.ports.cluster)
	user, pass := "", ""
	if c.spec.auth {
		user, pass = ctRouteUser, ctRoutePass
		if n.spec.routePass != "" {
			pass = n.spec.routePass
		}
	}
	if len(n.spec.routes) > 0 {
		b.WriteString("  routes: [\n")
		for _, j := range n.spec.routes {
			fmt.Fprintf(&b, "    %s\n", c.nodes[j].routeURL(user, pass))
		}
		b.WriteString("  ]\n")
	}
	if c.spec.poolSize != 0 {
		fmt.Fprintf(&b, "  pool_size: %d\n", c.spec.poolSize)
	}
	if len(c.spec.pinned) > 0 {
		fmt.Fprintf(&b, "  accounts: [%s]\n", strings.Join(c.spec.pinned, ", "))
	}
	if n.spec.noAdvertise {
		b.WriteString("  no_advertise: true\n")
	}
	if n.spec.compression != "" {
		fmt.Fprintf(&b, "  compression: %s\n", n.spec.compression)
	}
	if c.spec.auth {
		fmt.Fprintf(&b, "  authorization {\n    user: %s\n    password: %s\n  }\n", user, pass)
	}
	if c.pki != nil {
		b.WriteString(c.pki.block(n.spec.untrusted))
	}
	b.WriteString("}\n")
	b.WriteString(c.spec.extra)
	return b.String()
}

func (n *clusterNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil
}

// pid is the running (or last) process's id, and whether it is running.
func (n *clusterNode) pid() (int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastPID, n.proc != nil
}

// start runs the node's process and waits until it listens on its client, monitoring and
// cluster ports. The first start picks the ports (again, if another process took one meanwhile);
// later starts reuse them and the same config file.
func (n *clusterNode) start(t *testing.T) {
	t.Helper()
	bin := n.c.env.bins.path(t, n.kind)
	for attempt := 1; ; attempt++ {
		first := n.runs == 0
		if first {
			p := ctFreePorts(t, 3)
			n.ports.client, n.ports.cluster, n.ports.http = p[0], p[1], p[2]
			if err := os.WriteFile(n.conf, []byte(n.config()), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		err := n.spawn(t, bin)
		if err == nil {
			err = n.waitListening()
		}
		if err == nil {
			n.runs++
			return
		}
		out := n.runLog()
		n.stop(t, true)
		if first && attempt < 3 && strings.Contains(out, "address already in use") {
			t.Logf("%s: a port was taken meanwhile, picking others", n)
			continue
		}
		t.Fatalf("%s: %v\n---- config %s ----\n%s", n, err, n.conf, n.config())
	}
}

func (n *clusterNode) spawn(t *testing.T, bin string) error {
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own copy
	args := []string{"-c", n.conf}
	if n.kind == kindNatsd {
		if e := os.Getenv("NATSD_ENGINE"); e != "" {
			args = append(args, "--engine", e)
		}
		if os.Getenv("NATSD_CLUSTER_DEBUG") != "" {
			args = append(args, "-D") // natsd's route decisions in the logs a failure prints
		}
	}
	fmt.Fprintf(f, "==== harness: run %d of %s: %s %s ====\n", n.runs+1, n, bin, strings.Join(args, " "))
	off, _ := f.Seek(0, io.SeekCurrent)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = n.c.dir
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &nodeProc{cmd: cmd, pid: cmd.Process.Pid, logOffset: off, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.proc, n.lastPID = p, p.pid
	n.mu.Unlock()
	return nil
}

// waitListening waits for the client and monitoring ports, then for the cluster port.
func (n *clusterNode) waitListening() error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	exited := func() error {
		select {
		case <-p.done:
			return fmt.Errorf("pid %d exited at start-up: %v", p.pid, p.err)
		default:
			return nil
		}
	}
	dialOK := func(port int) bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	deadline := time.Now().Add(ctStartWait)
	for {
		if err := exited(); err != nil {
			return err
		}
		if dialOK(n.ports.client) {
			if _, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/varz", n.ports.http)); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d: no client port 127.0.0.1:%d and /varz on 127.0.0.1:%d after %v",
				p.pid, n.ports.client, n.ports.http, ctStartWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(ctClusterWait)
	for !dialOK(n.ports.cluster) {
		if err := exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d serves clients but does not listen on its cluster port 127.0.0.1:%d "+
				"(%v after its client port opened): is the cluster block supported?", p.pid, n.ports.cluster, ctClusterWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// kill sends SIGKILL to the node's process (only it) and waits for it to be gone.
func (n *clusterNode) kill(t *testing.T) {
	t.Helper()
	n.stop(t, true)
}

// stop ends the node's process: SIGKILL at once when hard, else SIGTERM and SIGKILL after
// ctStopWait. It waits for the process to be reaped.
func (n *clusterNode) stop(t *testing.T, hard bool) {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	if !hard {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(ctStopWait):
			t.Logf("%s: pid %d still running %v after SIGTERM; sending SIGKILL", n, p.pid, ctStopWait)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s: pid %d did not die of SIGKILL", n, p.pid)
	}
}

// exitedUnexpectedly reports a process that ended while the harness thought it was running.
func (n *clusterNode) exitedUnexpectedly() error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) exited: %v", n, p.pid, p.err)
	default:
		return nil
	}
}

// runLog is the current (or last) run's output.
func (n *clusterNode) runLog() string {
	n.mu.Lock()
	var off int64
	if n.proc != nil {
		off = n.proc.logOffset
	}
	n.mu.Unlock()
	b, _ := os.ReadFile(n.log)
	if off > int64(len(b)) {
		off = 0
	}
	return string(b[off:])
}

// stop ends every node (SIGTERM first, so shutdown paths run too) and fails owner on a data race
// a natsd process reported.
func (c *testCluster) stop(owner *testing.T) {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop(owner, false) }()
	}
	wg.Wait()
	raced := c.checkRaces(owner)
	c.mu.Lock()
	dumped := c.dumped
	c.mu.Unlock()
	if owner.Failed() && !dumped && !raced {
		for _, n := range c.nodes {
			c.dumpLog(owner, n, 0, "")
		}
	}
}

// checkRaces fails t for each data race report (natsd built with -race) not reported yet.
func (c *testCluster) checkRaces(t *testing.T) bool {
	found := false
	for _, n := range c.nodes {
		b, _ := os.ReadFile(n.log)
		total := strings.Count(string(b), "WARNING: DATA RACE")
		n.mu.Lock()
		fresh := total - n.races
		n.races = total
		n.mu.Unlock()
		if fresh > 0 {
			found = true
			t.Errorf("%s reported %d data race(s)", n, fresh)
			c.dumpLog(t, n, 0, "data race")
		}
	}
	return found
}

// dumpLog prints n's log from offset from on (its last 200 lines).
func (c *testCluster) dumpLog(t *testing.T, n *clusterNode, from int64, why string) {
	b, _ := os.ReadFile(n.log)
	if from > int64(len(b)) {
		from = 0
	}
	pid, up := n.pid()
	state := "stopped"
	if up {
		state = "running"
	}
	if why != "" {
		why = ", " + why
	}
	t.Logf("---- %s of cluster %s: pid %d (%s), ports client %d cluster %d http %d; log %s%s ----\n%s",
		n, c.name, pid, state, n.ports.client, n.ports.cluster, n.ports.http, n.log, why, tail(string(b[from:]), 200))
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = append([]string{fmt.Sprintf("... (%d lines before)", len(parts)-lines)}, parts[len(parts)-lines:]...)
	}
	return strings.Join(parts, "\n")
}

// ---------------------------------------------------------------------------------------------
// Monitoring

var ctHTTP = &http.Client{Timeout: 5 * time.Second}

func httpGet(u string) ([]byte, error) {
	resp, err := ctHTTP.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return b, nil
}

func (n *clusterNode) monitor(path string, v any) error {
	b, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d%s", n.ports.http, path))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %v: %s", n, path, err, b)
	}
	return nil
}

type routezRoute struct {
	Rid          uint64   `json:"rid"`
	RemoteID     string   `json:"remote_id"`
	RemoteName   string   `json:"remote_name"`
	DidSolicit   bool     `json:"did_solicit"`
	IsConfigured bool     `json:"is_configured"`
	NumSubs      int      `json:"subscriptions"`
	Subs         []string `json:"subscriptions_list"`
	Account      string   `json:"account"`
	Compression  string   `json:"compression"`
}

type routez struct {
	ID        string        `json:"server_id"`
	Name      string        `json:"server_name"`
	NumRoutes int           `json:"num_routes"`
	Routes    []routezRoute `json:"routes"`
}

func (n *clusterNode) routez(t *testing.T, subs bool) *routez {
	t.Helper()
	var rz routez
	path := "/routez"
	if subs {
		path += "?subs=1"
	}
	if err := n.monitor(path, &rz); err != nil {
		t.Fatalf("%s /routez: %v", n, err)
	}
	return &rz
}

// serverID is the node's current server id (a new one each run) from /varz.
func (n *clusterNode) serverID() (string, error) {
	var v struct {
		ID string `json:"server_id"`
	}
	if err := n.monitor("/varz", &v); err != nil {
		return "", err
	}
	return v.ID, nil
}

// routesPerPeer is how many route connections nats-server keeps to each peer: pool_size (3 by
// default) plus one per pinned account, plus one for the system account, which is pinned
// whenever pooling is on; pool_size -1 turns pooling off: one route.
func (c *testCluster) routesPerPeer() int {
	if c.spec.poolSize < 0 {
		return 1
	}
	n := c.spec.poolSize
	if n == 0 {
		n = 3
	}
	n += len(c.spec.pinned)
	for _, a := range c.spec.pinned {
		if a == c.systemAccount() {
			return n
		}
	}
	return n + 1
}

// systemAccount is the system account's name: the configured one, or nats-server's default.
func (c *testCluster) systemAccount() string {
	if strings.Contains(c.spec.extra, "system_account: SYS") {
		return "SYS"
	}
	return "$SYS"
}

// running is the nodes whose processes the harness started and has not stopped.
func (c *testCluster) running() []*clusterNode {
	var out []*clusterNode
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// waitFormed waits until every running node has routesPerPeer routes to each other running node
// and none to anyone else, all to the peer's current server id (num_routes agreeing).
func (c *testCluster) waitFormed(t *testing.T) {
	t.Helper()
	nodes := c.running()
	c.waitRoutes(t, nodes, func(n *clusterNode) []*clusterNode {
		var peers []*clusterNode
		for _, m := range nodes {
			if m != n {
				peers = append(peers, m)
			}
		}
		return peers
	})
}

// waitRoutes waits until each node in nodes has exactly routesPerPeer routes to each of
// peers(node) and no others.
func (c *testCluster) waitRoutes(t *testing.T, nodes []*clusterNode, peers func(*clusterNode) []*clusterNode) {
	t.Helper()
	per := c.routesPerPeer()
	deadline := time.Now().Add(ctFormWait)
	var last []string
	for {
		last = last[:0]
		ids := map[string]string{}
		for _, n := range c.running() {
			if id, err := n.serverID(); err == nil {
				ids[n.name] = id
			}
		}
		for _, n := range nodes {
			if err := n.exitedUnexpectedly(); err != nil {
				t.Fatalf("cluster %s: %v", c.name, err)
			}
			if msg := n.routesState(ids, peers(n), per); msg != "" {
				last = append(last, msg)
			}
		}
		if len(last) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s (%s) did not form within %v:\n  %s", c.name, c.env.topo.name, ctFormWait, strings.Join(last, "\n  "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// routesState is "" when n's /routez shows exactly per routes to each peer (at its current id)
// and nothing else, or else what differs.
func (n *clusterNode) routesState(ids map[string]string, peers []*clusterNode, per int) string {
	var rz routez
	if err := n.monitor("/routez", &rz); err != nil {
		return err.Error()
	}
	want := map[string]bool{}
	var wantNames []string
	for _, p := range peers {
		want[p.name] = true
		wantNames = append(wantNames, p.name)
	}
	count := map[string]int{}
	var problems []string
	for _, r := range rz.Routes {
		count[r.RemoteName]++
		if !want[r.RemoteName] {
			problems = append(problems, fmt.Sprintf("unexpected route to %q (%s)", r.RemoteName, r.RemoteID))
		} else if id := ids[r.RemoteName]; id != "" && r.RemoteID != id {
			problems = append(problems, fmt.Sprintf("route to %s has id %s, its /varz says %s", r.RemoteName, r.RemoteID, id))
		}
	}
	for _, p := range peers {
		if count[p.name] != per {
			problems = append(problems, fmt.Sprintf("%d routes to %s, want %d", count[p.name], p.name, per))
		}
	}
	if rz.NumRoutes != len(rz.Routes) {
		problems = append(problems, fmt.Sprintf("num_routes %d but %d routes listed", rz.NumRoutes, len(rz.Routes)))
	}
	if len(problems) == 0 {
		return ""
	}
	sort.Strings(problems)
	return fmt.Sprintf("%s: num_routes %d, want %d (%d to each of %v): %s", n, rz.NumRoutes, per*len(peers), per,
		wantNames, strings.Join(problems, "; "))
}

// ---------------------------------------------------------------------------------------------
// Clients

// ctErrs collects nats.go's asynchronous errors (slow consumer, permissions ...) per test.
type ctErrs struct {
	mu   sync.Mutex
	errs []string
}

func (e *ctErrs) add(s string) {
	e.mu.Lock()
	e.errs = append(e.errs, s)
	e.mu.Unlock()
}

// connect opens a nats.go connection to node i as user (password = user name), closed when t
// ends. Asynchronous errors fail t.
func (c *testCluster) connect(t *testing.T, i int, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	n := c.nodes[i]
	errs := &ctErrs{}
	base := []nats.Option{
		nats.Name(fmt.Sprintf("%s@%s", t.Name(), n.name)),
		nats.Timeout(5 * time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			errs.add(fmt.Sprintf("async error on %s (sub %q): %v", n.name, subj, err))
		}),
	}
	if user != "" {
		base = append(base, nats.UserInfo(user, user))
	}
	nc, err := nats.Connect(n.clientURL(), append(base, opts...)...)
	if err != nil {
		t.Fatalf("connect to %s as %q: %v", n, user, err)
	}
	t.Cleanup(func() {
		nc.Close()
		errs.mu.Lock()
		defer errs.mu.Unlock()
		for _, e := range errs.errs {
			t.Errorf("%s", e)
		}
	})
	return nc
}

func ctFlush(t *testing.T, nc *nats.Conn) {
	t.Helper()
	if err := nc.FlushTimeout(ctDeliverWait); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func ctChanSub(t *testing.T, nc *nats.Conn, subj string, ch chan *nats.Msg) *nats.Subscription {
	t.Helper()
	sub, err := nc.ChanSubscribe(subj, ch)
	if err != nil {
		t.Fatalf("subscribe %q: %v", subj, err)
	}
	return sub
}

// recv returns the next message on ch, failing t after ctDeliverWait.
func recv(t *testing.T, ch <-chan *nats.Msg, what string) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(ctDeliverWait):
		t.Fatalf("no %s within %v", what, ctDeliverWait)
		return nil
	}
}

// awaitInterest waits until a publish from every pub reaches sub's connection: the connection
// subscribes a probe subject after its other subscriptions and each pub publishes to it until a
// probe arrives. A server sends a connection's subscriptions to a route in order, so once the
// probe's interest has reached a publisher's server, so has that of every subscription the
// connection made before it (in the same account).
func awaitInterest(t *testing.T, sub *nats.Conn, pubs ...*nats.Conn) {
	t.Helper()
	awaitProbe(t, sub, "_CTEST.probe."+nuid.Next(), pubs...)
}

// awaitProbe is awaitInterest with the probe subject given (to probe through an import).
func awaitProbe(t *testing.T, sub *nats.Conn, subj string, pubs ...*nats.Conn) {
	t.Helper()
	ch := make(chan *nats.Msg, 1024)
	s := ctChanSub(t, sub, subj, ch)
	defer s.Unsubscribe()
	ctFlush(t, sub)
	for i, pub := range pubs {
		tag := strconv.Itoa(i)
		deadline := time.Now().Add(ctDeliverWait)
		tick := time.NewTicker(25 * time.Millisecond)
		got := false
		for !got {
			if err := pub.Publish(subj, []byte(tag)); err != nil {
				t.Fatalf("publish probe: %v", err)
			}
			ctFlush(t, pub)
			select {
			case m := <-ch:
				got = string(m.Data) == tag
			case <-tick.C:
			}
			if !got && time.Now().After(deadline) {
				tick.Stop()
				t.Fatalf("interest of %s (connected to %s) did not reach publisher %d (connected to %s) within %v",
					sub.Opts.Name, sub.ConnectedServerName(), i, pub.ConnectedServerName(), ctDeliverWait)
			}
		}
		tick.Stop()
	}
}

// eventually polls cond until it returns "" or ctDeliverWait passes; then it fails t with the
// last answer.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(ctDeliverWait)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v: %s", what, ctDeliverWait, msg)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------------------------
// Raw route connection (the handshake a server with the wrong credentials gets)

// routeHandshake dials a cluster port as a route with user/pass and returns the server's INFO
// and what it answers to CONNECT+PING (up to EOF or PONG).
func routeHandshake(t *testing.T, port int, cluster, user, pass string) (map[string]any, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatalf("dial cluster port %d: %v", port, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ctDeliverWait))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read INFO from cluster port %d: %v", port, err)
	}
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("cluster port %d greeted with %q, want INFO", port, line)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatalf("route INFO: %v: %s", err, js)
	}
	connect, _ := json.Marshal(map[string]any{
		"verbose": false, "pedantic": false, "user": user, "pass": pass, "tls_required": false,
		"name": "NCTESTFAKEROUTE" + nuid.Next(), "cluster": cluster, "headers": true,
	})
	if _, err := fmt.Fprintf(c, "CONNECT %s\r\nPING\r\n", connect); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	var got []string
	for {
		l, err := r.ReadString('\n')
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
		if err != nil || l == "PONG" {
			if err != nil && !errors.Is(err, io.EOF) && !isConnReset(err) {
				got = append(got, "<"+err.Error()+">")
			} else if err != nil {
				got = append(got, "<EOF>")
			}
			break
		}
	}
	return info, strings.Join(got, " | ")
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "connection reset")
}
