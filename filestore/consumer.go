package filestore

// TEMPORARY stub (replaced by the consumer state store from branch wt-cstore).

import (
	"time"
)

type SequencePair struct{ Consumer, Stream uint64 }

type PendingAck struct {
	Sequence  uint64
	Timestamp int64
}

type ConsumerState struct {
	Delivered   SequencePair
	AckFloor    SequencePair
	Pending     map[uint64]*PendingAck
	Redelivered map[uint64]uint64
}

type ConsumerAckPolicy int

const (
	ConsumerAckNone ConsumerAckPolicy = iota
	ConsumerAckAll
	ConsumerAckExplicit
)

func (st *ConsumerState) ApplyDelivered(dseq, sseq, dc uint64, ts int64, p ConsumerAckPolicy) {
	if dc == 1 || p == ConsumerAckNone {
		if dseq > st.Delivered.Consumer {
			st.Delivered.Consumer = dseq
		}
		if sseq > st.Delivered.Stream {
			st.Delivered.Stream = sseq
		}
	} else if dseq > st.Delivered.Consumer {
		st.Delivered.Consumer = dseq
	}
	if p == ConsumerAckNone {
		st.AckFloor = st.Delivered
		return
	}
	if sseq <= st.AckFloor.Stream {
		return
	}
	if st.Pending == nil {
		st.Pending = make(map[uint64]*PendingAck)
	}
	if pa := st.Pending[sseq]; pa != nil {
		pa.Sequence, pa.Timestamp = dseq, ts
	} else {
		st.Pending[sseq] = &PendingAck{dseq, ts}
	}
	if dc > 1 {
		if st.Redelivered == nil {
			st.Redelivered = make(map[uint64]uint64)
		}
		st.Redelivered[sseq] = dc - 1
	}
}

func (st *ConsumerState) ApplyAcked(dseq, sseq uint64, p ConsumerAckPolicy) {
	if p == ConsumerAckNone || sseq <= st.AckFloor.Stream {
		return
	}
	if p == ConsumerAckAll {
		for s := range st.Pending {
			if s <= sseq {
				delete(st.Pending, s)
				delete(st.Redelivered, s)
			}
		}
		st.AckFloor = SequencePair{dseq, sseq}
		return
	}
	pa := st.Pending[sseq]
	if pa == nil {
		return
	}
	delete(st.Pending, sseq)
	delete(st.Redelivered, sseq)
	if len(st.Pending) == 0 {
		st.AckFloor = st.Delivered
		return
	}
	if dseq == st.AckFloor.Consumer+1 {
		st.AckFloor = SequencePair{dseq, sseq}
		for ss := sseq + 1; ss <= st.Delivered.Stream; ss++ {
			if p, ok := st.Pending[ss]; ok {
				if p.Sequence > 0 {
					st.AckFloor = SequencePair{p.Sequence - 1, ss - 1}
				}
				break
			}
		}
	}
}

func (st *ConsumerState) Copy() *ConsumerState {
	c := &ConsumerState{Delivered: st.Delivered, AckFloor: st.AckFloor}
	if len(st.Pending) > 0 {
		c.Pending = make(map[uint64]*PendingAck, len(st.Pending))
		for k, v := range st.Pending {
			p := *v
			c.Pending[k] = &p
		}
	}
	if len(st.Redelivered) > 0 {
		c.Redelivered = make(map[uint64]uint64, len(st.Redelivered))
		for k, v := range st.Redelivered {
			c.Redelivered[k] = v
		}
	}
	return c
}

type ConsumerStoreConfig struct {
	Dir          string
	FS           FS
	Journal      *Journal
	AckPolicy    ConsumerAckPolicy
	SyncInterval time.Duration
	Logf         func(string, ...any)
}

type ConsumerStore interface {
	UpdateDelivered(dseq, sseq, dc uint64, ts int64) error
	UpdateAcks(dseq, sseq uint64) error
	Commit() error
	State() *ConsumerState
	SetState(st *ConsumerState) error
	Stop() error
	Delete() error
}

type consumerMem struct {
	p  ConsumerAckPolicy
	st ConsumerState
}

func NewConsumerMemStore(p ConsumerAckPolicy) ConsumerStore { return &consumerMem{p: p} }

func OpenConsumerStore(cfg ConsumerStoreConfig) (ConsumerStore, error) {
	return &consumerMem{p: cfg.AckPolicy}, nil
}

func (c *consumerMem) UpdateDelivered(dseq, sseq, dc uint64, ts int64) error {
	c.st.ApplyDelivered(dseq, sseq, dc, ts, c.p)
	return nil
}
func (c *consumerMem) UpdateAcks(dseq, sseq uint64) error { c.st.ApplyAcked(dseq, sseq, c.p); return nil }
func (c *consumerMem) Commit() error                      { return nil }
func (c *consumerMem) State() *ConsumerState              { return c.st.Copy() }
func (c *consumerMem) SetState(st *ConsumerState) error   { c.st = *st.Copy(); return nil }
func (c *consumerMem) Stop() error                        { return nil }
func (c *consumerMem) Delete() error                      { return nil }
