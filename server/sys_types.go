package server

import (
	"encoding/json"
	"time"

	"github.com/natsd/natsd/auth"
)

// The JSON shapes of nats-server 2.15.2's $SYS events and request/reply API. Field names,
// types and omitempty behaviour are part of the contract: the nats CLI, nats.go users and
// other servers decode them. The `data` of a request's answer reuses the monitoring types of
// monitor_types.go.

// ServerCapability is the "flags" bit set of ServerInfo.
type ServerCapability uint64

// Capability bits, as nats-server numbers them.
const (
	JetStreamEnabled     ServerCapability = 1 << iota // the server runs JetStream
	BinaryStreamSnapshot                              // stream snapshots in the binary format
	AccountNRG                                        // Raft traffic in the asset's account
)

// ServerInfo identifies the server that sent an event or an answer ("server").
type ServerInfo struct {
	Name         string            `json:"name"`
	Host         string            `json:"host"`
	ID           string            `json:"id"`
	Cluster      string            `json:"cluster,omitempty"`
	Domain       string            `json:"domain,omitempty"`
	Version      string            `json:"ver"`
	Tags         []string          `json:"tags,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	FeatureFlags map[string]bool   `json:"feature_flags,omitempty"`
	// JetStream is the old form of the JetStreamEnabled flag, still sent.
	JetStream bool             `json:"jetstream"`
	Flags     ServerCapability `json:"flags"`
	// Seq counts the server's $SYS messages (it only goes up); Time is when this one left.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// ServerID is the answer to IDZ (sent bare, not in a ServerAPIResponse).
type ServerID struct {
	Name string `json:"name"`
	Host string `json:"host"`
	ID   string `json:"id"`
}

// ClientInfo describes a client in events and in the Nats-Request-Info header of requests
// that crossed a service import.
type ClientInfo struct {
	Start      *time.Time    `json:"start,omitempty"`
	Host       string        `json:"host,omitempty"`
	ID         uint64        `json:"id,omitempty"`
	Account    string        `json:"acc,omitempty"`
	Service    string        `json:"svc,omitempty"`
	User       string        `json:"user,omitempty"`
	Name       string        `json:"name,omitempty"`
	Lang       string        `json:"lang,omitempty"`
	Version    string        `json:"ver,omitempty"`
	RTT        time.Duration `json:"rtt,omitempty"`
	Server     string        `json:"server,omitempty"`
	Cluster    string        `json:"cluster,omitempty"`
	Alternates []string      `json:"alts,omitempty"`
	Stop       *time.Time    `json:"stop,omitempty"`
	Jwt        string        `json:"jwt,omitempty"`
	IssuerKey  string        `json:"issuer_key,omitempty"`
	NameTag    string        `json:"name_tag,omitempty"`
	Tags       []string      `json:"tags,omitempty"`
	Kind       string        `json:"kind,omitempty"`
	ClientType string        `json:"client_type,omitempty"`
	MQTTClient string        `json:"client_id,omitempty"`
	Nonce      string        `json:"nonce,omitempty"`
	Reply      string        `json:"reply,omitempty"`
}

// clientInfoHdr is the header a service import adds to a request with the requester's
// ClientInfo (nats-server's ClientInfoHdr).
const clientInfoHdr = "Nats-Request-Info"

// TypedEvent is the type, unique id and time every advisory carries.
type TypedEvent struct {
	Type string    `json:"type"`
	ID   string    `json:"id"`
	Time time.Time `json:"timestamp"`
}

// Event schema types.
const (
	ConnectEventMsgType    = "io.nats.server.advisory.v1.client_connect"
	DisconnectEventMsgType = "io.nats.server.advisory.v1.client_disconnect"
	AccountNumConnsMsgType = "io.nats.server.advisory.v1.account_connections"
)

// ConnectEventMsg is $SYS.ACCOUNT.<acc>.CONNECT.
type ConnectEventMsg struct {
	TypedEvent
	Server ServerInfo `json:"server"`
	Client ClientInfo `json:"client"`
}

// DisconnectEventMsg is $SYS.ACCOUNT.<acc>.DISCONNECT and the two CLIENT.AUTH.ERR events.
// Sent is what the client sent (the server's inbound figures), Received what it was sent.
type DisconnectEventMsg struct {
	TypedEvent
	Server   ServerInfo `json:"server"`
	Client   ClientInfo `json:"client"`
	Sent     DataStats  `json:"sent"`
	Received DataStats  `json:"received"`
	Reason   string     `json:"reason"`
}

// AccountNumConns is $SYS.ACCOUNT.<acc>.SERVER.CONNS (and the legacy
// $SYS.SERVER.ACCOUNT.<acc>.CONNS), and the answer to $SYS.REQ.ACCOUNT.<acc>.CONNS.
type AccountNumConns struct {
	TypedEvent
	Server ServerInfo `json:"server"`
	AccountStat
}

// accNumConnsReq is the optional body of $SYS.REQ.ACCOUNT.<acc>.CONNS.
type accNumConnsReq struct {
	Server  ServerInfo `json:"server"`
	Account string     `json:"acc"`
}

// ServerStatsMsg is $SYS.SERVER.<id>.STATSZ and the answer to STATSZ requests (bare).
type ServerStatsMsg struct {
	Server ServerInfo  `json:"server"`
	Stats  ServerStats `json:"statsz"`
}

// ServerStats are the figures of a STATSZ.
type ServerStats struct {
	Start                time.Time      `json:"start"`
	Mem                  int64          `json:"mem"`
	Cores                int            `json:"cores"`
	CPU                  float64        `json:"cpu"`
	Connections          int            `json:"connections"`
	TotalConnections     uint64         `json:"total_connections"`
	ActiveAccounts       int            `json:"active_accounts"`
	NumSubs              uint32         `json:"subscriptions"`
	Sent                 DataStats      `json:"sent"`
	SentToClients        DataStats      `json:"sent_to_clients"`
	Received             DataStats      `json:"received"`
	ReceivedFromClients  DataStats      `json:"received_from_clients"`
	SlowConsumers        int64          `json:"slow_consumers"`
	SlowConsumersStats   *KindCounts    `json:"slow_consumer_stats,omitempty"`
	StaleConnections     int64          `json:"stale_connections,omitempty"`
	StaleConnectionStats *KindCounts    `json:"stale_connection_stats,omitempty"`
	StalledClients       int64          `json:"stalled_clients,omitempty"`
	Routes               []*RouteStat   `json:"routes,omitempty"`
	Gateways             []*GatewayStat `json:"gateways,omitempty"`
	ActiveServers        int            `json:"active_servers,omitempty"`
	JetStream            *JetStreamVarz `json:"jetstream,omitempty"`
	MemLimit             int64          `json:"gomemlimit,omitempty"`
	MaxProcs             int            `json:"gomaxprocs,omitempty"`
}

// RouteStat is one route in a STATSZ.
type RouteStat struct {
	ID       uint64    `json:"rid"`
	Name     string    `json:"name,omitempty"`
	Sent     DataStats `json:"sent"`
	Received DataStats `json:"received"`
	Pending  int       `json:"pending"`
}

// GatewayStat is one outbound gateway in a STATSZ.
type GatewayStat struct {
	ID         uint64    `json:"gwid"`
	Name       string    `json:"name"`
	Sent       DataStats `json:"sent"`
	Received   DataStats `json:"received"`
	NumInbound int       `json:"inbound_connections"`
}

// ServerAPIResponse is the envelope of every $SYS.REQ answer except IDZ and STATSZ.
// Data is omitted only when the endpoint gave none at all; an endpoint that failed with a
// typed nil (Connz, Subsz, Accountz ...) sends "data": null next to the error, as
// nats-server does.
type ServerAPIResponse struct {
	Server *ServerInfo `json:"server"`
	Data   any         `json:"data,omitempty"`
	Error  *ApiError   `json:"error,omitempty"`

	compress compression // from the request's Accept-Encoding
}

// ApiError is a ServerAPIResponse's error.
type ApiError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

// EventFilterOptions select which servers answer a request; a server that does not match
// stays silent. Without ExactMatch, name, host and cluster match as substrings.
type EventFilterOptions struct {
	Name       string   `json:"server_name,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Host       string   `json:"host,omitempty"`
	ExactMatch bool     `json:"exact_match,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Domain     string   `json:"domain,omitempty"`
}

// The request bodies: an endpoint's options plus the filter (both inlined in the JSON).

// StatszEventOptions is the body of STATSZ and $SYS.REQ.SERVER.PING.
type StatszEventOptions struct {
	EventFilterOptions
}

// AccInfoEventOptions is the body of $SYS.REQ.ACCOUNT.<acc>.INFO.
type AccInfoEventOptions struct {
	EventFilterOptions
}

// ConnzEventOptions is the body of CONNZ.
type ConnzEventOptions struct {
	ConnzOptions
	EventFilterOptions
}

// RoutezEventOptions is the body of ROUTEZ.
type RoutezEventOptions struct {
	RoutezOptions
	EventFilterOptions
}

// SubszEventOptions is the body of SUBSZ.
type SubszEventOptions struct {
	SubszOptions
	EventFilterOptions
}

// VarzEventOptions is the body of VARZ.
type VarzEventOptions struct {
	VarzOptions
	EventFilterOptions
}

// GatewayzEventOptions is the body of GATEWAYZ.
type GatewayzEventOptions struct {
	GatewayzOptions
	EventFilterOptions
}

// LeafzEventOptions is the body of LEAFZ.
type LeafzEventOptions struct {
	LeafzOptions
	EventFilterOptions
}

// AccountzEventOptions is the body of ACCOUNTZ.
type AccountzEventOptions struct {
	AccountzOptions
	EventFilterOptions
}

// AccountStatzEventOptions is the body of STATZ.
type AccountStatzEventOptions struct {
	AccountStatzOptions
	EventFilterOptions
}

// JszEventOptions is the body of JSZ.
type JszEventOptions struct {
	JSzOptions
	EventFilterOptions
}

// HealthzEventOptions is the body of HEALTHZ.
type HealthzEventOptions struct {
	HealthzOptions
	EventFilterOptions
}

// ProfilezEventOptions is the body of PROFILEZ.
type ProfilezEventOptions struct {
	ProfilezOptions
	EventFilterOptions
}

// ExpvarzEventOptions is the body of EXPVARZ.
type ExpvarzEventOptions struct {
	EventFilterOptions
}

// IpqueueszEventOptions is the body of IPQUEUESZ.
type IpqueueszEventOptions struct {
	EventFilterOptions
	IpqueueszOptions
}

// RaftzEventOptions is the body of RAFTZ.
type RaftzEventOptions struct {
	EventFilterOptions
	RaftzOptions
}

// KickClientReq is the body of KICK.
type KickClientReq struct {
	CID uint64 `json:"cid"`
}

// LDMClientReq is the body of LDM.
type LDMClientReq struct {
	CID uint64 `json:"cid"`
}

// UserInfo answers $SYS.REQ.USER.INFO: who the requester is and what it may do.
type UserInfo struct {
	UserID      string            `json:"user"`
	Account     string            `json:"account"`
	AccountName string            `json:"account_name,omitempty"`
	UserName    string            `json:"user_name,omitempty"`
	Permissions *auth.Permissions `json:"permissions,omitempty"`
	Expires     time.Duration     `json:"expires,omitempty"`
}

// ProfilezStatus is PROFILEZ's data: the profile in pprof's format, or why there is none.
type ProfilezStatus struct {
	Profile []byte `json:"profile"`
	Error   string `json:"error"`
}

// ExpvarzStatus is EXPVARZ's data (and /debug/vars's content).
type ExpvarzStatus struct {
	Memstats json.RawMessage `json:"memstats"`
	Cmdline  json.RawMessage `json:"cmdline"`
}

// IpqueueszStatus is IPQUEUESZ's data: queue name to its figures (natsd has none).
type IpqueueszStatus map[string]IpqueueszStatusIPQ

// IpqueueszStatusIPQ is one internal queue.
type IpqueueszStatusIPQ struct {
	Pending    int `json:"pending"`
	InProgress int `json:"in_progress,omitempty"`
}

// RaftzStatus is RAFTZ's data: account to group to its state (natsd has no Raft groups yet).
type RaftzStatus map[string]map[string]json.RawMessage
