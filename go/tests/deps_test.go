package tests

// The packages the pinned redis_rate tests import once copied into _run/ (which `go mod tidy`
// does not read): the original redis_rate (the referee), testify, and this package.
import (
	_ "github.com/go-redis/redis_rate/v10"
	_ "github.com/stretchr/testify/require"
	_ "ratelimit/redis_rate"
)
