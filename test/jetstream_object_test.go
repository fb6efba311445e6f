package test

// The object store (issue 18): a 50 MiB object put and got back byte-identical, links to an
// object and to a bucket, watch, seal and the bucket list, on both servers.

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// objPayload is a deterministic pseudo-random stream of n bytes (the same on every call).
func objPayload(n int64) io.Reader {
	return io.LimitReader(rand.New(rand.NewSource(18)), n)
}

// objInfoObs is what a scenario records of an object's info (not its NUID or time).
func objInfoObs(i *jetstream.ObjectInfo) any {
	if i == nil {
		return nil
	}
	v := map[string]any{"name": i.Name, "bucket": i.Bucket, "size": i.Size, "chunks": i.Chunks,
		"digest": i.Digest, "deleted": i.Deleted, "description": i.Description, "nuid_set": i.NUID != ""}
	if i.Opts != nil && i.Opts.Link != nil {
		v["link"] = *i.Opts.Link
	}
	return v
}

// objReadCompare reads r to its end, comparing it with want: the bytes read, the first
// offset at which they differ (-1 none) and their SHA-256 in the object store's form.
func objReadCompare(r io.Reader, want io.Reader) (int64, int64, string, error) {
	h := sha256.New()
	buf, wbuf := make([]byte, 256<<10), make([]byte, 256<<10)
	var n int64
	diff := int64(-1)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			if diff < 0 {
				wk, _ := io.ReadFull(want, wbuf[:k])
				if i := firstDiff(buf[:k], wbuf[:wk]); i >= 0 {
					diff = n + int64(i)
				}
			}
			n += int64(k)
		}
		if err == io.EOF {
			if diff < 0 {
				if wk, _ := want.Read(wbuf[:1]); wk > 0 {
					diff = n // want goes on
				}
			}
			return n, diff, "SHA-256=" + base64.URLEncoding.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return n, diff, "", err
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(b) > len(a) {
		return len(a)
	}
	return -1
}

func TestJSObjectStoreBigLinksWatchSeal(t *testing.T) {
	jsCompare(t, func(t *testing.T, tg target) any {
		_, js := jsStart(t, tg, Config{})
		// Two 50 MiB transfers (put, get, and a get through a link) under -race and a full
		// parallel suite take far longer than the usual 20 s budget.
		ctx := jsCtxFor(t, 90*time.Second)
		obs := map[string]any{}
		obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "files", Description: "big ones"})
		if err != nil {
			t.Fatal(err)
		}
		other, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "other", Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}

		// 50 MiB, streamed in and out (never held whole), compared byte for byte.
		const size = 50 << 20
		start := time.Now()
		info, err := obj.Put(ctx, jetstream.ObjectMeta{Name: "big", Description: "50 MiB"}, objPayload(size))
		if err != nil {
			t.Fatalf("put 50 MiB: %v", err)
		}
		put := time.Since(start)
		_, _, wantDigest, _ := objReadCompare(objPayload(size), objPayload(size))
		obs["big_put"], obs["big_digest_is_sha256"] = objInfoObs(info), info.Digest == wantDigest
		start = time.Now()
		res, err := obj.Get(ctx, "big")
		if err != nil {
			t.Fatalf("get 50 MiB: %v", err)
		}
		n, diff, digest, rerr := objReadCompare(res, objPayload(size))
		res.Close()
		t.Logf("50 MiB: put %v, get %v", put, time.Since(start))
		gi, _ := res.Info()
		obs["big_get"] = map[string]any{"read": n, "first_diff": diff, "digest_ok": digest == wantDigest,
			"err": fmt.Sprint(rerr), "res_err": fmt.Sprint(res.Error()), "info": objInfoObs(gi)}

		// Links: to an object (got through), to a bucket (not), to a link (refused).
		if _, err := other.PutString(ctx, "note", "in the other bucket"); err != nil {
			t.Fatal(err)
		}
		small, err := obj.PutBytes(ctx, "small", []byte("hello, object"))
		if err != nil {
			t.Fatal(err)
		}
		li, err := obj.AddLink(ctx, "small-link", small)
		obs["link"], obs["link_err"] = objInfoObs(li), jsErrObs(err)
		oi, err := other.GetInfo(ctx, "note")
		if err != nil {
			t.Fatal(err)
		}
		xli, err := obj.AddLink(ctx, "note-link", oi)
		obs["cross_link"], obs["cross_link_err"] = objInfoObs(xli), jsErrObs(err)
		bli, err := obj.AddBucketLink(ctx, "other-bucket", other)
		obs["bucket_link"], obs["bucket_link_err"] = objInfoObs(bli), jsErrObs(err)
		if li != nil {
			_, err = obj.AddLink(ctx, "link-to-link", li)
			obs["link_to_link_err"] = jsErrObs(err)
		}
		for _, name := range []string{"small-link", "note-link", "other-bucket"} {
			s, err := obj.GetString(ctx, name)
			obs["get_"+name], obs["get_"+name+"_err"] = s, jsErrObs(err)
			gi, err := obj.GetInfo(ctx, name)
			obs["info_"+name], obs["info_"+name+"_err"] = objInfoObs(gi), jsErrObs(err)
		}
		// A link through which a 50 MiB object is read is the object.
		bl, err := obj.AddLink(ctx, "big-link", info)
		if err != nil {
			t.Fatal(err)
		}
		obs["big_link"] = objInfoObs(bl)
		if res, err := obj.Get(ctx, "big-link"); err != nil {
			obs["big_link_get_err"] = jsErrObs(err)
		} else {
			n, diff, digest, rerr := objReadCompare(res, objPayload(size))
			res.Close()
			obs["big_link_get"] = []any{n, diff, digest == wantDigest, fmt.Sprint(rerr)}
		}

		// Watch: the initial entries, the end marker, then a put, an update and a delete.
		w, err := obj.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []any
		initial := 0
		collect := func(until func() bool) {
			deadline := time.After(5 * time.Second)
			for !until() {
				select {
				case e := <-w.Updates():
					if e == nil {
						seen = append(seen, "<initial done>")
						initial = len(seen)
						continue
					}
					seen = append(seen, objInfoObs(e))
				case <-deadline:
					seen = append(seen, "<timeout>")
					return
				}
			}
		}
		collect(func() bool { return initial > 0 })
		// (The initial entries come in the stream's order of the last meta of each name.)
		// Each change is waited for before the next: a put rolls the name's previous meta
		// up, so one the watcher had not been sent yet would be skipped (timing).
		for i, op := range []func() error{
			func() error { _, err := obj.PutString(ctx, "w", "first"); return err },
			func() error { _, err := obj.PutString(ctx, "w", "second, longer"); return err },
			func() error { return obj.Delete(ctx, "w") },
		} {
			if err := op(); err != nil {
				t.Fatal(err)
			}
			collect(func() bool { return len(seen) >= initial+i+1 })
		}
		obs["watch"] = seen
		uw, err := obj.Watch(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
		if err != nil {
			t.Fatal(err)
		}
		defer uw.Stop()
		if err := obj.Delete(ctx, "small"); err != nil {
			t.Fatal(err)
		}
		if _, err := obj.PutString(ctx, "after", "x"); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-uw.Updates():
			obs["updates_only"] = objInfoObs(e)
		case <-time.After(5 * time.Second):
			obs["updates_only"] = "timeout"
		}
		_, err = obj.GetString(ctx, "small-link")
		obs["get_link_to_deleted"] = jsErrObs(err)

		list, err := obj.List(ctx)
		var names []string
		for _, i := range list {
			names = append(names, i.Name)
		}
		sort.Strings(names)
		obs["list"], obs["list_err"] = names, jsErrObs(err)
		_, err = obj.List(ctx, jetstream.ListObjectsShowDeleted())
		obs["list_deleted_err"] = jsErrObs(err)

		// Seal: no more puts, deletes or links; reads still work.
		if err := obj.Seal(ctx); err != nil {
			t.Fatalf("seal: %v", err)
		}
		_, err = obj.PutString(ctx, "late", "x")
		obs["sealed_put_err"] = jsErrObs(err)
		obs["sealed_delete_err"] = jsErrObs(obj.Delete(ctx, "after"))
		_, err = obj.AddBucketLink(ctx, "late-link", other)
		obs["sealed_link_err"] = jsErrObs(err)
		s, err := obj.GetString(ctx, "after")
		obs["sealed_get"], obs["sealed_get_err"] = s, jsErrObs(err)
		st, err := obj.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs["status"] = []any{st.Bucket(), st.Description(), st.Sealed(), st.Storage().String(), st.Size(), st.BackingStore()}

		// The bucket list, with a KV bucket (not an object store) beside.
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "kv"}); err != nil {
			t.Fatal(err)
		}
		nl := js.ObjectStoreNames(ctx)
		var bnames []string
		for n := range nl.Name() {
			bnames = append(bnames, n)
		}
		sort.Strings(bnames)
		obs["names"], obs["names_err"] = bnames, jsErrObs(nl.Error())
		sl := js.ObjectStores(ctx)
		var stats []any
		for st := range sl.Status() {
			stats = append(stats, fmt.Sprint(st.Bucket(), " sealed=", st.Sealed(), " ", st.Storage(), " ", st.Description()))
		}
		sort.Slice(stats, func(i, j int) bool { return stats[i].(string) < stats[j].(string) })
		obs["stores"], obs["stores_err"] = stats, jsErrObs(sl.Error())
		if err := js.DeleteObjectStore(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		_, err = obj.GetInfo(ctx, "other-bucket")
		obs["bucket_link_after_delete_err"] = jsErrObs(err)
		_, err = js.ObjectStore(ctx, "other")
		obs["deleted_bucket_err"] = jsErrObs(err)
		return obs
	})
}
