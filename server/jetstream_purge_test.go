package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamAccountPurge: `nats server account purge` ($JS.API.ACCOUNT.PURGE.<account>
// from the system account) deletes the account's streams and its store directory, leaving
// JetStream on for it; from the account itself the request gets no answer. Both servers,
// the same observations.
func TestJetStreamAccountPurge(t *testing.T) {
	var ref map[string]any
	for _, name := range compatTargets() {
		t.Run(name, func(t *testing.T) {
			store := t.TempDir()
			cs := startCompat(t, name, fmt.Sprintf(`jetstream { store_dir: %q }
accounts {
  A: { jetstream: enabled, users: [{user: a, password: a}] }
  B: { jetstream: enabled, users: [{user: b, password: b}] }
  SYS: { users: [{user: s, password: s}] }
}
system_account: SYS
`, store))
			conn := func(user string) *nats.Conn {
				nc, err := nats.Connect("nats://"+cs.addr, nats.UserInfo(user, user))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				return nc
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			nca, ncb, ncs := conn("a"), conn("b"), conn("s")
			jsa, _ := jetstream.New(nca)
			jsb, _ := jetstream.New(ncb)
			for _, c := range []jetstream.StreamConfig{{Name: "F", Subjects: []string{"f"}}, {Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage}} {
				s, err := jsa.CreateStream(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := jsa.Publish(ctx, c.Subjects[0], []byte("x")); err != nil {
					t.Fatal(err)
				}
				if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := jsb.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}}); err != nil {
				t.Fatal(err)
			}
			adv, err := nca.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.DELETED.>")
			if err != nil {
				t.Fatal(err)
			}
			req := func(nc *nats.Conn, subj string) any {
				m, err := nc.Request(subj, nil, time.Second)
				if errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
					return err.Error()
				} else if err != nil {
					t.Fatal(err)
				}
				var v any
				if err := json.Unmarshal(m.Data, &v); err != nil {
					t.Fatalf("%s: %s", subj, m.Data)
				}
				return v
			}
			obs := map[string]any{}
			obs["from the account"] = req(nca, "$JS.API.ACCOUNT.PURGE.A")
			obs["path separator"] = req(ncs, `$JS.API.ACCOUNT.PURGE.A\B`)
			obs["purge"] = req(ncs, "$JS.API.ACCOUNT.PURGE.A")
			obs["unknown account"] = req(ncs, "$JS.API.ACCOUNT.PURGE.NOPE")
			var advised []string
			for range 2 {
				m, err := adv.NextMsg(5 * time.Second)
				if err != nil {
					t.Fatalf("delete advisories: %v", err)
				}
				advised = append(advised, m.Subject)
			}
			slices.Sort(advised) // nats-server deletes the streams in its map's order
			obs["advisories"] = advised
			ai, err := jsa.AccountInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			obs["account after"] = []any{ai.Streams, ai.Consumers, ai.Store, ai.Memory}
			_, err = os.Stat(filepath.Join(store, "jetstream", "A"))
			obs["A directory gone"] = os.IsNotExist(err)
			if bi, err := jsb.AccountInfo(ctx); err == nil {
				obs["B untouched"] = bi.Streams
			}
			// JetStream stays on for the account: a stream made again works.
			if _, err := jsa.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}}); err != nil {
				t.Fatal(err)
			}
			ack, err := jsa.Publish(ctx, "f", []byte("again"))
			if err != nil {
				t.Fatal(err)
			}
			obs["again"] = ack.Sequence
			t.Logf("%v", obs)
			if ref == nil {
				ref = obs
			} else if !reflect.DeepEqual(obs, ref) {
				t.Errorf("observations differ:\n got %v\nwant %v", obs, ref)
			}
		})
	}
}
