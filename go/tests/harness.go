// Package tests starts the real servers the Go package is tested on: a redis-server (or
// valkey-server) with the module, a plain one, and a 3-master Redis Cluster, each on free
// loopback ports in a directory of its own, stopped when the test ends.
//
// REDIS_SERVER names the server binary (default redis-server); RATELIMIT_MODULE the module
// (default ../../target/debug/libratelimit.so, built by `make build`).
package tests

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hang is how long a server may take to start or a cluster to agree before the test fails:
// long, since a busy machine is slow, and no result depends on it.
const Hang = 60 * time.Second

// Server is a running server.
type Server struct {
	Addr string
	Port int
	Dir  string
	cmd  *exec.Cmd
}

// serverBinary is REDIS_SERVER, or redis-server when it is not set. Set but empty is a
// mistake of the caller (a path that did not resolve): no test may run on another server.
func serverBinary(t testing.TB) string {
	s, set := os.LookupEnv("REDIS_SERVER")
	if !set {
		return "redis-server"
	}
	if s == "" {
		t.Fatal("REDIS_SERVER is set but empty")
	}
	return s
}

// ModulePath is the module the servers load.
func ModulePath(t testing.TB) string {
	path := os.Getenv("RATELIMIT_MODULE")
	if path == "" {
		path = "../../target/debug/libratelimit.so"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no module at %s (make build, or set RATELIMIT_MODULE): %v", abs, err)
	}
	return abs
}

// freePort is a free loopback port any server can take, a cluster node included: at most
// 55535 (a node's bus port is 10 000 above its own, and the server refuses a port beyond that),
// with that bus port free too. The kernel's own pick (port 0) comes from the ephemeral range, up
// to 60999, and in sequence: once above 55535, every retry would be too.
func freePort(t testing.TB) int {
	for i := 0; i < 200; i++ {
		port := 20000 + rand.Intn(55536-20000)
		if bindable(port) && bindable(port+10000) {
			return port
		}
	}
	t.Fatal("no free loopback port from 20000 to 55535 with its bus port free")
	return 0
}

func bindable(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// Start starts a server with the module (loaded with debug-commands yes) unless plain, with
// extra server options.
func Start(t testing.TB, plain bool, extra ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", "server.log"}
		if !plain {
			args = append(args, "--loadmodule", ModulePath(t), "debug-commands", "yes")
		}
		args = append(args, extra...)
		cmd := exec.Command(serverBinary(t), args...)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", serverBinary(t), err)
		}
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, Dir: dir, cmd: cmd}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if s.waitReady(exited) {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return s
		}
		_ = cmd.Process.Kill()
		<-exited
		// The port was taken between our probe and the server's bind: another one.
		if attempt == 5 {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("the server never answered on %s:\n%s", s.Addr, log)
		}
	}
}

func (s *Server) waitReady(exited <-chan struct{}) bool {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(Hang)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if rdb.Ping(context.Background()).Err() == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Client is a go-redis client of the server.
func (s *Server) Client(t testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartCluster starts three masters with the module, joins them with
// `redis-cli --cluster create` and waits until every node reports the cluster ok.
func StartCluster(t testing.TB) []*Server {
	t.Helper()
	var nodes []*Server
	var addrs []string
	for i := 0; i < 3; i++ {
		n := Start(t, false, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		nodes = append(nodes, n)
		addrs = append(addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	deadline := time.Now().Add(Hang)
	for _, n := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never reached cluster_state:ok: %v\n%s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = rdb.Close()
	}
	return nodes
}

// ErrorCounts is the server's INFO errorstats: error code -> count.
func ErrorCounts(t testing.TB, s *Server) map[string]int {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "errorstat_") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimPrefix(line, "errorstat_"), ":count=")
		n, _ := strconv.Atoi(value)
		counts[name] = n
	}
	return counts
}
