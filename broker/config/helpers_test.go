package config

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func isInvalidConfig(err error) bool  { return errors.Is(err, kerr.InvalidConfig) }
func isInvalidRequest(err error) bool { return errors.Is(err, kerr.InvalidRequest) }
