package server

import (
	"fmt"
	"io"
	"log/syslog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Logger writes nats-server's log format: "[pid] 2006/01/02 15:04:05.000000 [INF] text".
type Logger struct {
	mu      sync.Mutex
	w       io.Writer
	f       *os.File
	path    string
	pid     string
	logtime bool
	// sys, with syslog or remote_syslog and no log file: lines go there, at the severity of
	// their level, without pid, time or label (syslog adds its own), as nats-server's do.
	sys *syslog.Writer
	// Size rotation (logfile_size_limit, logfile_max_num): out is the log file's size; past
	// limit it is renamed with a timestamp and a new one started, keeping at most maxFiles
	// files in all (0: every backup).
	out, limit int64
	maxFiles   int
	utc        bool        // logtime_utc: timestamps in UTC
	debug      atomic.Bool // read unlocked by Debugf/Tracef; a config reload may flip them
	trace      atomic.Bool
}

func newLogger(o *Options) (*Logger, error) {
	l := &Logger{w: os.Stderr, pid: fmt.Sprintf("[%d] ", os.Getpid()), logtime: o.Logtime, utc: o.LogtimeUTC, path: o.LogFile,
		limit: o.LogSizeLimit, maxFiles: int(o.LogMaxFiles)}
	l.debug.Store(o.Debug)
	l.trace.Store(o.Trace)
	if o.NoLog {
		l.w = io.Discard
		return l, nil
	}
	switch {
	case o.LogFile != "":
		if err := l.open(); err != nil {
			return nil, err
		}
	case o.RemoteSyslog != "":
		network, addr, err := syslogAddr(o.RemoteSyslog)
		if err != nil {
			return nil, err
		}
		if l.sys, err = syslog.Dial(network, addr, syslog.LOG_DEBUG, syslogTag()); err != nil {
			return nil, fmt.Errorf("error connecting to syslog: %q", err.Error())
		}
	case o.Syslog:
		var err error
		if l.sys, err = syslog.New(syslog.LOG_DAEMON|syslog.LOG_NOTICE, syslogTag()); err != nil {
			return nil, fmt.Errorf("error connecting to syslog: %q", err.Error())
		}
	}
	return l, nil
}

// syslogTag is the executable's name, as nats-server tags its lines.
func syslogTag() string { return filepath.Base(os.Args[0]) }

// syslogAddr splits remote_syslog's URL: udp://host:port, tcp://host:port or unix:///path.
func syslogAddr(raw string) (network, addr string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	switch u.Scheme {
	case "udp", "tcp":
		return u.Scheme, u.Host, nil
	case "unix":
		return u.Scheme, u.Path, nil
	}
	return "", "", fmt.Errorf("error invalid network type: %q", u.Scheme)
}

// sysLog sends one line to syslog at the severity of its label.
func (l *Logger) sysLog(label, msg string) {
	switch label {
	case "[WRN] ":
		_ = l.sys.Warning(msg)
	case "[ERR] ":
		_ = l.sys.Err(msg)
	case "[FTL] ":
		_ = l.sys.Crit(msg)
	case "[DBG] ":
		_ = l.sys.Debug(msg)
	default: // [INF], and [TRC] as nats-server sends traces
		_ = l.sys.Notice(msg)
	}
}

func (l *Logger) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("error opening file: %v", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.w = f, f
	l.out = 0
	if st, err := f.Stat(); err == nil {
		l.out = st.Size()
	}
	return nil
}

// rotate moves a log file past its size limit aside, as nats-server names the backups
// (<file>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn), starts a new one with a line saying so, and removes
// the oldest backups beyond logfile_max_num.
func (l *Logger) rotate() {
	if err := l.f.Close(); err != nil {
		l.limit *= 2 // try again later rather than on every line
		return
	}
	now := time.Now()
	bak := fmt.Sprintf("%s.%04d.%02d.%02d.%02d.%02d.%02d.%09d", l.path, now.Year(), now.Month(), now.Day(),
		now.Hour(), now.Minute(), now.Second(), now.Nanosecond())
	_ = os.Rename(l.path, bak)
	l.f = nil
	if err := l.open(); err != nil {
		l.w = os.Stderr
		return
	}
	l.write("[INF] ", fmt.Sprintf("Rotated log, backup saved as %q", bak))
	if l.maxFiles > 0 {
		l.purge()
	}
}

// purge removes the oldest backups so that at most maxFiles files remain, this one included.
func (l *Logger) purge() {
	dir, base := filepath.Dir(l.path), filepath.Base(l.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var backups []string // ReadDir sorts by name, and the names sort by time
	for _, e := range entries {
		if stamp, ok := strings.CutPrefix(e.Name(), base+"."); ok && !e.IsDir() {
			if _, err := time.Parse("2006:01:02:15:04:05.999999999", strings.Replace(stamp, ".", ":", 5)); err == nil {
				backups = append(backups, e.Name())
			}
		}
	}
	for i := 0; i < len(backups)-(l.maxFiles-1); i++ {
		if err := os.Remove(filepath.Join(dir, backups[i])); err != nil {
			return
		}
		l.write("[INF] ", fmt.Sprintf("Purged log file %q", backups[i]))
	}
}

// Reopen reopens the log file (SIGUSR1), for log rotation.
func (l *Logger) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return nil
	}
	return l.open()
}

func (l *Logger) logf(label, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == io.Discard {
		return
	}
	if l.sys != nil {
		l.sysLog(label, fmt.Sprintf(format, v...))
		return
	}
	l.write(label, fmt.Sprintf(format, v...))
	if l.f != nil && l.limit > 0 && l.out > l.limit {
		l.rotate()
	}
}

// write writes one line in nats-server's format (l.mu held).
func (l *Logger) write(label, msg string) {
	b := make([]byte, 0, 128)
	b = append(b, l.pid...)
	if l.logtime {
		now := time.Now()
		if l.utc {
			now = now.UTC()
		}
		b = now.AppendFormat(b, "2006/01/02 15:04:05.000000 ")
	}
	b = append(b, label...)
	b = append(b, msg...)
	b = append(b, '\n')
	if n, err := l.w.Write(b); err == nil && l.f != nil {
		l.out += int64(n)
	}
}

func (l *Logger) Noticef(format string, v ...any) { l.logf("[INF] ", format, v...) }
func (l *Logger) Warnf(format string, v ...any)   { l.logf("[WRN] ", format, v...) }
func (l *Logger) Errorf(format string, v ...any)  { l.logf("[ERR] ", format, v...) }
func (l *Logger) Fatalf(format string, v ...any)  { l.logf("[FTL] ", format, v...) }

func (l *Logger) Debugf(format string, v ...any) {
	if l.debug.Load() {
		l.logf("[DBG] ", format, v...)
	}
}

// DebugEnabled reports whether debug lines are written (-D), for callers that would rather
// not build a line that is dropped.
func (l *Logger) DebugEnabled() bool { return l.debug.Load() }

func (l *Logger) Tracef(format string, v ...any) {
	if l.trace.Load() {
		l.logf("[TRC] ", format, v...)
	}
}

// reconfigure applies a reloaded config's logging settings: debug, trace, logtime and the
// log file (switching files, or back to stderr, without losing a line).
func (l *Logger) reconfigure(o *Options) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.LogFile != l.path && l.w != io.Discard {
		if o.LogFile == "" {
			if l.f != nil {
				l.f.Close()
				l.f = nil
			}
			l.path, l.w = "", os.Stderr
		} else {
			old := l.path
			l.path = o.LogFile
			if err := l.open(); err != nil {
				l.path = old
				return err
			}
		}
	}
	if o.LogFile != "" && l.sys != nil {
		// A log file wins over syslog, as at start-up.
		_ = l.sys.Close()
		l.sys = nil
	}
	l.logtime, l.utc = o.Logtime, o.LogtimeUTC
	l.limit, l.maxFiles = o.LogSizeLimit, int(o.LogMaxFiles)
	l.debug.Store(o.Debug)
	l.trace.Store(o.Trace)
	return nil
}

func (l *Logger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if l.sys != nil {
		_ = l.sys.Close()
		l.sys = nil
	}
}
