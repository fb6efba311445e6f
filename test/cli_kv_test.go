package test

// The nats CLI's kv and object commands against natsd and nats-server: outputs compared once
// masked, as for the stream and consumer commands.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kvMasks blank what differs between two runs of the kv and object commands.
var kvMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)(created|modified|last modified)( ?: ?| )\S.*`), "$1$2<time>"},
	{regexp.MustCompile(`\d+(\.\d+)?(ms|s|m|h|µs|ns) ago`), "<age> ago"},
	{regexp.MustCompile(`(Nuid|NUID|nuid)\S*:? *\S+`), "$1 <nuid>"},
	{regexp.MustCompile(`\[\d{2}:\d{2}:\d{2}\]`), "[<clock>]"},
	{regexp.MustCompile(`(?m)^\d{2}:\d{2}:\d{2} `), "<clock> "},
	{regexp.MustCompile(`│ \d+(\.\d+)?(ns|µs|ms|s|m|h)(\d+(\.\d+)?(ns|µs|ms|s|m))* │`), "│ <age> │"},
}

func maskKV(out string, paths ...string) string {
	out = maskCLI(out, paths...)
	// Table columns are as wide as their widest value: compare words, not padding.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	out = strings.Join(lines, "\n")
	for _, m := range kvMasks {
		out = m.re.ReplaceAllString(out, m.with)
	}
	return out
}

func TestCLIKVAndObject(t *testing.T) {
	natsCLI(t)
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		u := nc.ConnectedUrl()
		dir := t.TempDir()
		src := filepath.Join(dir, "file.bin")
		data := strings.Repeat("natsd object store ", 20000) // ~380 KB: several chunks
		if err := os.WriteFile(src, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "out.bin")
		obs := map[string]any{}
		step := 0
		run := func(fail bool, args ...string) string {
			t.Helper()
			out, ok := jsCLI(t, u, args...)
			if ok == fail {
				t.Errorf("nats %s: succeeded %v, want %v:\n%s", strings.Join(args, " "), ok, !fail, out)
			}
			step++
			key := strings.ReplaceAll(strings.Join(args, " "), dir, "<dir>")
			if len(key) > 60 {
				key = key[:60]
			}
			key = string(rune('A'+step/26)) + string(rune('a'+step%26)) + " " + key
			lines := strings.Split(maskKV(out, dir), "\n")
			if fail {
				// A refused upload may show some progress first, as far as it got: only the
				// error is compared.
				var errs []string
				for _, l := range lines {
					if strings.Contains(l, "rror") {
						errs = append(errs, l)
					}
				}
				lines = errs
			}
			obs[key] = lines
			return out
		}
		run(false, "kv", "add", "CFG", "--history", "5", "--description", "config")
		run(false, "kv", "put", "CFG", "a", "one")
		run(false, "kv", "put", "CFG", "a", "two")
		run(false, "kv", "put", "CFG", "b.c", "three")
		run(false, "kv", "get", "CFG", "a")
		run(false, "kv", "get", "CFG", "a", "--raw")
		run(true, "kv", "get", "CFG", "missing")
		run(false, "kv", "create", "CFG", "new", "v")
		run(true, "kv", "create", "CFG", "new", "again")
		run(false, "kv", "update", "CFG", "new", "v2", "4")
		run(true, "kv", "update", "CFG", "new", "v3", "1")
		run(false, "kv", "history", "CFG", "a")
		run(false, "kv", "del", "CFG", "b.c", "-f")
		run(false, "kv", "purge", "CFG", "new", "-f")
		run(false, "kv", "ls")
		run(false, "kv", "ls", "CFG")
		run(false, "kv", "info", "CFG")
		run(false, "kv", "del", "CFG", "-f")
		run(false, "kv", "ls")
		run(false, "object", "add", "FILES", "--description", "files")
		run(false, "object", "put", "FILES", src, "--name", "file.bin", "-f")
		run(false, "object", "ls", "FILES")
		run(false, "object", "info", "FILES", "file.bin")
		run(false, "object", "get", "FILES", "file.bin", "-O", dst, "-f")
		got, err := os.ReadFile(dst)
		obs["object round trip"] = err == nil && string(got) == data
		run(false, "object", "info", "FILES")
		run(false, "object", "seal", "FILES", "-f")
		run(true, "object", "put", "FILES", src, "--name", "again", "-f")
		run(false, "object", "ls")
		run(false, "object", "del", "FILES", "-f")
		return obs
	})
}
