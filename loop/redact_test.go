package loop

import (
	"strings"
	"testing"
)

func TestRedactConnect(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`CONNECT {"verbose":false,"user":"derek","pass":"s3cr3t","name":"x"}`,
			`CONNECT {"verbose":false,"user":"derek","pass":"[REDACTED]","name":"x"}`},
		{`CONNECT {"auth_token":"tok,en","lang":"go"}`, `CONNECT {"auth_token":"[REDACTED]","lang":"go"}`},
		{`CONNECT {"password" : "p\"w"}`, `CONNECT {"password" : "[REDACTED]"}`},
		{`CONNECT {"nkey":"UABC","sig":"c2ln","proxy_sig":"cHM="}`,
			`CONNECT {"nkey":"[REDACTED]","sig":"[REDACTED]","proxy_sig":"[REDACTED]"}`},
		// Only the exact names: "signature" and "nkeys" are not secrets here, nor is a value "pass".
		{`CONNECT {"signature":"a","nkeys":"b","name":"pass"}`, `CONNECT {"signature":"a","nkeys":"b","name":"pass"}`},
		{`CONNECT {"user":"a","pass":""}`, `CONNECT {"user":"a","pass":""}`},
		{`CONNECT {"pass":12345,"x":1}`, `CONNECT {"pass":[REDACTED],"x":1}`},
		{`CONNECT {"pass":"unterminated`, `CONNECT {"pass":"[REDACTED]`},
		{`CONNECT {"pass`, `CONNECT {"pass`},
		{`CONNECT {}`, `CONNECT {}`},
	} {
		in := []byte(tc.in)
		got := string(redactConnect(in))
		if got != tc.want {
			t.Errorf("redactConnect(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("input modified: %s", in)
		}
	}
}

func FuzzRedactConnect(f *testing.F) {
	f.Add([]byte(`CONNECT {"user":"a","pass":"secret"}`))
	f.Add([]byte(`CONNECT {"auth_token":"x\"y","sig":"z"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		out := redactConnect(line)
		// A quoted password value never survives.
		if strings.Contains(string(line), `{"pass":"hunter2"}`) && strings.Contains(string(out), "hunter2") {
			t.Fatalf("secret kept: %q", out)
		}
	})
}
