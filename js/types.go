package js

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The API's documents, with the reference's JSON names (jetstream-api.md §3). Enumerations
// are strings checked on decode, so a zero value is "unset" and takes the server's default.

// Retention is a stream's retention policy: "limits", "interest" or "workqueue".
type Retention string

// Discard is what a full stream does: "old" (drop the oldest) or "new" (refuse).
type Discard string

// Storage is "file" or "memory".
type Storage string

// Compression is "none" or "s2".
type Compression string

// PersistMode is "default" or "async" (acknowledge before the write is synced).
type PersistMode string

const (
	LimitsPolicy    Retention   = "limits"
	InterestPolicy  Retention   = "interest"
	WorkQueuePolicy Retention   = "workqueue"
	DiscardOld      Discard     = "old"
	DiscardNew      Discard     = "new"
	FileStorage     Storage     = "file"
	MemoryStorage   Storage     = "memory"
	NoCompression   Compression = "none"
	S2Compression   Compression = "s2"
	DefaultPersist  PersistMode = "default"
	AsyncPersist    PersistMode = "async"
)

func unmarshalEnum(data []byte, fold bool, ok ...string) (string, error) {
	s := string(data)
	if fold {
		s = strings.ToLower(s)
	}
	for _, o := range ok {
		if s == `"`+o+`"` {
			return o, nil
		}
	}
	return "", fmt.Errorf("can not unmarshal %q", data)
}

func (r *Retention) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "limits", "interest", "workqueue")
	*r = Retention(s)
	return err
}

func (d *Discard) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, true, "old", "new")
	*d = Discard(s)
	return err
}

func (s *Storage) UnmarshalJSON(b []byte) error {
	v, err := unmarshalEnum(b, false, "file", "memory")
	*s = Storage(v)
	return err
}

func (c *Compression) UnmarshalJSON(b []byte) error {
	v, err := unmarshalEnum(b, false, "none", "s2", "")
	if v == "" && err == nil {
		v = "none"
	}
	*c = Compression(v)
	return err
}

func (p *PersistMode) UnmarshalJSON(b []byte) error {
	v, err := unmarshalEnum(b, false, "default", "async", "")
	*p = PersistMode(v)
	return err
}

// StreamConfig is a stream's configuration as clients send it and the server reports it.
type StreamConfig struct {
	Name                   string                  `json:"name"`
	Description            string                  `json:"description,omitempty"`
	Subjects               []string                `json:"subjects,omitempty"`
	Retention              Retention               `json:"retention"`
	MaxConsumers           int                     `json:"max_consumers"`
	MaxMsgs                int64                   `json:"max_msgs"`
	MaxBytes               int64                   `json:"max_bytes"`
	MaxAge                 time.Duration           `json:"max_age"`
	MaxMsgsPer             int64                   `json:"max_msgs_per_subject"`
	MaxMsgSize             int32                   `json:"max_msg_size,omitempty"`
	Discard                Discard                 `json:"discard"`
	Storage                Storage                 `json:"storage"`
	Replicas               int                     `json:"num_replicas"`
	NoAck                  bool                    `json:"no_ack,omitempty"`
	Duplicates             time.Duration           `json:"duplicate_window,omitempty"`
	Placement              *Placement              `json:"placement,omitempty"`
	Mirror                 *StreamSource           `json:"mirror,omitempty"`
	Sources                []*StreamSource         `json:"sources,omitempty"`
	Compression            Compression             `json:"compression"`
	FirstSeq               uint64                  `json:"first_seq,omitempty"`
	SubjectTransform       *SubjectTransformConfig `json:"subject_transform,omitempty"`
	RePublish              *RePublish              `json:"republish,omitempty"`
	AllowDirect            bool                    `json:"allow_direct"`
	MirrorDirect           bool                    `json:"mirror_direct"`
	DiscardNewPer          bool                    `json:"discard_new_per_subject,omitempty"`
	Sealed                 bool                    `json:"sealed"`
	DenyDelete             bool                    `json:"deny_delete"`
	DenyPurge              bool                    `json:"deny_purge"`
	AllowRollup            bool                    `json:"allow_rollup_hdrs"`
	ConsumerLimits         StreamConsumerLimits    `json:"consumer_limits"`
	AllowMsgTTL            bool                    `json:"allow_msg_ttl"`
	SubjectDeleteMarkerTTL time.Duration           `json:"subject_delete_marker_ttl,omitempty"`
	AllowMsgCounter        bool                    `json:"allow_msg_counter,omitempty"`
	AllowAtomicPublish     bool                    `json:"allow_atomic,omitempty"`
	AllowMsgSchedules      bool                    `json:"allow_msg_schedules,omitempty"`
	PersistMode            PersistMode             `json:"persist_mode,omitempty"`
	AllowBatchPublish      bool                    `json:"allow_batched,omitempty"`
	Metadata               map[string]string       `json:"metadata,omitempty"`
}

// StreamConsumerLimits are the defaults a stream gives its consumers.
type StreamConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

type Placement struct {
	Cluster   string   `json:"cluster,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Preferred string   `json:"preferred,omitempty"`
}

type StreamSource struct {
	Name              string                   `json:"name"`
	OptStartSeq       uint64                   `json:"opt_start_seq,omitempty"`
	OptStartTime      *time.Time               `json:"opt_start_time,omitempty"`
	FilterSubject     string                   `json:"filter_subject,omitempty"`
	SubjectTransforms []SubjectTransformConfig `json:"subject_transforms,omitempty"`
	External          *ExternalStream          `json:"external,omitempty"`
	Consumer          *StreamConsumerSource    `json:"consumer,omitempty"`
}

type StreamConsumerSource struct {
	Name           string `json:"name,omitempty"`
	DeliverSubject string `json:"deliver_subject,omitempty"`
}

type ExternalStream struct {
	APIPrefix     string `json:"api"`
	DeliverPrefix string `json:"deliver"`
}

type SubjectTransformConfig struct {
	Source      string `json:"src"`
	Destination string `json:"dest"`
}

type RePublish struct {
	Source      string `json:"src,omitempty"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only,omitempty"`
}

// StreamInfo is what the API reports about a stream.
type StreamInfo struct {
	Config    StreamConfig        `json:"config"`
	Created   time.Time           `json:"created"`
	State     StreamState         `json:"state"`
	Domain    string              `json:"domain,omitempty"`
	Cluster   *ClusterInfo        `json:"cluster,omitempty"`
	Mirror    *StreamSourceInfo   `json:"mirror,omitempty"`
	Sources   []*StreamSourceInfo `json:"sources,omitempty"`
	TimeStamp time.Time           `json:"ts"`
}

type ClusterInfo struct {
	Name        string     `json:"name,omitempty"`
	Leader      string     `json:"leader,omitempty"`
	LeaderSince *time.Time `json:"leader_since,omitempty"`
}

type StreamSourceInfo struct {
	Name              string                   `json:"name"`
	External          *ExternalStream          `json:"external,omitempty"`
	Lag               uint64                   `json:"lag"`
	Seq               uint64                   `json:"seq,omitempty"`
	Active            time.Duration            `json:"active"`
	Error             *APIError                `json:"error,omitempty"`
	FilterSubject     string                   `json:"filter_subject,omitempty"`
	SubjectTransforms []SubjectTransformConfig `json:"subject_transforms,omitempty"`
}

type StreamState struct {
	Msgs        uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"first_seq"`
	FirstTime   time.Time         `json:"first_ts"`
	LastSeq     uint64            `json:"last_seq"`
	LastTime    time.Time         `json:"last_ts"`
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	NumDeleted  int               `json:"num_deleted,omitempty"`
	Deleted     []uint64          `json:"deleted,omitempty"`
	Lost        *LostStreamData   `json:"lost,omitempty"`
	Consumers   int               `json:"consumer_count"`
}

type LostStreamData struct {
	Msgs  []uint64 `json:"msgs"`
	Bytes uint64   `json:"bytes"`
}

// apiPaged and ApiPagedRequest are the list calls' paging.
type apiPaged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// The API's request types carry nats-server's names: a request that does not decode is
// answered with encoding/json's error text, which names the type and its embedded fields.
type ApiPagedRequest struct {
	Offset int `json:"offset"`
}

type JSApiStreamListRequest JSApiStreamNamesRequest

type JSApiStreamNamesRequest struct {
	ApiPagedRequest
	Subject string `json:"subject,omitempty"`
}

type JSApiStreamInfoRequest struct {
	ApiPagedRequest
	DeletedDetails bool   `json:"deleted_details,omitempty"`
	SubjectsFilter string `json:"subjects_filter,omitempty"`
}

type JSApiStreamPurgeRequest struct {
	Subject  string `json:"filter,omitempty"`
	Sequence uint64 `json:"seq,omitempty"`
	Keep     uint64 `json:"keep,omitempty"`
}

type JSApiMsgDeleteRequest struct {
	Seq     uint64 `json:"seq"`
	NoErase bool   `json:"no_erase,omitempty"`
}

// JSApiMsgGetRequest is STREAM.MSG.GET's and DIRECT.GET's body.
type JSApiMsgGetRequest struct {
	Seq          uint64     `json:"seq,omitempty"`
	LastFor      string     `json:"last_by_subj,omitempty"`
	NextFor      string     `json:"next_by_subj,omitempty"`
	Batch        int        `json:"batch,omitempty"`
	MaxBytes     int        `json:"max_bytes,omitempty"`
	StartTime    *time.Time `json:"start_time,omitempty"`
	MultiLastFor []string   `json:"multi_last,omitempty"`
	UpToSeq      uint64     `json:"up_to_seq,omitempty"`
	UpToTime     *time.Time `json:"up_to_time,omitempty"`
	NoHeaders    bool       `json:"no_hdr,omitempty"`
}

type storedMsgJSON struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// AccountLimits are an account's JetStream limits (-1: unlimited).
type AccountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStore             int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StoreMaxStreamBytes  int64 `json:"storage_max_stream_bytes"`
	MaxBytesRequired     bool  `json:"max_bytes_required"`
}

// Unlimited is an account with no JetStream limits of its own.
var Unlimited = AccountLimits{-1, -1, -1, -1, -1, -1, -1, false}

type apiStats struct {
	Level  int    `json:"level"`
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}

// AccountStats is $JS.API.INFO's document (and /jsz's per-account usage).
type AccountStats struct {
	Memory         uint64         `json:"memory"`
	Store          uint64         `json:"storage"`
	ReservedMemory uint64         `json:"reserved_memory"`
	ReservedStore  uint64         `json:"reserved_storage"`
	Streams        int            `json:"streams"`
	Consumers      int            `json:"consumers"`
	Limits         AccountLimits  `json:"limits"`
	Domain         string         `json:"domain,omitempty"`
	API            apiStats       `json:"api"`
	Tiers          map[string]any `json:"tiers,omitempty"`
}

// pubAckError is a failed publish's reply.
type pubAckError struct {
	Error  *APIError `json:"error"`
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
}

// decode reads an API request body, refusing unknown fields when strict, as the reference
// does (an empty body decodes to the zero request).
func decode(body []byte, v any, strict bool) *APIError {
	if len(body) == 0 {
		return nil
	}
	// As nats-server: every JSON value in the body is decoded into v in turn (the last
	// wins); a syntax error says where; when not strict, what fails strictly is decoded
	// again leniently.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	for {
		err := dec.Decode(v)
		if err == io.EOF {
			return nil
		}
		if err == nil {
			continue
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("%w at offset %d", err, se.Offset)
		}
		if !strict {
			if err = json.Unmarshal(body, v); err == nil {
				return nil
			}
		}
		return JSInvalidJSONErr.with("err", jsonErrText(err))
	}
}

// emptyRequest is a body that asks nothing: none, or an empty JSON object.
func emptyRequest(body []byte) bool {
	if len(body) == 0 || string(body) == "{}" {
		return true
	}
	var m map[string]any
	return json.Unmarshal(body, &m) == nil && m != nil && len(m) == 0
}

// decodeIfObject is decode for the calls whose body nats-server reads only when it is a
// JSON object or array, and otherwise ignores.
func decodeIfObject(body []byte, v any, strict bool) *APIError {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' && b[0] != '[' {
		return nil
	}
	return decode(body, v, strict)
}

// jsonErrText is err's text with the package nats-server's types live in.
func jsonErrText(err error) string {
	return strings.ReplaceAll(err.Error(), "Go value of type js.", "Go value of type server.")
}
