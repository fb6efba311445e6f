package server

// Checks across accounts, made once the whole file is read, as nats-server makes them when
// it loads a config: the system account must exist; then stream exports, service exports
// (with their latency tracking), stream imports and service imports are added in that
// order, each import checked against what the exporting account exports (authorization,
// account token position), against the imports added before it (cycles, duplicates), and
// compiled (wildcard rewrites). nats-server walks accounts in random order, so which import
// of a cycle it blames varies; natsd walks them in file order and blames the one that
// closes the cycle.
//
// Errors are located at the export or import they are about (nats-server names only the
// accounts block).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/natsd/natsd/sublist"
	"github.com/natsd/natsd/transform"
)

// nats-server's texts for what these checks find.
var (
	errInvalidSubject      = errors.New("sublist: invalid subject")
	errBadPublishSubject   = errors.New("invalid publish subject")
	errBadServiceType      = errors.New("bad service response type")
	errNoSysAccount        = errors.New("system account not setup")
	errStreamImportAuth    = errors.New("stream import not authorized")
	errServiceImportAuth   = errors.New("service import not authorized")
	errStreamImportPrefix  = errors.New("stream import prefix can not contain wildcard tokens")
	errStreamImportDup     = errors.New("stream import already exists")
	errImportFormsCycle    = errors.New("import forms a cycle")
	errCycleSearchDepth    = errors.New("search cycle depth exhausted")
	errMissingAccount      = errors.New("account missing")
	errServiceImportAbsent = errors.New("service import not found")
)

// maxCycleSearchDepth bounds the accounts one cycle search visits (nats-server's).
const maxCycleSearchDepth = 1024

// The exports and imports added so far, per account, in the order they were added.
type (
	xAccount struct {
		name           string
		streamExports  []*xExport
		serviceExports []*xExport
		streamImports  []*xImport
		serviceImports []*xImport
	}
	xExport struct {
		subject string
		auth    *xAuth // nil: public (stream exports only)
		rt      ServiceResponseType
	}
	// xAuth restricts an export to approved accounts, or (pos > 0) to the account named by
	// the subject's pos-th token; neither is public.
	xAuth struct {
		approved map[string]bool
		pos      int
	}
	// xImport: from and to as nats-server keeps them. Stream: from is the subject in the
	// exporter, to the one in the importer. Service: from is the importer's subject, to the
	// exporter's.
	xImport struct {
		acc      *xAccount
		from, to string
	}
)

func findExport(list []*xExport, subject string) *xExport {
	for _, e := range list {
		if e.subject == subject {
			return e
		}
	}
	return nil
}

// setAuth restricts ea as an export of subject to accounts, or to the account at token
// pos; the position must be a '*' of the subject.
func (ea *xAuth) set(subject string, accounts []string, pos int) error {
	if pos != 0 {
		toks := strings.Split(subject, ".")
		if pos < 0 || len(toks) < pos || toks[pos-1] != "*" {
			return errInvalidSubject
		}
	}
	ea.pos = pos
	if accounts == nil {
		return nil
	}
	if ea.approved == nil {
		ea.approved = make(map[string]bool, len(accounts))
	}
	for _, a := range accounts {
		ea.approved[a] = true
	}
	return nil
}

// allows reports whether importer may import under ea; toks is the import's subject when
// it matched the export as a subset (nil for the export's own subject).
func (ea *xAuth) allows(importer string, toks []string) bool {
	if ea == nil || (len(ea.approved) == 0 && ea.pos == 0) {
		return true
	}
	if ea.pos > 0 {
		// nats-server reads the position in the import's subject only: importing the
		// export's own subject (with its '*') is never allowed.
		return ea.pos <= len(toks) && toks[ea.pos-1] == importer
	}
	return ea.approved[importer]
}

// approved finds the export that subject falls under (its own subject first, then the
// first, in file order, it is a subset of) and asks it about importer.
func approved(list []*xExport, importer, subject string) bool {
	if e := findExport(list, subject); e != nil {
		return e.auth.allows(importer, nil)
	}
	toks := strings.Split(subject, ".")
	for _, e := range list {
		if subsetMatch(toks, e.subject) {
			return e.auth.allows(importer, toks)
		}
	}
	return false
}

// checkAccounts runs the checks across accounts (see the file comment).
func (p *cfgParser) checkAccounts(o *Options) {
	if p.sysTk != nil && o.SystemAccount != GlobalAccount && o.Account(o.SystemAccount) == nil {
		p.fail(p.sysTk, "error resolving system account: %v", errMissingAccount)
	}
	if p.accountsFailed || len(o.Accounts) == 0 {
		return
	}
	byName := make(map[string]*xAccount, len(o.Accounts))
	accs := make([]*xAccount, len(o.Accounts))
	for i, a := range o.Accounts {
		accs[i] = &xAccount{name: a.Name}
		byName[a.Name] = accs[i]
	}
	resolve := func(ex *ExportConfig, kind string) []string {
		var names []string
		for _, n := range ex.Accounts {
			if byName[n] == nil {
				p.failAt(ex.Pos, "%q account not defined for %s export", n, kind)
				continue
			}
			names = append(names, n)
		}
		return names
	}
	for i, a := range o.Accounts {
		for _, ex := range a.Exports {
			if ex.Service {
				continue
			}
			names := resolve(ex, "stream")
			if err := accs[i].addStreamExport(ex.Subject, names, ex.AccountTokenPosition); err != nil {
				p.failAt(ex.Pos, "Error adding stream export %q: %v", ex.Subject, err)
			}
		}
	}
	for i, a := range o.Accounts {
		for _, ex := range a.Exports {
			if !ex.Service {
				continue
			}
			names := resolve(ex, "service")
			if err := accs[i].addServiceExport(ex.Subject, ex.ResponseType, names, ex.AccountTokenPosition); err != nil {
				p.failAt(ex.Pos, "Error adding service export %q: %v", ex.Subject, err)
				continue
			}
			if ex.Latency == nil {
				continue
			}
			if o.NoSystemAccount {
				p.failAt(ex.Pos, "Error adding service latency sampling for %q: %v", ex.Subject, errNoSysAccount)
				continue
			}
			if err := accs[i].trackLatency(ex.Subject, ex.Latency.Subject); err != nil {
				p.failAt(ex.Pos, "Error adding service latency sampling for %q on subject %q: %v", ex.Subject, ex.Latency.Subject, err)
			}
		}
	}
	for i, a := range o.Accounts {
		for _, im := range a.Imports {
			if im.Service {
				continue
			}
			ta := byName[im.Account]
			if ta == nil {
				p.failAt(im.Pos, "%q account not defined for stream import", im.Account)
				continue
			}
			if err := accs[i].addStreamImport(ta, im); err != nil {
				p.failAt(im.Pos, "Error adding stream import %q: %v", im.Subject, err)
			}
		}
	}
	for i, a := range o.Accounts {
		for _, im := range a.Imports {
			if !im.Service {
				continue
			}
			ta := byName[im.Account]
			if ta == nil {
				p.failAt(im.Pos, "%q account not defined for service import", im.Account)
				continue
			}
			if err := accs[i].addServiceImport(ta, im); err != nil {
				p.failAt(im.Pos, "Error adding service import %q: %v", im.Subject, err)
				continue
			}
			// Sharing is set on the import whose exporter's subject is the one written;
			// nats-server does not find it when that subject had to be rewritten.
			if im.RemoteSubject != im.Subject {
				p.failAt(im.Pos, "Error setting service import sharing %q: %v", im.Subject, errServiceImportAbsent)
			}
		}
	}
}

func (a *xAccount) addStreamExport(subject string, accounts []string, pos int) error {
	e := findExport(a.streamExports, subject)
	if accounts != nil || pos != 0 {
		auth := &xAuth{}
		if e != nil && e.auth != nil {
			auth = e.auth
		}
		if err := auth.set(subject, accounts, pos); err != nil {
			return err
		}
		if e != nil {
			e.auth = auth
			return nil
		}
		a.streamExports = append(a.streamExports, &xExport{subject: subject, auth: auth})
		return nil
	}
	// Exported again publicly: an earlier restriction stays (nats-server keeps the entry).
	if e == nil {
		a.streamExports = append(a.streamExports, &xExport{subject: subject})
	}
	return nil
}

func (a *xAccount) addServiceExport(subject string, rt ServiceResponseType, accounts []string, pos int) error {
	e := findExport(a.serviceExports, subject)
	isNew := e == nil
	if isNew {
		e = &xExport{subject: subject, auth: &xAuth{}}
	}
	// A later singleton export of the same subject does not reset the response type.
	if rt != ResponseSingleton {
		e.rt = rt
	}
	if accounts != nil || pos != 0 {
		if err := e.auth.set(subject, accounts, pos); err != nil {
			return err
		}
	}
	if isNew {
		a.serviceExports = append(a.serviceExports, e)
	}
	return nil
}

// trackLatency checks a service export's latency results subject: a valid literal that is
// not itself one of the account's service exports so far (results would loop back), on a
// singleton service.
func (a *xAccount) trackLatency(service, results string) error {
	if !sublist.ValidLiteralSubject([]byte(results)) {
		return errBadPublishSubject
	}
	if a.isServiceExport(results) {
		return errBadPublishSubject
	}
	if e := findExport(a.serviceExports, service); e != nil && e.rt != ResponseSingleton {
		return errBadServiceType
	}
	return nil
}

func (a *xAccount) isServiceExport(subject string) bool {
	if findExport(a.serviceExports, subject) != nil {
		return true
	}
	toks := strings.Split(subject, ".")
	for _, e := range a.serviceExports {
		if subsetMatch(toks, e.subject) {
			return true
		}
	}
	return false
}

// addStreamImport adds im (importing from exp) and resolves its local subject and transform.
func (a *xAccount) addStreamImport(exp *xAccount, im *ImportConfig) error {
	from, to := im.Subject, im.To
	if !validSubjectStr(from) || len(exp.streamExports) == 0 || !approved(exp.streamExports, a.name, from) {
		return errStreamImportAuth
	}
	if pre := im.Prefix; pre != "" {
		// The prefix is prepended to published subjects: it must be literal.
		if sublist.IsWildcard(pre) {
			return errStreamImportPrefix
		}
		if !strings.HasSuffix(pre, ".") {
			pre += "."
		}
		to = pre + from
	}
	if to == "" {
		to = from
	}
	if err := a.streamImportFormsCycle(exp, to); err != nil {
		return err
	}
	if err := a.streamImportFormsCycle(exp, from); err != nil {
		return err
	}
	var tr *transform.Transform
	if sublist.IsWildcard(from) && to != from {
		var err error
		if tr, err = transform.NewStrict(from, transform.Tokenize(to)); err != nil {
			return fmt.Errorf("failed to create mapping transform for stream import subject from %q to %q: %v", from, to, err)
		}
		to, _ = transform.Untokenize(to)
	}
	for _, si := range a.streamImports {
		if si.acc == exp && si.from == from {
			return errStreamImportDup
		}
	}
	a.streamImports = append(a.streamImports, &xImport{acc: exp, from: from, to: to})
	im.LocalSubject, im.RemoteSubject, im.Transform = to, from, tr
	return nil
}

// addServiceImport adds im (requests to exp) and resolves its subjects and transform.
func (a *xAccount) addServiceImport(exp *xAccount, im *ImportConfig) error {
	from, to := im.To, im.Subject // local, remote
	if from == "" {
		from = to
	}
	if !validSubjectStr(from) || !validSubjectStr(to) {
		return errInvalidSubject
	}
	if len(exp.serviceExports) == 0 || !approved(exp.serviceExports, a.name, to) {
		return errServiceImportAuth
	}
	fromT := from
	if sublist.IsWildcard(to) {
		fromT, _ = transform.Untokenize(from)
	}
	if err := exp.checkServiceCycles(fromT, map[string]bool{a.name: true}); err != nil {
		return err
	}
	for _, si := range a.serviceImports {
		if si.from == from && si.acc == exp {
			return fmt.Errorf("duplicate service import subject %q, previously used in import for account %q, subject %q", from, exp.name, si.to)
		}
	}
	var tr *transform.Transform
	if sublist.IsWildcard(to) && to != from {
		to, _ = transform.Untokenize(to)
		t, err := transform.NewStrict(to, transform.Tokenize(from))
		if err != nil {
			return fmt.Errorf("failed to create mapping transform for service import subject from %q to %q: %v", from, to, err)
		}
		from, _ = transform.Untokenize(from)
		// Built from the exporter's subject to the importer's; requests go the other way.
		tr = t.Reverse()
	}
	a.serviceImports = append(a.serviceImports, &xImport{acc: exp, from: from, to: to})
	im.LocalSubject, im.RemoteSubject, im.Transform = from, to, tr
	return nil
}

// checkServiceCycles follows a's service imports whose exporter's subject meets from: an
// account already on the path closes a cycle.
func (a *xAccount) checkServiceCycles(from string, visited map[string]bool) error {
	if len(visited) >= maxCycleSearchDepth {
		return errCycleSearchDepth
	}
	for _, si := range a.serviceImports {
		if !subjectsCollide(from, si.to) {
			continue
		}
		if visited[si.acc.name] {
			return errImportFormsCycle
		}
		visited[a.name] = true
		f := from
		if subjectIsSubsetMatch(si.from, f) {
			f = si.from
		}
		if err := si.acc.checkServiceCycles(f, visited); err != nil {
			return err
		}
	}
	return nil
}

func (a *xAccount) streamImportFormsCycle(exp *xAccount, to string) error {
	return exp.checkStreamCycles(to, map[string]bool{a.name: true})
}

// checkStreamCycles follows a's stream imports, when a exports what to names, whose local
// subject meets to: an account already on the path closes a cycle.
func (a *xAccount) checkStreamCycles(to string, visited map[string]bool) error {
	if len(visited) >= maxCycleSearchDepth {
		return errCycleSearchDepth
	}
	exported := false
	for _, e := range a.streamExports {
		if subjectIsSubsetMatch(to, e.subject) {
			exported = true
			break
		}
	}
	if !exported {
		return nil
	}
	for _, si := range a.streamImports {
		if !subjectsCollide(to, si.to) {
			continue
		}
		if visited[si.acc.name] {
			return errImportFormsCycle
		}
		visited[a.name] = true
		t := to
		if subjectIsSubsetMatch(si.to, t) {
			t = si.to
		}
		if err := si.acc.checkStreamCycles(t, visited); err != nil {
			return err
		}
	}
	return nil
}

// subjectIsSubsetMatch reports whether every subject subject can match, test matches too
// (both may hold wildcards: "foo.*" is a subset of ">", "*.*" and "foo.*", not "foo.bar").
func subjectIsSubsetMatch(subject, test string) bool {
	return subsetMatch(strings.Split(subject, "."), test)
}

func subsetMatch(toks []string, test string) bool {
	tt := strings.Split(test, ".")
	for i, t2 := range tt {
		if i >= len(toks) || t2 == "" {
			return false
		}
		if t2 == ">" {
			return true
		}
		t1 := toks[i]
		switch {
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

// subjectsCollide reports whether some literal subject matches both a and b.
func subjectsCollide(a, b string) bool {
	if a == b {
		return true
	}
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	pa, fa := wildcards(ta)
	pb, fb := wildcards(tb)
	litA, litB := !pa && !fa, !pb && !fb
	switch {
	case litA && litB:
		return false
	case litA:
		return subsetMatch(ta, b)
	case litB:
		return subsetMatch(tb, a)
	}
	if len(ta) != len(tb) {
		// Only a '>' lets subjects of different lengths meet, in the shorter one.
		if !fa && !fb || len(ta) < len(tb) && !fa || len(tb) < len(ta) && !fb {
			return false
		}
	}
	for i := 0; i < len(ta) && i < len(tb); i++ {
		if !tokensCanMatch(ta[i], tb[i]) {
			return false
		}
	}
	return true
}

// tokensCanMatch: as nats-server, a token starting with '*' or '>' meets any other.
func tokensCanMatch(x, y string) bool {
	if x == "" || y == "" {
		return false
	}
	if x[0] == '*' || x[0] == '>' || y[0] == '*' || y[0] == '>' {
		return true
	}
	return x == y
}

func wildcards(toks []string) (pwc, fwc bool) {
	for _, t := range toks {
		switch t {
		case "*":
			pwc = true
		case ">":
			fwc = true
		}
	}
	return pwc, fwc
}
