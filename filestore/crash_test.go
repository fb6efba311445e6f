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
