package js

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/natsd/natsd/auth"
	"github.com/natsd/natsd/sublist"
	"github.com/natsd/natsd/transform"
)

// Limits on names and documents, as nats-server's.
const (
	maxNameLen        = 255
	maxDescriptionLen = 4096
	maxMetadataLen    = 128 * 1024
	maxReplicas       = 5
	defaultDupWindow  = 2 * time.Minute
)

// validName is nats-server's rule for stream and consumer names.
func validName(n string) bool {
	if n == "" {
		return false
	}
	return !strings.ContainsAny(n, ".*> \t\r\n\f\\/")
}

func invalidConfig(format string, a ...any) *APIError {
	return JSStreamInvalidConfigF.withErr(fmt.Errorf(format, a...))
}

func validSubject(s string) bool { return sublist.ValidSubject([]byte(s)) }

// subsetMatch reports whether every subject that subject matches, test matches too.
func subsetMatch(subject, test string) bool {
	toks, tt := strings.Split(subject, "."), strings.Split(test, ".")
	for i, t2 := range tt {
		if i >= len(toks) || t2 == "" {
			return false
		}
		if t2 == ">" {
			return true
		}
		switch t1 := toks[i]; {
		case t1 == "" || t1 == ">":
			return false
		case t1 == "*":
			if t2 != "*" {
				return false
			}
		case t2 != "*" && t1 != t2:
			return false
		}
	}
	return len(toks) == len(tt)
}

// checkConfig validates a stream configuration and fills its defaults, with nats-server's
// rules and error texts (checkStreamCfg). Features natsd does not have yet are refused
// rather than accepted and ignored.
func (a *account) checkConfig(in *StreamConfig, pedantic bool) (StreamConfig, *APIError) {
	if in == nil {
		return StreamConfig{}, invalidConfig("stream configuration invalid")
	}
	if !validName(in.Name) {
		return StreamConfig{}, invalidConfig("stream name is required and can not contain '.', '*', '>', '\\', '/'")
	}
	if len(in.Name) > maxNameLen {
		return StreamConfig{}, invalidConfig("stream name is too long, maximum allowed is %d", maxNameLen)
	}
	if len(in.Description) > maxDescriptionLen {
		return StreamConfig{}, invalidConfig("stream description is too long, maximum allowed is %d", maxDescriptionLen)
	}
	mdLen := 0
	for k, v := range in.Metadata {
		mdLen += len(k) + len(v)
	}
	if mdLen > maxMetadataLen {
		return StreamConfig{}, invalidConfig("stream metadata exceeds maximum size of %d bytes", maxMetadataLen)
	}
	cfg := *in
	if cfg.Retention == "" {
		cfg.Retention = LimitsPolicy
	}
	if cfg.Discard == "" {
		cfg.Discard = DiscardOld
	}
	if cfg.Compression == "" {
		cfg.Compression = NoCompression
	}
	if cfg.Storage == "" {
		cfg.Storage = FileStorage
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Replicas > maxReplicas {
		return cfg, invalidConfig("maximum replicas is %d", maxReplicas)
	}
	if cfg.Replicas < 0 {
		return cfg, JSReplicasCountCannotBeNegative
	}
	for _, f := range []struct {
		v    *int64
		name string
	}{{&cfg.MaxMsgs, "max_msgs"}, {&cfg.MaxMsgsPer, "max_msgs_per_subject"}, {&cfg.MaxBytes, "max_bytes"}} {
		if *f.v == 0 || *f.v < -1 {
			if pedantic && *f.v < -1 {
				return StreamConfig{}, JSPedanticErrF.withErr(fmt.Errorf("%s must be set to -1", f.name))
			}
			*f.v = -1
		}
	}
	if cfg.MaxMsgSize == 0 || cfg.MaxMsgSize < -1 {
		if pedantic && cfg.MaxMsgSize < -1 {
			return StreamConfig{}, JSPedanticErrF.withErr(errors.New("max_msg_size must be set to -1"))
		}
		cfg.MaxMsgSize = -1
	}
	if cfg.MaxConsumers == 0 || cfg.MaxConsumers < -1 {
		if pedantic && cfg.MaxConsumers < -1 {
			return StreamConfig{}, JSPedanticErrF.withErr(errors.New("max_consumers must be set to -1"))
		}
		cfg.MaxConsumers = -1
	}
	if cfg.MaxAge < 0 {
		return StreamConfig{}, invalidConfig("max age can not be negative")
	}
	if cfg.MaxAge != 0 && cfg.MaxAge < 100*time.Millisecond {
		return StreamConfig{}, invalidConfig("max age needs to be >= 100ms")
	}
	limDup := a.js.cfg.DuplicateWindowLimit
	if cfg.Duplicates == 0 && cfg.Mirror == nil && len(cfg.Sources) == 0 {
		w := defaultDupWindow
		if limDup > 0 && w > limDup {
			if pedantic {
				return StreamConfig{}, JSPedanticErrF.withErr(errors.New("duplicate window limits are higher than current limits"))
			}
			w = limDup
		}
		if cfg.MaxAge != 0 && cfg.MaxAge < w {
			if pedantic {
				return StreamConfig{}, JSPedanticErrF.withErr(errors.New("duplicate window cannot be bigger than max age"))
			}
			cfg.Duplicates = cfg.MaxAge
		} else {
			cfg.Duplicates = w
		}
	}
	switch {
	case cfg.Duplicates < 0:
		return StreamConfig{}, invalidConfig("duplicates window can not be negative")
	case cfg.MaxAge != 0 && cfg.Duplicates > cfg.MaxAge:
		return StreamConfig{}, invalidConfig("duplicates window can not be larger then max age")
	case limDup > 0 && cfg.Duplicates > limDup:
		return StreamConfig{}, invalidConfig("duplicates window can not be larger then server limit of %v", limDup.String())
	case cfg.Duplicates > 0 && cfg.Duplicates < 100*time.Millisecond:
		return StreamConfig{}, invalidConfig("duplicates window needs to be >= 100ms")
	}
	if cfg.DenyPurge && cfg.AllowRollup {
		return StreamConfig{}, invalidConfig("roll-ups require the purge permission")
	}
	if cfg.AllowMsgCounter {
		switch {
		case cfg.Discard == DiscardNew:
			return StreamConfig{}, invalidConfig("counter stream cannot use discard new")
		case cfg.AllowMsgTTL:
			return StreamConfig{}, invalidConfig("counter stream cannot use message TTLs")
		case cfg.AllowMsgSchedules:
			return StreamConfig{}, invalidConfig("counter stream cannot use message schedules")
		case cfg.Retention != LimitsPolicy:
			return StreamConfig{}, invalidConfig("counter stream can only use limits retention")
		}
	}
	if cfg.DiscardNewPer {
		if cfg.Discard != DiscardNew {
			return StreamConfig{}, invalidConfig("discard new per subject requires discard new policy to be set")
		}
		if cfg.MaxMsgsPer <= 0 {
			return StreamConfig{}, invalidConfig("discard new per subject requires max msgs per subject > 0")
		}
	}
	if cfg.SubjectDeleteMarkerTTL > 0 {
		if cfg.SubjectDeleteMarkerTTL < time.Second {
			return StreamConfig{}, invalidConfig("subject delete marker TTL must be at least 1 second")
		}
		if !cfg.AllowMsgTTL {
			if pedantic {
				return StreamConfig{}, invalidConfig("subject delete marker cannot be set if message TTLs are disabled")
			}
			cfg.AllowMsgTTL = true
		}
		if !cfg.AllowRollup {
			if pedantic {
				return StreamConfig{}, invalidConfig("subject delete marker cannot be set if roll-ups are disabled")
			}
			cfg.AllowRollup, cfg.DenyPurge = true, false
		}
	} else if cfg.SubjectDeleteMarkerTTL < 0 {
		return StreamConfig{}, invalidConfig("subject delete marker TTL must not be negative")
	}
	if cfg.AllowMsgSchedules {
		if cfg.Discard == DiscardNew {
			return StreamConfig{}, invalidConfig("message scheduling cannot use discard new")
		}
		if !cfg.AllowRollup {
			if pedantic {
				return StreamConfig{}, invalidConfig("message scheduling cannot be set if roll-ups are disabled")
			}
			cfg.AllowRollup, cfg.DenyPurge = true, false
		}
	}
	if cfg.PersistMode == AsyncPersist {
		switch {
		case cfg.Storage != FileStorage:
			return StreamConfig{}, invalidConfig("async persist mode is only supported on file storage")
		case cfg.Replicas > 1:
			return StreamConfig{}, invalidConfig("async persist mode is not supported on replicated streams")
		case cfg.AllowAtomicPublish:
			return StreamConfig{}, invalidConfig("async persist mode is not supported with atomic batch publish")
		}
	}
	if cfg.PersistMode == DefaultPersist {
		cfg.PersistMode = "" // stored and reported as unset, as nats-server does
	}
	if e := checkSourcing(&cfg); e != nil {
		return StreamConfig{}, e
	}
	if len(cfg.Subjects) == 0 {
		if cfg.Mirror == nil && len(cfg.Sources) == 0 {
			cfg.Subjects = []string{cfg.Name}
		}
	} else {
		seen := make(map[string]bool, len(cfg.Subjects))
		for i, subj := range cfg.Subjects {
			if !validSubject(subj) {
				return StreamConfig{}, invalidConfig("invalid subject")
			}
			if seen[subj] {
				return StreamConfig{}, invalidConfig("duplicate subjects detected")
			}
			if subj == ">" {
				if !cfg.NoAck {
					return StreamConfig{}, invalidConfig("capturing all subjects requires no-ack to be true")
				}
				if cfg.Replicas != 1 {
					return StreamConfig{}, invalidConfig("capturing all subjects requires replicas of 1")
				}
			}
			if !cfg.NoAck {
				for _, ns := range []string{"$JS.>", "$JSC.>", "$NRG.>"} {
					if auth.SubjectsCollide(subj, ns) && !subsetMatch(subj, "$JS.EVENT.>") {
						return StreamConfig{}, invalidConfig("subjects that overlap with jetstream api require no-ack to be true")
					}
				}
				if auth.SubjectsCollide(subj, "$SYS.>") && !subsetMatch(subj, "$SYS.ACCOUNT.>") {
					return StreamConfig{}, invalidConfig("subjects that overlap with system api require no-ack to be true")
				}
			}
			for _, other := range cfg.Subjects[i+1:] {
				if auth.SubjectsCollide(other, subj) {
					return StreamConfig{}, invalidConfig("subject %q overlaps with %q", subj, other)
				}
			}
			seen[subj] = true
		}
	}
	lim := a.limits()
	maxStream := lim.StoreMaxStreamBytes
	if cfg.Storage == MemoryStorage {
		maxStream = lim.MemoryMaxStreamBytes
	}
	if lim.MaxBytesRequired && cfg.MaxBytes <= 0 {
		return StreamConfig{}, JSStreamMaxBytesRequired
	}
	if maxStream > 0 && cfg.MaxBytes > maxStream {
		return StreamConfig{}, JSStreamMaxStreamBytesExceeded
	}
	if t := cfg.SubjectTransform; t != nil {
		if t.Source != "" && !validSubject(t.Source) {
			return StreamConfig{}, JSStreamTransformInvalidSource.withErr(fmt.Errorf("invalid subject %s", t.Source))
		}
		if err := transform.Validate(t.Source, t.Destination); err != nil {
			return StreamConfig{}, JSStreamTransformInvalidDestination.withErr(err)
		}
	}
	if rp := cfg.RePublish; rp != nil {
		r := *rp
		cfg.RePublish = &r
		if r.Source == "" {
			if pedantic {
				return StreamConfig{}, JSPedanticErrF.withErr(errors.New("republish source can not be empty"))
			}
			cfg.RePublish.Source = ">"
		}
		if r.Destination == ">" && cfg.RePublish.Source == ">" && cfg.SubjectTransform != nil &&
			len(cfg.Subjects) == 1 && cfg.SubjectTransform.Source == cfg.Subjects[0] {
			if pedantic {
				return StreamConfig{}, JSPedanticErrF.withErr(errors.New("implicit republish based on subject transform"))
			}
			cfg.RePublish.Source, cfg.RePublish.Destination = cfg.SubjectTransform.Destination, cfg.SubjectTransform.Destination
		}
		for _, subj := range cfg.Subjects {
			if auth.SubjectsCollide(cfg.RePublish.Destination, subj) {
				return StreamConfig{}, invalidConfig("stream configuration for republish destination forms a cycle")
			}
		}
		if _, err := transform.New(cfg.RePublish.Source, cfg.RePublish.Destination); err != nil {
			return StreamConfig{}, invalidConfig("stream configuration for republish with transform from '%s' to '%s' not valid",
				cfg.RePublish.Source, cfg.RePublish.Destination)
		}
	}
	if p := cfg.Placement; p != nil && p.Cluster == "" && len(p.Tags) == 0 && p.Preferred == "" {
		cfg.Placement = nil
	}
	if cfg.Placement != nil && cfg.Placement.Preferred != "" {
		return StreamConfig{}, invalidConfig("preferred server not permitted in placement")
	}
	return cfg, nil
}

// checkUpdate validates an update of old to in (configUpdateCheck).
func (a *account) checkUpdate(old *StreamConfig, in *StreamConfig, pedantic bool) (StreamConfig, *APIError) {
	cfg, e := a.checkConfig(in, pedantic)
	if e != nil {
		return cfg, e
	}
	switch {
	case cfg.Name != old.Name:
		return cfg, invalidConfig("stream configuration name must match original")
	case cfg.Replicas > 1:
		return cfg, JSStreamReplicasNotSupportedErr
	case cfg.Storage != old.Storage:
		return cfg, invalidConfig("stream configuration update can not change storage type")
	case cfg.Retention != old.Retention && (old.Retention == WorkQueuePolicy || cfg.Retention == WorkQueuePolicy):
		return cfg, invalidConfig("stream configuration update can not change retention policy to/from workqueue")
	case !cfg.Sealed && old.Sealed:
		return cfg, invalidConfig("stream configuration update can not unseal a sealed stream")
	case !cfg.DenyDelete && old.DenyDelete:
		return cfg, invalidConfig("stream configuration update can not cancel deny message deletes")
	case !cfg.DenyPurge && old.DenyPurge:
		return cfg, invalidConfig("stream configuration update can not cancel deny purge")
	case old.AllowMsgTTL && !cfg.AllowMsgTTL:
		return cfg, invalidConfig("message TTL status can not be disabled")
	case cfg.AllowMsgCounter != old.AllowMsgCounter:
		return cfg, invalidConfig("stream configuration update can not change message counter setting")
	case old.AllowMsgSchedules && !cfg.AllowMsgSchedules:
		return cfg, invalidConfig("message schedules can not be disabled")
	case old.PersistMode != cfg.PersistMode:
		return cfg, invalidConfig("stream configuration update can not change persist mode")
	case cfg.Mirror != nil && !reflect.DeepEqual(cfg.Mirror, old.Mirror):
		// Removing the mirror promotes the stream to a normal one, as nats-server allows.
		return cfg, JSStreamMirrorNotUpdatableErr
	}
	if cfg.Sealed {
		cfg.MaxAge = 0
		cfg.Discard = DiscardNew
		cfg.DenyDelete, cfg.DenyPurge = true, true
		cfg.AllowRollup = false
	}
	return cfg, nil
}

// requiredLevel is the API level a configuration's features need (_nats.req.level).
func requiredLevel(cfg *StreamConfig) int {
	l := 0
	if cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL > 0 {
		l = 1
	}
	if cfg.AllowMsgCounter || cfg.AllowAtomicPublish || cfg.AllowMsgSchedules || cfg.PersistMode == AsyncPersist {
		l = 2
	}
	if cfg.AllowBatchPublish {
		l = 4
	}
	return l
}

// setStaticMetadata records the configuration's required level in its metadata, dropping
// the keys the server adds to what it reports.
func setStaticMetadata(cfg *StreamConfig) {
	md := make(map[string]string, len(cfg.Metadata)+1)
	for k, v := range cfg.Metadata {
		if k != "_nats.ver" && k != "_nats.level" {
			md[k] = v
		}
	}
	md["_nats.req.level"] = strconv.Itoa(requiredLevel(cfg))
	cfg.Metadata = md
}

// keepRequiredLevel carries the stored required level over an update.
func keepRequiredLevel(cfg, prev *StreamConfig) {
	md := make(map[string]string, len(cfg.Metadata)+1)
	for k, v := range cfg.Metadata {
		if k != "_nats.ver" && k != "_nats.level" && k != "_nats.req.level" {
			md[k] = v
		}
	}
	if v, ok := prev.Metadata["_nats.req.level"]; ok {
		md["_nats.req.level"] = v
	}
	if len(md) == 0 {
		md = nil
	}
	cfg.Metadata = md
}

// reported is cfg as the API shows it: with the server's version and level in its metadata.
func reported(cfg StreamConfig) StreamConfig {
	md := make(map[string]string, len(cfg.Metadata)+2)
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	md["_nats.ver"] = Version
	md["_nats.level"] = strconv.Itoa(APILevel)
	cfg.Metadata = md
	return cfg
}
