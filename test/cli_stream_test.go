package test

// The nats CLI's stream commands, run against natsd and nats-server in the same test: what an
// operator sees must be the same once values that differ between any two runs (times, ids,
// ports, paths) are masked. JSON output is compared field by field (jsCompare); text output
// is compared whole, line by line, so a changed number or label shows.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsCLI runs the nats CLI against url; it returns the combined output and whether it succeeded.
func jsCLI(t *testing.T, url string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, natsCLI(t), append([]string{"--server", url, "--timeout", "2s"}, args...)...)
	cmd.Env = append(os.Environ(), "NATS_CONTEXT=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// cliMasks blank what legitimately differs between two servers or two runs; each is anchored
// to its context so a number that should match is never masked.
var cliMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?( \+0000 UTC)?Z?`), "<time>"},
	{regexp.MustCompile(`(?m)^\d{2}:\d{2}:\d{2} Published`), "<clock> Published"},
	{regexp.MustCompile(`<time> \(\S+\) on Subject`), "<time> (<age>) on Subject"},
	{regexp.MustCompile(`\bN[A-Z0-9]{55}\b`), "<server-id>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "<host:port>"},
	{regexp.MustCompile(`(Client ID|RTT): .*`), "$1: <v>"},
	{regexp.MustCompile(`done! \[.*\]`), "done! [<progress>]"},
	{regexp.MustCompile(`in \d+(\.\d+)?(ns|µs|ms|s)\b`), "in <elapsed>"},
	{regexp.MustCompile(`Received .* in \S+, .* uncompressed`), "Received <size>"},
}

func maskCLI(out string, paths ...string) string {
	// go-cmp (the CLI's edit diff) picks ordinary or no-break spaces at random, on purpose.
	out = strings.ReplaceAll(out, "\u00a0", " ")
	for _, p := range paths {
		out = strings.ReplaceAll(out, p, "<dir>")
	}
	for _, m := range cliMasks {
		out = m.re.ReplaceAllString(out, m.with)
	}
	return out
}

// cliJSON decodes a --json output (after any warning lines) into plain JSON values.
func cliJSON(t *testing.T, out string) any {
	t.Helper()
	var v any
	decode(t, out, &v)
	return v
}

// storedMsgs is every message of a stream as nats.go reads it back, time included.
func storedMsgs(t *testing.T, s jetstream.Stream) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsAPITimeout)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []map[string]any
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			out = append(out, map[string]any{"seq": seq, "error": err.Error()})
			continue
		}
		out = append(out, map[string]any{"seq": m.Sequence, "subject": m.Subject, "header": headerObs(m.Header),
			"data": base64.StdEncoding.EncodeToString(m.Data), "at": m.Time.UnixNano()})
	}
	return out
}

func TestCLIStream(t *testing.T) {
	natsCLI(t)
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, js := jsStart(t, tg, Config{})
		u := nc.ConnectedUrl()
		backup := filepath.Join(t.TempDir(), "backup")
		obs := map[string]any{}
		step := 0
		// run records a command's output: text masked, --json decoded; fail says it must fail.
		run := func(fail bool, args ...string) string {
			t.Helper()
			out, ok := jsCLI(t, u, args...)
			if ok == fail {
				t.Errorf("nats %s: succeeded %v, want %v:\n%s", strings.Join(args, " "), ok, !fail, out)
			}
			step++
			key := strings.Join(args, " ")
			key = strings.ReplaceAll(key, backup, "<dir>")
			if len(key) > 60 {
				key = key[:60]
			}
			key = string(rune('A'+step/26)) + string(rune('a'+step%26)) + " " + key
			if ok && (args[len(args)-1] == "--json" || args[len(args)-1] == "-j") {
				obs[key] = cliJSON(t, out)
			} else {
				obs[key] = strings.Split(maskCLI(out, backup), "\n")
			}
			return out
		}
		run(false, "stream", "add", "ORDERS", "--subjects", "orders.*", "--storage", "file", "--retention", "limits",
			"--discard", "old", "--max-msgs", "1000", "--max-bytes", "1048576", "--max-age", "1h", "--max-msg-size", "1024",
			"--max-msgs-per-subject", "100", "--dupe-window", "2m", "--replicas", "1", "--description", "the orders",
			"--allow-rollup", "--no-deny-delete", "--no-deny-purge", "--allow-direct", "--metadata", "owner:test",
			"--max-consumers=-1", "--defaults")
		run(false, "stream", "add", "MEM", "--subjects", "mem.>", "--storage", "memory", "--discard", "new",
			"--max-msgs-per-subject", "3", "--deny-delete", "--deny-purge", "--defaults")
		run(true, "stream", "add", "OVERLAP", "--subjects", "orders.a", "--defaults")
		run(false, "stream", "info", "ORDERS")
		run(false, "stream", "info", "MEM", "--json")
		run(false, "stream", "ls")
		run(false, "stream", "ls", "--names")
		run(false, "stream", "ls", "--json")
		run(false, "stream", "edit", "ORDERS", "--max-msgs", "500", "--description", "edited", "-f")
		run(false, "stream", "info", "ORDERS", "--json")
		run(false, "pub", "orders.a", "msg {{Count}}", "--count", "5")
		run(false, "pub", "orders.b", "b", "--count", "3", "-H", "X-Test:yes")
		run(false, "pub", "mem.x", "m", "--count", "2")
		run(false, "stream", "get", "ORDERS", "2")
		run(false, "stream", "get", "ORDERS", "7", "--json")
		run(false, "stream", "get", "ORDERS", "--last-for", "orders.b")
		run(false, "stream", "get", "ORDERS", "--last-for", "orders.a", "--json")
		run(true, "stream", "get", "ORDERS", "99")
		run(false, "stream", "rmm", "ORDERS", "3", "-f")
		run(true, "stream", "rmm", "ORDERS", "3", "-f")
		run(true, "stream", "rmm", "MEM", "1", "-f")
		run(false, "stream", "purge", "ORDERS", "--subject", "orders.b", "--keep", "1", "-f")
		run(false, "stream", "purge", "ORDERS", "--seq", "2", "-f")
		run(true, "stream", "purge", "MEM", "-f")
		run(false, "stream", "info", "ORDERS", "--json")
		run(false, "stream", "report")
		run(false, "account", "info")

		s, err := js.Stream(context.Background(), "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		before := storedMsgs(t, s)
		infoBefore := streamInfo(t, s)
		cfgBefore := infoBefore.Config
		run(false, "stream", "backup", "ORDERS", backup)
		run(false, "stream", "rm", "ORDERS", "-f")
		run(true, "stream", "info", "ORDERS")
		run(false, "account", "info")
		run(false, "stream", "restore", backup)
		run(false, "stream", "info", "ORDERS", "--json")
		run(false, "account", "info")
		s, err = js.Stream(context.Background(), "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		after := storedMsgs(t, s)
		if len(before) == 0 || !reflect.DeepEqual(before, after) {
			t.Errorf("restored messages differ:\nbefore %v\nafter  %v", before, after)
		}
		infoAfter := streamInfo(t, s)
		// nats-server's restore of its own archive format makes the stream anew.
		obs["restore keeps created"] = infoAfter.Created.Equal(infoBefore.Created)
		if cfgAfter := infoAfter.Config; !reflect.DeepEqual(cfgBefore, cfgAfter) {
			b, _ := json.Marshal(cfgBefore)
			a, _ := json.Marshal(cfgAfter)
			t.Errorf("restored config differs:\nbefore %s\nafter  %s", b, a)
		}
		for _, m := range after {
			delete(m, "at") // a server's own clock; compared above, before against after
		}
		obs["restored messages"] = after
		run(true, "stream", "restore", backup) // the stream exists
		run(false, "stream", "purge", "ORDERS", "-f")
		run(false, "stream", "rm", "MEM", "-f")
		run(false, "stream", "ls", "--names")
		run(false, "stream", "rm", "ORDERS", "-f")
		run(false, "account", "info")
		run(false, "stream", "ls")
		return obs
	})
}
