// Package app is a net/http service limited per user with the redis_rate package on the
// module, as a service written for go-redis/redis_rate is: nothing in it but the import path
// says which one it runs on. It answers 429 Too Many Requests with Retry-After once a user is
// over the limit, and X-RateLimit-Limit, -Remaining and -Reset (seconds) on every answer.
package app

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"ratelimit/redis_rate"
)

// New serves next behind limit, per X-User header, on rdb (a Client or a ClusterClient).
func New(rdb redis.UniversalClient, limit redis_rate.Limit, next http.Handler) http.Handler {
	limiter := redis_rate.NewLimiter(rdb)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := limiter.Allow(r.Context(), "user:"+r.Header.Get("X-User"), limit)
		if err != nil {
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit.Burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
		h.Set("X-RateLimit-Reset", seconds(res.ResetAfter))
		if res.Allowed == 0 {
			h.Set("Retry-After", seconds(res.RetryAfter))
			http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// seconds is d in whole seconds, rounded up: a client that waits this long is never early.
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
