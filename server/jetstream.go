package server

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/natsd/natsd/js"
)

// JetStream wiring: the js package runs streams and the API; this file turns Options into
// its configuration, enables it in the accounts nats-server would enable it in, and reports
// it to monitoring.

// jetStreamDir is where the server keeps JetStream's state: <store_dir>/jetstream, with
// nats-server's default store_dir when none is set.
func jetStreamDir(o *Options) (dir string, temp bool) {
	base := o.StoreDir
	if base == "" {
		base, temp = filepath.Join(os.TempDir(), "nats"), true
	}
	return filepath.Join(base, "jetstream"), temp
}

// jetStreamConfig fills nats-server's defaults: 75% of the machine's memory, and the free
// space of the store directory's file system (1 TB when it cannot be read).
func jetStreamConfig(o *Options) js.Config {
	dir, _ := jetStreamDir(o)
	cfg := js.Config{Dir: dir, MaxMemory: o.JetStreamMaxMemory, MaxStore: o.JetStreamMaxStore,
		Domain: o.JetStreamDomain, Strict: o.JetStreamStrict || !o.JetStreamStrictSet,
		MaxBufferedMsgs: o.JetStreamMaxBufferedMsgs, MaxBufferedSize: o.JetStreamMaxBufferedSize,
		DuplicateWindowLimit: o.JetStreamLimits.DuplicateWindow, MaxAckPending: o.JetStreamLimits.MaxAckPending,
		MaxRequestBatch: o.JetStreamLimits.MaxRequestBatch, DefaultMaxConsumers: o.JetStreamLimits.DefaultMaxConsumers,
		ServerName: o.ServerName, FS: o.JetStreamFS}
	if !o.SyncAlways && o.SyncInterval > 0 {
		cfg.SyncInterval = o.SyncInterval
	}
	if cfg.MaxMemory <= 0 {
		if mem := totalMemory(); mem > 0 {
			cfg.MaxMemory = int64(mem / 4 * 3)
		} else {
			cfg.MaxMemory = 256 << 20
		}
	}
	if cfg.MaxStore <= 0 {
		cfg.MaxStore = 1 << 40
		_ = os.MkdirAll(dir, 0o750)
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil {
			cfg.MaxStore = int64(st.Bavail) * int64(st.Bsize)
		}
	}
	return cfg
}

// startJetStream starts JetStream when the options ask for it.
func (s *Server) startJetStream() error {
	o := &s.opts
	if !o.JetStream {
		return nil
	}
	start := time.Now()
	s.log.Noticef("Starting JetStream")
	cfg := jetStreamConfig(o)
	cfg.ServerID = s.id
	cfg.Logf = func(level, format string, args ...any) {
		switch level {
		case "WRN":
			s.log.Warnf(format, args...)
		case "ERR":
			s.log.Errorf(format, args...)
		default:
			s.log.Noticef(format, args...)
		}
	}
	if _, temp := jetStreamDir(o); temp {
		s.log.Warnf("Temporary storage directory used, data could be lost on system reboot")
	}
	j, err := js.New(s.eng, cfg)
	if err != nil {
		return err
	}
	s.log.Noticef("    _ ___ _____ ___ _____ ___ ___   _   __  __")
	s.log.Noticef(" _ | | __|_   _/ __|_   _| _ \\ __| /_\\ |  \\/  |")
	s.log.Noticef("| || | _|  | | \\__ \\ | | |   / _| / _ \\| |\\/| |")
	s.log.Noticef(" \\__/|___| |_| |___/ |_| |_|_\\___/_/ \\_\\_|  |_|")
	s.log.Noticef("")
	s.log.Noticef("         https://docs.nats.io/jetstream")
	s.log.Noticef("")
	s.log.Noticef("---------------- JETSTREAM ----------------")
	s.log.Noticef("  Strict:          %t", cfg.Strict)
	s.log.Noticef("  Max Memory:      %s", friendlyBytes(cfg.MaxMemory))
	s.log.Noticef("  Max Storage:     %s", friendlyBytes(cfg.MaxStore))
	s.log.Noticef("  Store Directory: \"%s\"", cfg.Dir)
	if cfg.Domain != "" {
		s.log.Noticef("  Domain:          %s", cfg.Domain)
	}
	if cfg.SyncInterval > 0 {
		s.log.Noticef("  Sync:            every %v (acknowledged before fsync)", cfg.SyncInterval)
	} else {
		s.log.Noticef("  Sync:            before every acknowledgement")
	}
	s.log.Noticef("  API Level:       %d", js.APILevel)
	s.log.Noticef("-------------------------------------------")
	if err := s.enableJetStreamAccounts(j, o); err != nil {
		j.Stop()
		return err
	}
	if sys := s.eng.LookupAccount(o.SystemAccountName()); sys != nil && o.SystemAccountName() != "" {
		if err := j.ServeSystem(sys); err != nil {
			j.Stop()
			return err
		}
	}
	s.js.Store(j)
	s.log.Noticef("Took %s to start JetStream", time.Since(start))
	return nil
}

// enableJetStreamAccounts enables JetStream as nats-server does: in the global account when
// no accounts are configured, else in each account with a jetstream setting (the others,
// but the system account, answer $JS.API.INFO with "not enabled for account").
func (s *Server) enableJetStreamAccounts(j *js.JetStream, o *Options) error {
	sys := o.SystemAccountName()
	if len(o.Accounts) == 0 || (len(o.Accounts) == 1 && o.Accounts[0].Name == sys) {
		return j.EnableAccount(s.eng.Global(), js.Unlimited)
	}
	for _, ac := range o.Accounts {
		acc := s.eng.LookupAccount(ac.Name)
		if acc == nil || ac.Name == sys {
			continue
		}
		if ac.JetStream == nil {
			if err := j.ServeDisabled(acc); err != nil {
				return err
			}
			continue
		}
		l := ac.JetStream
		lim := js.AccountLimits{MaxMemory: l.MaxMemory, MaxStore: l.MaxStore, MaxStreams: l.MaxStreams,
			MaxConsumers: l.MaxConsumers, MaxAckPending: l.MaxAckPending, MemoryMaxStreamBytes: l.MemoryMaxStreamBytes,
			StoreMaxStreamBytes: l.StoreMaxStreamBytes, MaxBytesRequired: l.MaxBytesRequired}
		if err := j.EnableAccount(acc, lim); err != nil {
			return fmt.Errorf("Error enabling jetstream on configured accounts: %v", err)
		}
	}
	return nil
}

func (s *Server) stopJetStream() {
	if j := s.js.Load(); j != nil {
		s.log.Noticef("Initiating JetStream Shutdown...")
		j.Stop()
		s.log.Noticef("JetStream Shutdown")
	}
}

// JetStream is the running JetStream, nil when it is off.
func (s *Server) JetStream() *js.JetStream { return s.js.Load() }

// friendlyBytes prints a size as nats-server's logs do.
func friendlyBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(b)/float64(div), "KMGTPE"[exp])
}

func init() { reloadAppliers = append(reloadAppliers, reloadJetStream) }

// reloadJetStream applies what a reload may change (the reload checks refused the rest):
// JetStream switched on or off, raised limits, and accounts' JetStream settings.
func reloadJetStream(s *Server, old, n *Options) error {
	if s.eng == nil {
		return nil
	}
	j := s.js.Load()
	switch {
	case !n.JetStream && j != nil:
		s.stopJetStream()
		s.js.Store(nil)
		return nil
	case n.JetStream && j == nil:
		return s.startJetStream()
	case j == nil:
		return nil
	}
	cfg := jetStreamConfig(n)
	j.SetServerLimits(cfg.MaxMemory, cfg.MaxStore)
	return s.enableJetStreamAccounts(j, n)
}
