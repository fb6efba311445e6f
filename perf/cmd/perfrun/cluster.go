package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	// clusterSize is the number of servers of the cluster scenarios: A (publisher), B
	// (subscriber), C (idle, in the mesh).
	clusterSize = 3
	// routesPerPeer is what a full mesh shows in /routez for each peer with the default
	// cluster settings, on nats-server 2.15 and natsd alike: a pool of 3 connections plus the
	// one pinned to the $SYS account.
	routesPerPeer = 3 + 1
)

var clusterNames = []string{"A", "B", "C", "D", "E", "F", "G", "H"}

// clusterConf is one server's configuration file, in nats-server's format (natsd reads the
// same): client, monitoring and cluster listeners on 127.0.0.1, routes to the first server
// (none on the first itself), everything else default (pool_size 3, $SYS pinned).
func clusterConf(name string, port, httpPort, clusterPort, seedPort int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# perfrun: server %s of a %d-server cluster\n", name, clusterSize)
	fmt.Fprintf(&b, "server_name: perf-%s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n", name, port, httpPort)
	fmt.Fprintf(&b, "cluster {\n  name: perf\n  listen: 127.0.0.1:%d\n", clusterPort)
	if seedPort != 0 {
		fmt.Fprintf(&b, "  routes: [ \"nats-route://127.0.0.1:%d\" ]\n", seedPort)
	}
	b.WriteString("}\n")
	return b.String()
}

// startCluster starts n servers of side s joined by routes, each on fresh free ports with a
// generated config file (conf/NAME-X.conf next to logs/NAME-X.log): first A, up to its route
// listener, then the others with a route to A. It returns once every server's /routez shows
// the full mesh (every peer with routesPerPeer connections). On failure it stops whatever it
// started.
func (r *runner) startCluster(s side, n int, name string, envOf func(int) []string) ([]*proc, error) {
	if err := os.MkdirAll(filepath.Join(r.out, "conf"), 0o755); err != nil {
		return nil, err
	}
	var procs []*proc
	fail := func(err error) ([]*proc, error) {
		for _, p := range procs {
			p.stop()
		}
		return nil, err
	}
	seed := 0
	for i := 0; i < n; i++ {
		var ports [3]int
		for j := range ports {
			p, err := freePort()
			if err != nil {
				return fail(err)
			}
			ports[j] = p
		}
		x := clusterNames[i]
		conf := filepath.Join(r.out, "conf", name+"-"+x+".conf")
		if err := os.WriteFile(conf, []byte(clusterConf(x, ports[0], ports[1], ports[2], seed)), 0o644); err != nil {
			return fail(err)
		}
		args := append([]string{"-c", conf}, s.args...)
		// Wait for the route listener as well as the client port, so the others' first route
		// dial finds it (no "connection refused" in their logs).
		p, err := r.launch(s, args, name+"-"+x+".log", envOf(i), ports[0], ports[2])
		if err != nil {
			return fail(fmt.Errorf("server %s: %w", x, err))
		}
		p.name, p.http = x, ports[1]
		procs = append(procs, p)
		if i == 0 {
			seed = ports[2]
		}
	}
	if err := waitMesh(procs, 20*time.Second); err != nil {
		return fail(err)
	}
	return procs, nil
}

type routez struct {
	ServerName string `json:"server_name"`
	NumRoutes  int    `json:"num_routes"`
	Routes     []struct {
		RemoteID   string `json:"remote_id"`
		RemoteName string `json:"remote_name"`
		Account    string `json:"account"`
	} `json:"routes"`
}

// waitMesh polls every server's /routez until each lists all the others with routesPerPeer
// route connections each.
func waitMesh(procs []*proc, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		done := true
		var seen []string
		for _, p := range procs {
			peers, err := routesOf(hc, p.http)
			if err != nil {
				done = false
				seen = append(seen, fmt.Sprintf("%s: %v", p.name, err))
				continue
			}
			full := len(peers) == len(procs)-1
			for _, c := range peers {
				full = full && c >= routesPerPeer
			}
			done = done && full
			seen = append(seen, fmt.Sprintf("%s: %s", p.name, fmtPeers(peers)))
		}
		last = strings.Join(seen, "; ")
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not fully meshed within %v (want %d peers × %d routes on each server; /routez: %s)", timeout, len(procs)-1, routesPerPeer, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// routesOf returns the number of route connections per remote server id in /routez.
func routesOf(hc *http.Client, port int) (map[string]int, error) {
	resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/routez")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/routez: %s", resp.Status)
	}
	var rz routez
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		return nil, fmt.Errorf("/routez: %w", err)
	}
	peers := map[string]int{}
	for _, rt := range rz.Routes {
		id := rt.RemoteName
		if id == "" {
			id = rt.RemoteID
		}
		peers[id]++
	}
	return peers, nil
}

func fmtPeers(peers map[string]int) string {
	if len(peers) == 0 {
		return "no routes"
	}
	var s []string
	for id, n := range peers {
		s = append(s, fmt.Sprintf("%s×%d", id, n))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}
