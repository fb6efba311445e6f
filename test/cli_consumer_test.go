package test

// The nats CLI's consumer commands, run against natsd and nats-server in the same test, in
// the style of cli_stream_test.go: text output compared line by line once masked, --json
// output field by field.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// consumerMasks blank, on top of cliMasks, what a consumer's output legitimately has that
// differs between two runs: ages, the time left of a pause, an ack subject's timestamp.
var consumerMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	// "Last Delivery: 12ms ago", "Active: 1.5s", "(59m59s remaining)"
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|ms|s|m|h|d|y))+( ago)?\b`), "<dur>"},
	// $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>
	{regexp.MustCompile(`(\$JS\.ACK\.\S+\.\d+\.\d+\.\d+\.)\d+(\.\d+)`), "$1<ts>$2"},
	{regexp.MustCompile(`(?m)^\[\d{2}:\d{2}:\d{2}\]`), "[<clock>]"},
	{regexp.MustCompile(`_INBOX\.\S+`), "<inbox>"},
}

func maskConsumerCLI(out string) string {
	out = sortHeaderBlocks(maskCLI(out))
	for _, m := range consumerMasks {
		out = m.re.ReplaceAllString(out, m.with)
	}
	// A table's column is as wide as its widest value, a masked age too: padding and rules
	// are not compared.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "│") || strings.HasPrefix(l, "├") || strings.HasPrefix(l, "╭") || strings.HasPrefix(l, "╰") {
			lines[i] = tablePad.ReplaceAllString(l, "$1")
		}
	}
	return strings.Join(lines, "\n")
}

var tablePad = regexp.MustCompile(`( |─)+`)

// sortHeaderBlocks sorts the lines of each "Headers:" block of a message the CLI shows: it
// prints them in Go's map order.
func sortHeaderBlocks(out string) string {
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "Headers:" {
			continue
		}
		j := i + 2 // a blank line follows the label
		k := j
		for k < len(lines) && lines[k] != "" {
			k++
		}
		if j < k {
			slices.Sort(lines[j:k])
		}
		i = k
	}
	return strings.Join(lines, "\n")
}

// jsonVolatile removes, from a decoded --json output, the fields that are times or ages.
func jsonVolatile(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch k {
			case "created", "ts", "last_active", "pause_remaining", "pause_until":
				x[k] = "<masked>"
			case "_nats.ver":
				x[k] = "<ver>"
			default:
				x[k] = jsonVolatile(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = jsonVolatile(e)
		}
	}
	return v
}

func TestCLIConsumer(t *testing.T) {
	natsCLI(t)
	jsCompare(t, func(t *testing.T, tg target) any {
		nc, _ := jsStart(t, tg, Config{})
		u := nc.ConnectedUrl()
		obs := map[string]any{}
		step := 0
		until := time.Now().Add(time.Hour).UTC().Format(time.DateTime) // a pause's end
		// run records a command's output: text masked, --json decoded; fail says it must fail.
		run := func(fail bool, args ...string) string {
			t.Helper()
			out, ok := jsCLI(t, u, args...)
			if ok == fail {
				t.Errorf("nats %s: succeeded %v, want %v:\n%s", strings.Join(args, " "), ok, !fail, out)
			}
			step++
			key := strings.Join(args, " ")
			if until != "" {
				key = strings.ReplaceAll(key, until, "<until>")
			}
			if len(key) > 60 {
				key = key[:60]
			}
			key = string(rune('A'+step/26)) + string(rune('a'+step%26)) + " " + key
			if ok && (args[len(args)-1] == "--json" || args[len(args)-1] == "-j") {
				obs[key] = jsonVolatile(cliJSON(t, out))
			} else {
				obs[key] = strings.Split(maskConsumerCLI(out), "\n")
			}
			return out
		}
		run(false, "stream", "add", "ORDERS", "--subjects", "orders.*", "--storage", "file", "--defaults")
		run(false, "pub", "orders.a", "a{{Count}}", "--count", "5")
		run(false, "pub", "orders.b", "b{{Count}}", "--count", "3", "-H", "X-Test:yes")

		// A pull durable with most of the flags, and a push one with a deliver group.
		run(false, "consumer", "add", "ORDERS", "PULL", "--pull", "--deliver", "all", "--ack", "explicit",
			"--replay", "instant", "--filter", "orders.a", "--max-deliver", "5", "--max-pending", "100",
			"--wait", "30s", "--max-waiting", "64", "--max-pull-batch", "10", "--description", "the pull one",
			"--metadata", "owner:test", "--no-headers-only", "--defaults")
		run(false, "consumer", "add", "ORDERS", "PUSH", "--target", "deliver.push", "--deliver-group", "workers",
			"--deliver", "last", "--ack", "all", "--replay", "instant", "--filter", "orders.b",
			"--max-deliver=-1", "--max-pending", "20", "--defaults")
		run(false, "consumer", "add", "ORDERS", "NEW", "--pull", "--deliver", "new", "--ack", "none",
			"--replay", "instant", "--defaults")
		// The same name again, with another configuration.
		run(true, "consumer", "add", "ORDERS", "PULL", "--pull", "--deliver", "last", "--ack", "explicit",
			"--replay", "instant", "--defaults")
		run(true, "consumer", "add", "NOPE", "X", "--pull", "--defaults")
		// A filter that no stream subject takes is allowed.
		run(false, "consumer", "add", "ORDERS", "ODD", "--pull", "--filter", "other.x", "--deliver", "all",
			"--ack", "explicit", "--replay", "instant", "--defaults")

		run(false, "consumer", "info", "ORDERS", "PULL")
		run(false, "consumer", "info", "ORDERS", "PUSH")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "info", "ORDERS", "PUSH", "--json")
		run(true, "consumer", "info", "ORDERS", "NOPE")
		run(true, "consumer", "info", "NOPE", "PULL")
		run(true, "consumer", "info", "ORDERS", "NOPE", "--no-select")
		run(true, "consumer", "next", "ORDERS", "NOPE")
		run(true, "consumer", "next", "NOPE", "PULL")
		run(true, "consumer", "next", "ORDERS", "PUSH")
		// A pull request to no consumer: nats-server has no one take it, so no responders at
		// once (the CLI's next above falls back to an info request for its error text).
		_, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.NOPE", []byte(`{"batch":1}`), time.Second)
		obs["next request to no consumer"] = fmt.Sprint(err)
		run(false, "consumer", "ls", "ORDERS")
		run(false, "consumer", "ls", "ORDERS", "-n")
		run(false, "consumer", "ls", "ORDERS", "--json")

		run(false, "consumer", "next", "ORDERS", "PULL", "--count", "2", "--ack")
		run(false, "consumer", "next", "ORDERS", "PULL", "--no-ack")
		run(false, "consumer", "info", "ORDERS", "PULL")
		run(false, "consumer", "state", "ORDERS", "PULL")
		run(false, "consumer", "state", "ORDERS", "PULL", "--json")
		run(false, "consumer", "next", "ORDERS", "PULL", "--nak")
		run(false, "consumer", "next", "ORDERS", "PULL", "--term") // the nak'd message again
		run(false, "consumer", "next", "ORDERS", "PULL", "--ack")
		// One is left pending, unacked: nothing to fetch. Whether the server's 408 for the
		// expired pull or the CLI's own timeout comes first is a race, so only the failure counts.
		if _, ok := jsCLI(t, u, "consumer", "next", "ORDERS", "PULL", "--ack"); ok {
			t.Errorf("nats consumer next: a message when none is left")
		}
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "pub", "orders.c", "c{{Count}}", "--count", "2")
		run(false, "consumer", "next", "ORDERS", "NEW", "--count", "2", "--raw")
		run(false, "consumer", "info", "ORDERS", "NEW", "--json")

		run(false, "consumer", "edit", "ORDERS", "PULL", "--description", "edited", "--max-deliver", "10",
			"--max-pending", "50", "-f")
		run(false, "consumer", "edit", "ORDERS", "PUSH", "--max-pending", "0", "--filter", "orders.*", "-f")
		run(true, "consumer", "edit", "ORDERS", "PULL", "--target", "deliver.pull", "-f")
		run(true, "consumer", "edit", "ORDERS", "NOPE", "--description", "x", "-f")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "copy", "ORDERS", "PULL", "COPY", "--description", "copied")
		run(false, "consumer", "info", "ORDERS", "COPY", "--json")

		run(false, "consumer", "pause", "ORDERS", "PULL", until, "-f")
		run(false, "consumer", "info", "ORDERS", "PULL")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "resume", "ORDERS", "PULL", "-f")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "reset", "ORDERS", "PULL", "--sequence", "2", "-f")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "next", "ORDERS", "PULL", "--ack")
		run(false, "consumer", "info", "ORDERS", "PULL", "--json")
		run(false, "consumer", "reset", "ORDERS", "NEW", "-f") // back to its ack floor
		run(false, "consumer", "info", "ORDERS", "NEW", "--json")
		run(true, "consumer", "reset", "ORDERS", "PUSH", "--sequence", "2", "-f") // deliver last: not allowed
		run(true, "consumer", "reset", "ORDERS", "NOPE", "-f")

		run(false, "consumer", "report", "ORDERS")
		run(false, "consumer", "find", "ORDERS", "--pull")
		run(false, "consumer", "find", "ORDERS", "--push")

		run(false, "consumer", "rm", "ORDERS", "PULL", "-f")
		run(true, "consumer", "rm", "ORDERS", "PULL", "-f")
		run(false, "consumer", "rm", "ORDERS", "PUSH", "-f")
		run(false, "consumer", "ls", "ORDERS", "-n")
		run(false, "consumer", "ls", "ORDERS")
		run(false, "stream", "info", "ORDERS", "--json")
		return obs
	})
}
