// Per-user rate limiting for net/http with one RATELIMIT.ALLOW call per request.
//
//	REDIS_URL=redis://127.0.0.1:6379 PORT=8080 go run .
//	curl -i -H 'X-User: alice' http://127.0.0.1:8080/
//
// With REDIS_CLUSTER=host:port[,host:port...] it uses a Redis Cluster seeded with those nodes
// instead (see do for how each command reaches the node that serves its key).
//
// Requests are keyed by the X-User header (use your authenticated user id in a real app), or by
// the remote address. Each user's limiter is created by its first request (RATE) and removed by
// Redis once the user is idle for a whole interval (KEEPALIVE), so no setup call is needed.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	limit            = 10     // requests per user ...
	intervalMs       = 60_000 // ... per minute
	reportsTimeoutMs = 1_000  // /report waits at most this long for its turn
	dayMs            = 86_400_000
)

// searchLimits are /search's own limits per user, taken together with RATELIMIT.ALLOWALL.
var searchLimits = []struct {
	name           string
	rate, interval int64
}{{"minute", 3, 60_000}, {"day", 100, dayMs}}

// seconds is milliseconds as whole seconds, rounded up: a client that waits this long is never
// early.
func seconds(ms int64) string { return strconv.FormatInt((ms+999)/1000, 10) }

func userOf(r *http.Request) string {
	if user := r.Header.Get("X-User"); user != "" {
		return user
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return host
}

// do runs a module command whose first key is args[keyPos]. A ClusterClient routes a raw Do by
// the first key position COMMAND gives, or by args[1] when it has none: right for the module's
// one-key commands, wrong for RATELIMIT.ALLOWALL, whose keys come after numkeys (keyPos 2).
// Naming the position sends every command straight to its key's master; a Client ignores it.
func do(ctx context.Context, rdb redis.UniversalClient, keyPos int8, args ...interface{}) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(keyPos)
	_ = rdb.Process(ctx, cmd)
	return cmd
}

// RateLimit is middleware: 429 with Retry-After once a user is over the limit, X-RateLimit-*
// always. KEEPALIVE = interval: an idle limiter expires only when all its permits have.
func RateLimit(rdb redis.UniversalClient, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply, err := do(r.Context(), rdb, 1, "RATELIMIT.ALLOW", "api:user:"+userOf(r),
			"RATE", limit, intervalMs, "OVERALL", "KEEPALIVE", intervalMs).Result()
		m, ok := reply.(map[interface{}]interface{}) // RESP3, go-redis' default: a map
		if err != nil || !ok {
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		field := func(name string) int64 { n, _ := m[name].(int64); return n }
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.FormatInt(field("limit"), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(field("remaining"), 10))
		h.Set("X-RateLimit-Reset", seconds(field("reset_after")))
		if field("allowed") == 0 {
			h.Set("Retry-After", seconds(field("retry_after")))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// acquire runs RATELIMIT.ACQUIRE: it waits in Redis, first come first served, up to timeoutMs.
// It returns -1 once the permit is ours, else the wait hint in ms. waiters must be a client whose
// ReadTimeout outlasts timeoutMs and that never retries: go-redis' defaults (5 s, 3 retries on
// a timeout) would give up and resend the command, queueing a new waiter each time.
func acquire(ctx context.Context, waiters redis.UniversalClient, key string, timeoutMs int64) (int64, error) {
	wait, err := do(ctx, waiters, 1, "RATELIMIT.ACQUIRE", key, "TIMEOUT", timeoutMs,
		"RATE", 1, 60_000, "KEEPALIVE", 60_000).Int64()
	if err == redis.Nil {
		return -1, nil
	}
	return wait, err
}

// connect gives a client of REDIS_CLUSTER's cluster if set, else of the server at REDIS_URL, and
// a second one for ACQUIRE: a pool of its own (each blocked ACQUIRE holds its connection until it
// returns) whose reads outlast TIMEOUT and that never retries.
func connect() (rdb, waiters redis.UniversalClient) {
	waitTimeout := reportsTimeoutMs*time.Millisecond + 5*time.Second
	if seeds := os.Getenv("REDIS_CLUSTER"); seeds != "" {
		opt := &redis.ClusterOptions{Addrs: strings.Split(seeds, ",")}
		waitOpt := *opt
		waitOpt.ReadTimeout = waitTimeout
		waitOpt.MaxRetries = -1
		return redis.NewClusterClient(opt), redis.NewClusterClient(&waitOpt)
	}
	opt, err := redis.ParseURL(getenv("REDIS_URL", "redis://127.0.0.1:6379"))
	if err != nil {
		log.Fatal(err)
	}
	waitOpt := *opt
	waitOpt.ReadTimeout = waitTimeout
	waitOpt.MaxRetries = -1
	return redis.NewClient(opt), redis.NewClient(&waitOpt)
}

// allowAll runs RATELIMIT.ALLOWALL: a permit from each of the user's search limits, or from none
// of them. ALLOWALL takes no RATE: the limiters are made with SETRATE ... NX when it says they are
// missing. Their keys share a hash tag, hence a slot in a cluster; they start at args[2].
func allowAll(ctx context.Context, rdb redis.UniversalClient, user string) (map[interface{}]interface{}, error) {
	args := []interface{}{"RATELIMIT.ALLOWALL", len(searchLimits)}
	for _, limit := range searchLimits {
		args = append(args, "{search:"+user+"}:"+limit.name)
	}
	reply, err := do(ctx, rdb, 2, args...).Result()
	if err != nil && strings.Contains(err.Error(), "not initialized") {
		for i, limit := range searchLimits {
			err := do(ctx, rdb, 1, "RATELIMIT.SETRATE", args[2+i], limit.rate, limit.interval,
				"KEEPALIVE", dayMs, "NX").Err()
			if err != nil {
				return nil, err
			}
		}
		reply, err = do(ctx, rdb, 2, args...).Result()
	}
	if err != nil {
		return nil, err
	}
	m, ok := reply.(map[interface{}]interface{}) // RESP3: a map
	if !ok {
		return nil, fmt.Errorf("RATELIMIT.ALLOWALL replied %v", reply)
	}
	return m, nil
}

func main() {
	rdb, waiters := connect()

	mux := http.NewServeMux()
	mux.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		// Expensive reports: one a minute across all users; wait briefly for a turn.
		wait, err := acquire(r.Context(), waiters, "reports", reportsTimeoutMs)
		switch {
		case err != nil:
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		case wait >= 0:
			w.Header().Set("Retry-After", seconds(wait))
			http.Error(w, "reports are busy", http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "report for %s\n", userOf(r))
		}
	})
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		m, err := allowAll(r.Context(), rdb, userOf(r))
		if err != nil {
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		if n, _ := m["allowed"].(int64); n == 0 {
			retry, _ := m["retry_after"].(int64)
			w.Header().Set("Retry-After", seconds(retry))
			http.Error(w, fmt.Sprintf("search limit reached: %v", m["limited_by"]),
				http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(w, "results for %s\n", userOf(r))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s\n", userOf(r))
	})

	addr := "127.0.0.1:" + getenv("PORT", "8080")
	log.Printf("listening on http://%s", addr)
	log.Fatal(http.ListenAndServe(addr, RateLimit(rdb, mux)))
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
