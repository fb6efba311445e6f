package server

// The `accounts {}` block, top-level `mappings {}`, system_account and no_system_account,
// parsed with nats-server 2.15's key names, aliases and error texts. nats-server walks each
// map in Go's random order, so where the order of keys changes its verdict (a stream export
// with a response threshold written first, a stream import with both prefix and to, ...)
// natsd refuses in every order, with the text nats-server gives in the orders it refuses;
// where only the text changes (which of two conflicting keys is blamed), natsd's is the
// one for the file's order. Checks across accounts (exports, imports, cycles) are in
// config_accounts_check.go.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/sublist"
	"github.com/natsd/natsd/transform"
)

// goType is Go's name for a parsed value's type, which nats-server's texts print (%T).
func goType(v any) string { return fmt.Sprintf("%T", v) }

// pos is where tk sits (the parser's last token when tk is nil).
func (p *cfgParser) pos(tk confToken) ConfigPos {
	e := p.errAt(tk, "")
	return ConfigPos{File: e.File, Line: e.Line, Col: e.Col}
}

// failAt reports an error found after parsing, at a position kept in the model.
func (p *cfgParser) failAt(at ConfigPos, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{File: at.File, Line: at.Line, Col: at.Col, Reason: fmt.Sprintf(format, args...)})
}

// warnText is a located warning with nats-server's own text (no "invalid use of field").
func (p *cfgParser) warnText(tk confToken, format string, args ...any) {
	p.rep.Warnings = append(p.rep.Warnings, p.errAt(tk, format, args...))
}

func validSubjectStr(s string) bool { return sublist.ValidSubject([]byte(s)) }

// accounts parses `accounts`: an array of names, or a map of name → account. Any other
// value is ignored, as nats-server ignores it.
func (p *cfgParser) accounts(o *Options, e entry) {
	if e.tk != nil && e.tk.IsUsedVariable() {
		return
	}
	before := len(p.errs)
	defer func() { p.accountsFailed = p.accountsFailed || len(p.errs) > before }()
	switch v := e.v.(type) {
	case []any:
		seen := make(map[string]bool, len(v))
		for _, raw := range v {
			tk, nv := p.unwrap(raw)
			if tk == nil {
				tk = e.tk
			}
			name, ok := nv.(string)
			if !ok {
				p.fail(tk, "expected an account name for %q, got %s", e.key, typeName(nv))
				continue
			}
			if name == GlobalAccount {
				p.fail(tk, "%q is a Reserved Account", name)
				continue
			}
			if seen[name] {
				p.fail(tk, "Duplicate Account Entry: %s", name)
				continue
			}
			seen[name] = true
			o.Accounts = append(o.Accounts, &AccountConfig{Name: name, Limits: NoAccountLimits, Pos: p.pos(tk)})
		}
	case map[string]any:
		for _, a := range p.entries(v) {
			if a.tk != nil && a.tk.IsUsedVariable() {
				continue
			}
			am, ok := a.v.(map[string]any)
			if !ok {
				p.fail(a.tk, "Expected map entries for accounts")
				continue
			}
			if a.key == GlobalAccount {
				p.fail(a.tk, "%q is a Reserved Account", a.key)
				continue
			}
			o.Accounts = append(o.Accounts, p.account(a, am))
		}
	}
}

// account parses one account's block.
func (p *cfgParser) account(a entry, am map[string]any) *AccountConfig {
	acc := &AccountConfig{Name: a.key, Limits: NoAccountLimits, Pos: p.pos(a.tk)}
	var (
		users   []*auth.User
		nks     []*auth.NkeyUser
		usersTk confToken
	)
	for _, f := range p.entries(am) {
		switch strings.ToLower(f.key) {
		case "nkey":
			nk, ok := f.v.(string)
			if !ok || !nkeys.IsValidPublicAccountKey(nk) {
				p.fail(f.tk, "Not a valid public nkey for an account: %q", f.v)
				continue
			}
			acc.Nkey = nk
		case "imports":
			p.imports(acc, f)
		case "exports":
			p.exports(acc, f)
		case "jetstream":
			p.accountJetStream(acc, f)
		case "users":
			usersTk = f.tk
			nks, users = p.users(f)
		case "default_permissions":
			acc.DefaultPermissions = p.permissions(f)
		case "mappings", "maps":
			acc.Mappings = mergeMappings(acc.Mappings, p.mappings(f))
		case "limits":
			p.accountLimits(acc, f)
		case "msg_trace", "trace_dest":
			p.msgTrace(acc, f)
		default:
			p.unknown(f.tk, f.key)
		}
	}
	if len(users) == 0 && len(nks) == 0 {
		return acc
	}
	// Users in accounts and a single user or token cannot go together (the other order,
	// authorization after accounts, is checked there).
	if p.authUser != "" {
		p.fail(usersTk, "Can not have a single user/pass and accounts")
		return acc
	}
	if p.authToken != "" {
		p.fail(usersTk, "Can not have a token and accounts")
		return acc
	}
	// The account's default permissions go to its users that have none.
	for _, u := range users {
		if u.Permissions == nil {
			u.Permissions = acc.DefaultPermissions
		}
	}
	for _, u := range nks {
		if u.Permissions == nil {
			u.Permissions = acc.DefaultPermissions
		}
	}
	// User names and nkeys are unique across the authorization block and every account.
	for _, u := range nks {
		if p.userNames[u.Nkey] {
			p.fail(usersTk, "Duplicate nkey %q detected", u.Nkey)
			continue
		}
		p.userNames[u.Nkey] = true
		u.Account = acc.Name
		acc.Nkeys = append(acc.Nkeys, u)
		p.allNkeys = append(p.allNkeys, u)
	}
	for _, u := range users {
		if p.userNames[u.Username] {
			p.fail(usersTk, "Duplicate user %q detected", u.Username)
			continue
		}
		p.userNames[u.Username] = true
		u.Account = acc.Name
		acc.Users = append(acc.Users, u)
		p.allUsers = append(p.allUsers, u)
	}
	p.usersSet = true
	return acc
}

// accountLimits parses `limits {}`.
func (p *cfgParser) accountLimits(acc *AccountConfig, e entry) {
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected account limits to be a map/struct, got %+v", e.v)
		return
	}
	for _, f := range p.entries(m) {
		var dst *int32
		switch strings.ToLower(f.key) {
		case "max_connections", "max_conn":
			dst = &acc.Limits.MaxConnections
		case "max_subscriptions", "max_subs":
			dst = &acc.Limits.MaxSubscriptions
		case "max_payload", "max_pay":
			dst = &acc.Limits.MaxPayload
		case "max_leafnodes", "max_leafs":
			dst = &acc.Limits.MaxLeafNodes
		default:
			if f.tk == nil || !f.tk.IsUsedVariable() {
				p.fail(f.tk, "Unknown field %q parsing account limits", f.key)
			}
			continue
		}
		// nats-server keeps the low 32 bits of a bigger number (2^32 would be 0, refusing
		// every client): refused here.
		if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok {
			*dst = int32(n)
		}
	}
}

// msgTrace parses `msg_trace` / `trace_dest`: a destination subject, or {dest, sampling}.
func (p *cfgParser) msgTrace(acc *AccountConfig, e entry) {
	p.unsupported(e.tk, "accounts."+acc.Name+"."+e.key)
	dest := func(tk confToken, key string, v any) bool {
		td, ok := v.(string)
		if !ok {
			p.fail(tk, "Field %q should be a string, got %T", key, v)
			return false
		}
		if !sublist.ValidLiteralSubject([]byte(td)) {
			p.fail(tk, "Trace destination %q is not valid", td)
			return false
		}
		acc.TraceDest = td
		return true
	}
	sampling := func(tk confToken, n int) bool {
		if n <= 0 || n > 100 {
			p.fail(tk, "Ttrace destination sampling value %d is invalid, needs to be [1..100]", n)
			return false
		}
		acc.TraceDestSampling = n
		return true
	}
	switch v := e.v.(type) {
	case string:
		if !dest(e.tk, e.key, v) {
			return
		}
	case map[string]any:
		for _, f := range p.entries(v) {
			switch strings.ToLower(f.key) {
			case "dest":
				if !dest(f.tk, f.key, f.v) {
					return
				}
			case "sampling":
				switch s := f.v.(type) {
				case int64:
					if s < 1 || s > 100 {
						p.fail(f.tk, "Ttrace destination sampling value %d is invalid, needs to be [1..100]", s)
						return
					}
					acc.TraceDestSampling = int(s)
				case string:
					n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
					if err != nil {
						p.fail(f.tk, "Invalid trace destination sampling value %q", s)
						return
					}
					if !sampling(f.tk, n) {
						return
					}
				default:
					p.fail(f.tk, "Trace destination sampling field %q should be an integer or a percentage, got %T", f.key, f.v)
					return
				}
			default:
				if f.tk == nil || !f.tk.IsUsedVariable() {
					p.fail(f.tk, "Unknown field %q parsing account message trace map/struct %q", f.key, e.key)
					return
				}
			}
		}
	default:
		p.fail(e.tk, "Expected account message trace %q to be a string or a map/struct, got %T", e.key, e.v)
		return
	}
	switch {
	case acc.TraceDest != "" && acc.TraceDestSampling == 0:
		acc.TraceDestSampling = 100
	case acc.TraceDestSampling > 0 && acc.TraceDest == "":
		p.warnText(e.tk, "Trace destination sampling ignored since no destination was set")
		acc.TraceDestSampling = 0
	}
}

// accountJetStream parses an account's `jetstream`: a boolean, enabled/disabled, or a map
// of limits.
func (p *cfgParser) accountJetStream(acc *AccountConfig, e entry) {
	dynamic := AccountJetStream{-1, -1, -1, -1, -1, -1, -1, false, ""}
	switch v := e.v.(type) {
	case bool:
		if v {
			acc.JetStream = &dynamic
		}
	case string:
		switch strings.ToLower(v) {
		case "enabled", "enable":
			acc.JetStream = &dynamic
		case "disabled", "disable":
			acc.JetStream = nil
		default:
			p.fail(e.tk, "Expected 'enabled' or 'disabled' for string value, got '%s'", v)
		}
	case map[string]any:
		js := dynamic
		for _, f := range p.entries(v) {
			size := func(dst *int64) bool {
				n, ok := f.v.(int64)
				if !ok {
					p.fail(f.tk, "Expected a parseable size for %q, got %v", f.key, f.v)
					return false
				}
				*dst = n
				return true
			}
			count := func(dst *int) bool {
				var n int64
				if !size(&n) {
					return false
				}
				*dst = int(n)
				return true
			}
			ok := true
			switch strings.ToLower(f.key) {
			case "max_memory", "max_mem", "mem", "memory":
				ok = size(&js.MaxMemory)
			case "max_store", "max_file", "max_disk", "store", "disk":
				ok = size(&js.MaxStore)
			case "max_streams", "streams":
				ok = count(&js.MaxStreams)
			case "max_consumers", "consumers":
				ok = count(&js.MaxConsumers)
			case "max_bytes_required", "max_stream_bytes", "max_bytes":
				b, isBool := f.v.(bool)
				if !isBool {
					p.fail(f.tk, "Expected a parseable bool for %q, got %v", f.key, f.v)
					return
				}
				js.MaxBytesRequired = b
			case "mem_max_stream_bytes", "memory_max_stream_bytes":
				ok = size(&js.MemoryMaxStreamBytes)
			case "disk_max_stream_bytes", "store_max_stream_bytes":
				ok = size(&js.StoreMaxStreamBytes)
			case "max_ack_pending":
				ok = count(&js.MaxAckPending)
			case "cluster_traffic":
				s, isStr := f.v.(string)
				if !isStr {
					p.fail(f.tk, "Expected either 'system' or 'owner' string value for %q, got %v", f.key, f.v)
					return
				}
				switch s {
				case "system", "":
					js.ClusterTraffic = ""
				case "owner":
					js.ClusterTraffic = "owner"
				default:
					p.fail(f.tk, "Expected 'system' or 'owner' string value for %q, got %v", f.key, f.v)
					return
				}
			default:
				p.unknown(f.tk, f.key)
			}
			if !ok {
				return
			}
		}
		acc.JetStream = &js
	default:
		p.fail(e.tk, "Expected map, bool or string to define JetStream, got %T", e.v)
	}
}

// stringList reads an array of strings.
func (p *cfgParser) stringList(e entry) ([]string, bool) {
	arr, ok := e.v.([]any)
	if !ok {
		p.fail(e.tk, "expected an array for %q, got %s", e.key, typeName(e.v))
		return nil, false
	}
	var out []string
	for _, raw := range arr {
		tk, v := p.unwrap(raw)
		s, ok := v.(string)
		if !ok {
			if tk == nil {
				tk = e.tk
			}
			p.fail(tk, "expected a string in %q, got %s", e.key, typeName(v))
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// exports parses an account's `exports` array.
func (p *cfgParser) exports(acc *AccountConfig, e entry) {
	arr, ok := e.v.([]any)
	if !ok {
		p.fail(e.tk, "Exports should be an array, got %T", e.v)
		return
	}
	for _, raw := range arr {
		tk, v := p.unwrap(raw)
		if tk == nil {
			tk = e.tk
		}
		if ex := p.export(tk, v); ex != nil {
			acc.Exports = append(acc.Exports, ex)
		}
	}
}

// export parses `{stream: subject}` or `{service: subject, response_type, ...}`; an entry
// with neither is ignored, as nats-server ignores it.
func (p *cfgParser) export(tk confToken, v any) *ExportConfig {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(tk, "Export Items should be a map with type entry, got %T", v)
		return nil
	}
	var (
		stream, service    *ExportConfig
		accounts           []string
		rt                 ServiceResponseType
		rtTk, threshTk     confToken
		latTk, atrcTk      confToken
		lat                *LatencyConfig
		thresh             time.Duration
		rtSeen, threshSeen bool
		atrc, atrcSeen     bool
		tokPos             int
	)
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "stream":
			if service != nil {
				p.fail(f.tk, "Detected stream %q but already saw a service", f.v)
				continue
			}
			// A response directive before the stream: nats-server blames it in one order
			// and ignores a threshold in the other; refused in both here.
			directive := rtTk
			if directive == nil {
				directive = threshTk
			}
			if directive != nil {
				p.fail(directive, "Detected response directive on non-service")
				continue
			}
			if latTk != nil {
				p.fail(latTk, "Detected latency directive on non-service")
				continue
			}
			if atrcTk != nil {
				p.fail(atrcTk, "Detected allow_trace directive on non-service")
				continue
			}
			s, ok := f.v.(string)
			if !ok {
				p.fail(f.tk, "Expected stream name to be string, got %T", f.v)
				continue
			}
			stream = &ExportConfig{Subject: s, Pos: p.pos(tk)}
		case "service":
			if stream != nil {
				p.fail(f.tk, "Detected service %q but already saw a stream", f.v)
				continue
			}
			s, ok := f.v.(string)
			if !ok {
				p.fail(f.tk, "Expected service name to be string, got %T", f.v)
				continue
			}
			service = &ExportConfig{Service: true, Subject: s, Pos: p.pos(tk)}
		case "response", "response_type":
			if rtSeen {
				p.fail(f.tk, "Duplicate response type definition")
				continue
			}
			rtSeen, rtTk = true, f.tk
			s, ok := f.v.(string)
			if !ok {
				p.fail(f.tk, "Expected response type to be string, got %T", f.v)
				continue
			}
			switch strings.ToLower(s) {
			case "single", "singleton":
				rt = ResponseSingleton
			case "stream":
				rt = ResponseStream
			case "chunk", "chunked":
				rt = ResponseChunked
			default:
				p.fail(f.tk, "Unknown response type: %q", s)
				continue
			}
			if stream != nil {
				p.fail(f.tk, "Detected response directive on non-service")
			}
		case "threshold", "response_threshold", "response_max_time", "response_time":
			if threshSeen {
				p.fail(f.tk, "Duplicate response threshold detected")
				continue
			}
			threshSeen, threshTk = true, f.tk
			s, ok := f.v.(string)
			if !ok {
				p.fail(f.tk, "Expected response threshold to be a parseable time duration, got %T", f.v)
				continue
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				p.fail(f.tk, "Expected response threshold to be a parseable time duration, got %q", s)
				continue
			}
			thresh = d
			if stream != nil {
				p.fail(f.tk, "Detected response directive on non-service")
			}
		case "accounts":
			accounts, _ = p.stringList(f)
		case "latency":
			latTk = f.tk
			l, ok := p.latency(f)
			if !ok {
				continue
			}
			if stream != nil {
				p.fail(f.tk, "Detected latency directive on non-service")
				continue
			}
			lat = l
		case "account_token_position":
			if n, ok := p.intRange(f, -1<<31, 1<<31-1); ok {
				tokPos = n
			}
		case "allow_trace":
			atrcSeen, atrcTk = true, f.tk
			b, ok := p.boolean(f)
			if !ok {
				continue
			}
			atrc = b
			if stream != nil {
				p.fail(f.tk, "Detected allow_trace directive on non-service")
				continue
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	switch {
	case stream != nil:
		stream.Accounts, stream.AccountTokenPosition = accounts, tokPos
		return stream
	case service != nil:
		service.Accounts, service.AccountTokenPosition = accounts, tokPos
		service.ResponseType, service.Latency = rt, lat
		service.ResponseThreshold = DefaultServiceResponseThreshold
		if thresh != 0 {
			service.ResponseThreshold = thresh
		}
		if atrcSeen {
			service.AllowTrace = atrc
		}
		return service
	}
	return nil
}

// latency parses a service export's `latency`: a results subject (sampling 100%), or
// {sampling: 1-100 | "N%" | "headers", subject}. As nats-server, only those two keys are
// read (other keys are ignored, and the names are case-sensitive).
func (p *cfgParser) latency(e entry) (*LatencyConfig, bool) {
	if s, ok := e.v.(string); ok {
		return &LatencyConfig{Sampling: DefaultServiceLatencySampling, Subject: s}, true
	}
	m, ok := e.v.(map[string]any)
	if !ok {
		p.fail(e.tk, "Expected latency entry to be a map/struct or string, got %T", e.v)
		return nil, false
	}
	l := &LatencyConfig{Sampling: DefaultServiceLatencySampling}
	if raw, ok := m["sampling"]; ok {
		tk, v := p.unwrap(raw)
		if tk == nil {
			tk = e.tk
		}
		headers := false
		var n int64
		switch s := v.(type) {
		case int64:
			n = s
		case string:
			if strings.ToLower(strings.TrimSpace(s)) == "headers" {
				headers = true
				break
			}
			i, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
			if err != nil {
				p.fail(tk, "Failed to parse latency sample: %v", err)
				return nil, false
			}
			n = int64(i)
		default:
			p.fail(tk, "Expected latency sample to be a string or map/struct, got %T", v)
			return nil, false
		}
		if !headers && (n < 1 || n > 100) {
			p.fail(tk, "bad sampling percentage, should be 1-100")
			return nil, false
		}
		l.Sampling = int(n)
	}
	raw, ok := m["subject"]
	if !ok {
		p.fail(e.tk, "Latency subject required, but missing")
		return nil, false
	}
	tk, v := p.unwrap(raw)
	if tk == nil {
		tk = e.tk
	}
	s, ok := v.(string)
	if !ok {
		// nats-server's text prints "string" here whatever the value (it formats the
		// empty string it failed to get); natsd names the value's type.
		p.fail(tk, "Expected latency subject to be a string, got %T", v)
		return nil, false
	}
	l.Subject = s
	return l, true
}

// imports parses an account's `imports` array.
func (p *cfgParser) imports(acc *AccountConfig, e entry) {
	arr, ok := e.v.([]any)
	if !ok {
		p.fail(e.tk, "Imports should be an array, got %T", e.v)
		return
	}
	services := map[string][]*ImportConfig{} // by local subject
next:
	for _, raw := range arr {
		tk, v := p.unwrap(raw)
		if tk == nil {
			tk = e.tk
		}
		im := p.importEntry(tk, v)
		if im == nil {
			continue
		}
		if im.Service {
			local := im.To
			if local == "" {
				local = im.Subject
			}
			for _, d := range services[local] {
				if d.Account == im.Account {
					p.fail(tk, "Duplicate service import subject %q, previously used in import for account %q, subject %q", local, d.Account, d.Subject)
					continue next
				}
			}
			services[local] = append(services[local], im)
		}
		acc.Imports = append(acc.Imports, im)
	}
}

// importEntry parses `{stream: {account, subject}, prefix | to, allow_trace}` or
// `{service: {account, subject}, to, share}`; an entry with neither is ignored.
func (p *cfgParser) importEntry(tk confToken, v any) *ImportConfig {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(tk, "Import Items should be a map with type entry, got %T", v)
		return nil
	}
	var (
		stream, service *ImportConfig
		pre, to         string
		toTk            confToken
		share           bool
		atrc, atrcSeen  bool
		atrcTk          confToken
		bothBlamed      bool
	)
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "stream", "service":
			isStream := strings.ToLower(f.key) == "stream"
			if isStream && service != nil {
				p.fail(f.tk, "Detected stream but already saw a service")
				continue
			}
			if !isStream && stream != nil {
				p.fail(f.tk, "Detected service but already saw a stream")
				continue
			}
			if !isStream && atrcTk != nil {
				p.fail(atrcTk, "Detected allow_trace directive on a non-stream")
				continue
			}
			am, ok := f.v.(map[string]any)
			if !ok {
				kind := "Stream"
				if !isStream {
					kind = "Service"
				}
				p.fail(f.tk, "%s entry should be an account map, got %T", kind, f.v)
				continue
			}
			an, subj := p.importSource(am)
			if an == "" || subj == "" {
				p.fail(f.tk, "Expect an account name and a subject")
				continue
			}
			im := &ImportConfig{Service: !isStream, Account: an, Subject: subj, Prefix: pre, To: to, Pos: p.pos(tk)}
			if isStream {
				if atrcSeen {
					im.AllowTrace = atrc
				}
				stream = im
			} else {
				im.Prefix, im.Share = "", share
				service = im
			}
		case "prefix":
			s, ok := p.str(f)
			if !ok {
				continue
			}
			pre = s
			if stream != nil {
				stream.Prefix = s
			}
		case "to":
			s, ok := p.str(f)
			if !ok {
				continue
			}
			to, toTk = s, f.tk
			if service != nil {
				service.To = s
			}
			if stream != nil {
				stream.To = s
				if stream.Prefix != "" {
					bothBlamed = true
					p.fail(f.tk, "Stream import can not have a 'prefix' and a 'to' property")
					continue
				}
			}
		case "share":
			b, ok := p.boolean(f)
			if !ok {
				continue
			}
			share = b
			if service != nil {
				service.Share = b
			}
		case "allow_trace":
			if service != nil {
				p.fail(f.tk, "Detected allow_trace directive on a non-stream")
				continue
			}
			b, ok := p.boolean(f)
			if !ok {
				continue
			}
			atrc, atrcSeen, atrcTk = b, true, f.tk
			if stream != nil {
				stream.AllowTrace = b
			}
		default:
			p.unknown(f.tk, f.key)
		}
	}
	if stream != nil && stream.Prefix != "" && stream.To != "" && !bothBlamed {
		// nats-server notices only when `to` comes after both stream and prefix, and
		// otherwise drops `to`; refused in every order here.
		p.fail(toTk, "Stream import can not have a 'prefix' and a 'to' property")
	}
	if stream != nil {
		return stream
	}
	return service
}

// importSource parses an import's {account, subject}.
func (p *cfgParser) importSource(m map[string]any) (account, subject string) {
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "account":
			account, _ = p.str(f)
		case "subject":
			subject, _ = p.str(f)
		default:
			p.unknown(f.tk, f.key)
		}
	}
	return account, subject
}

// mappings parses a `mappings {}` block (top level or an account's): subject →
// destination, or → one {destination, weight, cluster} or a list of them. Every mapping
// is compiled with transform.NewMapping, which checks what nats-server's
// AddWeightedMappings checks, with its texts.
func (p *cfgParser) mappings(e entry) []*MappingConfig {
	m, ok := p.mapping(e)
	if !ok {
		return nil
	}
	var out []*MappingConfig
	for _, s := range p.entries(m) {
		tk := s.tk
		if tk == nil {
			tk = e.tk
		}
		if !validSubjectStr(s.key) {
			p.fail(tk, "Subject %q is not a valid subject", s.key)
			continue
		}
		var dests []transform.Dest
		single, isSingle := s.v.(string)
		switch v := s.v.(type) {
		case string:
			dests = []transform.Dest{{Subject: v, Weight: 100}}
		case []any:
			for _, raw := range v {
				itk, iv := p.unwrap(raw)
				if itk == nil {
					itk = tk
				}
				// A bad destination is reported and left out; the rest still make a
				// mapping, as in nats-server.
				if d, ok := p.mapDest(itk, iv); ok {
					dests = append(dests, d)
				}
			}
		default:
			d, ok := p.mapDest(tk, v)
			if !ok {
				continue
			}
			dests = []transform.Dest{d}
		}
		mp, err := transform.NewMapping(s.key, dests...)
		if err != nil {
			if isSingle {
				p.fail(tk, "Error adding mapping for %q to %q : %v", s.key, single, err)
			} else {
				p.fail(tk, "Error adding mapping for %q : %v", s.key, err)
			}
			continue
		}
		out = append(out, &MappingConfig{Source: s.key, Dests: dests, Mapping: mp, Pos: p.pos(tk)})
	}
	return out
}

// mapDest parses one weighted destination.
func (p *cfgParser) mapDest(tk confToken, v any) (transform.Dest, bool) {
	var d transform.Dest
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(tk, "Expected an entry for the mapping destination")
		return d, false
	}
	weighted := false
	for _, f := range p.entries(m) {
		switch strings.ToLower(f.key) {
		case "dest", "destination":
			s, ok := p.str(f)
			if !ok {
				return d, false
			}
			d.Subject = s
		case "weight":
			var w int64
			switch x := f.v.(type) {
			case string:
				ws := strings.TrimSuffix(x, "%")
				n, err := strconv.Atoi(ws)
				if err != nil {
					p.fail(f.tk, "Invalid weight %q for mapping destination", ws)
					return d, false
				}
				w = int64(n)
			case int64:
				w = x
			default:
				// nats-server's text ends with a newline here; dropped.
				p.fail(f.tk, "Unknown entry type for weight of %v", x)
				return d, false
			}
			if w > 100 || w < 0 {
				p.fail(f.tk, "Invalid weight %d for mapping destination", w)
				return d, false
			}
			d.Weight, weighted = uint8(w), true
		case "cluster":
			s, ok := p.str(f)
			if !ok {
				return d, false
			}
			d.Cluster = s
		default:
			// Not even a variable's name is skipped here, as in nats-server.
			p.fail(f.tk, "Unknown field %q for mapping destination", f.key)
			return d, false
		}
	}
	if !weighted {
		p.fail(tk, "Missing weight for mapping destination %q", d.Subject)
		return d, false
	}
	return d, true
}

// mergeMappings adds more to have (an account may have both `mappings` and `maps`): a
// source mapped again replaces its earlier mapping, as nats-server's AddWeightedMappings.
func mergeMappings(have, more []*MappingConfig) []*MappingConfig {
	for _, m := range more {
		replaced := false
		for i, h := range have {
			if h.Source == m.Source {
				have[i], replaced = m, true
				break
			}
		}
		if !replaced {
			have = append(have, m)
		}
	}
	return have
}

// systemAccount handles system_account / system: nats-server reads the key
// "system_account" first and "system" only without it (exact spellings; other casings of
// them are accepted and ignored).
func (p *cfgParser) systemAccount(e entry) {
	if e.tk != nil && e.tk.IsUsedVariable() {
		return
	}
	switch e.key {
	case "system_account":
		p.sysAccount = &e
	case "system":
		p.sysAlias = &e
	}
}

// finishSystemAccount sets Options.SystemAccount from the key that wins.
func (p *cfgParser) finishSystemAccount(o *Options) {
	e := p.sysAccount
	if e == nil {
		e = p.sysAlias
	}
	if e == nil {
		return
	}
	s, ok := e.v.(string)
	if !ok {
		p.fail(e.tk, "system account name must be a string")
		return
	}
	o.SystemAccount = s
	p.sysTk = e.tk
}
