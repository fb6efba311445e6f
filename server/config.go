package server

// Config files in nats-server's format. The syntax (include, variables, environment
// variables, units, token positions) comes from nats-server's own conf package; this file maps
// the parsed tree onto Options with nats-server's key names, aliases and error texts, reports
// the keys natsd does not support yet, and refuses unknown keys.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/conf"

	"github.com/natsd/natsd/auth"
)

// confToken is a parsed value with its position (the conf package's pedantic mode wraps every
// value in one).
type confToken interface {
	Value() any
	Line() int
	Position() int
	SourceFile() string
	IsUsedVariable() bool
}

// ConfigError is one problem in a config file, located like nats-server does:
// "<file>:<line>:<col>: <reason>".
type ConfigError struct {
	File   string
	Line   int
	Col    int
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Reason)
}

// ConfigErrors is every error (and, with -t, warning) found in one file, one per line,
// warnings first as nats-server prints them.
type ConfigErrors []error

func (es ConfigErrors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// ConfigReport is what loading a config file found besides the options themselves.
type ConfigReport struct {
	// Digest is the sha256 of the parsed config ("sha256:<hex>"), as -t and /varz show it.
	Digest string
	// Warnings are located problems that do not stop start-up (they fail -t).
	Warnings []error
	// Unsupported lists the keys nats-server accepts that natsd does not implement yet, located,
	// in file order (also in Options.Unsupported). They stop start-up, -t and reload unless
	// the operator opts in (allow_unsupported); see CheckUnsupported.
	Unsupported []UnsupportedSetting
}

// ProcessConfigFile reads a nats-server config file into o, on top of what o holds (callers
// start from the defaults, then re-apply command-line flags so that flags win). Errors name
// the file, line and key.
func (o *Options) ProcessConfigFile(path string) (rep *ConfigReport, err error) {
	o.ConfigFile = path
	rep = &ConfigReport{}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return rep, fmt.Errorf("error opening config file: %v", rerr)
	}
	if ierr := checkIncludes(path, data, nil); ierr != nil {
		return rep, ierr
	}
	m, digest, perr := parseConfigTree(path, data)
	if perr != nil {
		return rep, perr
	}
	rep.Digest = digest
	o.ConfigDigest = digest
	p := &cfgParser{file: path, rep: rep, userNames: map[string]bool{}}
	defer func() {
		// The parser type-checks every value, so a panic is a bug; still, a bad file must
		// never crash the server: report it at the last value looked at.
		if r := recover(); r != nil {
			p.errs = append(p.errs, p.errAt(p.last, "%v", r))
			err = p.result()
		}
	}()
	if len(m) == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Errorf("%s: config has no values or is empty", path))
	}
	p.top(o, m)
	o.Unsupported = rep.Unsupported
	return rep, p.result()
}

// parseConfigTree runs the conf package in pedantic mode (values carry positions) and makes
// sure every syntax error names a line.
func parseConfigTree(path string, data []byte) (m map[string]any, digest string, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, digest, err = nil, "", fmt.Errorf("%s:1:1: config could not be parsed: %v", path, r)
		}
	}()
	m, digest, err = conf.ParseFileWithChecksDigest(path)
	if err != nil {
		return nil, "", locateSyntaxError(path, data, err)
	}
	return m, digest, nil
}

// maxIncludeDepth bounds nested includes (the conf package follows them recursively).
const maxIncludeDepth = 16

// includeRe finds include statements, generously (anywhere, any case, quoted or not): a false
// match only matters if it names a file already being included.
var includeRe = regexp.MustCompile(`(?i)include[ \t]+(?:"([^"]*)"|'([^']*)'|([^\s;,}'"]+))`)

// checkIncludes refuses include cycles (a file including itself would recurse until the stack
// overflows, a crash rather than an error), absurd nesting, and includes of anything but a
// regular file (a device or pipe could block start-up forever), naming the include's line.
func checkIncludes(path string, data []byte, stack []string) error {
	stack = append(stack, filepath.Clean(path))
	for _, m := range includeRe.FindAllSubmatchIndex(data, -1) {
		var name string
		for g := 1; g <= 3; g++ {
			if m[2*g] >= 0 {
				name = string(data[m[2*g]:m[2*g+1]])
				break
			}
		}
		target := filepath.Join(filepath.Dir(path), name)
		line := 1 + strings.Count(string(data[:m[0]]), "\n")
		if slices.Contains(stack, filepath.Clean(target)) {
			return fmt.Errorf("%s:%d:1: include cycle: %s includes %s (nats-server 2.15.2 would recurse until its stack overflows)", path, line, path, target)
		}
		if len(stack) >= maxIncludeDepth {
			return fmt.Errorf("%s:%d:1: includes nested too deep (more than %d)", path, line, maxIncludeDepth)
		}
		fi, err := os.Stat(target)
		if err != nil || fi.IsDir() {
			continue // the conf package reports it, located
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s:%d:1: include %q is not a regular file", path, line, name)
		}
		sub, err := os.ReadFile(target)
		if err != nil {
			continue
		}
		if err := checkIncludes(target, sub, stack); err != nil {
			return err
		}
	}
	return nil
}

var (
	onLineRe  = regexp.MustCompile(`line (\d+)`)
	posRe     = regexp.MustCompile(`:(\d+):(\d+)\)`)
	quotedRe  = regexp.MustCompile(`'([^']*)'`)
	includeEr = "error parsing include file '"
)

// locateSyntaxError gives a conf package error the "<file>:<line>:<col>: " prefix of every
// other config error. Where the conf package named no line (out-of-range numbers, bad
// include files …), the offending text is looked up in the file.
func locateSyntaxError(path string, data []byte, err error) error {
	msg := err.Error()
	line, col := 0, 1
	if m := onLineRe.FindStringSubmatch(msg); m != nil && !strings.HasPrefix(msg, includeEr) {
		line, _ = strconv.Atoi(m[1])
	} else if m := posRe.FindStringSubmatch(msg); m != nil && !strings.HasPrefix(msg, includeEr) {
		line, _ = strconv.Atoi(m[1])
		col, _ = strconv.Atoi(m[2])
	} else if q := quotedRe.FindStringSubmatch(msg); q != nil && q[1] != "" {
		if i := strings.Index(string(data), q[1]); i >= 0 {
			line = 1 + strings.Count(string(data[:i]), "\n")
		}
	}
	if line <= 0 {
		line = 1 // nothing to point at: the file as a whole is at fault
	}
	return fmt.Errorf("%s:%d:%d: %s", path, line, col, msg)
}

// cfgParser walks the parsed tree, collecting every error rather than stopping at the first.
type cfgParser struct {
	file       string
	rep        *ConfigReport
	errs       []error
	last       confToken
	noAuthUser confToken // where no_auth_user was set, to check it names a user

	// Users come from the authorization block and from accounts, in file order; names and
	// nkeys are unique across all of them (userNames). authUser/authToken are the
	// authorization block's single user or token, which accounts with users conflict with.
	allUsers            []*auth.User
	allNkeys            []*auth.NkeyUser
	usersSet            bool
	userNames           map[string]bool
	authUser, authToken string

	accountsFailed       bool   // the accounts block had errors: no checks across accounts
	sysAccount, sysAlias *entry // system_account and system, resolved after the walk
	sysTk                confToken
}

func (p *cfgParser) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b error) int {
		var ea, eb *ConfigError
		if errors.As(a, &ea) && errors.As(b, &eb) {
			if ea.File == eb.File {
				if ea.Line != eb.Line {
					return ea.Line - eb.Line
				}
				return ea.Col - eb.Col
			}
		}
		return 0
	})
	return ConfigErrors(p.errs)
}

// errAt builds a located error; tk may be nil, when the parser's last token stands in.
func (p *cfgParser) errAt(tk confToken, format string, args ...any) *ConfigError {
	if tk == nil {
		tk = p.last
	}
	e := &ConfigError{File: p.file, Line: 1, Col: 1, Reason: fmt.Sprintf(format, args...)}
	if tk != nil {
		if f := tk.SourceFile(); f != "" {
			e.File = f
		}
		e.Line, e.Col = tk.Line(), tk.Position()
	}
	return e
}

func (p *cfgParser) fail(tk confToken, format string, args ...any) {
	p.errs = append(p.errs, p.errAt(tk, format, args...))
}

func (p *cfgParser) warn(tk confToken, field, reason string) {
	e := p.errAt(tk, "invalid use of field %q: %s", field, reason)
	p.rep.Warnings = append(p.rep.Warnings, e)
}

func (p *cfgParser) unknown(tk confToken, key string) {
	if tk != nil && tk.IsUsedVariable() {
		return // a key used only as a variable is not a setting
	}
	p.fail(tk, "unknown field %q", key)
}

// unsupported notes a key nats-server accepts that natsd does not implement yet.
func (p *cfgParser) unsupported(tk confToken, key string) {
	if tk != nil && tk.IsUsedVariable() {
		return
	}
	e := p.errAt(tk, "")
	u := UnsupportedSetting{Key: key, Where: fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)}
	if tk != nil {
		u.value = plainValue(tk)
	}
	p.rep.Unsupported = append(p.rep.Unsupported, u)
}

// unwrap returns a value's token (nil if the value carries none) and the bare value.
func (p *cfgParser) unwrap(v any) (confToken, any) {
	if tk, ok := v.(confToken); ok {
		p.last = tk
		return tk, tk.Value()
	}
	return nil, v
}

// entry is one key of a map, in source order.
type entry struct {
	key string
	tk  confToken
	v   any
}

// entries lists m's keys in the order they appear in the files (the conf package returns a
// map): later keys win over earlier aliases, as a reader of the file expects.
func (p *cfgParser) entries(m map[string]any) []entry {
	es := make([]entry, 0, len(m))
	for k, raw := range m {
		tk, v := p.unwrap(raw)
		es = append(es, entry{key: k, tk: tk, v: v})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.tk == nil || b.tk == nil {
			return strings.Compare(a.key, b.key)
		}
		if c := strings.Compare(a.tk.SourceFile(), b.tk.SourceFile()); c != 0 {
			return c
		}
		if a.tk.Line() != b.tk.Line() {
			return a.tk.Line() - b.tk.Line()
		}
		if a.tk.Position() != b.tk.Position() {
			return a.tk.Position() - b.tk.Position()
		}
		return strings.Compare(a.key, b.key)
	})
	return es
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case map[string]any:
		return "map"
	case []any:
		return "array"
	case time.Time:
		return "date"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}

func (p *cfgParser) str(e entry) (string, bool) {
	s, ok := e.v.(string)
	if !ok {
		p.fail(e.tk, "expected a string for %q, got %s", e.key, typeName(e.v))
	}
	return s, ok
}

func (p *cfgParser) integer(e entry) (int64, bool) {
	n, ok := e.v.(int64)
	if !ok {
		p.fail(e.tk, "expected an integer for %q, got %s", e.key, typeName(e.v))
	}
	return n, ok
}

// intRange reads an int that must fit Go's int32 range (ports, counts).
func (p *cfgParser) intRange(e entry, lo, hi int64) (int, bool) {
	n, ok := p.integer(e)
	if !ok {
		return 0, false
	}
	if n < lo || n > hi {
		p.fail(e.tk, "%s value %d is out of range", e.key, n)
		return 0, false
	}
	return int(n), true
}

func (p *cfgParser) boolean(e entry) (bool, bool) {
	b, ok := e.v.(bool)
	if !ok {
		p.fail(e.tk, "expected a boolean for %q, got %s", e.key, typeName(e.v))
	}
	return b, ok
}

func (p *cfgParser) mapping(e entry) (map[string]any, bool) {
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "expected a map for %q, got %s", e.key, typeName(e.v))
	}
	return m, ok
}

// duration reads a Go duration string; a bare integer is taken as seconds with nats-server's
// warning ("should be converted to a duration").
func (p *cfgParser) duration(e entry) (time.Duration, bool) {
	switch v := e.v.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			p.fail(e.tk, "error parsing %s: %v", e.key, err)
			return 0, false
		}
		return d, true
	case int64:
		p.warn(e.tk, e.key, e.key+" should be converted to a duration")
		return time.Duration(v) * time.Second, true
	}
	p.fail(e.tk, "expected a duration for %q, got %s", e.key, typeName(e.v))
	return 0, false
}

// seconds reads a timeout given as seconds (integer or float) or as a duration string;
// negative only where negOK (nats-server takes a negative auth timeout as already expired).
func (p *cfgParser) seconds(e entry, what string, negOK bool) (time.Duration, bool) {
	lo := 0.0
	if negOK {
		lo = -(1 << 31)
	}
	switch v := e.v.(type) {
	case int64:
		if float64(v) < lo || v > 1<<31 {
			p.fail(e.tk, "error parsing %s config, 'timeout' out of range", what)
			return 0, false
		}
		return time.Duration(v) * time.Second, true
	case float64:
		if v < lo || v > 1<<31 || v != v {
			p.fail(e.tk, "error parsing %s config, 'timeout' out of range", what)
			return 0, false
		}
		return time.Duration(v * float64(time.Second)), true
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			p.fail(e.tk, "error parsing %s config, 'timeout' %s", what, err)
			return 0, false
		}
		return d, true
	}
	p.fail(e.tk, "error parsing %s config, 'timeout' wrong type", what)
	return 0, false
}

// hostPort parses `listen`-style values: a port, or host:port.
func (p *cfgParser) hostPort(e entry) (host string, port int, ok bool) {
	switch v := e.v.(type) {
	case int64:
		if v < -1 || v > 65535 {
			p.fail(e.tk, "%s value %d is out of range", e.key, v)
			return "", 0, false
		}
		return "", int(v), true
	case string:
		h, ps, err := splitHostPort(v)
		if err != nil {
			p.fail(e.tk, "could not parse address string %q", v)
			return "", 0, false
		}
		n, err := strconv.Atoi(ps)
		if err != nil || n < -1 || n > 65535 {
			p.fail(e.tk, "could not parse port %q", ps)
			return "", 0, false
		}
		return h, n, true
	}
	p.fail(e.tk, "expected port or host:port, got %s", typeName(e.v))
	return "", 0, false
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", errors.New("missing port")
	}
	h, port := s[:i], s[i+1:]
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	} else if strings.Contains(h, ":") {
		return "", "", errors.New("too many colons")
	}
	return h, port, nil
}

// Top-level keys nats-server v2.15.2 accepts that natsd does not implement yet: they stop
// start-up unless the operator opts in (allow_unsupported), never silently ignored.
var unsupportedTopLevel = map[string]bool{
	"server_tags": true, "server_metadata": true,
	"feature_flags": true, "proxy_protocol": true, "proxies": true,
	"max_sub_tokens": true, "max_subscription_tokens": true, "write_timeout": true,
	"max_closed_clients": true, "no_header_support": true,
	"disable_sublist_cache": true, "no_sublist_cache": true,
	"connect_error_reports": true, "reconnect_error_reports": true,
	"trace_headers": true, "prof_block_rate": true,
	"default_sentinel": true, "ocsp": true, "ocsp_cache": true,
	"resolver_tls": true, "resolver_preload": true, "resolver_pinned_accounts": true,
	"default_js_domain": true, "mqtt": true,
	"gateway": true, "leafnodes": true, "leaf": true, "websocket": true, "ws": true,
}

// Keys whose whole purpose is to authenticate clients: ignoring them would start the server
// open to anyone, so they stop start-up until natsd supports them.
var refusedTopLevel = map[string]bool{
	"operator": true, "operators": true, "root": true, "roots": true, "root_operator": true,
	"root_operators": true, "trusted": true, "trusted_keys": true,
	"resolver": true, "account_resolver": true, "accounts_resolver": true,
}

// top maps the top-level keys.
func (p *cfgParser) top(o *Options, m map[string]any) {
	for _, e := range p.entries(m) {
		k := strings.ToLower(e.key)
		switch k {
		case "listen":
			if h, port, ok := p.hostPort(e); ok {
				o.Host, o.Port = h, port
			}
		case "port":
			if n, ok := p.intRange(e, -1, 65535); ok {
				o.Port = n
			}
		case "host", "net":
			if s, ok := p.str(e); ok {
				o.Host = s
			}
		case "server_name":
			if s, ok := p.str(e); ok {
				if strings.Contains(s, " ") {
					p.fail(e.tk, "server name cannot contain spaces")
					continue
				}
				o.ServerName = s
			}
		case "debug":
			if b, ok := p.boolean(e); ok {
				o.Debug = b
			}
		case "trace", "trace_verbose":
			// Verbose tracing adds the system account's internal traffic, which natsd does not
			// trace: taken as trace (as -VV and -DVV are).
			if b, ok := p.boolean(e); ok {
				o.Trace = b
			}
		case "logtime":
			if b, ok := p.boolean(e); ok {
				o.Logtime = b
			}
		case "max_traced_msg_len":
			if n, ok := p.integer(e); ok {
				o.MaxTracedMsgLen = int(n)
			}
		case "logfile_size_limit", "log_size_limit":
			if n, ok := p.integer(e); ok {
				o.LogSizeLimit = n
			}
		case "logfile_max_num", "log_max_num":
			if n, ok := p.integer(e); ok {
				o.LogMaxFiles = n
			}
		case "syslog":
			if b, ok := p.boolean(e); ok {
				o.Syslog = b
			}
		case "remote_syslog":
			if s, ok := p.str(e); ok {
				o.RemoteSyslog = s
			}
		case "logtime_utc":
			if b, ok := p.boolean(e); ok {
				o.LogtimeUTC = b
			}
		case "logfile", "log_file":
			if s, ok := p.str(e); ok {
				o.LogFile = s
			}
		case "pidfile", "pid_file":
			if s, ok := p.str(e); ok {
				o.PidFile = s
			}
		case "client_advertise":
			if s, ok := p.str(e); ok {
				o.ClientAdvertise = s
			}
		case "ports_file_dir":
			if s, ok := p.str(e); ok {
				o.PortsFileDir = s
			}
		case "http":
			if h, port, ok := p.hostPort(e); ok {
				o.HTTPHost, o.HTTPPort = h, port
			}
		case "https":
			// HTTPS monitoring is not built: kept for /varz, reported.
			if h, port, ok := p.hostPort(e); ok {
				o.HTTPHost, o.HTTPSPort = h, port
				if port != 0 {
					p.unsupported(e.tk, e.key)
				}
			}
		case "http_port", "monitor_port":
			if n, ok := p.intRange(e, -1, 65535); ok {
				o.HTTPPort = n
			}
		case "https_port":
			if n, ok := p.intRange(e, -1, 65535); ok {
				o.HTTPSPort = n
				if n != 0 {
					p.unsupported(e.tk, e.key)
				}
			}
		case "allow_unsupported":
			// natsd's own: start (and reload) with the keys above ignored, with a warning.
			if b, ok := p.boolean(e); ok {
				o.AllowUnsupported = b
			}
		case "http_base_path":
			if s, ok := p.str(e); ok {
				o.HTTPBasePath = s
			}
		case "prof_port":
			if n, ok := p.intRange(e, -1, 65535); ok {
				o.ProfPort = n
			}
		case "max_control_line", "max_payload":
			n, ok := p.integer(e)
			if !ok {
				continue
			}
			if n > 1<<31-1 {
				p.fail(e.tk, "%s value is too big", e.key)
				continue
			}
			if n < 0 {
				// nats-server takes these, and then serves nobody: refused here, saying why.
				switch {
				case k == "max_control_line":
					p.fail(e.tk, "%s value can not be negative: nats-server 2.15.2 would refuse every CONNECT with 'maximum control line exceeded'", e.key)
				case n == -1:
					p.fail(e.tk, "%s value can not be negative: nats-server 2.15.2 would lift the limit and send -1 in INFO, where clients such as nats.go then refuse to publish anything", e.key)
				default:
					p.fail(e.tk, "%s value can not be negative: nats-server 2.15.2 would refuse every message with 'Maximum Payload Violation'", e.key)
				}
				continue
			}
			if k == "max_payload" {
				o.MaxPayload = int32(n)
			} else {
				o.MaxControlLine = int32(n)
			}
		case "max_pending":
			if n, ok := p.integer(e); ok {
				if n < 0 {
					p.fail(e.tk, "%s value can not be negative", e.key)
					continue
				}
				o.MaxPending = n
			}
		case "max_connections", "max_conn":
			if n, ok := p.intRange(e, -1<<31, 1<<31-1); ok {
				// nats-server stores an explicit 0 as -1, which refuses every client.
				if n == 0 {
					n = -1
				}
				o.MaxConn, o.MaxConnSet = n, true
			}
		case "max_subscriptions", "max_subs":
			if n, ok := p.intRange(e, -1<<31, 1<<31-1); ok {
				o.MaxSubs = n
			}
		case "ping_interval":
			if d, ok := p.duration(e); ok {
				if d != 0 && d < 5*time.Nanosecond {
					// nats-server draws its first PING's random delay from d/5: panics.
					p.fail(e.tk, "invalid ping_interval of %v: nats-server 2.15.2 crashes at the first client CONNECT with a ping_interval under 5ns (negative ones included)", d)
					continue
				}
				o.PingInterval = d
			}
		case "ping_max":
			if n, ok := p.intRange(e, -1<<31, 1<<31-1); ok {
				o.MaxPingsOut = n
			}
		case "write_deadline":
			if d, ok := p.duration(e); ok {
				o.WriteDeadline = d
			}
		case "lame_duck_duration":
			s, ok := p.str(e)
			if !ok {
				continue
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				p.fail(e.tk, "error parsing lame_duck_duration: %v", err)
				continue
			}
			if d < 30*time.Second {
				p.fail(e.tk, "invalid lame_duck_duration of %v, minimum is 30 seconds", d)
				continue
			}
			o.LameDuckDuration = d
		case "lame_duck_grace_period":
			s, ok := p.str(e)
			if !ok {
				continue
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				p.fail(e.tk, "error parsing lame_duck_grace_period: %v", err)
				continue
			}
			if d < 0 {
				p.fail(e.tk, "invalid lame_duck_grace_period, needs to be positive")
				continue
			}
			o.LameDuckGracePeriod = d
		case "no_fast_producer_stall":
			if b, ok := p.boolean(e); ok {
				o.NoFastProducerStall = b
			}
		case "authorization":
			p.authorization(o, e)
		case "no_auth_user":
			if s, ok := p.str(e); ok {
				o.NoAuthUser = s
				p.noAuthUser = e.tk
			}
		case "tls":
			p.tls(o, e)
		case "allow_non_tls":
			if b, ok := p.boolean(e); ok {
				o.AllowNonTLS = b
			}
		case "accounts":
			p.accounts(o, e)
		case "system_account", "system":
			p.systemAccount(e)
		case "no_system_account", "no_system", "no_sys_acc":
			if b, ok := p.boolean(e); ok {
				o.NoSystemAccount = b
			}
		case "mappings", "maps":
			if e.tk != nil && e.tk.IsUsedVariable() {
				continue
			}
			// Both keys name the global account's mappings: the later one wins.
			o.Mappings = p.mappings(e)
		case "engine":
			if s, ok := p.str(e); ok {
				switch s {
				case "gnet", "netpoll":
					o.Engine = s
				default:
					p.fail(e.tk, "unknown engine %q (gnet, netpoll)", s)
				}
			}
		case "cluster":
			p.cluster(o, e)
		case "jetstream":
			p.jetStream(o, e)
		case "store_dir", "storedir":
			p.storeDir(o, e)
		case "reactors":
			if n, ok := p.intRange(e, 0, 1024); ok {
				o.Reactors = n
			}
		case "reply_spin":
			if d, ok := p.duration(e); ok {
				o.ReplySpin = replySpin(d)
			}
		default:
			switch {
			case unsupportedTopLevel[k]:
				p.unsupported(e.tk, e.key)
			case refusedTopLevel[k]:
				if e.tk == nil || !e.tk.IsUsedVariable() {
					p.fail(e.tk, "%q (operator/JWT authentication) is not supported yet", e.key)
				}
			default:
				p.unknown(e.tk, e.key)
			}
		}
	}
	if p.usersSet {
		o.Users, o.Nkeys = p.allUsers, p.allNkeys
	}
	p.finishSystemAccount(o)
	p.checkAccounts(o)
	p.checkNoAuthUser(o)
}

// checkNoAuthUser: no_auth_user must name a user or nkey of the authorization block or of
// an account (nats-server's validateNoAuthUser, which runs when the server is created).
func (p *cfgParser) checkNoAuthUser(o *Options) {
	if o.NoAuthUser == "" || p.noAuthUser == nil {
		return
	}
	if len(o.Users) == 0 && len(o.Nkeys) == 0 {
		p.fail(p.noAuthUser, `no_auth_user: "%s" present, but users/nkeys are not defined`, o.NoAuthUser)
		return
	}
	for _, u := range o.Users {
		if u.Username == o.NoAuthUser {
			return
		}
	}
	for _, u := range o.Nkeys {
		if u.Nkey == o.NoAuthUser {
			return
		}
	}
	p.fail(p.noAuthUser, `no_auth_user: "%s" not present as user or nkey in authorization block or account configuration`, o.NoAuthUser)
}
