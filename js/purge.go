package js

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/natsd/natsd/loop"
)

// The system account's JetStream request on a server that is not clustered:
// $JS.API.ACCOUNT.PURGE.<account> (`nats server account purge`) deletes every stream of the
// account, as a stream delete each (advisories included), then the account's directory
// under the store. nats-server takes it from the system account only; sent from another
// account it reaches that account's API, which does not answer it.

const accountPurgePrefix = "$JS.API.ACCOUNT.PURGE."

type accountPurgeResponse struct {
	apiResponse
	Initiated bool `json:"initiated,omitempty"`
}

// ServeSystem subscribes the system account's JetStream requests.
func (j *JetStream) ServeSystem(sys *loop.Account) error {
	ic := j.eng.NewInternalClient(loop.KindJetStream, sys, "JetStream system API")
	if _, err := ic.Worker(accountPurgePrefix+"*", "", func(m *loop.WorkMsg) { j.purgeAccount(ic, m) }); err != nil {
		ic.Close()
		return err
	}
	j.mu.Lock()
	j.sysAPI = ic
	j.mu.Unlock()
	return nil
}

func (j *JetStream) purgeAccount(ic *loop.InternalClient, m *loop.WorkMsg) {
	if m.Reply == "" {
		return
	}
	const typ = typePrefix + "account_purge_response"
	reply := func(v any) {
		if b, err := jsonMarshal(v); err == nil {
			_ = ic.Publish(m.Reply, "", nil, b)
		}
	}
	name := strings.TrimPrefix(m.Subject, accountPurgePrefix)
	if strings.ContainsAny(name, `\/`) {
		reply(errorDoc(typ, JSStreamGeneralErrorF.withErr(errors.New("account name can not contain path separators"))))
		return
	}
	j.mu.Lock()
	a := j.accounts[name]
	j.mu.Unlock()
	var streams []*stream
	if a != nil {
		streams = a.streamList()
	}
	j.cfg.Logf("INF", "Purge request for account %s (streams: %d, hasAccount: %t)", name, len(streams), a != nil)
	for _, s := range streams {
		if err := a.deleteStream(s); err != nil {
			reply(errorDoc(typ, JSStreamDeleteErrF.withErr(err)))
			return
		}
		j.waitRemoved(s.dir)
	}
	dir := j.accountDir(name)
	if err := removeAll(j.cfg.FS, dir); err != nil {
		reply(errorDoc(typ, JSStreamGeneralErrorF.withErr(err)))
		return
	}
	// Made again, the account's directories must be synced anew (syncParents).
	j.durableDirs.Range(func(k, _ any) bool {
		if p := k.(string); p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) {
			j.durableDirs.Delete(k)
		}
		return true
	})
	reply(accountPurgeResponse{apiResponse{Type: typ}, true})
}
