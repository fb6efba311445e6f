package server

// Settings nats-server accepts that natsd does not implement yet. The config parser collects
// them (cfgParser.unsupported), the command line adds the flags natsd parses but cannot honour
// (HTTPS monitoring). They stop start-up, -t and reload unless the operator opts in with
// --allow_unsupported or the top-level key `allow_unsupported: true`; then they are ignored
// with a warning. Start-up is honest either way: nothing is ignored silently.

import (
	"fmt"
	"strings"
)

// UnsupportedSetting is one setting natsd does not implement yet: a config key, located, or a
// command-line flag.
type UnsupportedSetting struct {
	// Key is the key's path as written ("gateway", "jetstream.key", "tls.insecure"), or the
	// flag's names ("-ms/--https_port").
	Key string
	// Where is "<file>:<line>:<col>" for a config key, "" for a flag.
	Where string
	// Flag marks a command-line flag; What says what it is for ("HTTPS monitoring").
	Flag bool
	What string
	// value is the key's value as parsed, without positions: a reload tells a changed
	// setting from one that only moved in the file.
	value string
}

func (u UnsupportedSetting) String() string {
	if u.Flag {
		if u.What != "" {
			return fmt.Sprintf("flag %s (%s)", u.Key, u.What)
		}
		return "flag " + u.Key
	}
	return fmt.Sprintf("config key %q (%s)", u.Key, u.Where)
}

// same tells whether two settings are the same key with the same value, wherever they are.
func (u UnsupportedSetting) same(v UnsupportedSetting) bool {
	return u.Key == v.Key && u.Flag == v.Flag && u.value == v.value
}

// How an operator opts in: at start-up the flag (or the key), at a reload the key.
const (
	unsupportedStartHint  = "remove it, or start with --allow_unsupported to ignore it"
	unsupportedReloadHint = "remove it, or set allow_unsupported: true to ignore it"
)

// UnsupportedErrors are the settings that stop start-up, -t or a reload, one sentence each.
type UnsupportedErrors []string

func (e UnsupportedErrors) Error() string { return strings.Join(e, "\n") }

// CheckUnsupported refuses options that hold settings natsd does not implement, unless the
// operator opted in (AllowUnsupported): every such setting is listed, one per line, e.g.
//
//	config key "gateway" (/etc/nats.conf:12:1) is not supported by natsd yet; remove it, or start with --allow_unsupported to ignore it
func CheckUnsupported(o *Options) error {
	if len(o.Unsupported) == 0 || o.AllowUnsupported {
		return nil
	}
	var es UnsupportedErrors
	for _, u := range o.Unsupported {
		es = append(es, fmt.Sprintf("%s is not supported by natsd yet; %s", u, unsupportedStartHint))
	}
	return es
}

// UnsupportedWarnings are the lines logged for the settings ignored under the opt-in.
func UnsupportedWarnings(o *Options) []string {
	if !o.AllowUnsupported {
		return nil
	}
	var ws []string
	for _, u := range o.Unsupported {
		ws = append(ws, unsupportedWarning(u))
	}
	return ws
}

func unsupportedWarning(u UnsupportedSetting) string {
	return fmt.Sprintf("%s is not supported by natsd yet, ignored", u)
}

// unsupportedReloadField names, for the top-level keys natsd does not implement whose change
// nats-server 2.15.2 refuses to reload, the option its refusal names ("config reload not
// supported for Gateway: old=..., new=..."). The other keys (server_tags, ocsp, …)
// nats-server reloads; natsd refuses them with its own sentence. https/https_port set
// HTTPSPort, which diffOptions refuses with nats-server's text before this table is read.
var unsupportedReloadField = map[string]string{
	"gateway": "Gateway", "leafnodes": "LeafNode", "leaf": "LeafNode",
	"websocket": "Websocket", "ws": "Websocket", "mqtt": "MQTT",
	"max_sub_tokens": "MaxSubTokens", "max_subscription_tokens": "MaxSubTokens",
	"write_timeout": "WriteTimeout", "max_closed_clients": "MaxClosedClients",
	"no_header_support": "NoHeaderSupport", "disable_sublist_cache": "NoSublistCache",
	"no_sublist_cache": "NoSublistCache", "default_js_domain": "JsAccDefaultDomain",
	"feature_flags": "FeatureFlags", "proxy_protocol": "ProxyProtocol",
}

// checkUnsupportedReload applies the start-up rule to a reload: without the opt-in (the new
// file's allow_unsupported, or the --allow_unsupported flag, which every reload re-applies) a
// file with settings natsd does not implement is refused, every such setting listed; a
// setting nats-server would refuse to reload as well is refused with its text. With the
// opt-in the reload goes ahead and added names the settings added or changed, to warn about.
func checkUnsupportedReload(old, new *Options) (added []UnsupportedSetting, err error) {
	for _, u := range new.Unsupported {
		kept := false
		for _, v := range old.Unsupported {
			if u.same(v) {
				kept = true
				break
			}
		}
		if !kept {
			added = append(added, u)
		}
	}
	if len(new.Unsupported) == 0 || new.AllowUnsupported {
		return added, nil
	}
	var es UnsupportedErrors
	for _, u := range new.Unsupported {
		line := fmt.Sprintf("%s is not supported by natsd yet; %s", u, unsupportedReloadHint)
		if field, ok := unsupportedReloadField[strings.ToLower(u.Key)]; ok && !u.Flag && isAdded(u, added) {
			line = fmt.Sprintf("config reload not supported for %s: %s", field, line)
		}
		es = append(es, line)
	}
	return nil, es
}

func isAdded(u UnsupportedSetting, added []UnsupportedSetting) bool {
	for _, a := range added {
		if a.same(u) {
			return true
		}
	}
	return false
}

// plainValue strips the positions from a parsed value (the conf package wraps every value,
// nested ones included, in a token) and prints it; maps print sorted by key.
func plainValue(v any) string {
	return fmt.Sprintf("%v", stripTokens(v))
}

func stripTokens(v any) any {
	if tk, ok := v.(confToken); ok {
		v = tk.Value()
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = stripTokens(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = stripTokens(e)
		}
		return a
	}
	return v
}
