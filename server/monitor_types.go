package server

import (
	"encoding/json"
	"time"

	"github.com/natsd/natsd/js"
)

// The JSON shapes of nats-server v2.15.2's monitoring endpoints (tests compare the key sets).
// Field names, types and omitempty behaviour are part of the contract: tools decode them.

// Varz is /varz.
type Varz struct {
	ID                   string            `json:"server_id"`
	Name                 string            `json:"server_name"`
	Version              string            `json:"version"`
	Proto                int               `json:"proto"`
	GitCommit            string            `json:"git_commit,omitempty"`
	GoVersion            string            `json:"go"`
	Host                 string            `json:"host"`
	Port                 int               `json:"port"`
	AuthRequired         bool              `json:"auth_required,omitempty"`
	TLSRequired          bool              `json:"tls_required,omitempty"`
	TLSVerify            bool              `json:"tls_verify,omitempty"`
	TLSOCSPPeerVerify    bool              `json:"tls_ocsp_peer_verify,omitempty"`
	IP                   string            `json:"ip,omitempty"`
	ClientConnectURLs    []string          `json:"connect_urls,omitempty"`
	WSConnectURLs        []string          `json:"ws_connect_urls,omitempty"`
	MaxConn              int               `json:"max_connections"`
	MaxSubs              int               `json:"max_subscriptions,omitempty"`
	PingInterval         time.Duration     `json:"ping_interval"`
	MaxPingsOut          int               `json:"ping_max"`
	HTTPHost             string            `json:"http_host"`
	HTTPPort             int               `json:"http_port"`
	HTTPBasePath         string            `json:"http_base_path"`
	HTTPSPort            int               `json:"https_port"`
	AuthTimeout          float64           `json:"auth_timeout"`
	MaxControlLine       int32             `json:"max_control_line"`
	MaxPayload           int               `json:"max_payload"`
	MaxPending           int64             `json:"max_pending"`
	Cluster              ClusterOptsVarz   `json:"cluster"`
	Gateway              GatewayOptsVarz   `json:"gateway"`
	LeafNode             LeafNodeOptsVarz  `json:"leaf"`
	MQTT                 MQTTOptsVarz      `json:"mqtt"`
	Websocket            WebsocketOptsVarz `json:"websocket"`
	JetStream            JetStreamVarz     `json:"jetstream"`
	TLSTimeout           float64           `json:"tls_timeout"`
	WriteDeadline        time.Duration     `json:"write_deadline"`
	WriteTimeout         string            `json:"write_timeout,omitempty"`
	Start                time.Time         `json:"start"`
	Now                  time.Time         `json:"now"`
	Uptime               string            `json:"uptime"`
	Mem                  int64             `json:"mem"`
	Cores                int               `json:"cores"`
	MaxProcs             int               `json:"gomaxprocs"`
	MemLimit             int64             `json:"gomemlimit,omitempty"`
	CPU                  float64           `json:"cpu"`
	Connections          int               `json:"connections"`
	TotalConnections     uint64            `json:"total_connections"`
	Routes               int               `json:"routes"`
	Remotes              int               `json:"remotes"`
	Leafs                int               `json:"leafnodes"`
	InMsgs               int64             `json:"in_msgs"`
	InBytes              int64             `json:"in_bytes"`
	InClientMsgs         int64             `json:"in_client_msgs"`
	InClientBytes        int64             `json:"in_client_bytes"`
	OutMsgs              int64             `json:"out_msgs"`
	OutBytes             int64             `json:"out_bytes"`
	OutClientMsgs        int64             `json:"out_client_msgs"`
	OutClientBytes       int64             `json:"out_client_bytes"`
	SlowConsumers        int64             `json:"slow_consumers"`
	StaleConnections     int64             `json:"stale_connections"`
	StalledClients       int64             `json:"stalled_clients"`
	Subscriptions        uint32            `json:"subscriptions"`
	HTTPReqStats         map[string]uint64 `json:"http_req_stats"`
	ConfigLoadTime       time.Time         `json:"config_load_time"`
	ConfigDigest         string            `json:"config_digest"`
	Tags                 []string          `json:"tags,omitempty"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	FeatureFlags         map[string]bool   `json:"feature_flags,omitempty"`
	SystemAccount        string            `json:"system_account,omitempty"`
	PinnedAccountFail    uint64            `json:"pinned_account_fails,omitempty"`
	SlowConsumersStats   *KindCounts       `json:"slow_consumer_stats"`
	StaleConnectionStats *KindCounts       `json:"stale_connection_stats,omitempty"`
	DiskIOWaitStats      *DiskIOWaitStats  `json:"disk_io_wait_stats"`
	TLSCertNotAfter      time.Time         `json:"tls_cert_not_after,omitzero"`
	Proxies              *struct{}         `json:"proxies,omitempty"`
	OCSPResponseCache    *struct{}         `json:"ocsp_peer_cache,omitempty"`
	TrustedOperatorsJwt  []string          `json:"trusted_operators_jwt,omitempty"`
	TrustedOperatorsClm  []map[string]any  `json:"trusted_operators_claim,omitempty"`
}

// ClusterOptsVarz is /varz "cluster": the cluster options (clusterVarz). nats-server shows
// no compression, pinned accounts or permissions here.
type ClusterOptsVarz struct {
	Name            string        `json:"name,omitempty"`
	Host            string        `json:"addr,omitempty"`
	Port            int           `json:"cluster_port,omitempty"`
	AuthTimeout     float64       `json:"auth_timeout,omitempty"`
	URLs            []string      `json:"urls,omitempty"`
	TLSTimeout      float64       `json:"tls_timeout,omitempty"`
	TLSRequired     bool          `json:"tls_required,omitempty"`
	TLSVerify       bool          `json:"tls_verify,omitempty"`
	PoolSize        int           `json:"pool_size,omitempty"`
	WriteDeadline   time.Duration `json:"write_deadline,omitempty"`
	WriteTimeout    string        `json:"write_timeout,omitempty"`
	TLSCertNotAfter time.Time     `json:"tls_cert_not_after,omitzero"`
}

// GatewayOptsVarz is /varz "gateway".
type GatewayOptsVarz struct {
	Name           string        `json:"name,omitempty"`
	Host           string        `json:"host,omitempty"`
	Port           int           `json:"port,omitempty"`
	AuthTimeout    float64       `json:"auth_timeout,omitempty"`
	TLSTimeout     float64       `json:"tls_timeout,omitempty"`
	TLSRequired    bool          `json:"tls_required,omitempty"`
	TLSVerify      bool          `json:"tls_verify,omitempty"`
	Advertise      string        `json:"advertise,omitempty"`
	ConnectRetries int           `json:"connect_retries,omitempty"`
	Gateways       []any         `json:"gateways,omitempty"`
	RejectUnknown  bool          `json:"reject_unknown,omitempty"`
	WriteDeadline  time.Duration `json:"write_deadline,omitempty"`
	WriteTimeout   string        `json:"write_timeout,omitempty"`
}

// LeafNodeOptsVarz is /varz "leaf".
type LeafNodeOptsVarz struct {
	Host          string        `json:"host,omitempty"`
	Port          int           `json:"port,omitempty"`
	AuthTimeout   float64       `json:"auth_timeout,omitempty"`
	TLSTimeout    float64       `json:"tls_timeout,omitempty"`
	TLSRequired   bool          `json:"tls_required,omitempty"`
	TLSVerify     bool          `json:"tls_verify,omitempty"`
	Remotes       []any         `json:"remotes,omitempty"`
	WriteDeadline time.Duration `json:"write_deadline,omitempty"`
	WriteTimeout  string        `json:"write_timeout,omitempty"`
}

// MQTTOptsVarz is /varz "mqtt".
type MQTTOptsVarz struct {
	Host          string        `json:"host,omitempty"`
	Port          int           `json:"port,omitempty"`
	NoAuthUser    string        `json:"no_auth_user,omitempty"`
	AuthTimeout   float64       `json:"auth_timeout,omitempty"`
	TLSMap        bool          `json:"tls_map,omitempty"`
	TLSTimeout    float64       `json:"tls_timeout,omitempty"`
	JsDomain      string        `json:"js_domain,omitempty"`
	AckWait       time.Duration `json:"ack_wait,omitempty"`
	MaxAckPending uint16        `json:"max_ack_pending,omitempty"`
}

// WebsocketOptsVarz is /varz "websocket".
type WebsocketOptsVarz struct {
	Host             string        `json:"host,omitempty"`
	Port             int           `json:"port,omitempty"`
	Advertise        string        `json:"advertise,omitempty"`
	NoAuthUser       string        `json:"no_auth_user,omitempty"`
	JWTCookie        string        `json:"jwt_cookie,omitempty"`
	HandshakeTimeout time.Duration `json:"handshake_timeout,omitempty"`
	AuthTimeout      float64       `json:"auth_timeout,omitempty"`
	NoTLS            bool          `json:"no_tls,omitempty"`
	TLSMap           bool          `json:"tls_map,omitempty"`
	SameOrigin       bool          `json:"same_origin,omitempty"`
	AllowedOrigins   []string      `json:"allowed_origins,omitempty"`
	Compression      bool          `json:"compression,omitempty"`
}

// JetStreamVarz is /varz "jetstream" (empty while JetStream is off) and STATSZ's
// "jetstream". nats-server's also has "meta", the Raft meta group's state, which a server
// that is not clustered (natsd) never has: the field is left out rather than always nil.
type JetStreamVarz struct {
	Config *JetStreamConfig `json:"config,omitempty"`
	Stats  *JetStreamStats  `json:"stats,omitempty"`
	Limits *JSLimitOpts     `json:"limits,omitempty"`
}

// KindCounts are per-connection-kind counters (slow_consumer_stats, stale_connection_stats).
type KindCounts struct {
	Clients  uint64 `json:"clients"`
	Routes   uint64 `json:"routes"`
	Gateways uint64 `json:"gateways"`
	Leafs    uint64 `json:"leafs"`
}

// DiskIOWaitStats is /varz "disk_io_wait_stats".
type DiskIOWaitStats struct {
	Waiters     int64  `json:"waiters"`
	Waits       uint64 `json:"waits"`
	WaitTime    uint64 `json:"wait_time"`
	MaxWaitTime uint64 `json:"max_wait_time"`
}

// Connz is /connz.
type Connz struct {
	ID       string      `json:"server_id"`
	Now      time.Time   `json:"now"`
	NumConns int         `json:"num_connections"`
	Total    int         `json:"total"`
	Offset   int         `json:"offset"`
	Limit    int         `json:"limit"`
	Conns    []*ConnInfo `json:"connections"`
}

// ConnInfo is one /connz connection.
type ConnInfo struct {
	Cid            uint64         `json:"cid"`
	Kind           string         `json:"kind,omitempty"`
	Type           string         `json:"type,omitempty"`
	IP             string         `json:"ip"`
	Port           int            `json:"port"`
	Start          time.Time      `json:"start"`
	LastActivity   time.Time      `json:"last_activity"`
	Stop           *time.Time     `json:"stop,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	RTT            string         `json:"rtt,omitempty"`
	Uptime         string         `json:"uptime"`
	Idle           string         `json:"idle"`
	Pending        int            `json:"pending_bytes"`
	InMsgs         int64          `json:"in_msgs"`
	OutMsgs        int64          `json:"out_msgs"`
	InBytes        int64          `json:"in_bytes"`
	OutBytes       int64          `json:"out_bytes"`
	Stalls         int64          `json:"stalls,omitempty"`
	NumSubs        uint32         `json:"subscriptions"`
	Name           string         `json:"name,omitempty"`
	Lang           string         `json:"lang,omitempty"`
	Version        string         `json:"version,omitempty"`
	TLSVersion     string         `json:"tls_version,omitempty"`
	TLSCipher      string         `json:"tls_cipher_suite,omitempty"`
	TLSPeerCerts   []*TLSPeerCert `json:"tls_peer_certs,omitempty"`
	TLSFirst       bool           `json:"tls_first,omitempty"`
	AuthorizedUser string         `json:"authorized_user,omitempty"`
	Account        string         `json:"account,omitempty"`
	Subs           []string       `json:"subscriptions_list,omitempty"`
	SubsDetail     []SubDetail    `json:"subscriptions_list_detail,omitempty"`
	JWT            string         `json:"jwt,omitempty"`
	IssuerKey      string         `json:"issuer_key,omitempty"`
	NameTag        string         `json:"name_tag,omitempty"`
	Tags           []string       `json:"tags,omitempty"`
	MQTTClient     string         `json:"mqtt_client,omitempty"`

	rtt time.Duration // for sorting
}

// TLSPeerCert is one certificate of a client's verified chain in /connz.
type TLSPeerCert struct {
	Subject          string `json:"subject,omitempty"`
	SubjectPKISha256 string `json:"spki_sha256,omitempty"`
	CertSha256       string `json:"cert_sha256,omitempty"`
}

// SubDetail is one subscription in /connz and /subsz.
type SubDetail struct {
	Account    string `json:"account,omitempty"`
	AccountTag string `json:"account_tag,omitempty"`
	Subject    string `json:"subject"`
	Queue      string `json:"qgroup,omitempty"`
	Sid        string `json:"sid"`
	Msgs       int64  `json:"msgs"`
	Max        int64  `json:"max,omitempty"`
	Cid        uint64 `json:"cid"`
}

// SublistStats are the interest graph's figures, inlined in /subsz.
type SublistStats struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
}

// Subsz is /subsz.
type Subsz struct {
	ID  string    `json:"server_id"`
	Now time.Time `json:"now"`
	*SublistStats
	Total  int         `json:"total"`
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
	Subs   []SubDetail `json:"subscriptions_list,omitempty"`
}

// Routez is /routez.
type Routez struct {
	ID        string       `json:"server_id"`
	Name      string       `json:"server_name"`
	Now       time.Time    `json:"now"`
	NumRoutes int          `json:"num_routes"`
	Routes    []*RouteInfo `json:"routes"`
}

// RouteInfo is one route in /routez, in nats-server's field order.
type RouteInfo struct {
	RID          uint64      `json:"rid"`
	RemoteID     string      `json:"remote_id"`
	RemoteName   string      `json:"remote_name"`
	DidSolicit   bool        `json:"did_solicit"`
	IsConfigured bool        `json:"is_configured"`
	IP           string      `json:"ip"`
	Port         int         `json:"port"`
	Start        time.Time   `json:"start"`
	LastActivity time.Time   `json:"last_activity"`
	RTT          string      `json:"rtt,omitempty"`
	Uptime       string      `json:"uptime"`
	Idle         string      `json:"idle"`
	Pending      int         `json:"pending_size"`
	InMsgs       int64       `json:"in_msgs"`
	OutMsgs      int64       `json:"out_msgs"`
	InBytes      int64       `json:"in_bytes"`
	OutBytes     int64       `json:"out_bytes"`
	NumSubs      uint32      `json:"subscriptions"`
	Subs         []string    `json:"subscriptions_list,omitempty"`
	SubsDetail   []SubDetail `json:"subscriptions_list_detail,omitempty"`
	Account      string      `json:"account,omitempty"`
	Compression  string      `json:"compression,omitempty"`
}

// Gatewayz is /gatewayz.
type Gatewayz struct {
	ID               string           `json:"server_id"`
	Now              time.Time        `json:"now"`
	Name             string           `json:"name,omitempty"`
	Host             string           `json:"host,omitempty"`
	Port             int              `json:"port,omitempty"`
	OutboundGateways map[string]any   `json:"outbound_gateways"`
	InboundGateways  map[string][]any `json:"inbound_gateways"`
}

// Leafz is /leafz.
type Leafz struct {
	ID       string    `json:"server_id"`
	Now      time.Time `json:"now"`
	NumLeafs int       `json:"leafnodes"`
	Leafs    []any     `json:"leafs"`
}

// Accountz is /accountz.
type Accountz struct {
	ID            string       `json:"server_id"`
	Now           time.Time    `json:"now"`
	SystemAccount string       `json:"system_account,omitempty"`
	Accounts      []string     `json:"accounts,omitempty"`
	Account       *AccountInfo `json:"account_detail,omitempty"`
}

// AccountInfo is /accountz?acc=NAME and $SYS.REQ.ACCOUNT.<acc>.INFO.
type AccountInfo struct {
	AccountName string               `json:"account_name"`
	LastUpdate  time.Time            `json:"update_time,omitempty"`
	IsSystem    bool                 `json:"is_system,omitempty"`
	Expired     bool                 `json:"expired"`
	Complete    bool                 `json:"complete"`
	JetStream   bool                 `json:"jetstream_enabled"`
	LeafCnt     int                  `json:"leafnode_connections"`
	ClientCnt   int                  `json:"client_connections"`
	SubCnt      uint32               `json:"subscriptions"`
	Mappings    map[string][]MapDest `json:"mappings,omitempty"`
	Exports     []ExtExport          `json:"exports,omitempty"`
	Imports     []ExtImport          `json:"imports,omitempty"`
	Jwt         string               `json:"jwt,omitempty"`
	IssuerKey   string               `json:"issuer_key,omitempty"`
	NameTag     string               `json:"name_tag,omitempty"`
	Tags        []string             `json:"tags,omitempty"`
	Claim       json.RawMessage      `json:"decoded_jwt,omitempty"`
	Vr          []ExtVrIssues        `json:"validation_result_jwt,omitempty"`
	RevokedUser map[string]time.Time `json:"revoked_user,omitempty"`
	Sublist     *SublistStats        `json:"sublist_stats,omitempty"`
	Responses   map[string]ExtImport `json:"responses,omitempty"`
}

// MapDest is one destination of a subject mapping.
type MapDest struct {
	Subject string `json:"subject"`
	Weight  uint8  `json:"weight"`
	Cluster string `json:"cluster,omitempty"`
}

// ExtServiceLatency is an import's or export's latency tracking.
type ExtServiceLatency struct {
	Sampling int    `json:"sampling"`
	Results  string `json:"results"`
}

// ExtImport is one import of an account (the JWT import's fields, then the server's).
type ExtImport struct {
	Name         string              `json:"name,omitempty"`
	Subject      string              `json:"subject,omitempty"`
	Account      string              `json:"account,omitempty"`
	Token        string              `json:"token,omitempty"`
	To           string              `json:"to,omitempty"` // deprecated duplicate of LocalSubject
	LocalSubject string              `json:"local_subject,omitempty"`
	Type         string              `json:"type,omitempty"` // "service" or "stream"
	AllowTrace   bool                `json:"allow_trace,omitempty"`
	Invalid      bool                `json:"invalid"`
	Share        bool                `json:"share"`
	Tracking     bool                `json:"tracking"`
	TrackingHdr  map[string][]string `json:"tracking_header,omitempty"`
	Latency      *ExtServiceLatency  `json:"latency,omitempty"`
	M1           json.RawMessage     `json:"m1,omitempty"`
}

// ExtExport is one export of an account.
type ExtExport struct {
	Name                 string               `json:"name,omitempty"`
	Subject              string               `json:"subject,omitempty"`
	Type                 string               `json:"type,omitempty"`
	TokenReq             bool                 `json:"token_req,omitempty"`
	Revocations          map[string]int64     `json:"revocations,omitempty"`
	ResponseType         string               `json:"response_type,omitempty"`
	ResponseThreshold    time.Duration        `json:"response_threshold,omitempty"`
	Latency              *ExtServiceLatency   `json:"service_latency,omitempty"`
	AccountTokenPosition uint                 `json:"account_token_position,omitempty"`
	Advertise            bool                 `json:"advertise,omitempty"`
	AllowTrace           bool                 `json:"allow_trace,omitempty"`
	Description          string               `json:"description,omitempty"`
	InfoURL              string               `json:"info_url,omitempty"`
	ApprovedAccounts     []string             `json:"approved_accounts,omitempty"`
	RevokedAct           map[string]time.Time `json:"revoked_activations,omitempty"`
}

// ExtVrIssues is one problem found validating an account JWT.
type ExtVrIssues struct {
	Description string `json:"description"`
	Blocking    bool   `json:"blocking"`
	Time        bool   `json:"time_check"`
}

// AccountStatz is /accstatz.
type AccountStatz struct {
	ID       string         `json:"server_id"`
	Now      time.Time      `json:"now"`
	Accounts []*AccountStat `json:"account_statz"`
}

// AccountStat is one account's traffic.
type AccountStat struct {
	Account       string    `json:"acc"`
	Name          string    `json:"name"`
	Conns         int       `json:"conns"`
	LeafNodes     int       `json:"leafnodes"`
	TotalConns    int       `json:"total_conns"`
	NumSubs       uint32    `json:"num_subscriptions"`
	Sent          DataStats `json:"sent"`
	Received      DataStats `json:"received"`
	SlowConsumers int64     `json:"slow_consumers"`
}

// MsgBytes is a message and byte count.
type MsgBytes struct {
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
}

// DataStats is traffic in one direction, split by origin.
type DataStats struct {
	MsgBytes
	Gateways *MsgBytes `json:"gateways,omitempty"`
	Routes   *MsgBytes `json:"routes,omitempty"`
	Leafs    *MsgBytes `json:"leafs,omitempty"`
}

// JetStreamConfig is the JetStream configuration as /jsz and /varz show it.
type JetStreamConfig struct {
	MaxMemory    int64         `json:"max_memory"`
	MaxStore     int64         `json:"max_storage"`
	StoreDir     string        `json:"store_dir,omitempty"`
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	SyncAlways   bool          `json:"sync_always,omitempty"`
	Domain       string        `json:"domain,omitempty"`
	CompressOK   bool          `json:"compress_ok,omitempty"`
	UniqueTag    string        `json:"unique_tag,omitempty"`
	Strict       bool          `json:"strict,omitempty"`
}

// JetStreamAPIStats are the JetStream API counters.
type JetStreamAPIStats struct {
	Level    int    `json:"level"`
	Total    uint64 `json:"total"`
	Errors   uint64 `json:"errors"`
	Inflight uint64 `json:"inflight,omitempty"`
}

// JetStreamStats are JetStream's usage figures.
type JetStreamStats struct {
	Memory         uint64            `json:"memory"`
	Store          uint64            `json:"storage"`
	ReservedMemory uint64            `json:"reserved_memory"`
	ReservedStore  uint64            `json:"reserved_storage"`
	Accounts       int               `json:"accounts"`
	HAAssets       int               `json:"ha_assets"`
	API            JetStreamAPIStats `json:"api"`
}

// JSLimitOpts are the server-wide JetStream caps (jetstream { limits {} }), as /varz and
// /jsz show them.
type JSLimitOpts struct {
	MaxRequestBatch           int           `json:"max_request_batch,omitempty"`
	MaxAckPending             int           `json:"max_ack_pending,omitempty"`
	MaxHAAssets               int           `json:"max_ha_assets,omitempty"`
	Duplicates                time.Duration `json:"max_duplicate_window,omitempty"`
	MaxBatchInflightPerStream int           `json:"max_batch_inflight_per_stream,omitempty"`
	MaxBatchInflightTotal     int           `json:"max_batch_inflight_total,omitempty"`
	MaxBatchSize              int           `json:"max_batch_size,omitempty"`
	MaxBatchTimeout           time.Duration `json:"max_batch_timeout,omitempty"`
	DefaultMaxConsumers       int           `json:"default_max_consumers,omitempty"`
}

// JSInfo is /jsz and JSZ's data. nats-server's also has "meta_cluster", which only a
// clustered server has.
type JSInfo struct {
	JetStreamStats
	ID              string           `json:"server_id"`
	Now             time.Time        `json:"now"`
	Disabled        bool             `json:"disabled,omitempty"`
	Config          JetStreamConfig  `json:"config"`
	Limits          *JSLimitOpts     `json:"limits,omitempty"`
	Streams         int              `json:"streams"`
	StreamsLeader   int              `json:"streams_leader,omitempty"`
	Consumers       int              `json:"consumers"`
	ConsumersLeader int              `json:"consumers_leader,omitempty"`
	Messages        uint64           `json:"messages"`
	Bytes           uint64           `json:"bytes"`
	AccountDetails  []*AccountDetail `json:"account_details,omitempty"`
	Total           int              `json:"total"`
}

// AccountDetail is one account in /jsz account_details, and $SYS.REQ.ACCOUNT.<acc>.JSZ's
// data. Id is the account's name, Name its JWT name tag when it has one.
type AccountDetail struct {
	Name string `json:"name"`
	Id   string `json:"id"`
	JetStreamStats
	Streams []StreamDetail `json:"stream_detail,omitempty"`
}

// StreamDetail is one stream of an AccountDetail (config only when asked for; its consumers
// with consumers=true). A server that is not clustered has no Raft groups to name.
type StreamDetail struct {
	Name               string                 `json:"name"`
	Created            time.Time              `json:"created"`
	Cluster            *js.ClusterInfo        `json:"cluster,omitempty"`
	Config             *js.StreamConfig       `json:"config,omitempty"`
	State              js.StreamState         `json:"state,omitempty"`
	Consumer           []json.RawMessage      `json:"consumer_detail,omitempty"`
	DirectConsumer     []json.RawMessage      `json:"direct_consumer_detail,omitempty"`
	Mirror             *js.StreamSourceInfo   `json:"mirror,omitempty"`
	Sources            []*js.StreamSourceInfo `json:"sources,omitempty"`
	RaftGroup          string                 `json:"stream_raft_group,omitempty"`
	ConsumerRaftGroups []*RaftGroupDetail     `json:"consumer_raft_groups,omitempty"`
}

// RaftGroupDetail names a consumer's Raft group.
type RaftGroupDetail struct {
	Name      string `json:"name"`
	RaftGroup string `json:"raft_group,omitempty"`
}

// HealthStatus is /healthz.
type HealthStatus struct {
	Status     string         `json:"status"`
	StatusCode int            `json:"status_code,omitempty"`
	Error      string         `json:"error,omitempty"`
	Errors     []HealthzError `json:"errors,omitempty"`
}

// HealthzError is one /healthz?details=true problem.
type HealthzError struct {
	Type     HealthzErrorType `json:"type"`
	Account  string           `json:"account,omitempty"`
	Stream   string           `json:"stream,omitempty"`
	Consumer string           `json:"consumer,omitempty"`
	Error    string           `json:"error,omitempty"`
}

// HealthzErrorType is what a health problem is about, sent as nats-server's names.
type HealthzErrorType int

// Health problem types, as nats-server numbers and names them.
const (
	HealthzErrorConn HealthzErrorType = iota
	HealthzErrorBadRequest
	HealthzErrorJetStream
	HealthzErrorAccount
	HealthzErrorStream
	HealthzErrorConsumer
)

var healthzErrorNames = [...]string{"CONNECTION", "BAD_REQUEST", "JETSTREAM", "ACCOUNT", "STREAM", "CONSUMER"}

func (t HealthzErrorType) String() string {
	if t >= 0 && int(t) < len(healthzErrorNames) {
		return healthzErrorNames[t]
	}
	return "unknown"
}

// MarshalJSON writes the type's name.
func (t HealthzErrorType) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }
