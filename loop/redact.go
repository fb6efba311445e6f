package loop

import "bytes"

var redacted = []byte("[REDACTED]")

// redactConnect returns a CONNECT control line fit for a trace: the values of
// the credential fields (any key starting with "pass" or "auth_token", and
// exactly "sig", "proxy_sig" and "nkey", as nats-server hides them) are
// replaced by [REDACTED]. Anything else, including malformed JSON, is left
// as it is; line itself is never modified.
func redactConnect(line []byte) []byte {
	var out []byte // allocated on the first secret
	last := 0
	for i := 0; i < len(line); i++ {
		if line[i] != '"' {
			continue
		}
		end := bytes.IndexByte(line[i+1:], '"')
		if end < 0 {
			break
		}
		key := line[i+1 : i+1+end]
		j := i + 2 + end // after the key's closing quote
		for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		if j >= len(line) || line[j] != ':' {
			i += 1 + end // a string value, not a key
			continue
		}
		j++
		for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		vs, ve := j, j // the value, without its quotes
		if j < len(line) && line[j] == '"' {
			vs = j + 1
			ve = vs
			for ve < len(line) && line[ve] != '"' {
				if line[ve] == '\\' {
					ve++
				}
				ve++
			}
			ve = min(ve, len(line))
		} else {
			for ve < len(line) && line[ve] != ',' && line[ve] != '}' {
				ve++
			}
		}
		if secretKey(key) && ve > vs {
			out = append(out, line[last:vs]...)
			out = append(out, redacted...)
			last = ve
		}
		i = ve
	}
	if out == nil {
		return line
	}
	return append(out, line[last:]...)
}

func secretKey(k []byte) bool {
	return bytes.HasPrefix(k, []byte("pass")) || bytes.HasPrefix(k, []byte("auth_token")) ||
		string(k) == "sig" || string(k) == "proxy_sig" || string(k) == "nkey"
}
