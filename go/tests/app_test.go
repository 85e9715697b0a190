package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	original "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"ratelimit/redis_rate"
	"ratelimit/redis_rate/tests/app"
)

// 2027-01-15 08:00:00.206 UTC on the module's debug clock, frozen: the headers are exact.
const frozenAt = 1_800_000_000_206

type answer struct {
	status                             int
	limit, remaining, reset, retryWait string
}

func get(t *testing.T, url, user string) answer {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	h := resp.Header
	return answer{resp.StatusCode, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"),
		h.Get("X-RateLimit-Reset"), h.Get("Retry-After")}
}

// debug runs RATELIMIT.DEBUG on every master (each node has its own module clock).
func debug(t *testing.T, rdb redis.UniversalClient, args ...interface{}) {
	t.Helper()
	ctx := context.Background()
	args = append([]interface{}{"RATELIMIT.DEBUG"}, args...)
	var err error
	if cluster, ok := rdb.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.Do(ctx, args...).Err()
		})
	} else {
		err = rdb.Do(ctx, args...).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// exercise runs the app on rdb: PerMinute(5) per user, so one request every 12 s; the 6th
// request of a user in the same instant is the first refused, and 12 s later one passes again.
func exercise(t *testing.T, rdb redis.UniversalClient, users int) {
	debug(t, rdb, "SETCLOCK", frozenAt)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	server := httptest.NewServer(app.New(rdb, redis_rate.PerMinute(5), hello))
	defer server.Close()
	for u := 0; u < users; u++ {
		user := fmt.Sprintf("u%d", u)
		for i := 1; i <= 5; i++ {
			want := answer{200, "5", strconv.Itoa(5 - i), strconv.Itoa(12 * i), ""}
			if got := get(t, server.URL, user); got != want {
				t.Fatalf("%s request %d: %+v, want %+v", user, i, got, want)
			}
		}
		want := answer{429, "5", "0", "60", "12"}
		if got := get(t, server.URL, user); got != want {
			t.Fatalf("%s request 6: %+v, want %+v", user, got, want)
		}
	}
	debug(t, rdb, "ADVANCE", 12_000)
	for u := 0; u < users; u++ {
		want := answer{200, "5", "0", "60", ""}
		if got := get(t, server.URL, fmt.Sprintf("u%d", u)); got != want {
			t.Fatalf("u%d 12 s later: %+v, want %+v", u, got, want)
		}
		want = answer{429, "5", "0", "60", "12"}
		if got := get(t, server.URL, fmt.Sprintf("u%d", u)); got != want {
			t.Fatalf("u%d 12 s later, again: %+v, want %+v", u, got, want)
		}
	}
}

func TestAppOnAServer(t *testing.T) {
	server := Start(t, false)
	exercise(t, server.Client(t), 3)
}

// On a 3-master cluster every call goes straight to the master of its key: no MOVED, no ASK,
// no CROSSSLOT on any node, and the users' keys are spread over all three.
func TestAppOnACluster(t *testing.T) {
	nodes := StartCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	exercise(t, rdb, 30)
	for _, n := range nodes {
		errors := ErrorCounts(t, n)
		for _, code := range []string{"MOVED", "ASK", "CROSSSLOT"} {
			if errors[code] != 0 {
				t.Errorf("%s answered %s %d times", n.Addr, code, errors[code])
			}
		}
		keys, err := n.Client(t).DBSize(context.Background()).Result()
		if err != nil || keys == 0 {
			t.Errorf("%s holds %d keys (%v): the users should spread over every master", n.Addr, keys, err)
		}
	}
}

// A service switching from go-redis/redis_rate mid-flight: the keys its script wrote (float
// seconds since 2017) are read, not taken for fresh buckets.
func TestSwitchingMidFlight(t *testing.T) {
	server := Start(t, false)
	rdb := server.Client(t)
	ctx := context.Background()
	limit := redis_rate.PerHour(10) // one token every 6 minutes: nothing refills during the test
	before := original.NewLimiter(rdb)
	for i := 0; i < 3; i++ {
		if res, err := before.Allow(ctx, "switch", original.PerHour(10)); err != nil || res.Allowed != 1 {
			t.Fatalf("redis_rate's call %d: %+v %v", i, res, err)
		}
	}
	after := redis_rate.NewLimiter(rdb)
	res, err := after.AllowN(ctx, "switch", limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 7 left, or 6 where the module's clock (whole milliseconds) is still inside the
	// millisecond of the script's last call (microseconds): never a fresh 10.
	if res.Remaining != 7 && res.Remaining != 6 {
		t.Fatalf("after 3 taken by redis_rate: %+v", res)
	}
	res, err = after.AllowN(ctx, "switch", limit, 6)
	if err != nil || res.Allowed != 6 {
		t.Fatalf("taking the rest: %+v %v", res, err)
	}
	if res, _ = after.Allow(ctx, "switch", limit); res.Allowed != 0 && res.Remaining != 0 {
		t.Fatalf("the 10th token of the hour: %+v", res)
	}
}
