// Package redis_rate is github.com/go-redis/redis_rate/v10's API on the ratelimit module's
// RATELIMIT.GCRAALLOW: the same NewLimiter, Allow, AllowN, AllowAtMost, Reset, Limit and
// Result, the same keys ("rate:" + key), one native command per call instead of a Lua script.
// A service switches by changing its import path (docs/go.md).
//
// The arithmetic is exact: integer microseconds on the server's clock, where redis_rate's
// script counts float seconds since 2017 and, at today's dates, reports 8 tokens left where
// 9 are.
package redis_rate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisPrefix is redis_rate's: a key its script wrote is the key read here, and Reset deletes
// the same key.
const redisPrefix = "rate:"

// command is the module's command: key burst tokens_per_period period [TOKENS n | ATMOST n].
const command = "RATELIMIT.GCRAALLOW"

// rediser is what every go-redis client (Client, ClusterClient, Ring, UniversalClient, Conn)
// has: Process sends a command with its key position set, so a ClusterClient and a Ring send
// it to the node that owns the key.
type rediser interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Limit is Rate events every Period, at most Burst at once (redis_rate's meaning: Burst is the
// bucket's size; 0 admits nothing).
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, periodName(l.Period), l.Burst)
}

func (l Limit) IsZero() bool {
	return l == Limit{}
}

func periodName(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate events a second, rate at once.
func PerSecond(rate int) Limit {
	return Limit{Rate: rate, Period: time.Second, Burst: rate}
}

// PerMinute is rate events a minute, rate at once.
func PerMinute(rate int) Limit {
	return Limit{Rate: rate, Period: time.Minute, Burst: rate}
}

// PerHour is rate events an hour, rate at once.
func PerHour(rate int) Limit {
	return Limit{Rate: rate, Period: time.Hour, Burst: rate}
}

// Limiter controls how frequently events are allowed to happen.
type Limiter struct {
	rdb rediser
}

// NewLimiter returns a Limiter on rdb, a go-redis client of any kind.
func NewLimiter(rdb rediser) *Limiter {
	return &Limiter{rdb: rdb}
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN reports whether n events may happen now, and takes them if so. n = 0 only looks (it
// writes nothing); a negative n gives -n events back.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	if n == 1 {
		return l.call(ctx, key, limit)
	}
	return l.call(ctx, key, limit, "TOKENS", n)
}

// AllowAtMost takes up to n events, as many as may happen now, and reports how many it took.
// A negative n gives -n events back, as AllowN does.
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	if n < 0 {
		return l.AllowN(ctx, key, limit, n)
	}
	return l.call(ctx, key, limit, "ATMOST", n)
}

// Reset deletes the key's state: the next call finds a full bucket.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	cmd := redis.NewIntCmd(ctx, "DEL", redisPrefix+key)
	cmd.SetFirstKeyPos(1)
	_ = l.rdb.Process(ctx, cmd)
	return cmd.Err()
}

func (l Limiter) call(ctx context.Context, key string, limit Limit, take ...interface{}) (*Result, error) {
	args := make([]interface{}, 0, 7)
	args = append(args, command, redisPrefix+key, limit.Burst, limit.Rate,
		strconv.FormatFloat(limit.Period.Seconds(), 'f', -1, 64))
	args = append(args, take...)
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(1)
	_ = l.rdb.Process(ctx, cmd)
	values, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(values) != 5 {
		return nil, fmt.Errorf("redis_rate: %s replied %d values, not 5", command, len(values))
	}
	return &Result{
		Limit:      limit,
		Allowed:    int(values[0]),
		Remaining:  int(values[2]),
		RetryAfter: micros(values[3]),
		ResetAfter: micros(values[4]),
	}, nil
}

// micros is a reply's microseconds as a Duration; -1 stays -1 (redis_rate's "not limited").
func micros(us int64) time.Duration {
	if us == -1 {
		return -1
	}
	return time.Duration(us) * time.Microsecond
}

type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now (taken by this call).
	Allowed int

	// Remaining is the number of events that could still happen now; 0 when limited.
	Remaining int

	// RetryAfter is the time until this request would be permitted (for AllowAtMost, one
	// event); -1 unless the rate limit has been exceeded.
	RetryAfter time.Duration

	// ResetAfter is the time until the key returns to its initial state: until Remaining
	// equals Limit.Burst again.
	ResetAfter time.Duration
}
