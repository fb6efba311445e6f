package flame

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
)

var sink []byte

func TestHeapProfileToSVG(t *testing.T) {
	for i := 0; i < 1000; i++ {
		sink = make([]byte, 64<<10)
	}
	path := filepath.Join(t.TempDir(), "allocs.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	vi := p.ValueIndex("alloc_space")
	if p.SampleTypes[vi] != "alloc_space/bytes" || len(p.Stacks) == 0 {
		t.Fatalf("types %v, %d stacks", p.SampleTypes, len(p.Stacks))
	}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, p, vi, Options{Title: "test", Unit: "bytes"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "TestHeapProfileToSVG") {
		t.Fatal("flame graph lacks the allocating test function")
	}
	if !strings.Contains(Top(p, vi, 10, "bytes"), "TestHeapProfileToSVG") {
		t.Fatal("top lacks the allocating test function")
	}
}
