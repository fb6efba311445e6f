package test

// The cluster suite: routes between server processes, checked with nats.go clients connected to
// different servers, over four topologies (all-nats-server, all-natsd, and mixed clusters seeded
// by either). The harness is in cluster_harness_test.go.
//
//	go test -race -run TestCluster ./test/
//	NATSD_CLUSTER_TOPOLOGIES=all-nats-server go test -race -run TestCluster ./test/
//
// Every check asserts behaviour: which messages arrive, in what order, exactly once, which
// routes /routez lists. Time limits only end waits that would otherwise hang.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	bins := newCtBinaries(t)
	// A broken server can make every wait run to its limit: budgets keep the suite bounded
	// (a passing run needs a small fraction of them).
	end := time.Now().Add(ctSuiteBudget)
	if d, ok := t.Deadline(); ok && d.Add(-90*time.Second).Before(end) {
		end = d.Add(-90 * time.Second)
	}
	for _, tp := range selectedTopologies(t) {
		t.Run(tp.name, func(t *testing.T) {
			env := &topoEnv{topo: tp, bins: bins, owner: t}
			budget := time.Now().Add(ctTopologyBudget)
			if budget.After(end) {
				budget = end
			}
			run := func(name string, f func(*testing.T)) {
				t.Run(name, func(t *testing.T) {
					if time.Now().After(budget) {
						t.Fatalf("%s: out of time (%v per topology, %v for the suite): not run", tp.name, ctTopologyBudget, ctSuiteBudget)
					}
					f(t)
				})
			}
			// On the shared base cluster; restart and gossip (which adds a fourth node) last.
			run("pubsub", env.testPubSub)
			run("queue", env.testQueue)
			run("request", env.testRequest)
			run("interest", env.testInterest)
			run("accounts", env.testAccounts)
			run("discovery", env.testDiscovery)
			run("sys", env.testSys)
			run("restart", env.testRestart)
			run("gossip", env.testGossip)
			// On clusters of their own.
			run("pool", env.testPool)
			run("no_advertise", env.testNoAdvertise)
			run("route_auth", env.testRouteAuth)
			run("route_tls", env.testRouteTLS)
			run("compression", env.testCompression)
		})
	}
}

const (
	ctTopologyBudget = 150 * time.Second
	ctSuiteBudget    = 6 * time.Minute
)

// uniq is a fresh subject token, so tests sharing a cluster never see each other's traffic.
func uniq() string { return nuid.Next()[12:] }

// ---------------------------------------------------------------------------------------------
// 1. pub/sub across servers

// pubSequence is what one publisher sends: empty and header-only messages, headers with several
// values, reply subjects, 64 KiB payloads, and an end marker.
func pubSequence(subj, tag string, n int) []*nats.Msg {
	rng := rand.New(rand.NewSource(int64(len(tag)) + int64(n)))
	var out []*nats.Msg
	for i := 0; i < n; i++ {
		m := &nats.Msg{Subject: subj, Data: []byte(fmt.Sprintf("%s-%d", tag, i))}
		switch {
		case i == 0:
			m.Data = nil
		case i == 1:
			m.Data = nil
			m.Header = nats.Header{"Ctest-Seq": {"1"}}
		case i%50 == 0:
			m.Data = make([]byte, 64*1024)
			rng.Read(m.Data)
			if i%100 == 0 {
				m.Header = nats.Header{"Ctest-Seq": {strconv.Itoa(i)}, "Ctest-Big": {"yes"}}
			}
		case i%3 == 0:
			m.Header = nats.Header{"Ctest-Seq": {strconv.Itoa(i)}, "Ctest-Multi": {"x", "y z"}}
		}
		if i%7 == 0 {
			m.Reply = subj + ".reply." + strconv.Itoa(i)
		}
		out = append(out, m)
	}
	return append(out, &nats.Msg{Subject: subj, Data: []byte("end"), Header: nats.Header{"Ctest-End": {tag}}})
}

func publishAll(t *testing.T, nc *nats.Conn, msgs []*nats.Msg) {
	t.Helper()
	for _, m := range msgs {
		if err := nc.PublishMsg(m); err != nil {
			t.Fatalf("publish %q: %v", m.Subject, err)
		}
	}
	ctFlush(t, nc)
}

// collectUntilEnds reads ch until an end marker for each of tags arrived; it returns the
// messages before them, per tag (by subject order of arrival).
func collectUntilEnds(t *testing.T, ch <-chan *nats.Msg, what string, tags ...string) []*nats.Msg {
	t.Helper()
	want := map[string]bool{}
	for _, tag := range tags {
		want[tag] = true
	}
	var got []*nats.Msg
	for len(want) > 0 {
		m := recv(t, ch, fmt.Sprintf("message on %s (waiting for the end of %v, %d received)", what, tags, len(got)))
		if tag := m.Header.Get("Ctest-End"); tag != "" {
			if !want[tag] {
				t.Fatalf("%s: unexpected or repeated end marker %q", what, tag)
			}
			delete(want, tag)
			continue
		}
		got = append(got, m)
	}
	return got
}

func sameMsg(a, b *nats.Msg) string {
	if a.Subject != b.Subject {
		return fmt.Sprintf("subject %q, want %q", a.Subject, b.Subject)
	}
	if a.Reply != b.Reply {
		return fmt.Sprintf("reply %q, want %q", a.Reply, b.Reply)
	}
	if !bytes.Equal(a.Data, b.Data) {
		return fmt.Sprintf("payload %d bytes %.40q, want %d bytes %.40q", len(a.Data), a.Data, len(b.Data), b.Data)
	}
	if (len(a.Header) > 0 || len(b.Header) > 0) && !reflect.DeepEqual(a.Header, b.Header) {
		return fmt.Sprintf("headers %v, want %v", a.Header, b.Header)
	}
	return ""
}

// checkSequence asserts got is exactly want, in order.
func checkSequence(t *testing.T, what string, got, want []*nats.Msg) {
	t.Helper()
	for i := 0; i < len(got) && i < len(want); i++ {
		if d := sameMsg(got[i], want[i]); d != "" {
			t.Fatalf("%s: message %d: %s", what, i, d)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
}

// bySubject splits msgs by subject, keeping order.
func bySubject(msgs []*nats.Msg) map[string][]*nats.Msg {
	out := map[string][]*nats.Msg{}
	for _, m := range msgs {
		out[m.Subject] = append(out[m.Subject], m)
	}
	return out
}

// testPubSub: a wildcard and a literal subscriber on n0, a literal one on n2; publishers on n1
// and n2. Each subscriber gets exactly what each publisher sent to its subjects, in order, with
// headers, reply subjects and payloads intact.
func (env *topoEnv) testPubSub(t *testing.T) {
	c := env.baseCluster(t)
	u := uniq()
	prefix := "ps." + u
	s1, s2 := prefix+".from1", prefix+".from2"

	wild := c.connect(t, 0, "a")
	lit := c.connect(t, 0, "a")
	remote := c.connect(t, 2, "a")
	chW, chL, chR := make(chan *nats.Msg, 4096), make(chan *nats.Msg, 4096), make(chan *nats.Msg, 4096)
	ctChanSub(t, wild, prefix+".>", chW)
	ctChanSub(t, lit, s1, chL)
	ctChanSub(t, remote, s1, chR)
	pub1, pub2 := c.connect(t, 1, "a"), c.connect(t, 2, "a")
	awaitInterest(t, wild, pub1, pub2)
	awaitInterest(t, lit, pub1)
	awaitInterest(t, remote, pub1)

	m1, m2 := pubSequence(s1, "from1", 150), pubSequence(s2, "from2", 150)
	publishAll(t, pub1, m1)
	publishAll(t, pub2, m2)

	got := bySubject(collectUntilEnds(t, chW, "n0 "+prefix+".>", "from1", "from2"))
	checkSequence(t, "wildcard subscriber on n0, from n1", got[s1], m1[:len(m1)-1])
	checkSequence(t, "wildcard subscriber on n0, from n2", got[s2], m2[:len(m2)-1])
	if len(got) != 2 {
		t.Fatalf("wildcard subscriber got subjects %v", keys(got))
	}
	checkSequence(t, "literal subscriber on n0, from n1", collectUntilEnds(t, chL, "n0 "+s1, "from1"), m1[:len(m1)-1])
	checkSequence(t, "literal subscriber on n2, from n1", collectUntilEnds(t, chR, "n2 "+s1, "from1"), m1[:len(m1)-1])

	// A burst: many small messages in flight on the route at once, all delivered in order.
	const burst = 5000
	bs := "ps." + u + "-burst"
	bsub := c.connect(t, 0, "a")
	chB := make(chan *nats.Msg, burst+16)
	ctChanSub(t, bsub, bs, chB)
	awaitInterest(t, bsub, pub1)
	pad := strings.Repeat("x", 100)
	for i := 0; i < burst; i++ {
		if err := pub1.Publish(bs, []byte(strconv.Itoa(i)+pad)); err != nil {
			t.Fatal(err)
		}
	}
	ctFlush(t, pub1)
	for i := 0; i < burst; i++ {
		m := recv(t, chB, fmt.Sprintf("burst message %d of %d", i, burst))
		if want := strconv.Itoa(i) + pad; string(m.Data) != want {
			t.Fatalf("burst message %d: got %.20q", i, m.Data)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---------------------------------------------------------------------------------------------
// 2. queue groups

// queueMember is one connection with a queue subscription and a plain "barrier" subscription
// sharing one channel: the connection reads both in the order the server sent them.
type queueMember struct {
	node int
	nc   *nats.Conn
	qsub *nats.Subscription
	ch   chan *nats.Msg
	got  []*nats.Msg // queue messages received so far
}

// drainUntilBarriers reads the member's channel until a barrier from each tag has arrived.
func (m *queueMember) drainUntilBarriers(t *testing.T, barrier string, tags ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, tag := range tags {
		want[tag] = true
	}
	for len(want) > 0 {
		msg := recv(t, m.ch, fmt.Sprintf("message on the member on n%d (barriers %v outstanding)", m.node, want))
		if msg.Subject == barrier {
			delete(want, string(msg.Data))
			continue
		}
		m.got = append(m.got, msg)
	}
}

// testQueue: members of one group on n0, n1 and n2; publishers on each server. Every message
// reaches exactly one member, and (nats-server has no local preference for a client's publish
// inside a cluster: it picks among all members, local and remote) every member gets some of every
// publisher's messages. With n0's member gone, n0's publishes go to the members on n1 and n2,
// each exactly once. (A server that receives a queue message from a route delivers it to a
// member of its own, never back over a route: exactly-once covers that.)
func (env *topoEnv) testQueue(t *testing.T) {
	c := env.baseCluster(t)
	u := uniq()
	subj, barrier, group := "q."+u, "q."+u+".barrier", "workers"
	var members []*queueMember
	var pubs []*nats.Conn
	for i := 0; i < 3; i++ {
		m := &queueMember{node: i, nc: c.connect(t, i, "a"), ch: make(chan *nats.Msg, 4096)}
		var err error
		if m.qsub, err = m.nc.ChanQueueSubscribe(subj, group, m.ch); err != nil {
			t.Fatal(err)
		}
		ctChanSub(t, m.nc, barrier, m.ch)
		members = append(members, m)
		pubs = append(pubs, c.connect(t, i, "a"))
	}
	for _, m := range members {
		awaitInterest(t, m.nc, pubs...)
	}

	const n = 100
	sent := map[int][]*nats.Msg{}
	for i, p := range pubs {
		for j := 0; j < n; j++ {
			msg := &nats.Msg{Subject: subj, Data: []byte(fmt.Sprintf("p%d-%d", i, j))}
			if j%2 == 1 {
				msg.Header = nats.Header{"Ctest-From": {strconv.Itoa(i)}}
			}
			sent[i] = append(sent[i], msg)
		}
		publishAll(t, p, sent[i])
		if err := p.Publish(barrier, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		ctFlush(t, p)
	}
	for _, m := range members {
		m.drainUntilBarriers(t, barrier, "0", "1", "2")
	}
	// Exactly once across the group; each member gets each publisher's messages in publish
	// order; and every publisher's messages reach every member: nats-server picks a member
	// at random across the cluster (weighted by members per server) for a client's publish, with
	// no preference for the publisher's own server. (A member missing all 100 of a publisher's
	// messages by chance has probability (2/3)^100, about 2e-18.)
	seen := map[string]int{}
	for _, m := range members {
		last := map[string]int{}
		from := map[string]int{}
		for _, msg := range m.got {
			seen[string(msg.Data)]++
			p, j, _ := strings.Cut(string(msg.Data), "-")
			k, _ := strconv.Atoi(j)
			if l, ok := last[p]; ok && k <= l {
				t.Fatalf("member on n%d got %q after %s-%d: out of order", m.node, msg.Data, p, l)
			}
			last[p] = k
			from[p]++
			if i, _ := strconv.Atoi(p[1:]); (msg.Header.Get("Ctest-From") != "") != (k%2 == 1) ||
				(k%2 == 1 && msg.Header.Get("Ctest-From") != strconv.Itoa(i)) {
				t.Fatalf("member on n%d: %q with headers %v", m.node, msg.Data, msg.Header)
			}
		}
		for i := range pubs {
			if from["p"+strconv.Itoa(i)] == 0 {
				t.Fatalf("the member on n%d got none of n%d's %d messages (got %v): nats-server spreads a publisher's queue messages over the whole cluster", m.node, i, n, from)
			}
		}
		t.Logf("member on n%d got %v", m.node, from)
		m.got = nil
	}
	for i := range pubs {
		for _, msg := range sent[i] {
			if seen[string(msg.Data)] != 1 {
				t.Fatalf("%q delivered %d times to the group, want exactly once", msg.Data, seen[string(msg.Data)])
			}
		}
	}

	// No member on n0 any more: its publishes cross to n1 and n2, each exactly once.
	if err := members[0].qsub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	ctFlush(t, members[0].nc)
	var second []*nats.Msg
	for j := 0; j < n; j++ {
		second = append(second, &nats.Msg{Subject: subj, Data: []byte(fmt.Sprintf("second-%d", j))})
	}
	publishAll(t, pubs[0], second)
	if err := pubs[0].Publish(barrier, []byte("0")); err != nil {
		t.Fatal(err)
	}
	ctFlush(t, pubs[0])
	seen = map[string]int{}
	for _, m := range members {
		m.drainUntilBarriers(t, barrier, "0")
		last := -1
		for _, msg := range m.got {
			seen[string(msg.Data)]++
			j, _ := strconv.Atoi(strings.TrimPrefix(string(msg.Data), "second-"))
			if j <= last {
				t.Fatalf("member on n%d got %q after second-%d: out of order", m.node, msg.Data, last)
			}
			last = j
		}
	}
	if len(members[0].got) != 0 {
		t.Fatalf("the unsubscribed member on n0 got %d messages", len(members[0].got))
	}
	for _, msg := range second {
		if seen[string(msg.Data)] != 1 {
			t.Fatalf("%q delivered %d times to the group, want exactly once", msg.Data, seen[string(msg.Data)])
		}
	}
	if len(seen) != n {
		t.Fatalf("the group got %d distinct messages, want %d", len(seen), n)
	}
	// Both remaining members get some ((1/2)^100 chance each not to).
	if len(members[1].got) == 0 || len(members[2].got) == 0 {
		t.Fatalf("n0's publishes without a local member: %d to n1, %d to n2; want both", len(members[1].got), len(members[2].got))
	}
}

// ---------------------------------------------------------------------------------------------
// 3. request/reply

// testRequest: a responder on n1 answers requests from n0 and n2 (new-style muxed inboxes and
// old-style inbox per request), headers included; a subject nobody serves gets no responders
// (503) at once.
func (env *topoEnv) testRequest(t *testing.T) {
	c := env.baseCluster(t)
	u := uniq()
	subj := "rr." + u
	resp := c.connect(t, 1, "a")
	if _, err := resp.Subscribe(subj, func(m *nats.Msg) {
		r := &nats.Msg{Subject: m.Reply, Data: append([]byte("re:"), m.Data...), Header: nats.Header{}}
		for k, v := range m.Header {
			r.Header[k] = v
		}
		r.Header.Set("Ctest-Responder", "n1")
		_ = m.RespondMsg(r)
	}); err != nil {
		t.Fatal(err)
	}
	reqA, reqC := c.connect(t, 0, "a"), c.connect(t, 2, "a")
	old := c.connect(t, 0, "a", nats.UseOldRequestStyle())
	awaitInterest(t, resp, reqA, reqC, old)

	for i, nc := range []*nats.Conn{reqA, reqC, old} {
		for j := 0; j < 20; j++ {
			body := fmt.Sprintf("req-%d-%d", i, j)
			msg := &nats.Msg{Subject: subj, Data: []byte(body)}
			if j%2 == 0 {
				msg.Header = nats.Header{"Ctest-Req": {body}}
			}
			r, err := nc.RequestMsg(msg, ctDeliverWait)
			if err != nil {
				t.Fatalf("requester %d, request %d: %v", i, j, err)
			}
			if string(r.Data) != "re:"+body || r.Header.Get("Ctest-Responder") != "n1" ||
				(j%2 == 0) != (r.Header.Get("Ctest-Req") == body) {
				t.Fatalf("requester %d, request %d: reply %q headers %v", i, j, r.Data, r.Header)
			}
		}
	}

	for i, nc := range []*nats.Conn{reqA, reqC} {
		_, err := nc.Request("rr."+u+".nobody", []byte("x"), ctDeliverWait)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("requester %d to a subject nobody serves: %v, want no responders", i, err)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// 4. interest removal

// routeSubs is every subject n's /routez?subs=1 lists on its routes to peer.
func routeSubs(t *testing.T, n *clusterNode, peer string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range n.routez(t, true).Routes {
		if r.RemoteName == peer {
			for _, s := range r.Subs {
				out[s] = true
			}
		}
	}
	return out
}

// expectNoResponders waits until a request from nc to subj gets no responders: the requester's
// server knows of no interest anywhere in the cluster.
func expectNoResponders(t *testing.T, nc *nats.Conn, subj, why string) {
	t.Helper()
	eventually(t, why+": a request to "+subj+" gets no responders", func() string {
		_, err := nc.Request(subj, []byte("anyone?"), 2*time.Second)
		if errors.Is(err, nats.ErrNoResponders) {
			return ""
		}
		return fmt.Sprintf("request: %v", err)
	})
}

// testInterest: subscriptions on n1 (plain, queue, wildcard) show on n0's routes to n1 in
// /routez?subs=1 and serve requests from n0; after UNSUB (or the connection closing) they leave
// n0's /routez and requests from n0 get no responders.
func (env *topoEnv) testInterest(t *testing.T) {
	c := env.baseCluster(t)
	n0, n1 := c.nodes[0], c.nodes[1]
	u := uniq()
	plain, queue, wild := "ir."+u+".plain", "ir."+u+".queue", "ir."+u+".wild.*"
	wildPub := "ir." + u + ".wild.x"
	subConn := c.connect(t, 1, "a")
	closer := c.connect(t, 1, "a")
	echo := func(m *nats.Msg) { _ = m.Respond([]byte("here")) }
	sPlain, err := subConn.Subscribe(plain, echo)
	if err != nil {
		t.Fatal(err)
	}
	sQueue, err := subConn.QueueSubscribe(queue, "g", echo)
	if err != nil {
		t.Fatal(err)
	}
	closedSubj := "ir." + u + ".closed"
	if _, err := closer.Subscribe(closedSubj, echo); err != nil {
		t.Fatal(err)
	}
	if _, err := closer.Subscribe(wild, echo); err != nil {
		t.Fatal(err)
	}
	req := c.connect(t, 0, "a")
	awaitInterest(t, subConn, req)
	awaitInterest(t, closer, req)
	for _, s := range []string{plain, queue, closedSubj, wildPub} {
		if r, err := req.Request(s, nil, ctDeliverWait); err != nil || string(r.Data) != "here" {
			t.Fatalf("request from n0 to %s: %v", s, err)
		}
	}
	listed := routeSubs(t, n0, n1.name)
	for _, s := range []string{plain, queue, closedSubj, wild} {
		if !listed[s] {
			t.Fatalf("%s /routez?subs=1: routes to %s do not list %q", n0, n1.name, s)
		}
	}

	if err := sPlain.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := sQueue.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	ctFlush(t, subConn)
	closer.Close()
	for _, s := range []string{plain, queue, closedSubj, wildPub} {
		expectNoResponders(t, req, s, "interest removed on n1")
	}
	eventually(t, n0.name+"'s routes to "+n1.name+" drop the subscriptions", func() string {
		listed := routeSubs(t, n0, n1.name)
		var left []string
		for _, s := range []string{plain, queue, closedSubj, wild} {
			if listed[s] {
				left = append(left, s)
			}
		}
		if len(left) > 0 {
			return fmt.Sprintf("still listed: %v", left)
		}
		return ""
	})
}

// ---------------------------------------------------------------------------------------------
// 5. restart

// testRestart kills a joining node (n1), then the seed (n0), with SIGKILL, and restarts each with
// its config: clients reconnect, the dead node's interest leaves the others, and once it is back
// subscriptions made through it reach the cluster again.
func (env *topoEnv) testRestart(t *testing.T) {
	for _, victim := range []int{1, 0} {
		t.Run(fmt.Sprintf("n%d", victim), func(t *testing.T) { env.restartCycle(t, victim) })
	}
}

func (env *topoEnv) restartCycle(t *testing.T, victim int) {
	c := env.baseCluster(t)
	v := c.nodes[victim]
	u := uniq()
	svc, pinnedSubj, roamSubj := "rs."+u+".svc", "rs."+u+".pinned", "rs."+u+".roam"
	disconnected, reconnected := make(chan struct{}, 16), make(chan struct{}, 16)
	roamReconnected := make(chan struct{}, 16)
	// pinned only ever talks to the victim; roam may move to any server it learned of.
	pinned := c.connect(t, victim, "a", nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	roam := c.connect(t, victim, "a", nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { roamReconnected <- struct{}{} }))
	if _, err := pinned.Subscribe(svc, func(m *nats.Msg) { _ = m.Respond([]byte("up")) }); err != nil {
		t.Fatal(err)
	}
	chP, chR := make(chan *nats.Msg, 1024), make(chan *nats.Msg, 1024)
	ctChanSub(t, pinned, pinnedSubj, chP)
	ctChanSub(t, roam, roamSubj, chR)
	var pubs []*nats.Conn
	for i := range c.nodes {
		if i != victim {
			pubs = append(pubs, c.connect(t, i, "a"))
		}
	}
	awaitInterest(t, pinned, pubs...)
	awaitInterest(t, roam, pubs...)
	deliverFromEach := func(stage, subj string, ch chan *nats.Msg) {
		t.Helper()
		for i, p := range pubs {
			body := fmt.Sprintf("%s-%d", stage, i)
			if err := p.Publish(subj, []byte(body)); err != nil {
				t.Fatal(err)
			}
			ctFlush(t, p)
			if m := recv(t, ch, body+" on "+subj); string(m.Data) != body {
				t.Fatalf("%s: got %q, want %q", subj, m.Data, body)
			}
		}
	}
	deliverFromEach("before", pinnedSubj, chP)
	deliverFromEach("before", roamSubj, chR)

	v.kill(t)
	select {
	case <-disconnected:
	case <-time.After(ctDeliverWait):
		t.Fatalf("the client of %s did not notice its death", v)
	}
	c.waitFormed(t) // the others: routes to each other only
	expectNoResponders(t, pubs[0], svc, v.name+" died")
	select {
	case <-roamReconnected:
	case <-time.After(ctDeliverWait):
		t.Fatalf("the roaming client of %s did not reconnect elsewhere", v)
	}
	if strings.HasSuffix(roam.ConnectedUrl(), ":"+strconv.Itoa(v.ports.client)) {
		t.Fatalf("roaming client reconnected to the dead %s", v)
	}
	awaitInterest(t, roam, pubs...)
	deliverFromEach("moved", roamSubj, chR)

	v.start(t)
	c.waitFormed(t)
	select {
	case <-reconnected:
	case <-time.After(ctDeliverWait):
		t.Fatalf("the pinned client did not reconnect to the restarted %s", v)
	}
	awaitInterest(t, pinned, pubs...)
	deliverFromEach("after", pinnedSubj, chP)
	deliverFromEach("after", roamSubj, chR)
	for i, p := range pubs {
		if r, err := p.Request(svc, nil, ctDeliverWait); err != nil || string(r.Data) != "up" {
			t.Fatalf("request from publisher %d to the restarted %s: %v", i, v, err)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// 6. gossip

// testGossip: a fourth node whose routes list only n2 learns of n0 and n1 from it; every node
// ends with routes to three distinct server ids, traffic crosses the learned routes, and clients
// of the others learn the new node's client URL by async INFO.
func (env *topoEnv) testGossip(t *testing.T) {
	c := env.baseCluster(t)
	if len(c.nodes) > 3 {
		t.Fatalf("the base cluster already has %d nodes", len(c.nodes))
	}
	watcher := c.connect(t, 0, "a")
	n3 := c.addNode(t, func(ns *nodeSpec) { ns.routes = []int{2} })
	c.waitFormed(t)

	ids := map[string]string{}
	for _, n := range c.nodes {
		id, err := n.serverID()
		if err != nil {
			t.Fatal(err)
		}
		ids[n.name] = id
	}
	for _, n := range c.nodes {
		rz := n.routez(t, false)
		peers := map[string]bool{}
		for _, r := range rz.Routes {
			peers[r.RemoteID] = true
		}
		if len(peers) != 3 || peers[ids[n.name]] {
			t.Fatalf("%s: routes to %d server ids %v, want the 3 others", n, len(peers), keys(peers))
		}
	}
	// On n3, only n2 is configured; n0 and n1 were learned by gossip.
	configured := map[string]bool{}
	for _, r := range n3.routez(t, false).Routes {
		if r.IsConfigured {
			configured[r.RemoteName] = true
		}
	}
	if !configured[c.nodes[2].name] || configured[c.nodes[0].name] || configured[c.nodes[1].name] {
		t.Fatalf("%s: configured (explicit) routes to %v, want to %s only", n3, keys(configured), c.nodes[2].name)
	}

	u := uniq()
	sub3 := c.connect(t, 3, "a")
	ch3 := make(chan *nats.Msg, 1024)
	ctChanSub(t, sub3, "gs."+u+".>", ch3)
	p0, p1 := c.connect(t, 0, "a"), c.connect(t, 1, "a")
	awaitInterest(t, sub3, p0, p1)
	m0, m1 := pubSequence("gs."+u+".from0", "from0", 20), pubSequence("gs."+u+".from1", "from1", 20)
	publishAll(t, p0, m0)
	publishAll(t, p1, m1)
	got := bySubject(collectUntilEnds(t, ch3, "n3", "from0", "from1"))
	checkSequence(t, "n3 from n0", got["gs."+u+".from0"], m0[:len(m0)-1])
	checkSequence(t, "n3 from n1", got["gs."+u+".from1"], m1[:len(m1)-1])

	sub0 := c.connect(t, 0, "a")
	ch0 := make(chan *nats.Msg, 1024)
	ctChanSub(t, sub0, "gs."+u+".to0", ch0)
	p3 := c.connect(t, 3, "a")
	awaitInterest(t, sub0, p3)
	m3 := pubSequence("gs."+u+".to0", "from3", 20)
	publishAll(t, p3, m3)
	checkSequence(t, "n0 from n3", collectUntilEnds(t, ch0, "n0", "from3"), m3[:len(m3)-1])

	eventually(t, "a client of n0 learns n3's client URL", func() string {
		for _, s := range watcher.DiscoveredServers() {
			if s == n3.clientURL() {
				return ""
			}
		}
		return fmt.Sprintf("discovered %v", watcher.DiscoveredServers())
	})
}

// ---------------------------------------------------------------------------------------------
// 7. pooling and pinned accounts

// checkFlow: a subscriber in account user's account on node si gets exactly what a publisher
// on node pi sends, in order.
func checkFlow(t *testing.T, c *testCluster, user string, si, pi int) {
	t.Helper()
	subj := fmt.Sprintf("flow.%s.%s.%d.%d", uniq(), user, si, pi)
	sub := c.connect(t, si, user)
	ch := make(chan *nats.Msg, 1024)
	ctChanSub(t, sub, subj, ch)
	pub := c.connect(t, pi, user)
	awaitInterest(t, sub, pub)
	msgs := pubSequence(subj, "flow", 60)
	publishAll(t, pub, msgs)
	checkSequence(t, fmt.Sprintf("account of %s, n%d to n%d", user, pi, si), collectUntilEnds(t, ch, subj, "flow"), msgs[:len(msgs)-1])
}

// testPool: pool_size 3 (nats-server's default) with account A pinned, pool_size 1, and pooling
// off (-1). /routez on every node lists, per peer, the pool's routes (no account) and one route
// per pinned account (its name in "account"), the system account pinned whenever pooling is on;
// a pinned account's interest travels on its own route; traffic in pinned, pooled and imported
// accounts crosses either way.
func (env *topoEnv) testPool(t *testing.T) {
	for _, v := range []struct {
		name     string
		poolSize int
		pinned   []string
		accounts map[string]int // routes per peer by /routez "account"
	}{
		{"pool_size_3_pinned_A", 0, []string{"A"}, map[string]int{"": 3, "A": 1, "SYS": 1}},
		{"pool_size_1", 1, nil, map[string]int{"": 1, "SYS": 1}},
		{"pool_size_-1", -1, nil, map[string]int{"": 1}},
	} {
		t.Run(v.name, func(t *testing.T) {
			c := env.cluster(t, "pool", clusterSpec{nodes: 2, poolSize: v.poolSize, pinned: v.pinned, extra: ctAccounts})
			for _, n := range c.nodes {
				got := map[string]int{}
				for _, r := range n.routez(t, false).Routes {
					got[r.Account]++
				}
				if !reflect.DeepEqual(got, v.accounts) {
					t.Fatalf("%s /routez: routes by account %v, want %v", n, got, v.accounts)
				}
			}
			checkFlow(t, c, "a", 0, 1)
			checkFlow(t, c, "a", 1, 0)
			checkFlow(t, c, "b", 0, 1)
			checkFlow(t, c, "b", 1, 0)

			// A stream and a service imported by B from A, across the two servers.
			u := uniq()
			subB := c.connect(t, 0, "b")
			ch := make(chan *nats.Msg, 1024)
			ctChanSub(t, subB, "feed."+u+".data", ch)
			pubA := c.connect(t, 1, "a")
			awaitProbe(t, subB, "feed."+u+".probe", pubA)
			msgs := pubSequence("feed."+u+".data", "feed", 40)
			publishAll(t, pubA, msgs)
			checkSequence(t, "B's import of A's stream", collectUntilEnds(t, ch, "feed", "feed"), msgs[:len(msgs)-1])
			serveAndRequest(t, c.connect(t, 1, "a"), c.connect(t, 0, "b"), "svc."+u)

			if len(v.pinned) > 0 {
				// A's subscription shows on the route pinned to A.
				subj := "pin." + u
				s := c.connect(t, 0, "a")
				if _, err := s.SubscribeSync(subj); err != nil {
					t.Fatal(err)
				}
				awaitInterest(t, s, c.connect(t, 1, "a"))
				on := map[string]bool{}
				for _, r := range c.nodes[1].routez(t, true).Routes {
					for _, x := range r.Subs {
						if x == subj {
							on[r.Account] = true
						}
					}
				}
				if !reflect.DeepEqual(on, map[string]bool{"A": true}) {
					t.Fatalf("%s /routez?subs=1: %q listed on routes of accounts %v, want on A's pinned route only", c.nodes[1], subj, keys(on))
				}
			}
		})
	}
}

// serveAndRequest: a responder on resp (account A) serves subj; requester (account B, which
// imports svc.> from A) gets its answers.
func serveAndRequest(t *testing.T, resp, requester *nats.Conn, subj string) {
	t.Helper()
	if _, err := resp.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(append([]byte("svc:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	ctFlush(t, resp)
	eventually(t, "B's request through its service import reaches A's responder", func() string {
		if _, err := requester.Request(subj, []byte("0"), 2*time.Second); err != nil {
			return err.Error()
		}
		return ""
	})
	for i := 0; i < 10; i++ {
		body := strconv.Itoa(i)
		r, err := requester.Request(subj, []byte(body), ctDeliverWait)
		if err != nil {
			t.Fatalf("service import request %d: %v", i, err)
		}
		if string(r.Data) != "svc:"+body {
			t.Fatalf("service import request %d: answer %q", i, r.Data)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// 8. accounts across the cluster

// testAccounts: the same subject in accounts A and B, subscribers on n0, publishers on n1: each
// account's subscriber gets its own account's messages only. B's imports of A's stream and
// service work across servers.
func (env *topoEnv) testAccounts(t *testing.T) {
	c := env.baseCluster(t)
	u := uniq()
	subj, barrier := "iso."+u+".x", "iso."+u+".barrier"
	subs := map[string]*nats.Conn{"a": c.connect(t, 0, "a"), "b": c.connect(t, 0, "b")}
	pubs := map[string]*nats.Conn{"a": c.connect(t, 1, "a"), "b": c.connect(t, 1, "b")}
	chs := map[string]chan *nats.Msg{"a": make(chan *nats.Msg, 1024), "b": make(chan *nats.Msg, 1024)}
	for acc, nc := range subs {
		ctChanSub(t, nc, "iso."+u+".>", chs[acc])
		awaitInterest(t, nc, pubs[acc])
	}
	for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		from, other := pair[0], pair[1]
		msgs := pubSequence(subj, from, 30)
		publishAll(t, pubs[from], msgs)
		checkSequence(t, "account of "+from+" on n0", collectUntilEnds(t, chs[from], subj, from), msgs[:len(msgs)-1])
		// The other account's subscriber: the next thing it gets is its own account's barrier,
		// published after all of the above arrived, so anything leaked would have come first.
		if err := pubs[other].Publish(barrier, []byte(other)); err != nil {
			t.Fatal(err)
		}
		ctFlush(t, pubs[other])
		if m := recv(t, chs[other], "barrier"); m.Subject != barrier || string(m.Data) != other {
			t.Fatalf("the subscriber of account %s on n0 got %q %q from account %s", other, m.Subject, m.Data, from)
		}
	}

	// Stream import: A publishes on n1, B's subscriber on n0 gets it (and A's own does not see B).
	subB := c.connect(t, 0, "b")
	ch := make(chan *nats.Msg, 1024)
	ctChanSub(t, subB, "feed."+u+".data", ch)
	pubA := c.connect(t, 1, "a")
	awaitProbe(t, subB, "feed."+u+".probe", pubA)
	msgs := pubSequence("feed."+u+".data", "feed", 40)
	publishAll(t, pubA, msgs)
	checkSequence(t, "B on n0 importing A's stream from n1", collectUntilEnds(t, ch, "feed", "feed"), msgs[:len(msgs)-1])

	// Service import: B on n2 requests, A on n0 responds.
	serveAndRequest(t, c.connect(t, 0, "a"), c.connect(t, 2, "b"), "svc."+u)
}

// ---------------------------------------------------------------------------------------------
// 9. route authorization

// testRouteAuth: a cluster whose routes need a user and password forms with the right ones
// (n2 lists only n1 and reaches n0 through gossip, with the credentials of its authorization
// block); a server with the wrong password does not join (every attempt is refused with
// "Authorization Violation") and the others keep working.
func (env *topoEnv) testRouteAuth(t *testing.T) {
	c := env.cluster(t, "auth", clusterSpec{nodes: 3, auth: true, extra: ctAccounts, node: func(i int, ns *nodeSpec) {
		switch i {
		case 2:
			ns.routes = []int{1}
		case 3:
			ns.routePass = "wrong" // the intruder: routes to n0, n1, n2
		}
	}})
	for _, n := range c.nodes {
		info, reply := routeHandshake(t, n.ports.cluster, c.name, ctRouteUser, "wrong")
		if info["auth_required"] != true {
			t.Fatalf("%s route INFO: auth_required %v, want true", n, info["auth_required"])
		}
		if !strings.HasPrefix(reply, "-ERR 'Authorization Violation'") || !strings.HasSuffix(reply, "<EOF>") {
			t.Fatalf("%s: a route CONNECT with the wrong password got %q, want -ERR 'Authorization Violation' and close", n, reply)
		}
		if _, reply := routeHandshake(t, n.ports.cluster, c.name, "", ""); !strings.HasPrefix(reply, "-ERR 'Authorization Violation'") {
			t.Fatalf("%s: a route CONNECT without credentials got %q", n, reply)
		}
	}

	// The intruder keeps trying; nats-server retries a configured route every second, so a few
	// seconds cover several attempts. The accepting side, which checks the credentials, never
	// lists a route to it. (Its own /routez may: nats-server's dialing side lists a route from
	// the server's INFO until the -ERR that refuses its CONNECT arrives; none lasts.)
	watcher := c.connect(t, 0, "a")
	good := c.running()
	bad := c.addNode(t)
	halfOpen := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		halfOpen += len(bad.routez(t, false).Routes)
		for _, n := range good {
			if msg := n.routesState(nil, without(good, n), c.routesPerPeer()); msg != "" {
				t.Fatalf("the intruder changed the cluster: %s", msg)
			}
		}
	}
	t.Logf("the intruder's own /routez listed %d half-open routes over 30 samples", halfOpen)
	eventually(t, "the intruder has no routes", func() string {
		if rz := bad.routez(t, false); len(rz.Routes) != 0 || rz.NumRoutes != 0 {
			return fmt.Sprintf("%s: num_routes %d: %+v", bad, rz.NumRoutes, rz.Routes)
		}
		return ""
	})
	for _, s := range watcher.DiscoveredServers() {
		if s == bad.clientURL() {
			t.Fatalf("a client of n0 learned the intruder's URL %s", s)
		}
	}
	checkFlow(t, c, "a", 0, 2)
	checkFlow(t, c, "a", 2, 1)
}

func without(nodes []*clusterNode, n *clusterNode) []*clusterNode {
	var out []*clusterNode
	for _, m := range nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// 10. clients learn the cluster

// discovered is the set of client URLs nc learned from the servers' INFO (connect_urls).
func discovered(nc *nats.Conn) []string {
	d := nc.DiscoveredServers()
	sort.Strings(d)
	return d
}

func urlsOf(nodes ...*clusterNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.clientURL())
	}
	sort.Strings(out)
	return out
}

// testDiscovery: a client given one server's URL learns the others' client URLs (connect_urls in
// INFO): DiscoveredServers() is exactly the other nodes, Servers() all of them.
func (env *topoEnv) testDiscovery(t *testing.T) {
	c := env.baseCluster(t)
	for i, n := range c.nodes {
		nc := c.connect(t, i, "a")
		want := urlsOf(without(c.nodes, n)...)
		eventually(t, "a client of "+n.name+" learns the other servers", func() string {
			if got := discovered(nc); !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("discovered %v, want %v", got, want)
			}
			return ""
		})
		all := nc.Servers()
		sort.Strings(all)
		if !reflect.DeepEqual(all, urlsOf(c.nodes...)) {
			t.Fatalf("client of %s: Servers() %v, want %v", n, all, urlsOf(c.nodes...))
		}
	}
}

// testNoAdvertise: n2 has no_advertise: true. Clients of n0 and n1 learn each other but not n2;
// n2's own clients learn nothing; routing is unaffected.
func (env *topoEnv) testNoAdvertise(t *testing.T) {
	c := env.cluster(t, "noadv", clusterSpec{nodes: 3, extra: ctAccounts, node: func(i int, ns *nodeSpec) {
		ns.noAdvertise = i == 2
	}})
	for i, want := range [][]string{urlsOf(c.nodes[1]), urlsOf(c.nodes[0])} {
		nc := c.connect(t, i, "a")
		eventually(t, "a client of "+c.nodes[i].name+" learns the advertised server", func() string {
			if got := discovered(nc); !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("discovered %v, want %v", got, want)
			}
			return ""
		})
	}
	// The cluster formed before this client connected, so its INFO is final.
	if got := discovered(c.connect(t, 2, "a")); len(got) != 0 {
		t.Fatalf("a client of the no_advertise %s discovered %v, want none", c.nodes[2], got)
	}
	checkFlow(t, c, "a", 2, 0)
	checkFlow(t, c, "a", 0, 2)
}

// ---------------------------------------------------------------------------------------------
// 11. $SYS across the cluster

// serverPing is the part of a $SYS.REQ.SERVER.PING answer the test reads.
type serverPing struct {
	Server struct {
		Name    string `json:"name"`
		ID      string `json:"id"`
		Cluster string `json:"cluster"`
	} `json:"server"`
}

// testSys: $SYS.REQ.SERVER.PING from a system-account client on n1 gets one answer per server,
// each naming its server, id and cluster; `nats server list` sees the same servers.
func (env *topoEnv) testSys(t *testing.T) {
	c := env.baseCluster(t)
	want := map[string]string{} // name -> id
	for _, n := range c.nodes {
		id, err := n.serverID()
		if err != nil {
			t.Fatal(err)
		}
		want[n.name] = id
	}
	sys := c.connect(t, 1, "sys")
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 64)
	ctChanSub(t, sys, inbox, ch)
	ctFlush(t, sys)
	if err := sys.PublishRequest("$SYS.REQ.SERVER.PING", inbox, nil); err != nil {
		t.Fatal(err)
	}
	ctFlush(t, sys)
	got := map[string]string{}
	for len(got) < len(want) {
		m := recv(t, ch, fmt.Sprintf("answer to $SYS.REQ.SERVER.PING (have %v)", keys(got)))
		var p serverPing
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatalf("PING answer: %v: %s", err, m.Data)
		}
		if _, dup := got[p.Server.Name]; dup {
			t.Fatalf("two PING answers from %s", p.Server.Name)
		}
		if p.Server.Cluster != c.name {
			t.Fatalf("PING answer from %s names cluster %q, want %q", p.Server.Name, p.Server.Cluster, c.name)
		}
		got[p.Server.Name] = p.Server.ID
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PING answers from %v, want %v", got, want)
	}

	if os.Getenv("NATS_CLI") == "" {
		if _, err := os.Stat("../.cache/tools/nats"); err != nil {
			t.Log("the nats CLI is not installed (make tools): `nats server list` not checked")
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, natsCLI(t), "--server", c.nodes[2].clientURL(), "--user", "sys", "--password", "sys",
		"--timeout", "5s", "server", "list", strconv.Itoa(len(c.nodes)), "--json")
	cmd.Env = append(os.Environ(), "NATS_CONTEXT=", "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nats server list: %v\n%s", err, out)
	}
	var list []serverPing
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("nats server list --json: %v\n%s", err, out)
	}
	names := map[string]string{}
	for _, p := range list {
		names[p.Server.Name] = p.Server.ID
	}
	if len(list) != len(want) || !reflect.DeepEqual(names, want) {
		t.Fatalf("nats server list: %d servers %v, want %v", len(list), names, want)
	}
	t.Logf("nats server list via %s: %v", c.nodes[2].name, keys(names))
}

// ---------------------------------------------------------------------------------------------
// 12. route compression

// compressionWant is what /routez "compression" may say on a route of a node configured with
// local to a node configured with remote ("" = not written: accept), by nats-server's rules:
// an s2 mode on either side compresses (accept follows the other side, taking s2_auto as
// s2_fast), each side writing at its own level; accept on both sides is off; s2_auto shows the
// level its round trip picks (on loopback uncompressed, but a busy machine's handshake can
// take past 10, 50 or 100 ms: any s2 level).
func compressionWant(local, remote string) []string {
	if local == "" {
		local = "accept"
	}
	if remote == "" {
		remote = "accept"
	}
	switch {
	case local == "s2_auto":
		return []string{"s2_uncompressed", "s2_fast", "s2_better", "s2_best"}
	case local != "accept":
		return []string{local}
	case remote == "accept":
		return []string{"off"}
	case remote == "s2_auto":
		return []string{"s2_fast"}
	}
	return []string{remote}
}

// testCompression: clusters whose routes negotiate s2 compression. Every route /routez lists,
// on every node, shows the mode nats-server's rules give for the two ends' settings, and
// messages (with headers, 64 KiB payloads), requests and replies cross each way, in pooled,
// pinned ($SYS) and imported accounts.
func (env *topoEnv) testCompression(t *testing.T) {
	for _, v := range []struct {
		name  string
		modes []string // per node
	}{
		// Every route compresses at s2_fast, in each role: n1 (accept) dials n0 (s2_fast), n2
		// (s2_fast) dials n0 (s2_fast) and n1 (accept).
		{"s2_fast", []string{"s2_fast", "", "s2_fast"}},
		// s2_auto on one side, accept on the other, both ways round: n1 (accept) dials n0
		// (s2_auto), n2 (s2_auto) dials n1.
		{"s2_auto_accept", []string{"s2_auto", "accept", "s2_auto"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			c := env.cluster(t, "comp", clusterSpec{nodes: len(v.modes), extra: ctAccounts, node: func(i int, ns *nodeSpec) {
				ns.compression = v.modes[i]
			}})
			mode := map[string]string{}
			for i, n := range c.nodes {
				mode[n.name] = v.modes[i]
			}
			for i, n := range c.nodes {
				rz := n.routez(t, false)
				seen := map[string]int{}
				var got []string
				for _, r := range rz.Routes {
					seen[r.RemoteName]++
					got = append(got, fmt.Sprintf("%s:%s", r.RemoteName, r.Compression))
					want := compressionWant(v.modes[i], mode[r.RemoteName])
					if !slices.Contains(want, r.Compression) {
						t.Errorf("%s /routez: route %d to %s (account %q, solicited %v): compression %q, want %s",
							n, r.Rid, r.RemoteName, r.Account, r.DidSolicit, r.Compression, strings.Join(want, " or "))
					}
				}
				if len(seen) != len(c.nodes)-1 {
					t.Errorf("%s /routez: routes to %v", n, keys(seen))
				}
				sort.Strings(got)
				t.Logf("%s /routez compression: %s", n, strings.Join(got, " "))
			}
			if t.Failed() {
				t.FailNow()
			}
			for si := range c.nodes {
				for pi := range c.nodes {
					if si != pi {
						checkFlow(t, c, "a", si, pi)
					}
				}
			}
			checkFlow(t, c, "b", 0, len(c.nodes)-1)
			checkFlow(t, c, "sys", len(c.nodes)-1, 0)
			u := uniq()
			serveAndRequest(t, c.connect(t, 0, "a"), c.connect(t, 1, "a"), "svc."+u+".direct")
			serveAndRequest(t, c.connect(t, len(c.nodes)-1, "a"), c.connect(t, 0, "b"), "svc."+u+".import")
		})
	}
}
