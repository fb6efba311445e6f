package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/natsd/natsd/server"
)

// -js/--jetstream and -sd/--store_dir set the options as nats-server's ConfigureOptions
// does, config file or not; they are no longer reported as unsupported.
func TestFlagJetStream(t *testing.T) {
	jsOn := tempConf(t, "jetstream: enabled\n")
	jsOff := tempConf(t, "jetstream: false\n")
	jsMap := tempConf(t, "jetstream { max_mem: 1G }\n")
	sdFile := tempConf(t, "store_dir: /from/file\n")
	sdBlock := tempConf(t, "jetstream { store_dir: /from/block }\n")
	tests := []struct {
		args    []string
		js      bool
		sd      string
		wantErr string
	}{
		{args: []string{"-js"}, js: true},
		{args: []string{"--jetstream"}, js: true},
		{args: []string{"-js=false"}},
		// A store directory alone does not turn JetStream on.
		{args: []string{"-sd", "/x"}, sd: "/x"},
		{args: []string{"--store_dir=/x", "-js"}, js: true, sd: "/x"},
		// Flags win over the file.
		{args: []string{"-js", "-c", jsOff}, js: true},
		{args: []string{"-js=false", "-c", jsOn}},
		{args: []string{"-c", jsOn}, js: true},
		{args: []string{"-sd", "/x", "-c", jsMap}, js: true, sd: "/x"},
		{args: []string{"-c", sdFile}, sd: "/from/file"},
		{args: []string{"-c", sdBlock, "-js"}, js: true, sd: "/from/block"},
		// nats-server reads the file over the flags: -sd and a store_dir in the file clash.
		{args: []string{"-sd", "/x", "-c", sdFile}, wantErr: "Duplicate 'store_dir' configuration"},
		{args: []string{"--store_dir", "/x", "-c", sdBlock}, wantErr: "Duplicate 'store_dir' configuration"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, _, err := parseFlags(tc.args)
			fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			noop := func() {}
			n, nerr := natsserver.ConfigureOptions(fs, tc.args, noop, noop, noop)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("natsd err = %v, want %q", err, tc.wantErr)
				}
				if nerr == nil || !strings.Contains(nerr.Error(), tc.wantErr) {
					t.Fatalf("nats-server err = %v, want %q", nerr, tc.wantErr)
				}
				return
			}
			if err != nil || nerr != nil {
				t.Fatalf("natsd err %v, nats-server err %v", err, nerr)
			}
			if o.JetStream != tc.js || o.StoreDir != tc.sd {
				t.Fatalf("natsd: jetstream %v store_dir %q, want %v %q", o.JetStream, o.StoreDir, tc.js, tc.sd)
			}
			if n.JetStream != tc.js || n.StoreDir != tc.sd {
				t.Fatalf("nats-server: jetstream %v store_dir %q, want %v %q", n.JetStream, n.StoreDir, tc.js, tc.sd)
			}
			for _, u := range o.Unsupported {
				if strings.Contains(u.String(), "JetStream") || strings.Contains(u.String(), "jetstream") {
					t.Fatalf("still reported: %q", u)
				}
			}
		})
	}
}

// The flags keep winning over the file at reload.
func TestFlagJetStreamReapplied(t *testing.T) {
	conf := tempConf(t, "jetstream: false\n")
	o, cmd, err := parseFlags([]string{"-js", "-sd", "/x", "-c", conf})
	if err != nil || !o.JetStream || o.StoreDir != "/x" {
		t.Fatalf("start: %v %q %v", o.JetStream, o.StoreDir, err)
	}
	n := &server.Options{}
	if _, err := n.ProcessConfigFile(conf); err != nil {
		t.Fatal(err)
	}
	if err := cmd.reapply(n); err != nil {
		t.Fatal(err)
	}
	if !n.JetStream || n.StoreDir != "/x" {
		t.Fatalf("re-applied: jetstream %v store_dir %q", n.JetStream, n.StoreDir)
	}
}
