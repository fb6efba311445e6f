package server

// The accounts data model: what a config file's `accounts {}`, `mappings {}`,
// `system_account` and `no_system_account` say, parsed and validated with nats-server
// 2.15's rules (config_accounts.go, config_accounts_check.go); server/routing.go hands it to
// the engine's routing core.

import (
	"fmt"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/transform"
)

// Account names with a meaning of their own.
const (
	// GlobalAccount holds every client whose user names no account (and every client when
	// no accounts are configured). A config file cannot declare it.
	GlobalAccount = globalAccountName
	// DefaultSystemAccount is the system account's name unless system_account says
	// otherwise; nats-server creates it at start-up unless no_system_account is set.
	DefaultSystemAccount = "$SYS"
	// DefaultServiceLatencySampling is a latency block's sampling when it gives none (%).
	DefaultServiceLatencySampling = 100
	// DefaultServiceResponseThreshold is how long a service export waits for a response
	// when response_threshold is not given.
	DefaultServiceResponseThreshold = 2 * time.Minute
)

// ConfigPos is where a value sits in the config files, for errors found after parsing.
type ConfigPos struct {
	File      string
	Line, Col int
}

func (p ConfigPos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// AccountConfig is one account of the `accounts {}` block (or of its array form, which
// gives names only).
type AccountConfig struct {
	Name string
	// Nkey is the account's public nkey, if given (informational in config mode).
	Nkey string
	// Users and Nkeys are the account's users, each with Account set to Name. The same
	// pointers are in Options.Users / Options.Nkeys, which authentication reads.
	Users []*auth.User
	Nkeys []*auth.NkeyUser
	// DefaultPermissions are given (already, at parse) to the account's users that have no
	// permissions of their own; they are kept here for users added later (e.g. by JWT).
	DefaultPermissions *auth.Permissions
	// Exports and Imports in file order; every import has been checked against the
	// exporting account's exports (authorization, cycles) as nats-server does at load.
	Exports []*ExportConfig
	Imports []*ImportConfig
	// Mappings are the account's subject mappings (`mappings`/`maps`), applied to what its
	// clients publish.
	Mappings []*MappingConfig
	// Limits from `limits {}`; -1 is no limit.
	Limits AccountLimits
	// JetStream is the account's `jetstream` setting, nil when absent or disabled.
	JetStream *AccountJetStream
	// TraceDest and TraceDestSampling are `msg_trace` / `trace_dest` (sampling 1-100; 100
	// when a destination is given without one).
	TraceDest         string
	TraceDestSampling int
	Pos               ConfigPos
}

// AccountLimits are an account's `limits {}`: at most MaxConnections clients,
// MaxSubscriptions subscriptions per client, MaxPayload bytes per message (the lower of
// this and the server's max_payload), MaxLeafNodes leaf connections. -1 is no limit; 0
// means none allowed (nats-server then refuses every client of the account).
type AccountLimits struct {
	MaxConnections   int32
	MaxSubscriptions int32
	MaxPayload       int32
	MaxLeafNodes     int32
}

// NoAccountLimits is an account without a `limits {}` block.
var NoAccountLimits = AccountLimits{-1, -1, -1, -1}

// AccountJetStream is an account's JetStream enablement and limits (-1 = dynamic, as
// nats-server's defaults; tiered limits exist only through JWTs).
type AccountJetStream struct {
	MaxMemory            int64
	MaxStore             int64
	MaxStreams           int
	MaxConsumers         int
	MaxAckPending        int
	MemoryMaxStreamBytes int64
	StoreMaxStreamBytes  int64
	MaxBytesRequired     bool
	// ClusterTraffic is "" (the system account carries the account's Raft traffic) or
	// "owner" (the account itself).
	ClusterTraffic string
}

// ServiceResponseType is how many responses a service export's requests get.
type ServiceResponseType uint8

const (
	// ResponseSingleton: one response per request (the default).
	ResponseSingleton ServiceResponseType = iota
	// ResponseStream: any number of responses until the response threshold passes.
	ResponseStream
	// ResponseChunked: a response in several messages.
	ResponseChunked
)

// String gives nats-server's names (Singleton, Streamed, Chunked), as /accountz shows them.
func (rt ServiceResponseType) String() string {
	switch rt {
	case ResponseSingleton:
		return "Singleton"
	case ResponseStream:
		return "Streamed"
	case ResponseChunked:
		return "Chunked"
	}
	return "Unknown ServiceResType"
}

// ExportConfig is one entry of an account's `exports`: a stream (messages published in the
// account flow to importers) or a service (importers' requests flow into the account).
type ExportConfig struct {
	Service bool   // false: a stream export
	Subject string // may hold wildcards; nats-server does not validate it
	// Accounts may import it; nil is public (an empty list is public too).
	Accounts []string
	// AccountTokenPosition, when > 0, is the 1-based token of Subject (a '*') that must be
	// the importing account's name: each account may import only its own subjects.
	AccountTokenPosition int
	// Service exports only.
	ResponseType      ServiceResponseType
	ResponseThreshold time.Duration // DefaultServiceResponseThreshold when not given
	Latency           *LatencyConfig
	AllowTrace        bool
	Pos               ConfigPos
}

// LatencyConfig is a service export's latency tracking: for Sampling percent of the
// requests (0: those whose headers ask for it, config value "headers"), a measurement is
// published to Subject in the exporting account (it needs the system account).
type LatencyConfig struct {
	Sampling int
	Subject  string
}

// ImportConfig is one entry of an account's `imports`.
type ImportConfig struct {
	Service bool   // false: a stream import
	Account string // the exporting account
	Subject string // the subject in the exporting account (the export's namespace)
	// As written: Prefix (stream imports) or To. An import never has both.
	Prefix string
	To     string
	// Share (service imports): the importer's client information goes with latency results.
	Share bool
	// AllowTrace (stream imports): message traces may cross into the importing account.
	AllowTrace bool

	// Resolved at load, as nats-server stores them:
	//
	// Stream import: messages on Subject in Account appear in the importing account on
	// LocalSubject (prefix + subject, or To with wildcards as '*'); Transform, when
	// not nil, rewrites the exporter's subject into the local one (a wildcard Subject
	// mapped to a different To). Nil Transform: the subject is used unchanged.
	//
	// Service import: what clients of the importing account publish on LocalSubject goes
	// to the exporting account on RemoteSubject; Transform, when not nil, rewrites the
	// published subject into the remote one (wildcards mapped differently).
	LocalSubject  string
	RemoteSubject string
	Transform     *transform.Transform
	Pos           ConfigPos
}

// MappingConfig is one entry of `mappings {}` (server-wide, for GlobalAccount) or of an
// account's mappings: messages published on Source go to one of Dests, chosen by weight
// (per cluster where Cluster is set). Mapping is the compiled form the routing core applies.
type MappingConfig struct {
	Source  string
	Dests   []transform.Dest
	Mapping *transform.Mapping
	Pos     ConfigPos
}

// Account returns the configured account named name, or nil.
func (o *Options) Account(name string) *AccountConfig {
	for _, a := range o.Accounts {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// SystemAccountName is the system account nats-server runs with for these options: the
// one system_account names; else "$SYS" if an account of that name is configured (even
// with no_system_account); else none ("") with no_system_account; else "$SYS", which
// nats-server then creates at start-up.
func (o *Options) SystemAccountName() string {
	switch {
	case o.SystemAccount != "":
		return o.SystemAccount
	case o.Account(DefaultSystemAccount) != nil:
		return DefaultSystemAccount
	case o.NoSystemAccount:
		return ""
	}
	return DefaultSystemAccount
}

// ImplicitGlobalNoAuth reports nats-server's special case for a config whose only account
// is the system account (declared, or named by system_account), with no authorization
// block and no no_auth_user: nats-server then adds a hidden user in GlobalAccount and makes
// it the no_auth_user, so that clients without credentials still connect (to $G) while the
// system account's users log in with theirs.
func (o *Options) ImplicitGlobalNoAuth() bool {
	if o.AuthBlockDefined || o.NoAuthUser != "" || len(o.Accounts) != 1 {
		return false
	}
	sys := o.SystemAccount
	if sys == "" && o.Accounts[0].Name == DefaultSystemAccount {
		sys = DefaultSystemAccount
	}
	return sys != ""
}
