package js

import "strings"

// APIError is the JetStream API's error document: an HTTP-like code, the JetStream code
// clients switch on, and the text. The values are the reference's (errors_table.go).
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

func (e *APIError) Error() string { return e.Description }

// with fills the description's {name} placeholders, given as name, value pairs.
func (e *APIError) with(kv ...string) *APIError {
	d := e.Description
	for i := 0; i+1 < len(kv); i += 2 {
		d = strings.ReplaceAll(d, "{"+kv[i]+"}", kv[i+1])
	}
	return &APIError{Code: e.Code, ErrCode: e.ErrCode, Description: d}
}

// withErr fills {err} with err's text.
func (e *APIError) withErr(err error) *APIError { return e.with("err", err.Error()) }

// is reports whether err is the API error e (same JetStream code).
func (e *APIError) is(err error) bool {
	a, ok := err.(*APIError)
	return ok && a.ErrCode == e.ErrCode
}

// apiErr turns any error into an API error: an *APIError as it is, anything else as the
// generic 500 the reference answers with for unexpected failures.
func apiErr(err error, wrap *APIError) *APIError {
	if a, ok := err.(*APIError); ok {
		return a
	}
	return wrap.withErr(err)
}
