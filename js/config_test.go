package js

import (
	"strings"
	"testing"
	"time"
)

func testAccount(lim AccountLimits) *account {
	j := &JetStream{accounts: map[string]*account{}}
	return &account{js: j, lim: lim, streams: map[string]*stream{}}
}

// The defaults and refusals of checkConfig, with nats-server's texts (a few are checked
// against the real server in test/jetstream_raw_test.go).
func TestCheckConfig(t *testing.T) {
	cases := []struct {
		name string
		in   StreamConfig
		lim  AccountLimits
		err  string // "" for valid
		want func(StreamConfig) bool
	}{
		{name: "defaults", in: StreamConfig{Name: "S"}, lim: Unlimited, want: func(c StreamConfig) bool {
			return c.Retention == LimitsPolicy && c.Discard == DiscardOld && c.Storage == FileStorage &&
				c.Replicas == 1 && c.MaxMsgs == -1 && c.MaxBytes == -1 && c.MaxMsgsPer == -1 && c.MaxMsgSize == -1 &&
				c.MaxConsumers == -1 && c.Duplicates == 2*time.Minute && len(c.Subjects) == 1 && c.Subjects[0] == "S" &&
				c.Compression == NoCompression
		}},
		{name: "dup window follows max age", in: StreamConfig{Name: "S", MaxAge: time.Second}, lim: Unlimited,
			want: func(c StreamConfig) bool { return c.Duplicates == time.Second }},
		{name: "bad name", in: StreamConfig{Name: "a.b"}, lim: Unlimited,
			err: "stream name is required and can not contain '.', '*', '>', '\\', '/'"},
		{name: "long name", in: StreamConfig{Name: strings.Repeat("n", 256)}, lim: Unlimited,
			err: "stream name is too long, maximum allowed is 255"},
		{name: "max age", in: StreamConfig{Name: "S", MaxAge: time.Millisecond}, lim: Unlimited,
			err: "max age needs to be >= 100ms"},
		{name: "rollup needs purge", in: StreamConfig{Name: "S", DenyPurge: true, AllowRollup: true}, lim: Unlimited,
			err: "roll-ups require the purge permission"},
		{name: "overlapping subjects", in: StreamConfig{Name: "S", Subjects: []string{"a.*", "a.b"}}, lim: Unlimited,
			err: `subject "a.*" overlaps with "a.b"`},
		{name: "api subjects", in: StreamConfig{Name: "S", Subjects: []string{"$JS.API.>"}}, lim: Unlimited,
			err: "subjects that overlap with jetstream api require no-ack to be true"},
		{name: "advisories are fine", in: StreamConfig{Name: "S", Subjects: []string{"$JS.EVENT.ADVISORY.>"}}, lim: Unlimited},
		{name: "capture all", in: StreamConfig{Name: "S", Subjects: []string{">"}}, lim: Unlimited,
			err: "capturing all subjects requires no-ack to be true"},
		{name: "discard new per subject", in: StreamConfig{Name: "S", DiscardNewPer: true}, lim: Unlimited,
			err: "discard new per subject requires discard new policy to be set"},
		{name: "max bytes required", in: StreamConfig{Name: "S"}, lim: AccountLimits{-1, -1, -1, -1, -1, -1, -1, true},
			err: "account requires a stream config to have max bytes set"},
		{name: "marker ttl turns on ttl and rollup", in: StreamConfig{Name: "S", SubjectDeleteMarkerTTL: time.Second},
			lim: Unlimited, want: func(c StreamConfig) bool { return c.AllowMsgTTL && c.AllowRollup }},
		{name: "async persist on memory", in: StreamConfig{Name: "S", Storage: MemoryStorage, PersistMode: AsyncPersist},
			lim: Unlimited, err: "async persist mode is only supported on file storage"},
		{name: "mirror with subjects", in: StreamConfig{Name: "S", Subjects: []string{"s"}, Mirror: &StreamSource{Name: "O"}},
			lim: Unlimited, err: "stream mirrors can not contain subjects"},
		{name: "external source", in: StreamConfig{Name: "S", Sources: []*StreamSource{{Name: "O",
			External: &ExternalStream{APIPrefix: "$JS.hub.API"}}}}, lim: Unlimited},
		{name: "external api prefix overlaps", in: StreamConfig{Name: "S", Sources: []*StreamSource{{Name: "O",
			External: &ExternalStream{APIPrefix: "$JS.API"}}}}, lim: Unlimited,
			err: "stream external api prefix $JS.API must not overlap with $JS.API"},
		{name: "external deliver prefix wildcard", in: StreamConfig{Name: "S", Mirror: &StreamSource{Name: "O",
			External: &ExternalStream{APIPrefix: "JS.A.API", DeliverPrefix: "d.>"}}}, lim: Unlimited,
			err: "stream external delivery prefix d.> must not contain wildcards"},
		{name: "durable source with a filter", in: StreamConfig{Name: "S", Sources: []*StreamSource{{Name: "O",
			FilterSubject: "o.a", Consumer: &StreamConsumerSource{Name: "C", DeliverSubject: "d"}}}}, lim: Unlimited,
			err: "stream source consumer config is invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, e := testAccount(c.lim).checkConfig(&c.in, false)
			switch {
			case c.err == "" && e != nil:
				t.Fatalf("unexpected error %v", e)
			case c.err != "" && (e == nil || e.Description != c.err):
				t.Fatalf("error %v, want %q", e, c.err)
			case c.want != nil && !c.want(got):
				t.Fatalf("config %+v", got)
			}
		})
	}
}

func TestCheckUpdate(t *testing.T) {
	a := testAccount(Unlimited)
	old, _ := a.checkConfig(&StreamConfig{Name: "S", DenyDelete: true}, false)
	cases := []struct {
		change func(*StreamConfig)
		err    string
	}{
		{func(c *StreamConfig) { c.Storage = MemoryStorage }, "stream configuration update can not change storage type"},
		{func(c *StreamConfig) { c.DenyDelete = false }, "stream configuration update can not cancel deny message deletes"},
		{func(c *StreamConfig) { c.Retention = WorkQueuePolicy }, "stream configuration update can not change retention policy to/from workqueue"},
		{func(c *StreamConfig) { c.MaxMsgs = 10 }, ""},
	}
	for _, c := range cases {
		in := old
		c.change(&in)
		_, e := a.checkUpdate(&old, &in, false)
		if (c.err == "") != (e == nil) || (e != nil && e.Description != c.err) {
			t.Errorf("update: %v, want %q", e, c.err)
		}
	}
}

func TestHeaders(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: abc\r\nnats-expected-stream: x\r\nNats-TTL:  5s \r\n\r\n")
	for _, c := range []struct {
		key, want string
		ok        bool
	}{
		{hdrMsgID, "abc", true},
		{hdrExpectedStream, "", false}, // names match case-sensitively, as nats-server's
		{hdrTTL, "5s", true},
		{"Nats-Msg", "", false},
	} {
		v, ok := header(hdr, c.key)
		if ok != c.ok || string(v) != c.want {
			t.Errorf("header(%q) = %q, %v", c.key, v, ok)
		}
	}
	if got := string(appendHeader(nil, "A", "1")); got != "NATS/1.0\r\nA: 1\r\n\r\n" {
		t.Errorf("appendHeader = %q", got)
	}
	if got := string(appendHeader(hdr[:13+len("Nats-Msg-Id: abc\r\n")-3], "B", "2")); !strings.HasSuffix(got, "B: 2\r\n\r\n") {
		t.Errorf("appendHeader = %q", got)
	}
}

func TestParseTTL(t *testing.T) {
	for _, c := range []struct {
		in          string
		secs        int64
		never, okay bool
	}{
		{"never", 0, true, true}, {"NEVER", 0, true, true}, {"5s", 5, false, true}, {"1m", 60, false, true},
		{"30", 30, false, true}, {"0", 0, false, false}, // "0" parses as a duration under 1s, as in nats-server {"500ms", 0, false, false}, {"-1", 0, false, false},
		{"x", 0, false, false},
	} {
		secs, never, ok := parseTTL([]byte(c.in))
		if secs != c.secs || never != c.never || ok != c.okay {
			t.Errorf("parseTTL(%q) = %d %v %v", c.in, secs, never, ok)
		}
	}
}

func TestSubsetMatch(t *testing.T) {
	for _, c := range []struct {
		subj, test string
		want       bool
	}{
		{"foo.*", ">", true}, {"foo.*", "*.*", true}, {"foo.*", "foo.bar", false}, {"$JS.EVENT.X", "$JS.EVENT.>", true},
		{"foo.>", "foo.*", false}, {"foo", "foo", true},
	} {
		if got := subsetMatch(c.subj, c.test); got != c.want {
			t.Errorf("subsetMatch(%q, %q) = %v", c.subj, c.test, got)
		}
	}
}

func TestMetadataLevels(t *testing.T) {
	c := StreamConfig{Name: "S", AllowMsgTTL: true, Metadata: map[string]string{"_nats.ver": "x", "k": "v"}}
	setStaticMetadata(&c)
	if c.Metadata["_nats.req.level"] != "1" || c.Metadata["_nats.ver"] != "" || c.Metadata["k"] != "v" {
		t.Fatalf("metadata %v", c.Metadata)
	}
	r := reported(c)
	if r.Metadata["_nats.level"] != "5" || r.Metadata["_nats.ver"] != Version || c.Metadata["_nats.level"] != "" {
		t.Fatalf("reported %v (stored %v)", r.Metadata, c.Metadata)
	}
}
