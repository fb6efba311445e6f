package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SIGKILL test of the natsd binary's JetStream: a burst of async publishes, the server killed
// with SIGKILL in the middle of it, restarted on the same store directory, and every message
// it acknowledged (before or during its death) checked there, at its sequence, identical, with
// the next sequence past all of them. A killed process loses nothing the kernel has, so this
// is about what the process itself keeps in memory: a PubAck sent before the record was
// written, or a restart that hands a sequence out again.

var (
	killBinOnce sync.Once
	killBinPath string
	killBinErr  error
)

// natsdBinary builds natsd (the module's main package) once per test binary.
func natsdBinary(t *testing.T) string {
	t.Helper()
	killBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natsd-kill-bin")
		if err != nil {
			killBinErr = err
			return
		}
		killBinPath = filepath.Join(dir, "natsd")
		out, err := exec.Command("go", "build", "-o", killBinPath, "github.com/natsd/natsd").CombinedOutput()
		if err != nil {
			killBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if killBinErr != nil {
		t.Fatal(killBinErr)
	}
	return killBinPath
}

type killProc struct {
	cmd  *exec.Cmd
	url  string
	log  *lockedBuffer
	done chan error
}

// lockedBuffer is the process's output, written by exec's copying goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startKillable starts the binary on a free loopback port with JetStream in storeDir.
func startKillable(t *testing.T, bin, storeDir string, args ...string) *killProc {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &killProc{log: &lockedBuffer{}, done: make(chan error, 1),
		url: "nats://127.0.0.1:" + strconv.Itoa(port)}
	p.cmd = exec.Command(bin, append([]string{"-js", "-sd", storeDir, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("natsd exited at start: %v\n%s", err, p.log)
		default:
		}
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			c.Close()
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("natsd did not start: %s", p.log)
	return nil
}

// kill sends SIGKILL to the process this test started (only it) and waits for it to die.
func (p *killProc) kill(t *testing.T) {
	select {
	case err := <-p.done:
		p.done <- err
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		t.Errorf("natsd (pid %d) did not die of SIGKILL", p.cmd.Process.Pid)
	}
}

// TestJetStreamSIGKILL kills natsd in the middle of bursts, in the default mode (fsync before
// the ack) and in nats-server's lazy one (sync_interval: ack after write(2)), which a process
// crash must not make lose anything either: the kernel keeps what was written.
func TestJetStreamSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := natsdBinary(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	lazyConf := filepath.Join(t.TempDir(), "lazy.conf")
	if err := os.WriteFile(lazyConf, []byte("jetstream { sync_interval: \"1m\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name   string
		rounds int
		args   []string
	}{{"fsync", 4, nil}, {"sync_interval", 2, []string{"-c", lazyConf}}} {
		t.Run(v.name, func(t *testing.T) { killRounds(t, bin, rand.New(rand.NewSource(rng.Int63())), v.rounds, v.args) })
	}
}

func killRounds(t *testing.T, bin string, rng *rand.Rand, rounds int, args []string) {
	storeDir := t.TempDir()
	const name = "KILL"
	cfg := pcStream(name, false)
	must := map[uint64]pcMsg{} // every ack the killed servers sent
	sent := map[int]pcMsg{}
	next := 0
	for round := 0; round <= rounds; round++ {
		p := startKillable(t, bin, storeDir, args...)
		if round == 0 && len(args) > 0 && !strings.Contains(p.log.String(), "acknowledged before fsync") {
			// (The banner is written before the port opens.)
			t.Fatalf("not in lazy mode:\n%s", p.log)
		}
		nc, err := nats.Connect(p.url, nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		js, _ := jetstream.New(nc)
		if round == 0 {
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatalf("create stream: %v", err)
			}
		} else {
			res := checkRecovered(t, js, cfg, must, sent)
			t.Logf("restart %d: %s", round, res)
			if !res.ok() {
				t.Fatalf("restart %d after SIGKILL: %s\n%s", round, res, p.log)
			}
			must[res.nextSeq] = pcMsg{idx: -1, subj: name + ".next", data: []byte("after the restart")}
		}
		cancel()
		if round == rounds {
			nc.Close()
			p.kill(t)
			break
		}

		// The burst: the server is killed after a random number of acks, from the ack
		// handler, while the rest are in flight.
		n := 2000 + rng.Intn(2000)
		killAt := 1 + rng.Intn(n*3/4)
		var mu sync.Mutex
		byMsg := map[*nats.Msg]pcMsg{}
		var nacks int
		var ackErrs []string
		killed := make(chan struct{})
		ajs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512),
			jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, a *jetstream.PubAck) {
				mu.Lock()
				defer mu.Unlock()
				w, ok := byMsg[m]
				switch {
				case !ok || a.Stream != name || a.Duplicate:
					ackErrs = append(ackErrs, fmt.Sprintf("ack %+v for message %d (%v)", a, w.idx, ok))
				case must[a.Sequence].subj != "":
					ackErrs = append(ackErrs, fmt.Sprintf("seq %d acked twice (messages %d and %d)", a.Sequence, must[a.Sequence].idx, w.idx))
				}
				must[a.Sequence] = w
				if nacks++; nacks == killAt {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
					close(killed)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			select {
			case <-killed:
				i = n
				continue
			default:
			}
			w := pcMessage(rng, name, next)
			next++
			sent[w.idx] = w
			m := &nats.Msg{Subject: w.subj, Header: w.hdr, Data: w.data}
			mu.Lock()
			byMsg[m] = w
			mu.Unlock()
			if _, err := ajs.PublishMsgAsync(m, jetstream.WithStallWait(10*time.Second)); err != nil {
				select {
				case <-killed: // the server is gone (a stalled publish, a closed connection)
					i = n
					continue
				default:
				}
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		select {
		case <-killed:
		case <-time.After(20 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("round %d: %d of %d acks in 20s, never reached %d", round, nacks, n, killAt)
		}
		select {
		case err := <-p.done:
			p.done <- err
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("natsd ended with %v, not SIGKILL", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("natsd did not die")
		}
		// Acks already on the socket may still be read: let the client drain them.
		time.Sleep(50 * time.Millisecond)
		nc.Close()
		mu.Lock()
		if len(ackErrs) > 0 {
			t.Fatalf("acks: %v", ackErrs)
		}
		t.Logf("round %d: killed after %d acks of %d published; %d acked in all", round, killAt, n, len(must))
		mu.Unlock()
	}
}
