package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamKeepsUnreadableStreamDirs: a stream directory natsd cannot recover (here one
// laid out as nats-server lays out its own, in its own format: the store_dir was shared) is
// left as it is, and creating a stream of that name is refused instead of writing over it,
// until the operator moves the directory away.
func TestJetStreamKeepsUnreadableStreamDirs(t *testing.T) {
	store := t.TempDir()
	dir := filepath.Join(store, "jetstream", "$G", "streams", "ORDERS")
	if err := os.MkdirAll(filepath.Join(dir, "msgs"), 0o750); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"meta.inf":   `{"name":"ORDERS","subjects":["orders.>"],"storage":"file"}`,
		"meta.sum":   "3b8f0c2a9d1e4f56", // nats-server's highwayhash, not natsd's sha256
		"msgs/1.blk": "\x16\x00\x00\x00nats-server's block",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	s := startAuth(t, func(o *Options) { o.JetStream, o.StoreDir = true, store })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, "ORDERS"); err == nil {
		t.Fatal("an unreadable stream directory was loaded")
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err == nil || !strings.Contains(err.Error(), "kept untouched") {
		t.Fatalf("create over the kept directory: %v", err)
	}
	for name, body := range files {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != body {
			t.Fatalf("%s changed: %q %v", name, b, err)
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatalf("another stream: %v", err)
	}
	// Moved away by the operator: the name is free again.
	if err := os.Rename(dir, filepath.Join(store, "ORDERS.nats-server")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatalf("create after the directory moved: %v", err)
	}
}
