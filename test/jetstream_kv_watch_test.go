package test

// KV watchers, key listings and history, and the object store: client-side layers of
// nats.go over streams and (ordered) consumers, on both servers.

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestJSKVWatchKeysHistory(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 5})
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range []string{"a", "b", "a", "c.x", "c.y"} {
			if _, err := kv.Put(ctx, k, []byte(fmt.Sprintf("v%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := kv.Delete(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		obs := map[string]any{}
		keys, err := kv.Keys(ctx)
		sort.Strings(keys)
		obs["keys"], obs["keys_err"] = keys, fmt.Sprint(err)
		lister, err := kv.ListKeysFiltered(ctx, "c.*")
		if err != nil {
			t.Fatal(err)
		}
		var filtered []string
		for k := range lister.Keys() {
			filtered = append(filtered, k)
		}
		sort.Strings(filtered)
		obs["filtered"] = filtered
		hist, err := kv.History(ctx, "a")
		var h []string
		for _, e := range hist {
			h = append(h, fmt.Sprintf("%s=%s@%d %s", e.Key(), e.Value(), e.Revision(), e.Operation()))
		}
		obs["history"], obs["history_err"] = h, fmt.Sprint(err)
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []string
		initialDone := false
		collect := func(until func() bool) {
			deadline := time.After(3 * time.Second)
			for !until() {
				select {
				case e := <-w.Updates():
					if e == nil {
						seen = append(seen, "<initial done>")
						initialDone = true
						continue
					}
					// Deltas of live updates depend on what the server stored meanwhile (the
					// purge published right after the put): only the initial ones are fixed.
					if initialDone {
						seen = append(seen, fmt.Sprintf("%s=%s@%d %s", e.Key(), e.Value(), e.Revision(), e.Operation()))
					} else {
						seen = append(seen, fmt.Sprintf("%s=%s@%d %s d%d", e.Key(), e.Value(), e.Revision(), e.Operation(), e.Delta()))
					}
				case <-deadline:
					return
				}
			}
		}
		collect(func() bool { return len(seen) > 0 && seen[len(seen)-1] == "<initial done>" })
		if _, err := kv.Put(ctx, "d", []byte("live")); err != nil {
			t.Fatal(err)
		}
		if err := kv.Purge(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		collect(func() bool { return len(seen) >= 6 })
		obs["watch"] = seen
		wu, err := kv.Watch(ctx, "c.*", jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer wu.Stop()
		if _, err := kv.Put(ctx, "c.z", []byte("new")); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-wu.Updates():
			if e != nil {
				obs["updates_only"] = fmt.Sprintf("%s=%s", e.Key(), e.Value())
			}
		case <-time.After(3 * time.Second):
			obs["updates_only"] = "timeout"
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["status"] = []any{st.Bucket(), st.Values(), st.History(), st.TTL().String()}
		return obs
	})
}

func TestJSObjectStore(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		ctx := jsCtx(t)
		obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "files"})
		if err != nil {
			t.Fatal(err)
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: several chunks
		if _, err := obj.PutBytes(ctx, "big", big); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.PutString(ctx, "small", "hello"); err != nil {
			t.Fatal(err)
		}
		got, err := obj.GetBytes(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		obs := map[string]any{"big_ok": bytes.Equal(got, big)}
		s, err := obj.GetString(ctx, "small")
		obs["small"], obs["small_err"] = s, fmt.Sprint(err)
		info, err := obj.GetInfo(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		obs["info"] = []any{info.Name, info.Size, info.Chunks, info.Digest}
		list, err := obj.List(ctx)
		var names []string
		for _, i := range list {
			names = append(names, i.Name)
		}
		sort.Strings(names)
		obs["list"], obs["list_err"] = names, fmt.Sprint(err)
		if err := obj.Delete(ctx, "small"); err != nil {
			t.Fatal(err)
		}
		_, err = obj.GetString(ctx, "small")
		obs["deleted"] = fmt.Sprint(err)
		st, err := obj.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["status"] = []any{st.Bucket(), st.Size(), st.Sealed()}
		return obs
	})
}
