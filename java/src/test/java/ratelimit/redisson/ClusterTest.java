package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;

/**
 * The library on a real Redis Cluster (three masters with the module): Redisson routes each of
 * its commands by the key, so every call goes straight to the node that owns the limiter's slot
 * (no node answers MOVED or ASK), per-user limiters spread over the nodes, and a blocking wait is
 * served on its key's node.
 */
class ClusterTest {
    private static final int NODES = 3;
    private static final int SLOTS = 16384;

    private static final List<RedisServer> servers = new ArrayList<>();
    private static final List<Raw> nodes = new ArrayList<>();
    private static RedissonClient redisson;
    private static RedissonClient redisson2;

    @BeforeAll
    static void startCluster() {
        for (int i = 0; i < NODES; i++) {
            RedisServer server = RedisServer.withModule("--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "60000");
            servers.add(server);
            nodes.add(new Raw(server.port));
        }
        for (int i = 0; i < NODES; i++) {
            long first = (long) SLOTS * i / NODES;
            long last = (long) SLOTS * (i + 1) / NODES - 1;
            assertEquals("OK", nodes.get(i).call("CLUSTER", "ADDSLOTSRANGE", first, last));
        }
        for (int i = 1; i < NODES; i++) {
            assertEquals("OK", nodes.get(0).call("CLUSTER", "MEET", "127.0.0.1", servers.get(i).port));
        }
        for (Raw node : nodes) {
            await("the cluster ok on every node", () -> "ok".equals(clusterInfo(node, "cluster_state"))
                    && String.valueOf(NODES).equals(clusterInfo(node, "cluster_known_nodes"))
                    && String.valueOf(SLOTS).equals(clusterInfo(node, "cluster_slots_ok")));
        }
        redisson = client();
        redisson2 = client();
    }

    private static RedissonClient client() {
        Config config = new Config();
        config.setThreads(4);
        config.setNettyThreads(4);
        ClusterServersConfig cluster = config.useClusterServers();
        for (RedisServer server : servers) {
            cluster.addNodeAddress(server.address());
        }
        return Redisson.create(config);
    }

    @AfterAll
    static void stopCluster() {
        if (redisson != null) {
            redisson.shutdown();
        }
        if (redisson2 != null) {
            redisson2.shutdown();
        }
        nodes.forEach(Raw::close);
        servers.forEach(RedisServer::close);
    }

    /** Each test starts on empty nodes, the real clock and fresh command and error counts. */
    @BeforeEach
    void emptyNodes() {
        for (Raw node : nodes) {
            assertEquals("OK", node.rl("DEBUG", "REALCLOCK"));
            assertEquals("OK", node.call("FLUSHALL"));
            assertEquals("OK", node.call("CONFIG", "RESETSTAT"));
        }
    }

    private static long keys() {
        return nodes.stream().mapToLong(n -> n.integer("DBSIZE")).sum();
    }

    private static String clusterInfo(Raw node, String field) {
        for (String line : String.valueOf(node.call("CLUSTER", "INFO")).split("\r\n")) {
            if (line.startsWith(field + ":")) {
                return line.substring(field.length() + 1);
            }
        }
        return null;
    }

    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never happened: " + what);
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    private static long blockedClients() {
        return nodes.stream().mapToLong(Raw::blockedClients).sum();
    }

    /** No node redirected a command: every one went to the owner of its key's slot. */
    private static void assertNoRedirects() {
        for (int i = 0; i < NODES; i++) {
            for (String redirect : List.of("MOVED", "ASK", "CROSSSLOT")) {
                assertNull(nodes.get(i).info("errorstats", "errorstat_" + redirect),
                        "node " + i + " answered " + redirect);
            }
        }
    }

    @Test
    void everyRateMethodGoesStraightToItsKeysNode() {
        int users = 30;
        for (int u = 0; u < users; u++) {
            NativeRateLimiter l = NativeRateLimiters.get(redisson, "limit:user:" + u);
            assertTrue(l.trySetRate(RateType.OVERALL, 2, Duration.ofMinutes(1)));
            assertTrue(l.tryAcquire());
            assertTrue(l.tryAcquire());
            assertFalse(l.tryAcquire());
            assertEquals(0, l.availablePermits());
            assertEquals(2, l.getConfig().getRate());
            l.release(1);
            assertEquals(1, l.availablePermits());
            assertTrue(l.tryAcquire(1, Duration.ofSeconds(30)), "a free permit, taken at once");
            assertFalse(l.tryAcquire(1, Duration.ofMillis(20)), "a wait in the server that runs out");
        }
        RRateLimiter perClient = NativeRateLimiters.get(redisson, "{tenant:7}:api");
        assertTrue(perClient.trySetRate(RateType.PER_CLIENT, 1, Duration.ofMinutes(1)));
        assertTrue(perClient.tryAcquire());
        assertFalse(perClient.tryAcquire());
        assertTrue(NativeRateLimiters.get(redisson2, "{tenant:7}:api").tryAcquire(), "another client's own permits");

        int served = 0;
        for (Raw node : nodes) {
            long calls = node.calls("ratelimit.tryacquire") + node.calls("ratelimit.acquire");
            assertEquals(0, node.scripts(), "a Redisson script ran: the module was not used");
            if (calls > 0) {
                served++;
            }
        }
        assertEquals(NODES, served, "per-user limiters are spread over every node");
        assertNoRedirects();
    }

    @Test
    void aWaiterIsServedOnItsKeysNode() throws Exception {
        for (Raw node : nodes) {
            assertEquals("OK", node.rl("DEBUG", "SETCLOCK", 1767225600000L));
        }
        List<RFuture<Void>> waiters = new ArrayList<>();
        for (int j = 0; j < 6; j++) {
            RRateLimiter l = NativeRateLimiters.get(redisson, "jobs:" + j);
            assertTrue(l.trySetRate(RateType.OVERALL, 1, Duration.ofSeconds(1)));
            assertTrue(l.tryAcquire());
            waiters.add(l.acquireAsync());
            final int blocked = j + 1;
            await(blocked + " waiters blocked", () -> blockedClients() == blocked);
        }
        for (RFuture<Void> w : waiters) {
            assertFalse(w.isDone(), "served without a permit");
        }
        for (Raw node : nodes) {
            node.rl("DEBUG", "ADVANCE", 1000);
        }
        for (RFuture<Void> w : waiters) {
            w.toCompletableFuture().get(60, TimeUnit.SECONDS);
        }
        await("no waiter left", () -> blockedClients() == 0);
        assertNoRedirects();
    }

    /**
     * The bound on the waits in the server is the client's, over every master: with a bound of
     * 2, six callers on limiters spread over the nodes hold 2 connections, the other four wait
     * in the JVM, the client's other calls are answered, and all six are served once permits free.
     */
    @Test
    void theWaitsInTheServerAreBoundedPerClientOverEveryNode() throws Exception {
        for (Raw node : nodes) {
            assertEquals("OK", node.rl("DEBUG", "SETCLOCK", 1767225600000L));
        }
        RedissonClient client = client();
        try {
            assertEquals(16, NativeRateLimiters.maxWaitsInServer(client), "a quarter of 64 per master");
            NativeRateLimiters.setMaxWaitsInServer(client, 2);
            List<RFuture<Void>> waiters = new ArrayList<>();
            for (int j = 0; j < 6; j++) {
                RRateLimiter l = NativeRateLimiters.get(client, "bound:" + j);
                // An hour's permit: the asks of the callers queued in the JVM (refused, the clock
                // frozen) come again only in an hour, so each caller goes to the server by ACQUIRE.
                assertTrue(l.trySetRate(RateType.OVERALL, 1, Duration.ofHours(1)));
                assertTrue(l.tryAcquire());
                waiters.add(l.acquireAsync());
            }
            WaitGate gate = NativeRateLimiters.gate(client);
            await("2 waits in the servers, 4 in the JVM", () -> blockedClients() == 2 && gate.queued() == 4);
            for (int i = 0; i < 30; i++) {
                client.getBucket("other:" + i).set("v");
                assertEquals("v", client.getBucket("other:" + i).get());
            }
            for (Raw node : nodes) {
                node.rl("DEBUG", "ADVANCE", 3_600_000);
            }
            for (RFuture<Void> w : waiters) {
                w.toCompletableFuture().get(60, TimeUnit.SECONDS);
            }
            await("no waiter left", () -> blockedClients() == 0 && gate.inServer() == 0);
            // The asks (MULTI, RATELIMIT.ACQUIRE, EXEC) aside, each on its limiter's node.
            assertEquals(4, nodes.stream().mapToLong(n -> n.calls("exec")).sum(), "one ask per caller queued in the JVM");
            assertEquals(6, nodes.stream().mapToLong(n -> n.calls("ratelimit.acquire") - n.calls("exec")).sum(),
                    "one ACQUIRE per caller");
            assertNoRedirects();
        } finally {
            client.shutdown();
        }
    }

    @Test
    void objectMethodsActOnTheLimitersNode() {
        RRateLimiter l = NativeRateLimiters.get(redisson, "limit:object");
        assertTrue(l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1)));
        assertTrue(l.tryAcquire(2));
        assertTrue(l.isExists());
        assertTrue(l.expire(Duration.ofMinutes(10)));
        assertTrue(l.remainTimeToLive() > 0);
        assertEquals(3, keys(), "the hash, the value and the log, on one node");
        assertTrue(l.delete());
        assertFalse(l.isExists());
        assertEquals(0, keys());
        assertNoRedirects();
    }
}
