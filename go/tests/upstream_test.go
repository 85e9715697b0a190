package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// redis_rate's own test files are read from its module as the Go module proxy serves it, at the
// version this module's go.mod requires and checked against go.sum's hash (UPSTREAM.md): they are
// never copied into the repository.
const (
	upstreamModule = "github.com/go-redis/redis_rate/v10"
	originalPath   = `"github.com/go-redis/redis_rate/v10"`
	ourPath        = `"ratelimit/redis_rate"`
	// Both files connect to port 6379 (`":6379"`, `"localhost:6379"`).
	defaultPort = `:6379"`
)

// upstreamTests are the tests and examples redis_rate's test files hold; each must run.
var upstreamTests = []string{
	"ExampleNewLimiter",
	"TestAllow",
	"TestAllowAtMost",
	"TestAllowAtMost_IncrementZero",
	"TestAllowN_IncrementZero",
	"TestRetryAfter",
}

// prepare copies redis_rate's test files into dir, a package of this module, with the mechanical
// step and nothing else: the port replaced by the server's, and, if swap, the import path of
// the package under test replaced by ours.
func prepare(t *testing.T, dir string, port int, swap bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pinned := upstreamDir(t)
	for _, name := range []string{"rate_test.go", "example_test.go"} {
		src, err := os.ReadFile(filepath.Join(pinned, name))
		if err != nil {
			t.Fatal(err)
		}
		out := bytes.ReplaceAll(src, []byte(defaultPort), []byte(fmt.Sprintf(`:%d"`, port)))
		if n := bytes.Count(src, []byte(defaultPort)); n != 1 {
			t.Fatalf("%s: %d addresses to point at the server, not 1: the pin changed", name, n)
		}
		if swap {
			if n := bytes.Count(src, []byte(originalPath)); n != 1 {
				t.Fatalf("%s: %d imports of redis_rate, not 1: the pin changed", name, n)
			}
			out = bytes.ReplaceAll(out, []byte(originalPath), []byte(ourPath))
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// upstreamDir downloads redis_rate's module (if the module cache lacks it) at the version go.mod
// requires, verified against go.sum, and returns its directory in the module cache.
func upstreamDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", upstreamModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", upstreamModule, err, stderr.String())
	}
	var module struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &module); err != nil || module.Error != "" || module.Dir == "" {
		t.Fatalf("go mod download %s: no module directory (%v %s): %s", upstreamModule, err, module.Error, out)
	}
	return module.Dir
}

// goTest runs `go test -json` in dir and returns each test's outcome (pass, fail, skip) and the
// output of the failed ones.
func goTest(t *testing.T, dir string) (map[string]string, string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-json", ".")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // a failing test exits 1; the outcomes say which
	outcomes := map[string]string{}
	output := map[string]*strings.Builder{}
	scanner := bufio.NewScanner(&stdout)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var event struct{ Action, Test, Output string }
		if json.Unmarshal(scanner.Bytes(), &event) != nil || event.Test == "" {
			continue
		}
		switch event.Action {
		case "pass", "fail", "skip":
			outcomes[event.Test] = event.Action
		case "output":
			if output[event.Test] == nil {
				output[event.Test] = &strings.Builder{}
			}
			output[event.Test].WriteString(event.Output)
		}
	}
	// Of a failed test, the lines that say what differed.
	var failed strings.Builder
	for _, name := range names(outcomes) {
		if outcomes[name] != "fail" {
			continue
		}
		for _, line := range strings.Split(output[name].String(), "\n") {
			trimmed := strings.TrimSpace(line)
			for _, mark := range []string{"Error Trace:", "expected:", "actual  :", "allowed "} {
				if strings.HasPrefix(trimmed, mark) {
					fmt.Fprintf(&failed, "  %s: %s\n", name, trimmed)
				}
			}
		}
	}
	if len(outcomes) == 0 {
		t.Fatalf("go test in %s ran nothing:\n%s\n%s", dir, stdout.String(), stderr.String())
	}
	return outcomes, failed.String()
}

func names(m map[string]string) []string {
	var out []string
	for name := range m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// redis_rate's own tests, on this package and the module: every one passes.
func TestRedisRateSuiteOnTheModule(t *testing.T) {
	server := Start(t, false)
	info, err := server.Client(t).Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on server_name=%q redis_version=%s valkey_version=%q", infoField(info, "server_name"),
		infoField(info, "redis_version"), infoField(info, "valkey_version"))
	dir := filepath.Join("_run", "module")
	prepare(t, dir, server.Port, true)
	outcomes, failed := goTest(t, dir)
	if got := names(outcomes); strings.Join(got, " ") != strings.Join(upstreamTests, " ") {
		t.Fatalf("ran %v, not %v", got, upstreamTests)
	}
	for _, name := range upstreamTests {
		if outcomes[name] != "pass" {
			t.Errorf("%s: %s", name, outcomes[name])
		}
	}
	if failed != "" {
		t.Log(failed)
	}
}

// The referee: the same files on redis_rate v10.0.1 itself and a plain server. Its script
// counts float seconds since 2017, which at today's dates loses enough precision to fail most
// of its own tests; they are reported, not required to pass (nor to fail: that depends on
// the date).
func TestRedisRateSuiteOnRedisRateItself(t *testing.T) {
	server := Start(t, true)
	dir := filepath.Join("_run", "referee")
	prepare(t, dir, server.Port, false)
	outcomes, failed := goTest(t, dir)
	if got := names(outcomes); strings.Join(got, " ") != strings.Join(upstreamTests, " ") {
		t.Fatalf("ran %v, not %v", got, upstreamTests)
	}
	failures := 0
	for _, name := range upstreamTests {
		if outcomes[name] == "fail" {
			failures++
		}
		t.Logf("redis_rate v10.0.1 on a plain server: %s %s", name, outcomes[name])
	}
	t.Logf("redis_rate v10.0.1 fails %d of its %d tests and examples here:\n%s",
		failures, len(upstreamTests), failed)
}
