package server

// Hot reload (SIGHUP, --signal reload, Server.Reload): parse the config file again, re-apply
// the command-line flags on top, diff old and new options field by field, reject the whole
// reload if a field that cannot change at run time did, or if the file holds settings natsd
// does not implement without the opt-in (unsupported.go), then apply the rest.

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/natsd/natsd/loop"
)

// reloadApplier applies one group of reloaded options to a running server. Appliers run in
// order after the server's own (logging, limits), once the diff has been accepted and s's
// options updated; old and new are private copies.
type reloadApplier func(s *Server, old, new *Options) error

// reloadAppliers are registered from init() by the packages' other files (auth, TLS).
var reloadAppliers []reloadApplier

// reloadState is the server's reload bookkeeping.
type reloadState struct {
	mu    sync.Mutex           // one reload at a time
	flags func(*Options) error // re-applies command-line flags (flags win over the file)
}

// SetFlagOverrides installs fn, which re-applies the command-line flags onto options loaded
// from the config file; Reload calls it so that flags keep winning after a reload.
func (s *Server) SetFlagOverrides(fn func(*Options) error) {
	s.rl.mu.Lock()
	s.rl.flags = fn
	s.rl.mu.Unlock()
}

// getOpts returns a copy of the current options, safe to read while a reload runs.
func (s *Server) getOpts() *Options {
	s.mu.Lock()
	o := s.opts
	s.mu.Unlock()
	return &o
}

// Options that a reload may change. Any other field that differs rejects the reload (a field
// added to Options later is not reloadable until it is listed here).
var reloadable = map[string]bool{
	// Limits (loop.Limits).
	"MaxPayload": true, "MaxControlLine": true, "MaxConn": true, "MaxConnSet": true,
	"PingInterval": true, "MaxPingsOut": true, "WriteDeadline": true, "NoFastProducerStall": true,
	"AuthTimeout": true,
	// Logging and files.
	"Debug": true, "Trace": true, "Logtime": true, "LogtimeUTC": true, "LogSizeLimit": true, "LogMaxFiles": true, "ClientAdvertise": true, "MaxTracedMsgLen": true, "LogFile": true, "PidFile": true, "ConfigDigest": true,
	// Authentication and TLS: applied by the appliers the auth/TLS code registers.
	"Username": true, "Password": true, "Authorization": true, "Users": true, "Nkeys": true,
	"NoAuthUser": true, "DefaultPermissions": true, "AuthBlockDefined": true,
	// Accounts (users, exports, imports, mappings, limits) and the global account's
	// mappings, which nats-server keeps among its accounts: reloadable there (its
	// accountsOption, applied with the authorization). SystemAccount and NoAuthUser have
	// their own rules in diffOptions; NoSystemAccount is not reloadable.
	"Accounts": true, "Mappings": true, "SystemAccount": true,
	"TLSConfig": true, "TLSTimeout": true, "TLSVerify": true, "TLSHandshakeFirst": true, "TLSPinnedCerts": true,
	"TLSHandshakeFirstFallback": true,
	// Settings natsd does not implement, and the opt-in that ignores them: checked on their
	// own (checkUnsupportedReload), after the fields natsd implements.
	"Unsupported": true, "AllowUnsupported": true,
	// JetStream, with nats-server's rules (reloadRule): it may be switched on and off, the
	// store only grow; the rest of the jetstream block is fixed (the default refusal), but
	// fields natsd stores differently from nats-server are compared as nats-server sees them.
	"JetStream": true, "StoreDir": true, "JetStreamMaxMemory": true, "JetStreamMaxStore": true,
	"JetStreamLimits": true, "JetStreamMetaCompact": true, "JetStreamMetaCompactSize": true,
	"JetStreamMetaCompactSync": true, "JetStreamConcurrentIOs": true, "JetStreamStrict": true,
	"JetStreamStrictSet": true, "JetStreamRequestQueueLimit": true,
	"JetStreamInfoQueueLimit": true, "JetStreamCipher": true,
	// The cluster block, except its listener (clusterReloadRule); the route code applies the
	// rest through the server's cluster reload hook.
	"Cluster": true,
}

// reloadNames are nats-server's names for fields natsd names differently, for the refusal.
var reloadNames = map[string]string{
	"JetStreamMaxBufferedMsgs": "StreamMaxBufferedMsgs",
	"JetStreamMaxBufferedSize": "StreamMaxBufferedSize",
}

// reloadSecret fields are refused without their values (nats-server prints them).
var reloadSecret = map[string]bool{"JetStreamKey": true, "JetStreamOldKey": true, "JetStreamTpm": true}

// diffOptions lists the fields that differ, or fails with nats-server's text on the first
// one that cannot be reloaded.
func diffOptions(old, new *Options) ([]string, error) {
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem()
	t := ov.Type()
	var changed []string
	for i := range t.NumField() {
		f := t.Field(i)
		a, b := ov.Field(i), nv.Field(i)
		var same bool
		switch {
		case f.Name == "TLSConfig":
			// A tls.Config holds loaded certificates (maybe renewed on disk): always re-apply
			// it when TLS is configured, and when it is switched on or off.
			same = a.IsNil() && b.IsNil()
		case f.Name == "Cluster":
			same = clusterSame(&old.Cluster, &new.Cluster)
		case f.Type.Kind() == reflect.Func:
			same = a.IsNil() == b.IsNil()
		default:
			same = reflect.DeepEqual(a.Interface(), b.Interface())
		}
		if same {
			continue
		}
		if !reloadable[f.Name] {
			name := f.Name
			if n, ok := reloadNames[name]; ok {
				name = n
			}
			if reloadSecret[f.Name] {
				return nil, fmt.Errorf("config reload not supported for %s: old=[REDACTED], new=[REDACTED]", name)
			}
			return nil, fmt.Errorf("config reload not supported for %s: old=%v, new=%v", name, a.Interface(), b.Interface())
		}
		if err := reloadRule(f.Name, old, new); err != nil {
			return nil, err
		}
		changed = append(changed, f.Name)
	}
	// nats-server refuses these only once every field has been looked at.
	if err := jetStreamReloadAfter(old, new); err != nil {
		return nil, err
	}
	return changed, nil
}

// reloadRule applies nats-server's conditions on fields that reload only in part.
//   - NoAuthUser may only be removed, together with its user.
//   - SystemAccount may only go from "$SYS" to unset. nats-server compares the name it
//     runs with, which is "$SYS" when an account of that name is configured without
//     system_account.
func reloadRule(field string, old, new *Options) error {
	switch field {
	case "NoAuthUser":
		if old.NoAuthUser != "" && new.NoAuthUser == "" {
			for _, u := range new.Users {
				if u.Username == old.NoAuthUser {
					return fmt.Errorf("config reload not supported for %s: old=%v, new=%v", field, old.NoAuthUser, new.NoAuthUser)
				}
			}
			return nil
		}
		return fmt.Errorf("config reload not supported for %s: old=%v, new=%v", field, old.NoAuthUser, new.NoAuthUser)
	case "Cluster":
		return clusterReloadRule(old, new)
	case "SystemAccount":
		running := old.SystemAccount
		if running == "" && old.Account(DefaultSystemAccount) != nil {
			running = DefaultSystemAccount
		}
		if running == new.SystemAccount || (running == DefaultSystemAccount && new.SystemAccount == "") {
			return nil
		}
		return fmt.Errorf("config reload not supported for %s: old=%v, new=%v", field, running, new.SystemAccount)
	}
	return jetStreamReloadRule(field, old, new)
}

// jetStreamReloadRule is nats-server's diffOptions for the JetStream fields. "Running" is
// the old options' JetStream: changes to the store only matter while it is on.
//   - JetStream may be switched on or off (jetstream, enabled: false, -js).
//   - StoreDir may not change to another directory; to "" only when JetStream goes off.
//   - Max memory / store (<= 0: from the machine) may grow; a fixed size may go back to the
//     machine's only when JetStream goes off; they may not shrink or become fixed.
//   - Limits and meta_compact* reload; max_concurrent_io may not change while JetStream
//     is on, and keeps its running value while it is off.
//   - Others are compared as nats-server stores them: strict (NoJetStreamStrict), the queue
//     limits with their defaults filled in, the cipher by name.
func jetStreamReloadRule(field string, old, new *Options) error {
	running := old.JetStream
	refuse := func(name string, a, b any) error {
		return fmt.Errorf("config reload not supported for %s: old=%v, new=%v", name, a, b)
	}
	switch field {
	case "StoreDir":
		if running && new.StoreDir != "" {
			return errors.New("config reload not supported for jetstream storage directory")
		}
	case "JetStreamMaxMemory", "JetStreamMaxStore":
		if !running {
			return nil
		}
		a, b := old.JetStreamMaxMemory, new.JetStreamMaxMemory
		if field == "JetStreamMaxStore" {
			a, b = old.JetStreamMaxStore, new.JetStreamMaxStore
		}
		switch fromSet, toSet := a > 0, b > 0; {
		case !fromSet && !toSet, fromSet && toSet && b > a, fromSet && !toSet:
			// Unchanged as nats-server sees it, grown, or deferred to jetStreamReloadAfter.
		case !fromSet && toSet:
			return errors.New("config reload not supported for jetstream dynamic max memory and store")
		default:
			return errors.New("config reload not supported for decreasing jetstream max memory and store")
		}
	case "JetStreamConcurrentIOs":
		a, b := effConcurrentIOs(old), effConcurrentIOs(new)
		if a != b && new.JetStream {
			return refuse(field, a, b)
		}
		// While JetStream is off the running value stays.
		new.JetStreamConcurrentIOs = old.JetStreamConcurrentIOs
	case "JetStreamStrict", "JetStreamStrictSet":
		if a, b := !effStrict(old), !effStrict(new); a != b {
			return refuse("NoJetStreamStrict", a, b)
		}
	case "JetStreamRequestQueueLimit":
		if a, b := effRequestQueueLimit(old), effRequestQueueLimit(new); a != b {
			return refuse(field, a, b)
		}
	case "JetStreamInfoQueueLimit":
		if a, b := effInfoQueueLimit(old), effInfoQueueLimit(new); a != b {
			return refuse(field, a, b)
		}
	case "JetStreamCipher":
		if a, b := cipherName(old.JetStreamCipher), cipherName(new.JetStreamCipher); a != b {
			return refuse(field, a, b)
		}
	}
	return nil
}

// jetStreamReloadAfter refuses, while JetStream stays on, a store directory or fixed store
// size that went back to the defaults.
func jetStreamReloadAfter(old, new *Options) error {
	if !old.JetStream || !new.JetStream {
		return nil
	}
	if (old.JetStreamMaxMemory > 0 && new.JetStreamMaxMemory <= 0) ||
		(old.JetStreamMaxStore > 0 && new.JetStreamMaxStore <= 0) {
		return errors.New("config reload not supported for jetstream max memory and max store")
	}
	if old.StoreDir != "" && new.StoreDir == "" {
		return errors.New("config reload not supported for jetstream storage dir")
	}
	return nil
}

// The values nats-server compares at reload: its defaults filled in.
func effStrict(o *Options) bool { return !o.JetStreamStrictSet || o.JetStreamStrict }

func effConcurrentIOs(o *Options) int {
	if o.JetStreamConcurrentIOs <= 0 {
		return 4096
	}
	return o.JetStreamConcurrentIOs
}

func effRequestQueueLimit(o *Options) int {
	if o.JetStreamRequestQueueLimit <= 0 {
		return 10000
	}
	return o.JetStreamRequestQueueLimit
}

func effInfoQueueLimit(o *Options) int {
	if o.JetStreamInfoQueueLimit <= 0 {
		return effRequestQueueLimit(o)
	}
	return o.JetStreamInfoQueueLimit
}

func cipherName(c string) string {
	if c == "aes" {
		return "AES-GCM"
	}
	return "ChaCha20-Poly1305"
}

// Reload re-reads the config file and applies what changed; on error nothing is applied.
func (s *Server) Reload() error {
	s.rl.mu.Lock()
	defer s.rl.mu.Unlock()
	cur := s.getOpts()
	if cur.ConfigFile == "" {
		return errors.New("can only reload config when a file is provided using -c or --config")
	}
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if !running {
		return errors.New("server is not running")
	}
	n := &Options{Logtime: true}
	rep, err := n.ProcessConfigFile(cur.ConfigFile)
	if err != nil {
		return err
	}
	if s.rl.flags != nil {
		if err := s.rl.flags(n); err != nil {
			return err
		}
	}
	// What the file cannot say and start-up settled: the embedder's choices.
	n.ConfigFile, n.NoSigs, n.NoLog = cur.ConfigFile, cur.NoSigs, cur.NoLog
	if err := prepareOptions(n); err != nil {
		return err
	}
	if n.ServerName == "" && cur.ServerName == s.id {
		n.ServerName = s.id // the generated name stays
	}
	changed, err := diffOptions(cur, n)
	if err != nil {
		return err
	}
	ignored, err := checkUnsupportedReload(cur, n)
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings {
		s.log.Warnf("%v", w)
	}
	for _, u := range ignored {
		s.log.Warnf("%s", unsupportedWarning(u))
	}
	// The one step of ours that can fail (a log file that cannot be opened) is tried before
	// anything has changed or been logged.
	if n.LogFile != cur.LogFile && n.LogFile != "" && !cur.NoLog {
		f, err := os.OpenFile(n.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Errorf("error opening file: %v", err)
		}
		f.Close()
	}
	notes := s.reloadNotes(cur, n, changed)
	s.mu.Lock()
	dst := reflect.ValueOf(&s.opts).Elem()
	src := reflect.ValueOf(n).Elem()
	for _, name := range changed {
		dst.FieldByName(name).Set(src.FieldByName(name))
	}
	s.mu.Unlock()
	if n.PidFile != cur.PidFile && n.PidFile != "" {
		if err := writePidFile(n.PidFile); err != nil {
			s.log.Errorf("Failed to write pidfile: %v", err)
		}
	}
	closed := 0
	if s.eng != nil {
		if err := s.eng.UpdateLimits(limitsOf(n)); err != nil {
			return fmt.Errorf("applying limits: %v", err)
		}
		if n.MaxConn != cur.MaxConn {
			// New connections over the limit are refused from now on; existing ones over
			// it are closed, as nats-server does.
			closed = s.eng.TrimConns(n.MaxConn)
		}
	}
	// As nats-server: a line per option, through the logger in force before the reload
	// (the new log file, debug or trace settings take over after them).
	for _, nt := range notes {
		if nt.field == "MaxConn" && closed > 0 {
			s.log.Noticef("Closed %d connections to fall within max_connections", closed)
		}
		s.log.Noticef("%s", nt.text)
	}
	if err := s.log.reconfigure(n); err != nil {
		return err
	}
	for _, apply := range reloadAppliers {
		if err := apply(s, cur, n); err != nil {
			return err
		}
	}
	if slices.Contains(changed, "Cluster") {
		s.reloadCluster(&cur.Cluster, &n.Cluster)
	}
	s.loaded.Store(time.Now().UnixNano())
	if rep.Digest != "" {
		s.log.Noticef("Reloaded server configuration (%s)", rep.Digest)
	} else {
		s.log.Noticef("Reloaded server configuration")
	}
	return nil
}

// limitsOf is the reloadable part of the loop's configuration.
func limitsOf(o *Options) loop.Limits {
	return loop.Limits{
		MaxPayload:          int(o.MaxPayload),
		MaxControlLine:      int(o.MaxControlLine),
		MaxConn:             o.MaxConn,
		PingInterval:        o.PingInterval,
		MaxPingsOut:         o.MaxPingsOut,
		AuthTimeout:         o.AuthTimeout,
		WriteDeadline:       o.WriteDeadline,
		NoFastProducerStall: o.NoFastProducerStall,
		Trace:               o.Trace,
		MaxTracedMsgLen:     o.MaxTracedMsgLen,
	}
}

func writePidFile(path string) error {
	return os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o660)
}
