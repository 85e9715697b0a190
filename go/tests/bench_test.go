package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	original "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"ratelimit/redis_rate"
)

// The bench (make bench-go): server CPU per call and client latency of this package (one
// RATELIMIT.GCRAALLOW per call) beside go-redis/redis_rate v10.0.1's own script, and beside
// the other way to answer redis_rate from the module without a command of its own (GCRA, GET
// and TIME in one MULTI, the client computing the times), on one server, in one run,
// interleaved round by round. Runs only with RATELIMIT_BENCH=1; prints a Markdown table.
func TestBench(t *testing.T) {
	if os.Getenv("RATELIMIT_BENCH") != "1" {
		t.Skip("RATELIMIT_BENCH=1 (make bench-go) runs the bench")
	}
	server := Start(t, false)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr, PoolSize: benchWorkers})
	defer rdb.Close()
	version, _ := rdb.Info(ctx, "server").Result()
	t.Logf("server: %s", infoField(version, "redis_version")+" "+infoField(version, "server_name"))
	ours := redis_rate.NewLimiter(rdb)
	theirs := original.NewLimiter(rdb)
	contenders := []contender{
		{"this package (RATELIMIT.GCRAALLOW)", "ours", func(key string, l redis_rate.Limit) error {
			_, err := ours.Allow(ctx, key, l)
			return err
		}},
		{"go-redis/redis_rate v10.0.1 (Lua script)", "theirs", func(key string, l redis_rate.Limit) error {
			_, err := theirs.Allow(ctx, key, original.Limit{Rate: l.Rate, Burst: l.Burst, Period: l.Period})
			return err
		}},
		{"GCRA + GET + TIME in MULTI", "multi", func(key string, l redis_rate.Limit) error {
			k := "rate:" + key
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "GCRA", k, l.Burst-1, l.Rate, strconv.FormatFloat(l.Period.Seconds(), 'f', -1, 64))
				p.Get(ctx, k)
				p.Time(ctx)
				return nil
			})
			if err == redis.Nil {
				err = nil
			}
			return err
		}},
	}
	workloads := []workload{
		{"hot key", redis_rate.PerSecond(1_000_000), 1},
		{"200 000 keys at random", redis_rate.PerMinute(100), 200_000},
	}
	calls := envInt("RATELIMIT_BENCH_CALLS", 20_000)
	rounds := envInt("RATELIMIT_BENCH_ROUNDS", 3)
	var table strings.Builder
	fmt.Fprintf(&table, "\n| workload | client | server CPU µs/call | commandstats µs/call | p50 µs | p99 µs | CPU vs redis_rate |\n|---|---|---|---|---|---|---|\n")
	for _, w := range workloads {
		for _, c := range contenders {
			if w.keys > 1 {
				prefill(t, c, w)
			}
		}
		results := make([]measure, len(contenders))
		for r := 0; r < rounds; r++ {
			for i, c := range contenders {
				results[i].add(run(t, rdb, c, w, calls))
			}
		}
		base := results[1].cpuPerCall()
		for i, c := range contenders {
			m := results[i]
			fmt.Fprintf(&table, "| %s | %s | %.1f | %.1f | %d | %d | %.2fx |\n", w.name, c.name,
				m.cpuPerCall(), m.statPerCall(), m.percentile(50), m.percentile(99), m.cpuPerCall()/base)
		}
	}
	t.Log(table.String())
}

const benchWorkers = 4

type contender struct {
	name, prefix string
	allow        func(key string, l redis_rate.Limit) error
}

type workload struct {
	name  string
	limit redis_rate.Limit
	keys  int
}

type measure struct {
	calls     int
	cpuUs     float64
	statUs    float64
	latencies []time.Duration
}

func (m *measure) add(o measure) {
	m.calls += o.calls
	m.cpuUs += o.cpuUs
	m.statUs += o.statUs
	m.latencies = append(m.latencies, o.latencies...)
}

func (m *measure) cpuPerCall() float64  { return m.cpuUs / float64(m.calls) }
func (m *measure) statPerCall() float64 { return m.statUs / float64(m.calls) }

func (m *measure) percentile(p int) int64 {
	sort.Slice(m.latencies, func(i, j int) bool { return m.latencies[i] < m.latencies[j] })
	i := len(m.latencies) * p / 100
	if i >= len(m.latencies) {
		i = len(m.latencies) - 1
	}
	return m.latencies[i].Microseconds()
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// serverCPU is the server's used CPU (user + sys) in µs, and the total usec INFO commandstats
// gives the top-level commands of the contenders (evalsha, exec, ratelimit.gcraallow).
func serverCPU(t *testing.T, rdb *redis.Client) (cpu, stat float64) {
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, _ := strconv.ParseFloat(infoField(info, f), 64)
		cpu += v * 1e6
	}
	for _, cmd := range []string{"evalsha", "eval", "exec", "ratelimit.gcraallow"} {
		line := infoField(info, "cmdstat_"+cmd)
		for _, part := range strings.Split(line, ",") {
			if v, ok := strings.CutPrefix(part, "usec="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				stat += n
			}
		}
	}
	return cpu, stat
}

// prefill makes every key of the workload exist, so the random run measures calls on existing
// keys (and the server holds 200 000 limiters of each contender).
func prefill(t *testing.T, c contender, w workload) {
	var wg sync.WaitGroup
	errs := make(chan error, benchWorkers)
	for g := 0; g < benchWorkers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < w.keys; i += benchWorkers {
				if err := c.allow(c.prefix+":"+strconv.Itoa(i), w.limit); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// run makes calls calls of c on w from benchWorkers clients, each timing its calls.
func run(t *testing.T, rdb *redis.Client, c contender, w workload, calls int) measure {
	cpu0, stat0 := serverCPU(t, rdb)
	var mu sync.Mutex
	var latencies []time.Duration
	var wg sync.WaitGroup
	var failure error
	for g := 0; g < benchWorkers; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			mine := make([]time.Duration, 0, calls/benchWorkers)
			for i := 0; i < calls/benchWorkers; i++ {
				key := c.prefix + ":0"
				if w.keys > 1 {
					key = c.prefix + ":" + strconv.Itoa(rng.Intn(w.keys))
				}
				start := time.Now()
				err := c.allow(key, w.limit)
				mine = append(mine, time.Since(start))
				if err != nil {
					mu.Lock()
					failure = err
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}(int64(g))
	}
	wg.Wait()
	if failure != nil {
		t.Fatalf("%s: %v", c.name, failure)
	}
	cpu1, stat1 := serverCPU(t, rdb)
	return measure{calls: len(latencies), cpuUs: cpu1 - cpu0, statUs: stat1 - stat0, latencies: latencies}
}
