package server

import (
	"crypto/tls"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/cluster"
	"github.com/natsd/natsd/filestore"
)

// Defaults match nats-server v2.15.2.
const (
	DefaultPort             = 4222
	DefaultHost             = "0.0.0.0"
	DefaultMaxPayload       = 1 << 20
	DefaultMaxControlLine   = 4096
	DefaultMaxPending       = 64 << 20
	DefaultMaxConnections   = 64 * 1024
	DefaultPingInterval     = 2 * time.Minute
	DefaultMaxPingsOut      = 2
	DefaultAuthTimeout      = 2 * time.Second
	DefaultWriteDeadline    = 10 * time.Second
	DefaultLameDuckDuration = 2 * time.Minute
	DefaultLameDuckGrace    = 10 * time.Second

	// ServerVersion is the nats-server version whose behaviour natsd matches; clients gate
	// features on INFO's version, so this is what INFO reports (natsd's own is Version).
	ServerVersion = "2.15.2"
)

// Version is natsd's own version (logs, /varz) and Commit the source revision it was built
// from; release builds stamp both with -ldflags "-X github.com/natsd/natsd/server.Version=...
// -X github.com/natsd/natsd/server.Commit=..." (see the Makefile and the Dockerfile).
var (
	Version = "0.1.0"
	Commit  = ""
)

// Options holds the server configuration. Field names follow nats-server's Options where
// an equivalent exists, so that config keys and flags map one to one.
type Options struct {
	Host       string
	Port       int // -1 picks a random port
	ServerName string

	MaxPayload     int32
	MaxControlLine int32
	MaxPending     int64
	MaxConn        int // 0 = default; negative refuses every client (a config file's 0 is stored as -1)
	MaxConnSet     bool
	MaxSubs        int // 0 or -1 = unlimited; below -1 every client is refused (as nats-server)

	PingInterval  time.Duration
	MaxPingsOut   int
	AuthTimeout   time.Duration
	WriteDeadline time.Duration

	LameDuckDuration    time.Duration
	LameDuckGracePeriod time.Duration

	// NoFastProducerStall disables briefly slowing a publisher whose subscribers cannot keep up.
	NoFastProducerStall bool

	// Reactors is the number of gnet event loops; 0 picks the measured default.
	Reactors int
	// ReusePort gives each reactor its own SO_REUSEPORT listener (kernel-balanced accepts).
	ReusePort bool
	// ReplySpin is how long a reactor polls for its next event after answering a request
	// itself (loop.Config.ReplySpin); 0 picks the measured default, negative is never.
	ReplySpin time.Duration

	// Monitoring: HTTPPort 0 = off, -1 = random; HTTPHost defaults to Host. HTTPSPort is
	// not built yet: a setting in Unsupported (shown in /varz, nothing listens). ProfPort
	// serves Go's pprof on its own port.
	HTTPHost     string
	HTTPPort     int
	HTTPSPort    int
	HTTPBasePath string
	ProfPort     int

	LogFile         string
	Logtime         bool
	LogtimeUTC      bool // logtime_utc: log timestamps in UTC, not local time
	MaxTracedMsgLen int  // max_traced_msg_len: traced payloads cut to this length (0: whole)
	// Syslog (syslog) logs to the local syslog, RemoteSyslog (remote_syslog:
	// udp://host:port, tcp://host:port or unix:///path) to a remote one; a log file wins.
	Syslog       bool
	RemoteSyslog string
	// LogSizeLimit (logfile_size_limit) rotates the log file past that many bytes; LogMaxFiles
	// (logfile_max_num) keeps at most that many files, the current one included.
	LogSizeLimit int64
	LogMaxFiles  int64
	Debug        bool
	Trace        bool
	NoLog        bool
	PidFile      string
	// PortsFileDir (ports_file_dir): where the ports file goes (ports.go); "" for none.
	PortsFileDir string
	// ClientAdvertise (client_advertise): the host[:port] INFO gives clients instead of the
	// bound one (a missing or 0 port: the bound port).
	ClientAdvertise string

	// Engine picks the network driver: "gnet" (default) or "netpoll".
	Engine string

	// ConfigFile is the -c file, kept for reload; ConfigDigest is the sha256 of what it
	// parsed to (/varz config_digest).
	ConfigFile   string
	ConfigDigest string

	// Unsupported are the settings nats-server accepts that natsd does not implement yet (the
	// config file's, from ProcessConfigFile, and flags such as -ms). New, -t and Reload refuse
	// them unless AllowUnsupported (--allow_unsupported, allow_unsupported: true), which
	// ignores them with a warning (CheckUnsupported).
	Unsupported      []UnsupportedSetting
	AllowUnsupported bool

	// Authentication, with nats-server's field names: a single user (Username/Password), a
	// token (Authorization), or lists of users and nkey users; NoAuthUser is the identity of
	// clients that send no credentials. Passwords and tokens may be bcrypt hashes.
	Username           string
	Password           string
	Authorization      string
	Users              []*auth.User
	Nkeys              []*auth.NkeyUser
	NoAuthUser         string
	DefaultPermissions *auth.Permissions
	// AuthBlockDefined: the file has an `authorization` block (nats-server's
	// authBlockDefined, which ImplicitGlobalNoAuth reads).
	AuthBlockDefined bool

	// Accounts (accounts.go): the `accounts` block in file order (GlobalAccount is never in
	// it); their users are also in Users/Nkeys with Account set. SystemAccount is the
	// system_account (or system) key as written, NoSystemAccount no_system_account;
	// SystemAccountName gives the account nats-server would use. Mappings are the
	// top-level `mappings {}`, which apply to GlobalAccount.
	Accounts        []*AccountConfig
	SystemAccount   string
	NoSystemAccount bool
	Mappings        []*MappingConfig

	// Client TLS. TLSConfig is built from the tls{} block or the --tls* flags.
	TLSConfig  *tls.Config
	TLSTimeout time.Duration // handshake timeout (2s)
	TLSVerify  bool
	TLSMap     bool // verify_and_map: the client certificate names the user
	// TLSPinnedCerts (pinned_certs): when set, only clients whose certificate's public key
	// (hex SHA-256 of its DER SubjectPublicKeyInfo) is listed may connect.
	TLSPinnedCerts            map[string]struct{}
	TLSHandshakeFirst         bool
	TLSHandshakeFirstFallback time.Duration
	AllowNonTLS               bool

	// Cluster is the cluster {} block and the cluster flags (--cluster, --routes, ...): the
	// routes to other servers (server/routes.go runs them).
	Cluster cluster.Options

	// JetStream (-js, the jetstream block). StoreDir is the directory nats-server would be
	// given (-sd, store_dir): the server keeps its state in StoreDir/jetstream. "" picks
	// nats-server's default (<os tmp>/nats). JetStreamMaxMemory / JetStreamMaxStore are
	// max_memory_store / max_file_store (0: nats-server's defaults, from the machine).
	// SyncInterval is sync_interval as written: 0 (unset, or "always": SyncAlways) keeps
	// natsd's default of fsync before every acknowledgement; a duration opts out, as in
	// nats-server, acknowledging after write(2) and syncing that often.
	JetStream          bool
	StoreDir           string
	JetStreamMaxMemory int64
	JetStreamMaxStore  int64
	SyncInterval       time.Duration
	SyncAlways         bool
	JetStreamDomain    string
	// JetStreamStrict is jetstream.strict (default true: unknown JSON fields in API requests
	// are refused); JetStreamStrictSet says the file set it.
	JetStreamStrict    bool
	JetStreamStrictSet bool
	// JetStreamMaxBufferedMsgs / JetStreamMaxBufferedSize bound each stream's ingest queue
	// (max_buffered_msgs, max_buffered_size; 0: defaults).
	JetStreamMaxBufferedMsgs int
	JetStreamMaxBufferedSize int64
	// JetStreamRequestQueueLimit is request_queue_limit (0: 10000).
	JetStreamRequestQueueLimit int
	// JetStreamLimits are the jetstream.limits caps (0: none).
	JetStreamLimits JetStreamServerLimits
	// JetStreamFS is the file system JetStream writes through (nil: the OS's). Tests set a
	// double that loses what was not synced, to cut the power under a running server.
	JetStreamFS filestore.FS
	// JetStream keys natsd keeps but does not act on yet (start-up reports each as not
	// supported), under nats-server's field names: unique_tag (lower-cased, trimmed),
	// max_concurrent_io, key / ek / encryption_key, prev_key / prev_ek /
	// prev_encryption_key, cipher ("chacha" or "aes"; "": nats-server's default, chacha),
	// tpm {}, extension_hint, max_outstanding_catchup, info_queue_limit (0: the request
	// queue's), meta_compact, meta_compact_size, meta_compact_sync.
	JetStreamUniqueTag       string
	JetStreamConcurrentIOs   int
	JetStreamKey             string
	JetStreamOldKey          string
	JetStreamCipher          string
	JetStreamTpm             JetStreamTPM
	JetStreamExtHint         string
	JetStreamMaxCatchup      int64
	JetStreamInfoQueueLimit  int
	JetStreamMetaCompact     uint64
	JetStreamMetaCompactSize uint64
	JetStreamMetaCompactSync bool

	// NoSigs leaves signal handling to the embedder (tests).
	NoSigs bool
}

// JetStreamServerLimits is jetstream { limits { ... } }: server-wide caps on what accounts'
// streams and consumers may ask for (0: no cap).
type JetStreamServerLimits struct {
	MaxAckPending       int
	MaxHAAssets         int
	MaxRequestBatch     int
	DuplicateWindow     time.Duration
	DefaultMaxConsumers int
	// limits { batch { ... } }: atomic batch publishing caps (max_inflight_per_stream,
	// max_inflight_total, max_msgs, timeout).
	MaxBatchInflightPerStream int
	MaxBatchInflightTotal     int
	MaxBatchSize              int
	MaxBatchTimeout           time.Duration
}

// JetStreamTPM is jetstream { tpm { ... } }: the encryption key sealed in a TPM (kept, not
// supported).
type JetStreamTPM struct {
	KeysFile    string
	KeyPassword string
	SrkPassword string
	Pcr         int
}

// setDefaults fills zero fields with nats-server's defaults.
func (o *Options) setDefaults() {
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.MaxControlLine == 0 {
		o.MaxControlLine = DefaultMaxControlLine
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxConn == 0 {
		o.MaxConn = DefaultMaxConnections
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.MaxPingsOut == 0 {
		o.MaxPingsOut = DefaultMaxPingsOut
	}
	if o.AuthTimeout == 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.WriteDeadline == 0 {
		o.WriteDeadline = DefaultWriteDeadline
	}
	if o.LameDuckDuration == 0 {
		o.LameDuckDuration = DefaultLameDuckDuration
	}
	if o.HTTPHost == "" {
		o.HTTPHost = o.Host
	}
	if o.LameDuckGracePeriod == 0 {
		o.LameDuckGracePeriod = DefaultLameDuckGrace
	}
}

// replySpin maps a configured reply_spin to Options.ReplySpin: 0 (or less) there means
// never, where the zero Options value means the default.
func replySpin(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// ReplySpinFlag is the --reply_spin flag's value.
type ReplySpinFlag struct{ D *time.Duration }

func (f ReplySpinFlag) String() string {
	if f.D == nil {
		return ""
	}
	return f.D.String()
}

func (f ReplySpinFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*f.D = replySpin(d)
	return nil
}
