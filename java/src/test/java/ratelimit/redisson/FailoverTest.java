package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;

/**
 * A failover while clients wait in the master's queue: the master becomes a replica (REPLICAOF,
 * or FAILOVER to its replica). Every waiter gets an error, none hangs, and nothing is granted for
 * them on either server.
 */
class FailoverTest {

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never happened: " + what);
            Thread.sleep(10);
        }
    }

    /** Each future fails (a hang fails the test after a minute instead). */
    private static void assertFails(RFuture<?> waiter) throws Exception {
        try {
            Object value = waiter.toCompletableFuture().get(60, TimeUnit.SECONDS);
            throw new AssertionError("the waiter was served on a server that is now a replica: " + value);
        } catch (ExecutionException expected) {
            System.out.println("waiter after failover: " + expected.getCause());
        }
    }

    private void failoverWhileWaiting(boolean failoverCommand) throws Exception {
        try (RedisServer master = RedisServer.withModule();
                RedisServer replica = RedisServer.withModule();
                Raw m = new Raw(master.port);
                Raw r = new Raw(replica.port)) {
            r.call("REPLICAOF", "127.0.0.1", master.port);
            await("the replica in sync", () -> "up".equals(r.info("replication", "master_link_status")));
            RedissonClient redisson = Clients.redisson(master);
            try {
                RRateLimiter l = NativeRateLimiters.get(redisson, "jobs");
                assertTrue(l.trySetRate(RateType.OVERALL, 1, Duration.ofMinutes(1)));
                assertTrue(l.tryAcquire());
                // The replica has that permit before it is promoted: replication is asynchronous.
                // (WAIT on this connection would not do: it wrote nothing, so WAIT returns at once.)
                await("the permit on the replica", () -> r.integer("ZCARD", "{jobs}:permits") == 1L);
                RFuture<Void> forever = l.acquireAsync();
                RFuture<Boolean> timed = NativeRateLimiters.get(redisson, "jobs").tryAcquireAsync(1, Duration.ofMinutes(5));
                await("two waiters", () -> Long.parseLong(m.info("clients", "blocked_clients")) == 2);

                if (failoverCommand) {
                    assertEquals("OK", m.call("FAILOVER"));
                } else {
                    assertEquals("OK", r.call("REPLICAOF", "NO", "ONE"));
                    assertEquals("OK", m.call("REPLICAOF", "127.0.0.1", replica.port));
                }
                for (RFuture<?> waiter : List.of(forever, timed)) {
                    assertFails(waiter);
                }
                await("the new master", () -> "master".equals(r.info("replication", "role")));
                assertEquals(0L, Long.parseLong(r.info("clients", "blocked_clients")));
                // Only the first permit is logged: nothing was granted to the waiters.
                assertEquals(1L, r.integer("ZCARD", "{jobs}:permits"));
            } finally {
                redisson.shutdown();
            }
        }
    }

    /**
     * With a bound of 1 wait in the server, one caller waits there and two in the JVM when the
     * master is made a replica: the one in the server gets the server's error, the two queued go
     * to the server after it, which now refuses writes: all three fail, nothing is granted.
     */
    @Test
    void callersQueuedInTheJvmAreNotGrantedAcrossAFailover() throws Exception {
        try (RedisServer master = RedisServer.withModule();
                RedisServer replica = RedisServer.withModule();
                Raw m = new Raw(master.port);
                Raw r = new Raw(replica.port)) {
            r.call("REPLICAOF", "127.0.0.1", master.port);
            await("the replica in sync", () -> "up".equals(r.info("replication", "master_link_status")));
            RedissonClient redisson = Clients.redisson(master);
            try {
                NativeRateLimiters.setMaxWaitsInServer(redisson, 1);
                RRateLimiter l = NativeRateLimiters.get(redisson, "jobs");
                assertTrue(l.trySetRate(RateType.OVERALL, 1, Duration.ofMinutes(1)));
                assertTrue(l.tryAcquire());
                await("the permit on the replica", () -> r.integer("ZCARD", "{jobs}:permits") == 1L);
                RFuture<Void> first = l.acquireAsync();
                RFuture<Boolean> second = l.tryAcquireAsync(1, Duration.ofMinutes(5));
                RFuture<Void> third = l.acquireAsync();
                WaitGate gate = NativeRateLimiters.gate(redisson);
                await("one waiter in the server, two in the JVM",
                        () -> Long.parseLong(m.info("clients", "blocked_clients")) == 1 && gate.queued() == 2);
                assertEquals("OK", r.call("REPLICAOF", "NO", "ONE"));
                assertEquals("OK", m.call("REPLICAOF", "127.0.0.1", replica.port));
                for (RFuture<?> waiter : List.of(first, second, third)) {
                    assertFails(waiter);
                }
                assertEquals(0, gate.queued());
                assertEquals(0L, Long.parseLong(r.info("clients", "blocked_clients")));
                assertEquals(0L, Long.parseLong(m.info("clients", "blocked_clients")));
                assertEquals(1L, r.integer("ZCARD", "{jobs}:permits"), "nothing granted to the three");
            } finally {
                redisson.shutdown();
            }
        }
    }

    @Test
    void waitersGetAnErrorWhenTheirMasterIsMadeAReplica() throws Exception {
        failoverWhileWaiting(false);
    }

    @Test
    void waitersGetAnErrorOnAFailoverCommand() throws Exception {
        failoverWhileWaiting(true);
    }
}
