package filestore

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "FILESTORE_CRASH_CHILD_DIR"

func crashCfg(dir string) Config {
	return Config{Dir: dir, BlockSize: 32 << 10, Compress: true, Logf: quietLog}
}

func crashPayload(r, w, n int) []byte {
	return []byte(fmt.Sprintf("r%d-w%d-n%d-%s", r, w, n, strings.Repeat(string(rune('a'+w)), 20+n%60)))
}

// removable marks the records the child deletes itself, which may or may not
// have been deleted when it was killed.
func removable(w, n int) bool { return w == 0 && n%10 == 0 }

// TestCrashChild is the process that gets SIGKILLed: it appends from several
// goroutines and prints each acknowledgement only once the store calls back.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("only run as the child of TestCrashKill")
	}
	s, err := Open(crashCfg(dir))
	if err != nil {
		fmt.Println("OPENERR", err)
		os.Exit(2)
	}
	round, _ := strconv.Atoi(os.Getenv(crashEnv + "_ROUND"))
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	for w := 0; w < 8; w++ {
		go func(w int) {
			for n := 0; ; n++ {
				done := make(chan uint64, 1)
				s.StoreAsync(fmt.Sprintf("crash.%d", w), nil, crashPayload(round, w, n), func(seq uint64, ts int64, err error) {
					if err == nil {
						mu.Lock()
						fmt.Fprintf(out, "ACK %d %d %d\n", seq, w, n)
						out.Flush()
						mu.Unlock()
					}
					done <- seq
				})
				seq := <-done
				if removable(w, n) {
					s.RemoveMsg(seq)
				}
			}
		}(w)
	}
	select {}
}

type ackRec struct{ r, w, n int }

func TestCrashKill(t *testing.T) {
	dir := t.TempDir()
	acked := map[uint64]ackRec{}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rounds := 18
	if testing.Short() {
		rounds = 8
	}
	if n, err := strconv.Atoi(os.Getenv("FILESTORE_CRASH_ROUNDS")); err == nil && n > 0 {
		rounds = n // a soak: FILESTORE_CRASH_ROUNDS=300 go test -run TestCrashKill ./filestore/
	}
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, fmt.Sprintf("%s_ROUND=%d", crashEnv, round))
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(30+rng.Intn(150)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		lines := strings.Split(stdout.String(), "\n")
		for _, ln := range lines[:len(lines)-1] { // the last piece may be cut short
			f := strings.Fields(ln)
			if len(f) > 0 && f[0] == "OPENERR" {
				t.Fatalf("child failed to open: %s", ln)
			}
			if len(f) != 4 || f[0] != "ACK" {
				continue
			}
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			w, _ := strconv.Atoi(f[2])
			n, _ := strconv.Atoi(f[3])
			acked[seq] = ackRec{round, w, n}
		}
		s, err := Open(crashCfg(dir))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if l := s.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
			t.Fatalf("round %d: lost %+v", round, l)
		}
		prev := map[[2]int]ackRec{}
		var seqs []uint64
		for seq := range acked {
			seqs = append(seqs, seq)
		}
		slices.Sort(seqs)
		for _, seq := range seqs {
			a := acked[seq]
			// Per writer and round, a later append must have a later sequence.
			k := [2]int{a.r, a.w}
			if p, ok := prev[k]; ok && p.n >= a.n {
				t.Fatalf("round %d: seq %d (%+v) follows %+v", round, seq, a, p)
			}
			prev[k] = a
			m, err := s.LoadMsg(seq)
			if err == ErrNotFound && removable(a.w, a.n) {
				continue
			}
			if err != nil {
				t.Fatalf("round %d: acked seq %d: %v", round, seq, err)
			}
			if m.Subject != fmt.Sprintf("crash.%d", a.w) || !bytes.Equal(m.Data, crashPayload(a.r, a.w, a.n)) {
				t.Fatalf("round %d: seq %d differs: %q", round, seq, m.Data)
			}
		}
		s.Stop()
	}
	if len(acked) == 0 {
		t.Fatal("no acknowledgements seen")
	}
	t.Logf("%d rounds, %d acknowledged records verified", rounds, len(acked))
}

const truncEnv = "FILESTORE_TRUNC_CHILD_DIR"

// truncCfg gives blocks small enough that a truncation deletes several and
// cuts one; odd rounds seal full blocks, so the cut block may be sealed.
func truncCfg(dir string, round int) Config {
	return Config{Dir: dir, BlockSize: 2 << 10, Compress: round%2 == 1, Logf: quietLog}
}

// TestTruncateChild is the process TestTruncateKill kills: it truncates the
// store it is given and says when it starts and when Truncate returned.
func TestTruncateChild(t *testing.T) {
	dir := os.Getenv(truncEnv)
	if dir == "" {
		t.Skip("only run as the child of TestTruncateKill")
	}
	round, _ := strconv.Atoi(os.Getenv(truncEnv + "_ROUND"))
	at, _ := strconv.ParseUint(os.Getenv(truncEnv+"_AT"), 10, 64)
	s, err := Open(truncCfg(dir, round))
	if err != nil {
		fmt.Println("OPENERR", err)
		os.Exit(2)
	}
	fmt.Println("START")
	if err := s.Truncate(at); err != nil {
		fmt.Println("TRUNCERR", err)
		os.Exit(2)
	}
	fmt.Println("DONE")
	select {}
}

// TestTruncateKill SIGKILLs a process in the middle of Truncate on the real
// file system (deletions, the cut, the rewritten index.db in whatever state
// the kill leaves them) and checks the reopened store as
// TestPowerLossTruncate does: every message up to the point that was there
// is there, none removed comes back, past the point only an unbroken run of
// the old messages is left, and none at all once Truncate had returned.
func TestTruncateKill(t *testing.T) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rounds := 10
	if n, err := strconv.Atoi(os.Getenv("FILESTORE_TRUNC_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	payload := truncPayload
	finished, midway, before := 0, 0, 0
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		s, err := Open(truncCfg(dir, round))
		if err != nil {
			t.Fatal(err)
		}
		const n = 400
		live := map[uint64]bool{}
		for seq := uint64(1); seq <= n; seq++ {
			if _, _, err := s.StoreMsg(fmt.Sprintf("s.%d", seq%5), nil, payload(seq)); err != nil {
				t.Fatal(err)
			}
			live[seq] = true
		}
		for i := 0; i < 50; i++ {
			seq := uint64(1 + rng.Intn(n))
			s.RemoveMsg(seq)
			delete(live, seq)
		}
		s.Stop()
		at := uint64(n - 20 - rng.Intn(200))

		cmd := exec.Command(os.Args[0], "-test.run=^TestTruncateChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), truncEnv+"="+dir, fmt.Sprintf("%s_ROUND=%d", truncEnv, round),
			fmt.Sprintf("%s_AT=%d", truncEnv, at))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		done := false
		if lines.Scan() && lines.Text() == "START" {
			wait := 3000
			if rng.Intn(2) == 0 {
				wait = 300 // often before the marker is even written
			}
			time.Sleep(time.Duration(rng.Intn(wait)) * time.Microsecond)
		} else {
			t.Fatalf("round %d: child said %q", round, lines.Text())
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for lines.Scan() {
			done = done || lines.Text() == "DONE"
			if strings.HasPrefix(lines.Text(), "TRUNCERR") {
				t.Fatalf("round %d: %s", round, lines.Text())
			}
		}
		_ = cmd.Wait()

		r, err := Open(truncCfg(dir, round))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		checkTruncated(t, fmt.Sprintf("round %d (truncate %d, returned %v)", round, at, done), r, n, at, live, done)
		newest := uint64(n)
		for !live[newest] {
			newest--
		}
		if done {
			finished++
		} else if _, err := r.LoadMsg(newest); err != nil {
			midway++ // killed part way: something past at was already gone
		} else {
			before++
		}
		r.Stop()
	}
	t.Logf("%d rounds killed: %d after Truncate returned, %d part way through, %d before it took effect",
		rounds, finished, midway, before)
}
