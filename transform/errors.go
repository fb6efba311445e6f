package transform

import (
	"errors"
	"fmt"
)

// The texts are nats-server's: config loading and the JetStream API report
// them to users, who compare them with what nats-server says.
var (
	ErrBadSubject   = errors.New("invalid subject")
	ErrNoTransforms = errors.New("no matching transforms available")

	ErrInvalidMappingDestination               = errors.New("invalid mapping destination")
	ErrInvalidMappingDestinationSubject        = fmt.Errorf("%w: invalid transform", ErrInvalidMappingDestination)
	ErrMappingDestinationNotUsingAllWildcards  = fmt.Errorf("%w: not using all of the token wildcard(s)", ErrInvalidMappingDestination)
	ErrUnknownMappingDestinationFunction       = fmt.Errorf("%w: unknown function", ErrInvalidMappingDestination)
	ErrMappingDestinationIndexOutOfRange       = fmt.Errorf("%w: wildcard index out of range", ErrInvalidMappingDestination)
	ErrMappingDestinationNotEnoughArgs         = fmt.Errorf("%w: not enough arguments passed to the function", ErrInvalidMappingDestination)
	ErrMappingDestinationInvalidArg            = fmt.Errorf("%w: function argument is invalid or in the wrong format", ErrInvalidMappingDestination)
	ErrMappingDestinationTooManyArgs           = fmt.Errorf("%w: too many arguments passed to the function", ErrInvalidMappingDestination)
	ErrMappingDestinationNotSupportedForImport = fmt.Errorf("%w: the only mapping function allowed for import transforms is {{Wildcard()}}", ErrInvalidMappingDestination)
)

// DestinationError is a destination template rejected because of one token
// (or the whole template): its text is "<reason> in <token>", as nats-server
// prints it. errors.Is matches both the reason and ErrInvalidMappingDestination.
type DestinationError struct {
	Token  string
	Reason error
}

func (e *DestinationError) Error() string {
	if e.Token == "" {
		return e.Reason.Error()
	}
	return e.Reason.Error() + " in " + e.Token
}

func (e *DestinationError) Unwrap() error { return e.Reason }

func destErr(token string, reason error) error {
	return &DestinationError{Token: token, Reason: reason}
}
