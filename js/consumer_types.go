package js

import (
	"fmt"
	"time"
)

// The consumer API's documents (jetstream-api.md §3.3, §3.4), with the reference's JSON names.

// DeliverPolicy is where a consumer starts.
type DeliverPolicy string

// AckPolicy is how a consumer's deliveries are acknowledged.
type AckPolicy string

// ReplayPolicy is the pace of delivery: "instant" or "original" (the stored gaps).
type ReplayPolicy string

// PriorityPolicy is how a pull consumer's priority groups share its messages.
type PriorityPolicy string

const (
	DeliverAll            DeliverPolicy = "all"
	DeliverLast           DeliverPolicy = "last"
	DeliverNew            DeliverPolicy = "new"
	DeliverByStartSeq     DeliverPolicy = "by_start_sequence"
	DeliverByStartTime    DeliverPolicy = "by_start_time"
	DeliverLastPerSubject DeliverPolicy = "last_per_subject"

	AckNone        AckPolicy = "none"
	AckAll         AckPolicy = "all"
	AckExplicit    AckPolicy = "explicit"
	AckFlowControl AckPolicy = "flow_control"

	ReplayInstant  ReplayPolicy = "instant"
	ReplayOriginal ReplayPolicy = "original"

	PriorityNone        PriorityPolicy = "none"
	PriorityOverflow    PriorityPolicy = "overflow"
	PriorityPinned      PriorityPolicy = "pinned_client"
	PriorityPrioritized PriorityPolicy = "prioritized"
)

func (p *DeliverPolicy) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "all", "undefined", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject")
	if s == "undefined" {
		s = "all"
	}
	*p = DeliverPolicy(s)
	return err
}

func (p *AckPolicy) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "none", "all", "explicit", "flow_control")
	*p = AckPolicy(s)
	return err
}

func (p *ReplayPolicy) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "instant", "original")
	*p = ReplayPolicy(s)
	return err
}

// UnmarshalJSON takes the four policies only (not ""), with nats-server's error text.
func (p *PriorityPolicy) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "none", "overflow", "pinned_client", "prioritized")
	if err != nil {
		return fmt.Errorf("unknown priority policy: %s", b)
	}
	*p = PriorityPolicy(s)
	return nil
}

// ConsumerConfig is a consumer's configuration as clients send it and the server reports it.
type ConsumerConfig struct {
	Durable            string            `json:"durable_name,omitempty"`
	Name               string            `json:"name,omitempty"`
	Description        string            `json:"description,omitempty"`
	DeliverPolicy      DeliverPolicy     `json:"deliver_policy"`
	OptStartSeq        uint64            `json:"opt_start_seq,omitempty"`
	OptStartTime       *time.Time        `json:"opt_start_time,omitempty"`
	AckPolicy          AckPolicy         `json:"ack_policy"`
	AckWait            time.Duration     `json:"ack_wait,omitempty"`
	MaxDeliver         int               `json:"max_deliver,omitempty"`
	BackOff            []time.Duration   `json:"backoff,omitempty"`
	FilterSubject      string            `json:"filter_subject,omitempty"`
	FilterSubjects     []string          `json:"filter_subjects,omitempty"`
	ReplayPolicy       ReplayPolicy      `json:"replay_policy"`
	RateLimit          uint64            `json:"rate_limit_bps,omitempty"`
	SampleFrequency    string            `json:"sample_freq,omitempty"`
	MaxWaiting         int               `json:"max_waiting,omitempty"`
	MaxAckPending      int               `json:"max_ack_pending,omitempty"`
	FlowControl        bool              `json:"flow_control,omitempty"`
	HeadersOnly        bool              `json:"headers_only,omitempty"`
	MaxRequestBatch    int               `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration     `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int               `json:"max_bytes,omitempty"`
	DeliverSubject     string            `json:"deliver_subject,omitempty"`
	DeliverGroup       string            `json:"deliver_group,omitempty"`
	Heartbeat          time.Duration     `json:"idle_heartbeat,omitempty"`
	InactiveThreshold  time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas           int               `json:"num_replicas"`
	MemoryStorage      bool              `json:"mem_storage,omitempty"`
	Direct             bool              `json:"direct,omitempty"`
	Sourcing           bool              `json:"sourcing,omitempty"` // a mirror's or source's (nats-server 2.14+)
	Metadata           map[string]string `json:"metadata,omitempty"`
	PauseUntil         *time.Time        `json:"pause_until,omitempty"`
	PriorityGroups     []string          `json:"priority_groups,omitempty"`
	PriorityPolicy     PriorityPolicy    `json:"priority_policy,omitempty"`
	PinnedTTL          time.Duration     `json:"priority_timeout,omitempty"`
}

// CreateConsumerRequest is the body of CONSUMER.CREATE and CONSUMER.DURABLE.CREATE.
type CreateConsumerRequest struct {
	Stream   string          `json:"stream_name"`
	Config   *ConsumerConfig `json:"config"`
	Action   ConsumerAction  `json:"action"`
	Pedantic bool            `json:"pedantic,omitempty"`
}

// ConsumerAction is a create request's intent: "" create or update, "create", "update".
type ConsumerAction string

// UnmarshalJSON takes "", "create" and "update", with nats-server's error text.
func (p *ConsumerAction) UnmarshalJSON(b []byte) error {
	s, err := unmarshalEnum(b, false, "", "create", "update")
	if err != nil {
		return fmt.Errorf("unknown consumer action: %s", b)
	}
	*p = ConsumerAction(s)
	return nil
}

// SequenceInfo is a consumer's position: its own and the stream's sequence.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// ConsumerInfo is what the API reports about a consumer.
type ConsumerInfo struct {
	Stream         string               `json:"stream_name"`
	Name           string               `json:"name"`
	Created        time.Time            `json:"created"`
	Config         *ConsumerConfig      `json:"config,omitempty"`
	Delivered      SequenceInfo         `json:"delivered"`
	AckFloor       SequenceInfo         `json:"ack_floor"`
	NumAckPending  int                  `json:"num_ack_pending"`
	NumRedelivered int                  `json:"num_redelivered"`
	NumWaiting     int                  `json:"num_waiting"`
	NumPending     uint64               `json:"num_pending"`
	Cluster        *ClusterInfo         `json:"cluster,omitempty"`
	PushBound      bool                 `json:"push_bound,omitempty"`
	Paused         bool                 `json:"paused,omitempty"`
	PauseRemaining time.Duration        `json:"pause_remaining,omitempty"`
	TimeStamp      time.Time            `json:"ts"`
	PriorityGroups []PriorityGroupState `json:"priority_groups,omitempty"`
}

// PriorityGroupState is one priority group's pinned client.
type PriorityGroupState struct {
	Group          string    `json:"group"`
	PinnedClientID string    `json:"pinned_client_id,omitempty"`
	PinnedTS       time.Time `json:"pinned_ts,omitempty"`
}

// JSApiConsumerGetNextRequest is a pull request's JSON body.
type JSApiConsumerGetNextRequest struct {
	Expires   time.Duration `json:"expires,omitempty"`
	Batch     int           `json:"batch,omitempty"`
	MaxBytes  int           `json:"max_bytes,omitempty"`
	NoWait    bool          `json:"no_wait,omitempty"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	PriorityGroup
}

// PriorityGroup is a pull request's priority-group part.
type PriorityGroup struct {
	Group         string `json:"group,omitempty"`
	MinPending    int64  `json:"min_pending,omitempty"`
	MinAckPending int64  `json:"min_ack_pending,omitempty"`
	Id            string `json:"id,omitempty"`
	Priority      int    `json:"priority,omitempty"`
}

// Consumer API replies.
type consumerInfoResponse struct {
	apiResponse
	*ConsumerInfo
}

type consumerPauseResponse struct {
	apiResponse
	Paused         bool          `json:"paused"`
	PauseUntil     time.Time     `json:"pause_until"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
}

type consumerResetResponse struct {
	apiResponse
	*ConsumerInfo
	ResetSeq uint64 `json:"reset_seq"`
}

type JSApiConsumerPauseRequest struct {
	PauseUntil time.Time `json:"pause_until,omitempty"`
}

type JSApiConsumerUnpinRequest struct {
	Group string `json:"group"`
}

type JSApiConsumerResetRequest struct {
	Seq uint64 `json:"seq"`
}
