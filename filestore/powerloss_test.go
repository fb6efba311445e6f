package filestore

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// plFS is a test double of the OS page cache: file contents become durable
// only at File.Sync and names (creations, renames, removals) only at SyncDir.
// cut returns the file system a power failure would leave behind.
type plFS struct {
	mu      sync.Mutex
	names   map[string]*plInode
	durable map[string]*plInode
}

type plInode struct {
	data   []byte
	synced []byte
}

type plFile struct {
	fs *plFS
	in *plInode
}

func newPLFS() *plFS {
	return &plFS{names: map[string]*plInode{}, durable: map[string]*plInode{}}
}

func (p *plFS) MkdirAll(string) error { return nil }

func (p *plFS) OpenFile(name string, create bool) (File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.names[name]
	if in == nil {
		if !create {
			return nil, os.ErrNotExist
		}
		in = &plInode{}
		p.names[name] = in
	}
	return &plFile{p, in}, nil
}

func (p *plFS) ReadDir(dir string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.names {
		if filepath.Dir(n) == dir {
			out = append(out, filepath.Base(n))
		}
	}
	sort.Strings(out)
	return out, nil
}

func (p *plFS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names[name] == nil {
		return os.ErrNotExist
	}
	delete(p.names, name)
	return nil
}

func (p *plFS) Rename(o, n string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.names[o]
	if in == nil {
		return os.ErrNotExist
	}
	delete(p.names, o)
	p.names[n] = in
	return nil
}

func (p *plFS) SyncDir(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := range p.durable {
		if filepath.Dir(n) == dir && p.names[n] == nil {
			delete(p.durable, n)
		}
	}
	for n, in := range p.names {
		if filepath.Dir(n) == dir {
			p.durable[n] = in
		}
	}
	return nil
}

// cut simulates a power failure: durable names with their synced contents,
// plus, at random, a torn prefix of what was written but not synced.
func (p *plFS) cut(rng *rand.Rand) *plFS {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := newPLFS()
	for n, in := range p.durable {
		d := append([]byte(nil), in.synced...)
		if len(in.data) > len(d) && bytes.HasPrefix(in.data, d) && rng.Intn(2) == 0 {
			extra := in.data[len(d):]
			k := rng.Intn(len(extra) + 1)
			d = append(d, extra[:k]...)
			if k > 0 && rng.Intn(2) == 0 {
				// Blocks that reached the disk out of order leave zeros.
				z := rng.Intn(k) + 1
				clear(d[len(d)-z:])
			}
		}
		nin := &plInode{data: d, synced: append([]byte(nil), d...)}
		q.names[n] = nin
		q.durable[n] = nin
	}
	return q
}

func (f *plFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.in.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.in.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *plFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if end := off + int64(len(b)); end > int64(len(f.in.data)) {
		f.in.data = append(f.in.data, make([]byte, end-int64(len(f.in.data)))...)
	}
	copy(f.in.data[off:], b)
	return len(b), nil
}

func (f *plFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.in.synced = append(f.in.synced[:0], f.in.data...)
	return nil
}

func (f *plFile) Truncate(n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if n < int64(len(f.in.data)) {
		f.in.data = f.in.data[:n]
	} else {
		f.in.data = append(f.in.data, make([]byte, n-int64(len(f.in.data)))...)
	}
	return nil
}

func (f *plFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.in.data)), nil
}

func (f *plFile) Close() error { return nil }

type plAck struct {
	subj string
	data []byte
}

func TestPowerLoss(t *testing.T) {
	for _, variant := range []string{"plain", "s2-chacha"} {
		t.Run(variant, func(t *testing.T) {
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			fsys := newPLFS()
			cfg := Config{Dir: "/store", FS: fsys, BlockSize: 8 << 10, Logf: quietLog}
			if variant != "plain" {
				cfg.Compress, cfg.EncryptionKey = true, []byte("k")
			}
			acked := map[uint64]plAck{}
			for round := 0; round < 12; round++ {
				cfg.FS = fsys
				s, err := Open(cfg)
				if err != nil {
					t.Fatalf("round %d: open: %v", round, err)
				}
				for seq, a := range acked {
					m, err := s.LoadMsg(seq)
					if err != nil || m.Subject != a.subj || !bytes.Equal(m.Data, a.data) {
						t.Fatalf("round %d: acked seq %d lost after power cut: %v", round, seq, err)
					}
				}
				if l := s.Lost(); l.Msgs != 0 || l.CorruptSpans != 0 {
					t.Fatalf("round %d: lost %+v", round, l)
				}
				var mu sync.Mutex
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for w := 0; w < 16; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for n := 0; ; n++ {
							select {
							case <-stop:
								return
							default:
							}
							subj := fmt.Sprintf("pl.%d", w)
							data := []byte(fmt.Sprintf("%d-%d-%d-%0*d", round, w, n, (n*7+w)%200+1, 0))
							seq, _, err := s.StoreMsg(subj, nil, data)
							if err != nil {
								return
							}
							mu.Lock()
							acked[seq] = plAck{subj, data}
							mu.Unlock()
						}
					}(w)
				}
				time.Sleep(time.Duration(5+rng.Intn(25)) * time.Millisecond)
				// Everything acknowledged before this point must survive.
				mu.Lock()
				next := fsys.cut(rng)
				snapshot := make(map[uint64]plAck, len(acked))
				for k, v := range acked {
					snapshot[k] = v
				}
				mu.Unlock()
				close(stop)
				wg.Wait()
				s.Stop()
				acked, fsys = snapshot, next
			}
			if len(acked) < 100 {
				t.Fatalf("only %d acked records", len(acked))
			}
		})
	}
}

// TestPowerLossPeriodic shows the documented trade-off: with sync_interval
// only what was synced survives, and the store still opens cleanly.
func TestPowerLossPeriodic(t *testing.T) {
	fsys := newPLFS()
	cfg := Config{Dir: "/store", FS: fsys, BlockSize: 8 << 10, SyncInterval: time.Hour, Logf: quietLog}
	s, _ := Open(cfg)
	for i := 0; i < 100; i++ {
		mustStore(t, s, "p", "x")
	}
	cut := fsys.cut(rand.New(rand.NewSource(1)))
	s.Stop()
	cfg.FS = cut
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if st := s.State(); st.Msgs > 100 {
		t.Fatalf("%+v", st)
	}
}
