package js

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/auth"
)

// Consumer configuration: defaults and checks, in the order nats-server v2.15.2 applies
// them, with its error codes and texts (js/testdata/consumer_config_rows.json holds the
// cases, as the reference answered them).
//
// A create request (CONSUMER.CREATE…, CONSUMER.DURABLE.CREATE…) is served in this order:
//
//  1. decode the body (10025); createTarget: subject forms and names (10056, 10127,
//     10016–10020, 10137, 10131);
//  2. num_replicas > 1 → JSStreamReplicasNotSupportedErr (10074, standalone); the stream
//     (10059);
//  3. prepareConsumerConfig: keeps an existing consumer's pause_until, sets the static
//     metadata, setConsumerDefaults, checkConsumerConfig (which, given the existing
//     consumer of that name in lim.existing, also applies the action (10148/10149), the
//     update rules, the stream's consumer count and the work-queue rules);
//  4. a new consumer without a name gets a generated one; the consumer starts, and
//     stampInactiveThreshold gives an ephemeral its 5s (also on an update that changes
//     inactive_threshold).

const (
	defaultAckWait       = 30 * time.Second
	defaultMaxAckPending = 1000
	defaultMaxWaiting    = 512
	defaultEphemeralIdle = 5 * time.Second
	defaultPinnedTTL     = 2 * time.Minute
	// ackFCHeartbeat is the heartbeat a flow_control ack policy consumer must have (that of
	// stream sourcing).
	ackFCHeartbeat = time.Second

	maxConsumerNameLen     = 255
	maxConsumerDescLen     = 4 * 1024
	maxConsumerMetadataLen = 128 * 1024
)

// validGroupName is what a priority group may be called.
var validGroupName = regexp.MustCompile(`^[a-zA-Z0-9/_=-]{1,16}$`)

// consumerLimits are what a consumer's config is defaulted and checked against.
type consumerLimits struct {
	stream  *StreamConfig
	account AccountLimits
	// The server's jetstream.limits: max_ack_pending, max_request_batch (0: none), and the
	// default per-stream consumer count (default_max_consumers, 0: none).
	maxAckPending       int
	maxRequestBatch     int
	defaultMaxConsumers int

	// action is the request's ("" create or update, "create", "update").
	action ConsumerAction
	// existing is the stored config of the stream's consumer of the same name (nil: none):
	// the request is then an update.
	existing *ConsumerConfig
	// deliverInterest reports whether a subject has subscribers (an update may not move a
	// push consumer whose deliver subject is in use); nil: none has.
	deliverInterest func(subject string) bool
}

// pedanticErr is the pedantic-mode refusal of a default that would change the request.
func pedanticErr(msg string) *APIError { return JSPedanticErrF.with("err", msg) }

// invalidConsumerConfig is JSStreamInvalidConfigF with msg (nats-server answers some
// consumer mistakes with the stream's "invalid config" error).
func invalidConsumerConfig(msg string) *APIError { return JSStreamInvalidConfigF.with("err", msg) }

// setConsumerDefaults fills what cfg leaves unset and repairs out-of-range values. With
// pedantic, a default that would change what the client asked for is refused instead.
// (An ephemeral's 5s inactive_threshold is stamped later: stampInactiveThreshold.)
func setConsumerDefaults(cfg *ConsumerConfig, lim consumerLimits, pedantic bool) *APIError {
	// The enumerations' zero values (omitted in JSON).
	if cfg.DeliverPolicy == "" {
		cfg.DeliverPolicy = DeliverAll
	}
	if cfg.AckPolicy == "" {
		cfg.AckPolicy = AckNone
	}
	if cfg.ReplayPolicy == "" {
		cfg.ReplayPolicy = ReplayInstant
	}
	if cfg.PriorityPolicy == PriorityNone {
		cfg.PriorityPolicy = "" // none is reported by leaving priority_policy out
	}
	var sl StreamConsumerLimits
	if lim.stream != nil {
		sl = lim.stream.ConsumerLimits
	}

	if cfg.MaxDeliver == 0 || cfg.MaxDeliver < -1 {
		if pedantic && cfg.MaxDeliver < -1 {
			return pedanticErr("max_deliver must be set to -1")
		}
		cfg.MaxDeliver = -1
	}
	if cfg.MaxWaiting < 0 {
		if pedantic {
			return pedanticErr("max_waiting must not be negative")
		}
		cfg.MaxWaiting = 0
	}
	if cfg.MaxAckPending < -1 {
		if pedantic {
			return pedanticErr("max_ack_pending must be set to -1")
		}
		cfg.MaxAckPending = -1
	}
	if cfg.MaxRequestBatch < 0 {
		if pedantic {
			return pedanticErr("max_batch must not be negative")
		}
		cfg.MaxRequestBatch = 0
	}
	if cfg.MaxRequestExpires < 0 {
		if pedantic {
			return pedanticErr("max_expires must not be negative")
		}
		cfg.MaxRequestExpires = 0
	}
	if cfg.MaxRequestMaxBytes < 0 {
		if pedantic {
			return pedanticErr("max_bytes must not be negative")
		}
		cfg.MaxRequestMaxBytes = 0
	}
	if cfg.Heartbeat < 0 {
		if pedantic {
			return pedanticErr("idle_heartbeat must not be negative")
		}
		cfg.Heartbeat = 0
	}
	if cfg.InactiveThreshold < 0 {
		if pedantic {
			return pedanticErr("inactive_threshold must not be negative")
		}
		cfg.InactiveThreshold = 0
	}
	if cfg.PinnedTTL < 0 {
		if pedantic {
			return pedanticErr("priority_timeout must not be negative")
		}
		cfg.PinnedTTL = 0
	}

	if cfg.DeliverSubject == "" && cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = defaultMaxWaiting
	}
	if cfg.AckWait == 0 && (cfg.AckPolicy == AckExplicit || cfg.AckPolicy == AckAll) {
		cfg.AckWait = defaultAckWait
	}
	// A backoff's first step is the ack wait, whatever the ack policy.
	if len(cfg.BackOff) > 0 {
		if pedantic && cfg.AckWait != cfg.BackOff[0] {
			return pedanticErr("first backoff value has to equal batch AckWait")
		}
		cfg.AckWait = cfg.BackOff[0]
	}
	// The stream's consumer limits are taken as they are, even for ack policy none.
	if cfg.MaxAckPending == 0 {
		if pedantic && sl.MaxAckPending > 0 {
			return pedanticErr("max_ack_pending must be set if it's configured in stream limits")
		}
		cfg.MaxAckPending = sl.MaxAckPending
	}
	if cfg.InactiveThreshold == 0 {
		if pedantic && sl.InactiveThreshold > 0 {
			return pedanticErr("inactive_threshold must be set if it's configured in stream limits")
		}
		cfg.InactiveThreshold = sl.InactiveThreshold
	}
	// Then 1000, or the server's or the account's limit where lower.
	if cfg.MaxAckPending == 0 && cfg.AckPolicy != AckNone {
		n := defaultMaxAckPending
		if lim.maxAckPending > 0 && lim.maxAckPending < n {
			n = lim.maxAckPending
		}
		if lim.account.MaxAckPending > 0 && lim.account.MaxAckPending < n {
			n = lim.account.MaxAckPending
		}
		cfg.MaxAckPending = n
	}
	if cfg.DeliverSubject == "" && cfg.MaxRequestBatch == 0 && lim.maxRequestBatch > 0 {
		if pedantic {
			return pedanticErr("max_request_batch must be set if it's JetStream limits are set")
		}
		cfg.MaxRequestBatch = lim.maxRequestBatch
	}
	if cfg.PriorityPolicy == PriorityPinned && cfg.PinnedTTL == 0 {
		cfg.PinnedTTL = defaultPinnedTTL
	}
	// flow_control ack policy: flow control with a 1s heartbeat (pedantic: as asked).
	if cfg.AckPolicy == AckFlowControl && !pedantic {
		cfg.FlowControl = true
		cfg.Heartbeat = ackFCHeartbeat
	}
	return nil
}

// stampInactiveThreshold gives an ephemeral consumer without an inactive_threshold the
// default 5s. nats-server stamps it when the consumer starts (and when an update changes
// inactive_threshold), after the checks: an "action":"create" repeat of an ephemeral's
// request therefore differs from the stored config (10148), as from nats-server.
func stampInactiveThreshold(cfg *ConsumerConfig, ephemeral bool) {
	if ephemeral && cfg.InactiveThreshold <= 0 {
		cfg.InactiveThreshold = defaultEphemeralIdle
	}
}

// validAssetName is nats-server's rule for stream and consumer names.
func validAssetName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n\f.*>\\/")
}

// subjectFilters are a config's filters (filter_subject or filter_subjects).
func subjectFilters(cfg *ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return append(append([]string(nil), cfg.FilterSubjects...), cfg.FilterSubject)
	}
	return cfg.FilterSubjects
}

// subjectSubsetOf reports whether every subject subj matches is matched by test (either may
// hold wildcards): foo.* is a subset of foo.> and of *.*, not of foo.bar.
func subjectSubsetOf(subj, test string) bool {
	ts, tt := strings.Split(subj, "."), strings.Split(test, ".")
	for i, t2 := range tt {
		if i >= len(ts) || t2 == "" {
			return false
		}
		if t2 == ">" {
			return true
		}
		t1 := ts[i]
		if t1 == "" || t1 == ">" {
			return false
		}
		if t1 == "*" {
			if t2 != "*" {
				return false
			}
			continue
		}
		if t2 != "*" && t1 != t2 {
			return false
		}
	}
	return len(ts) == len(tt)
}

// checkConsumerConfig refuses a configuration (defaults set) its stream cannot serve, with
// nats-server's errors in its order. others are the stream's other consumers' configs (not
// the one of lim.existing). With lim.existing the request is an update of that consumer.
func checkConsumerConfig(cfg *ConsumerConfig, lim consumerLimits, others []*ConsumerConfig) *APIError {
	sc := lim.stream
	if sc == nil {
		sc = &StreamConfig{Replicas: 1}
	}
	if e := checkConsumerFields(cfg, lim, sc); e != nil {
		return e
	}

	filters := subjectFilters(cfg)
	if old := lim.existing; old != nil {
		if lim.action == "create" && !sameConsumerConfig(old, cfg) {
			return JSConsumerAlreadyExists
		}
		if sc.Retention == WorkQueuePolicy && !partitionUnique(filters, others) {
			return JSConsumerWQConsumerNotUniqueErr
		}
		return checkConsumerUpdateWith(old, cfg, lim.deliverInterest)
	}
	if lim.action == "update" {
		return JSConsumerDoesNotExist
	}

	// The stream's consumer count (direct and sourcing consumers, used by mirrors and
	// sources, do not count).
	n := 0
	for _, o := range others {
		if !o.Direct && !o.Sourcing {
			n++
		}
	}
	if !cfg.Direct && !cfg.Sourcing {
		maxc := sc.MaxConsumers
		if maxc <= 0 || (lim.account.MaxConsumers > 0 && lim.account.MaxConsumers < maxc) {
			maxc = lim.account.MaxConsumers
		}
		if lim.defaultMaxConsumers > 0 && maxc <= 0 {
			maxc = lim.defaultMaxConsumers
		}
		if maxc > 0 && n >= maxc {
			return JSMaximumConsumersLimitErr
		}
	}

	if sc.Retention == WorkQueuePolicy && !cfg.Direct && !cfg.Sourcing {
		if cfg.AckPolicy != AckExplicit && cfg.AckPolicy != AckFlowControl {
			return JSConsumerWQRequiresExplicitAckErr
		}
		if cfg.DeliverPolicy != DeliverAll {
			return JSConsumerWQConsumerNotDeliverAllErr
		}
		if n > 0 {
			if len(filters) == 0 {
				return JSConsumerWQMultipleUnfilteredErr
			}
			if !partitionUnique(filters, others) {
				return JSConsumerWQConsumerNotUniqueErr
			}
		}
	}

	if cfg.Durable != "" && len(cfg.Durable) > maxConsumerNameLen {
		return JSConsumerNameTooLongErrF.with("max", strconv.Itoa(maxConsumerNameLen))
	}
	return nil
}

// partitionUnique reports whether filters collide with none of the other (non-direct)
// consumers' filters; an unfiltered other collides with everything.
func partitionUnique(filters []string, others []*ConsumerConfig) bool {
	for _, f := range filters {
		for _, o := range others {
			if o.Direct || o.Sourcing {
				continue
			}
			ofs := subjectFilters(o)
			if len(ofs) == 0 {
				return false
			}
			for _, of := range ofs {
				if auth.SubjectsCollide(f, of) {
					return false
				}
			}
		}
	}
	return true
}

// checkConsumerFields is nats-server's checkConsumerCfg: the config on its own and against
// its stream and the limits.
func checkConsumerFields(cfg *ConsumerConfig, lim consumerLimits, sc *StreamConfig) *APIError {
	if cfg.Name != "" && !validAssetName(cfg.Name) {
		return invalidConsumerConfig(`consumer name can not contain '.', '*', '>', '\', '/'`)
	}
	if cfg.Durable != "" && !validAssetName(cfg.Durable) {
		return invalidConsumerConfig(`consumer durable name can not contain '.', '*', '>', '\', '/'`)
	}
	if cfg.Replicas > 0 && cfg.Replicas > sc.Replicas {
		return JSConsumerReplicasExceedsStream
	}
	if cfg.Replicas < 0 {
		return JSReplicasCountCannotBeNegative
	}
	if (sc.Retention == InterestPolicy || sc.Retention == WorkQueuePolicy) &&
		cfg.Replicas != 0 && cfg.Replicas != sc.Replicas {
		return JSConsumerReplicasShouldMatchStream
	}
	switch cfg.AckPolicy {
	case AckNone, AckAll, AckExplicit, AckFlowControl:
	default:
		return JSConsumerAckPolicyInvalidErr
	}
	switch cfg.ReplayPolicy {
	case ReplayInstant, ReplayOriginal:
	default:
		return JSConsumerReplayPolicyInvalidErr
	}
	for _, b := range cfg.BackOff {
		if b < 0 {
			return JSConsumerBackOffNegativeErr
		}
	}
	if cfg.AckWait < 0 {
		return JSConsumerAckWaitNegativeErr
	}

	if cfg.AckPolicy == AckFlowControl {
		switch {
		case cfg.DeliverSubject == "":
			return JSConsumerAckFCRequiresPushErr
		case !cfg.FlowControl:
			return JSConsumerAckFCRequiresFCErr
		case cfg.Heartbeat != ackFCHeartbeat:
			return invalidConsumerConfig("flow control ack policy heartbeat needs to be 1s")
		case cfg.MaxAckPending <= 0:
			return JSConsumerAckFCRequiresMaxAckPendingErr
		case cfg.AckWait != 0 || len(cfg.BackOff) > 0:
			return JSConsumerAckFCRequiresNoAckWaitErr
		case cfg.MaxDeliver > 0:
			return JSConsumerAckFCRequiresNoMaxDeliverErr
		}
	}

	if n := len(cfg.BackOff); n > 0 && cfg.MaxDeliver != -1 && n > cfg.MaxDeliver {
		return JSConsumerMaxDeliverBackoffErr
	}
	if len(cfg.Description) > maxConsumerDescLen {
		return JSConsumerDescriptionTooLongErrF.with("max", strconv.Itoa(maxConsumerDescLen))
	}

	if cfg.DeliverSubject != "" {
		switch {
		case hasWildcard(cfg.DeliverSubject):
			return JSConsumerDeliverToWildcardsErr
		case !validSubject(cfg.DeliverSubject):
			return JSConsumerInvalidDeliverSubject
		case deliveryFormsCycle(sc, cfg.DeliverSubject):
			return JSConsumerDeliverCycleErr
		case cfg.MaxWaiting != 0:
			return JSConsumerPushMaxWaitingErr
		case cfg.MaxAckPending > 0 && cfg.AckPolicy == AckNone:
			return JSConsumerMaxPendingAckPolicyRequiredErr
		case cfg.Heartbeat > 0 && cfg.Heartbeat < 100*time.Millisecond:
			return JSConsumerSmallHeartbeatErr
		}
	} else {
		switch {
		case cfg.AckPolicy == AckNone && sc.Retention == WorkQueuePolicy:
			return JSConsumerPullRequiresAckErr
		case cfg.RateLimit > 0:
			return JSConsumerPullWithRateLimitErr
		case cfg.MaxWaiting < 0:
			return JSConsumerMaxWaitingNegativeErr
		case cfg.Heartbeat > 0:
			return JSConsumerHBRequiresPushErr
		case cfg.FlowControl:
			return JSConsumerFCRequiresPushErr
		case cfg.MaxRequestBatch < 0:
			return JSConsumerMaxRequestBatchNegativeErr
		case cfg.MaxRequestExpires != 0 && cfg.MaxRequestExpires < time.Millisecond:
			return JSConsumerMaxRequestExpiresTooSmall
		case lim.maxRequestBatch > 0 && cfg.MaxRequestBatch > lim.maxRequestBatch:
			return JSConsumerMaxRequestBatchExceededF.with("limit", strconv.Itoa(lim.maxRequestBatch))
		}
	}
	if lim.maxAckPending > 0 && cfg.MaxAckPending > lim.maxAckPending {
		return JSConsumerMaxPendingAckExcessErrF.with("limit", strconv.Itoa(lim.maxAckPending))
	}
	if l := lim.account.MaxAckPending; l > 0 && cfg.MaxAckPending > l {
		return JSConsumerMaxPendingAckExcessErrF.with("limit", strconv.Itoa(l))
	}
	if l := sc.ConsumerLimits.MaxAckPending; l > 0 && cfg.MaxAckPending > l {
		return JSConsumerMaxPendingAckExcessErrF.with("limit", strconv.Itoa(l))
	}
	if l := sc.ConsumerLimits.InactiveThreshold; l > 0 && cfg.InactiveThreshold > l {
		return JSConsumerInactiveThresholdExcess.with("limit", l.String())
	}

	if cfg.Direct {
		if cfg.DeliverSubject == "" {
			return JSConsumerDirectRequiresPushErr
		}
		if cfg.Durable != "" {
			return JSConsumerDirectRequiresEphemeralErr
		}
	}

	if cfg.FilterSubject != "" && len(cfg.FilterSubjects) > 0 {
		return JSConsumerDuplicateFilterSubjects
	}
	if cfg.FilterSubject != "" && !validSubject(cfg.FilterSubject) {
		return invalidConsumerConfig("invalid subject")
	}
	for _, f := range cfg.FilterSubjects {
		if f == "" {
			return JSConsumerEmptyFilter
		}
	}
	filters := subjectFilters(cfg)
	for i, f := range filters {
		if !validSubject(f) {
			return invalidConsumerConfig("invalid subject")
		}
		for j, g := range filters {
			if i != j && subjectSubsetOf(f, g) {
				return JSConsumerOverlappingSubjectFilters
			}
		}
	}

	if e := checkDeliverPolicy(cfg); e != nil {
		return e
	}

	if cfg.SampleFrequency != "" {
		s := strings.TrimSuffix(cfg.SampleFrequency, "%")
		if n, err := strconv.Atoi(s); err != nil || n < 0 {
			msg := "<nil>" // a negative number is refused without an error to quote
			if err != nil {
				msg = err.Error()
			}
			return JSConsumerInvalidSamplingErrF.with("err", msg)
		}
	}
	if cfg.FlowControl && cfg.Heartbeat == 0 {
		return JSConsumerWithFlowControlNeedsHeartbeats
	}
	if cfg.Durable != "" && cfg.Name != "" && cfg.Name != cfg.Durable {
		return JSConsumerCreateDurableAndNameMismatch
	}
	n := 0
	for k, v := range cfg.Metadata {
		n += len(k) + len(v)
	}
	if n > maxConsumerMetadataLen {
		return JSConsumerMetadataLengthErrF.with("limit", fmt.Sprintf("%dKB", maxConsumerMetadataLen/1024))
	}

	if cfg.PriorityPolicy != "" && cfg.PriorityPolicy != PriorityNone {
		if cfg.DeliverSubject != "" {
			return JSConsumerPushWithPriorityGroupErr
		}
		if len(cfg.PriorityGroups) == 0 {
			return JSConsumerPriorityPolicyWithoutGroup
		}
		for _, g := range cfg.PriorityGroups {
			if g == "" {
				return JSConsumerEmptyGroupName
			}
			if !validGroupName.MatchString(g) {
				return JSConsumerInvalidGroupNameErr
			}
		}
	} else {
		if len(cfg.PriorityGroups) > 0 {
			return JSConsumerPriorityGroupWithPolicyNone
		}
		if cfg.PinnedTTL > 0 {
			return JSConsumerPinnedTTLWithoutPriorityPolicyNone
		}
	}

	if sc.Placement != nil && sc.Placement.Preferred != "" {
		return invalidConsumerConfig("preferred server not permitted in placement")
	}
	return nil
}

// hasWildcard reports whether a subject has a * or > token.
func hasWildcard(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if t == "*" || t == ">" {
			return true
		}
	}
	return false
}

// deliveryFormsCycle reports whether deliveries to subj would be captured by the stream.
func deliveryFormsCycle(sc *StreamConfig, subj string) bool {
	for _, s := range sc.Subjects {
		if subjectSubsetOf(subj, s) {
			return true
		}
	}
	return false
}

// checkDeliverPolicy refuses start options the deliver policy does not take or lacks.
func checkDeliverPolicy(cfg *ConsumerConfig) *APIError {
	bad := func(dp, opt string) *APIError {
		return JSConsumerInvalidPolicyErrF.with("err",
			fmt.Sprintf("consumer delivery policy is deliver %s, but optional start %s is also set", dp, opt))
	}
	unset := func(dp, opt string) *APIError {
		return JSConsumerInvalidPolicyErrF.with("err",
			fmt.Sprintf("consumer delivery policy is deliver %s, but optional %s is not set", dp, opt))
	}
	noStart := func(dp string) *APIError {
		if cfg.OptStartSeq > 0 {
			return bad(dp, "sequence")
		}
		if cfg.OptStartTime != nil {
			return bad(dp, "time")
		}
		return nil
	}
	switch cfg.DeliverPolicy {
	case DeliverAll:
		return noStart("all")
	case DeliverLast:
		return noStart("last")
	case DeliverNew:
		return noStart("new")
	case DeliverLastPerSubject:
		if e := noStart("last per subject"); e != nil {
			return e
		}
		if cfg.FilterSubject == "" && len(cfg.FilterSubjects) == 0 {
			return unset("last per subject", "filter subject")
		}
	case DeliverByStartSeq:
		if cfg.OptStartSeq == 0 {
			return unset("by start sequence", "start sequence")
		}
		if cfg.OptStartTime != nil {
			return bad("by start sequence", "time")
		}
	case DeliverByStartTime:
		if cfg.OptStartTime == nil {
			return unset("by start time", "start time")
		}
		if cfg.OptStartSeq != 0 {
			return bad("by start time", "start sequence") // "start start sequence", as nats-server says
		}
	}
	return nil
}

// checkConsumerUpdate refuses an update that changes what may not change: the error is
// JSConsumerCreateErrF (500) with nats-server's text, or an API error of its own.
func checkConsumerUpdate(old, cfg *ConsumerConfig) *APIError {
	return checkConsumerUpdateWith(old, cfg, nil)
}

func checkConsumerUpdateWith(old, cfg *ConsumerConfig, interest func(string) bool) *APIError {
	if reflect.DeepEqual(old, cfg) {
		return nil
	}
	no := func(msg string) *APIError { return JSConsumerCreateErrF.withErr(errors.New(msg)) }
	switch {
	case old.DeliverPolicy != cfg.DeliverPolicy:
		return no("deliver policy can not be updated")
	case old.MemoryStorage != cfg.MemoryStorage:
		return no("storage type can not be updated")
	case old.Direct != cfg.Direct:
		return no("direct can not be updated")
	case old.Sourcing != cfg.Sourcing:
		return no("sourcing can not be updated")
	case old.OptStartSeq != cfg.OptStartSeq:
		return no("start sequence can not be updated")
	case (old.OptStartTime == nil) != (cfg.OptStartTime == nil),
		old.OptStartTime != nil && !old.OptStartTime.Equal(*cfg.OptStartTime):
		return no("start time can not be updated")
	case old.AckPolicy != cfg.AckPolicy:
		return no("ack policy can not be updated")
	case old.ReplayPolicy != cfg.ReplayPolicy:
		return no("replay policy can not be updated")
	case old.Heartbeat != cfg.Heartbeat:
		return no("heart beats can not be updated")
	case old.FlowControl != cfg.FlowControl:
		return no("flow control can not be updated")
	}
	if old.DeliverSubject != cfg.DeliverSubject {
		switch {
		case old.DeliverSubject == "":
			return no("can not update pull consumer to push based")
		case cfg.DeliverSubject == "":
			return no("can not update push consumer to pull based")
		case interest != nil && interest(old.DeliverSubject):
			return JSConsumerNameExistErr
		}
	}
	if old.MaxWaiting != cfg.MaxWaiting {
		return no("max waiting can not be updated")
	}
	if n := len(cfg.BackOff); n > 0 && cfg.MaxDeliver != -1 && n > cfg.MaxDeliver {
		return JSConsumerMaxDeliverBackoffErr
	}
	return nil
}

// sameConsumerConfig is nats-server's test of an "action":"create" request against the
// consumer that exists: the same config, the required API level taken from the stored one.
func sameConsumerConfig(old, cfg *ConsumerConfig) bool {
	c := *cfg
	c.Metadata = nil
	for k, v := range cfg.Metadata {
		if k == "_nats.ver" || k == "_nats.level" || k == "_nats.req.level" {
			continue
		}
		if c.Metadata == nil {
			c.Metadata = map[string]string{}
		}
		c.Metadata[k] = v
	}
	if v, ok := old.Metadata["_nats.req.level"]; ok {
		if c.Metadata == nil {
			c.Metadata = map[string]string{}
		}
		c.Metadata["_nats.req.level"] = v
	}
	return reflect.DeepEqual(old, &c)
}

// setStaticConsumerMetadata sets the API level the config requires (_nats.req.level) and
// drops the levels a client may have copied from an info reply, as nats-server does before
// it checks (the metadata size limit counts them).
func setStaticConsumerMetadata(cfg *ConsumerConfig) {
	md := make(map[string]string, len(cfg.Metadata)+1)
	for k, v := range cfg.Metadata {
		if k != "_nats.ver" && k != "_nats.level" {
			md[k] = v
		}
	}
	level := 0
	if (cfg.PauseUntil != nil && !cfg.PauseUntil.IsZero()) ||
		(cfg.PriorityPolicy != "" && cfg.PriorityPolicy != PriorityNone) || cfg.PinnedTTL != 0 || len(cfg.PriorityGroups) > 0 {
		level = 1
	}
	if cfg.AckPolicy == AckFlowControl {
		level = 4
	}
	md["_nats.req.level"] = strconv.Itoa(level)
	cfg.Metadata = md
}

// prepareConsumerConfig runs a create request's config (after createTarget and the stream
// lookup) through what nats-server applies before it creates or updates the consumer:
// an existing consumer's pause_until is kept, the static metadata set, the defaults, then
// checkConsumerConfig. It returns the config to create or update with.
func prepareConsumerConfig(req *CreateConsumerRequest, lim consumerLimits, others []*ConsumerConfig) (*ConsumerConfig, *APIError) {
	c := *req.Config
	cfg := &c
	if lim.existing != nil {
		cfg.PauseUntil = lim.existing.PauseUntil
	}
	setStaticConsumerMetadata(cfg)
	if e := setConsumerDefaults(cfg, lim, req.Pedantic); e != nil {
		return nil, e
	}
	if e := checkConsumerConfig(cfg, lim, others); e != nil {
		return nil, e
	}
	return cfg, nil
}

// createTarget reads a create request's subject together with its body: the stream, and
// the consumer's name ("" for a legacy ephemeral the server names). tok are the subject's
// tokens after "$JS.API." (["CONSUMER","CREATE",<S>,…] or ["CONSUMER","DURABLE","CREATE",
// <S>,<C>]); a leading "CONSUMER" may also be left out. As nats-server does, it sets the
// config's name from the subject (a request without config is an empty config).
//
// The action is the caller's: "create" when a consumer of that name exists with another
// config is JSConsumerAlreadyExists (10148), "update" when none exists is
// JSConsumerDoesNotExist (10149); checkConsumerConfig applies both, given lim.action and
// lim.existing.
func createTarget(tok []string, req *CreateConsumerRequest) (stream, name string, e *APIError) {
	if len(tok) > 0 && tok[0] == "CONSUMER" {
		tok = tok[1:]
	}
	if req.Config == nil {
		req.Config = &ConsumerConfig{}
	}
	cfg := req.Config
	var filter string
	kind := "new"
	switch {
	case len(tok) < 2:
		return "", "", JSBadRequestErr
	case len(tok) == 2: // CREATE.<S>
		kind = "ephemeral"
		stream, name = tok[1], cfg.Name
	case tok[0] == "DURABLE":
		kind = "durable"
		if len(tok) != 4 {
			return "", "", JSConsumerDurableNameNotInSubjectErr
		}
		stream, name = tok[2], tok[3]
	default: // CREATE.<S>.<C>[.<filter>]
		stream, name = tok[1], tok[2]
		if len(tok) > 3 {
			filter = strings.Join(tok[3:], ".")
		}
	}
	if stream != req.Stream {
		return "", "", JSStreamMismatchErr
	}
	if name != "" && strings.ContainsAny(name, `\/`) {
		return "", "", JSConsumerNameContainsPathSeparatorsErr
	}
	switch kind {
	case "durable":
		if cfg.Durable == "" {
			return "", "", JSConsumerDurableNameNotSetErr
		}
		if name != cfg.Durable {
			return "", "", JSConsumerDurableNameNotMatchSubjectErr
		}
		cfg.Name = name
	case "new":
		if cfg.Durable != "" && name != cfg.Durable {
			return "", "", JSConsumerDurableNameNotMatchSubjectErr
		}
		cfg.Name = name
	case "ephemeral":
		if cfg.Durable != "" {
			return "", "", JSConsumerEphemeralWithDurableNameErr
		}
	}
	if filter != "" && len(cfg.FilterSubjects) != 0 {
		return "", "", JSConsumerMultipleFiltersNotAllowed
	}
	if filter != "" && cfg.FilterSubject != filter {
		return "", "", JSConsumerCreateFilterSubjectMismatchErr
	}
	if cfg.Durable != "" {
		name = cfg.Durable
	} else {
		name = cfg.Name
	}
	return stream, name, nil
}
