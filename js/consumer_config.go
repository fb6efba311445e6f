package js

import (
	"strings"
	"time"
)

// Consumer configuration: defaults and checks, as nats-server applies them.
// (A first cut: a helper completes it against the reference.)

const (
	defaultAckWait       = 30 * time.Second
	defaultMaxAckPending = 1000
	defaultMaxWaiting    = 512
	defaultEphemeralIdle = 5 * time.Second
)

// consumerLimits are the limits a consumer's config is checked and defaulted against.
type consumerLimits struct {
	stream        *StreamConfig
	account       AccountLimits
	maxAckPending int // the server's (jetstream.limits.max_ack_pending); 0: none
}

// setConsumerDefaults fills what cfg leaves unset. With pedantic, a default that would
// change what the client asked for is refused instead.
func setConsumerDefaults(cfg *ConsumerConfig, lim consumerLimits, pedantic bool) *APIError {
	if cfg.DeliverPolicy == "" {
		cfg.DeliverPolicy = DeliverAll
	}
	if cfg.AckPolicy == "" {
		cfg.AckPolicy = AckNone
	}
	if cfg.ReplayPolicy == "" {
		cfg.ReplayPolicy = ReplayInstant
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = -1
	}
	if cfg.AckPolicy != AckNone && cfg.AckWait == 0 {
		cfg.AckWait = defaultAckWait
		if len(cfg.BackOff) > 0 {
			cfg.AckWait = cfg.BackOff[0]
		}
	}
	if cfg.AckPolicy != AckNone && cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = defaultMaxAckPending
	}
	if cfg.DeliverSubject == "" && cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = defaultMaxWaiting
	}
	if cfg.Durable == "" && cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = defaultEphemeralIdle
	}
	return nil
}

// checkConsumerConfig refuses a configuration (defaults set) its stream cannot serve.
// others are the stream's other consumers' configurations (the work-queue rules).
func checkConsumerConfig(cfg *ConsumerConfig, lim consumerLimits, others []*ConsumerConfig) *APIError {
	if cfg.FilterSubject != "" && len(cfg.FilterSubjects) > 0 {
		return JSConsumerDuplicateFilterSubjects
	}
	return nil
}

// checkConsumerUpdate refuses an update that changes what may not change.
func checkConsumerUpdate(old, cfg *ConsumerConfig) *APIError {
	return nil
}

// createTarget reads a create request's subject (the tokens after "CONSUMER.") together with
// its body: the stream, and the consumer's name ("" for a server-named ephemeral).
func createTarget(tok []string, req *CreateConsumerRequest) (stream, name string, e *APIError) {
	if req.Config == nil {
		return "", "", JSConsumerConfigRequiredErr
	}
	switch {
	case tok[1] == "DURABLE":
		stream = tok[3]
		name = tok[4]
	default:
		stream = tok[2]
		if len(tok) > 3 {
			name = tok[3]
		}
	}
	if name == "" {
		name = req.Config.Name
		if name == "" {
			name = req.Config.Durable
		}
	}
	if strings.ContainsAny(name, ".*> \t") {
		return "", "", JSConsumerBadDurableNameErr
	}
	return stream, name, nil
}
