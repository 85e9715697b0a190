package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RRateLimiterReactive;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.config.Config;
import reactor.core.Disposable;

/**
 * Waiting costs the application nothing else: a client's callers in acquire() or tryAcquire with
 * a timeout hold at most {@link NativeRateLimiters#maxWaitsInServer} of its pooled connections,
 * the rest wait in the JVM in the order they came, every other call of the client is answered,
 * and a caller who gives up while queued in the JVM leaves nothing behind. Counted, never timed:
 * the module's clock is frozen and moves only when a test advances it.
 */
class WaitersTest extends ModuleTestBase {

    /** A client with Redisson's default configuration (64 pooled connections, 3 s timeout). */
    private static RedissonClient defaultClient() {
        Config config = new Config();
        config.useSingleServer().setAddress(server.address());
        return Redisson.create(config);
    }

    private static RRateLimiter fullLimiter(RedissonClient client, String name, long rate) {
        freezeClock();
        RRateLimiter l = NativeRateLimiters.get(client, name);
        assertTrue(l.trySetRate(RateType.OVERALL, rate, Duration.ofSeconds(1)));
        assertTrue(l.tryAcquire(rate));
        return l;
    }

    /**
     * A full limiter of {@code rate} per second whose permits were taken 1000/rate ms apart: each
     * advance of that much frees exactly one.
     */
    private static RRateLimiter spreadLimiter(RedissonClient client, String name, int rate) {
        freezeClock();
        RRateLimiter l = NativeRateLimiters.get(client, name);
        assertTrue(l.trySetRate(RateType.OVERALL, rate, Duration.ofSeconds(1)));
        for (int i = 0; i < rate; i++) {
            if (i > 0) {
                advance(1000 / rate);
            }
            assertTrue(l.tryAcquire());
        }
        return l;
    }

    /** Connections blocked in RATELIMIT.ACQUIRE now, from CLIENT LIST. */
    private static int connectionsWaiting() {
        int n = 0;
        for (String line : String.valueOf(raw.call("CLIENT", "LIST")).split("\n")) {
            if (line.contains("cmd=ratelimit.acquire") && line.matches(".* flags=[A-Za-z]*b.*")) {
                n++;
            }
        }
        return n;
    }

    @Test
    void theDefaultBoundIsAQuarterOfThePool() {
        RedissonClient client = defaultClient();
        try {
            assertEquals(16, NativeRateLimiters.maxWaitsInServer(client), "64 pooled connections by default");
            assertEquals(4, NativeRateLimiters.maxWaitsInServer(redisson), "the tests' clients pool 16");
            assertThrows(IllegalArgumentException.class, () -> NativeRateLimiters.setMaxWaitsInServer(client, 0));
        } finally {
            client.shutdown();
        }
    }

    /**
     * Redisson's default client, {@code waiters} threads in acquire() and tryAcquire(timeout) on
     * one full limiter: 16 wait in the server, the rest in the JVM holding no connection, and 300
     * other calls of the same client (reads, writes, another limiter) all answered without error.
     * Then the permits free up and every caller gets exactly its own.
     */
    @ParameterizedTest
    @ValueSource(ints = {200, 2000})
    void waitersLeaveEveryOtherCallOfTheClientAnswered(int waiters) throws Exception {
        RedissonClient client = defaultClient();
        try {
            RRateLimiter l = fullLimiter(client, "busy", waiters);
            AtomicInteger errors = new AtomicInteger();
            AtomicInteger acquired = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < waiters; i++) {
                boolean timed = i % 2 == 1;
                Thread t = new Thread(() -> {
                    try {
                        if (timed) {
                            assertTrue(l.tryAcquire(1, Duration.ofMinutes(10)));
                        } else {
                            l.acquire();
                        }
                        acquired.incrementAndGet();
                    } catch (Throwable e) {
                        e.printStackTrace();
                        errors.incrementAndGet();
                    }
                });
                t.start();
                threads.add(t);
            }
            WaitGate gate = NativeRateLimiters.gate(client);
            await("16 waits in the server, the rest queued in the JVM",
                    () -> raw.blockedClients() == 16 && gate.queued() == waiters - 16);
            assertEquals(16, connectionsWaiting(), "connections held by waits");

            RBucket<String> bucket = client.getBucket("other");
            RRateLimiter other = NativeRateLimiters.get(client, "other-limiter");
            other.trySetRate(RateType.OVERALL, 1_000_000, Duration.ofSeconds(1));
            int failedCalls = 0;
            for (int i = 0; i < 100; i++) {
                try {
                    bucket.set("v" + i);
                    assertEquals("v" + i, bucket.get());
                    assertTrue(other.tryAcquire());
                } catch (RedisException e) {
                    failedCalls++;
                }
            }
            assertEquals(0, failedCalls, "calls of the client failed while its callers waited");
            assertEquals(16, connectionsWaiting());
            assertEquals(0, acquired.get());

            advance(1000); // every permit frees up: each caller goes to the server in turn and gets one
            for (Thread t : threads) {
                t.join(120_000);
            }
            assertEquals(0, errors.get());
            assertEquals(waiters, acquired.get());
            assertEquals(waiters, logged(permitsKey("busy")), "one permit per caller (the first ones expired)");
            // A slot is handed back once its connection is back in the pool, just after the reply.
            await("every slot handed back", () -> gate.inServer() == 0);
            awaitBlocked(0);
        } finally {
            client.shutdown();
        }
    }

    /**
     * The callers of a client come one after another; the first four wait in the server, the rest
     * in the JVM. One permit frees at a time: each goes to the oldest caller.
     */
    @Test
    void callersOfOneClientAreServedInTheOrderTheyCame() throws Exception {
        RRateLimiter l = spreadLimiter(redisson, "order", 10);
        assertEquals(4, NativeRateLimiters.maxWaitsInServer(redisson));
        int callers = 60;
        ConcurrentLinkedQueue<Integer> served = new ConcurrentLinkedQueue<>();
        for (int i = 0; i < callers; i++) {
            int caller = i;
            RFuture<Boolean> waiting = i % 3 == 0 ? l.tryAcquireAsync(1, Duration.ofMinutes(10))
                    : toBoolean(l.acquireAsync());
            waiting.whenComplete((ok, e) -> served.add(e == null && ok ? caller : -1 - caller));
            long blocked = Math.min(i + 1, 4);
            awaitBlocked(blocked); // the first four reach the server one by one, in order
        }
        assertEquals(callers - 4, NativeRateLimiters.gate(redisson).queued());
        for (int i = 0; i < callers; i++) {
            advance(100); // one permit of the first ten frees
            int done = i + 1;
            await("caller " + i + " served", () -> served.size() == done);
            awaitBlocked(Math.min(4, callers - done));
        }
        List<Integer> order = new ArrayList<>(served);
        for (int i = 0; i < callers; i++) {
            assertEquals(i, order.get(i), "grant " + i + " went to caller " + order.get(i));
        }
    }

    private static RFuture<Boolean> toBoolean(RFuture<Void> future) {
        return new org.redisson.misc.CompletableFutureWrapper<>(future.toCompletableFuture().thenApply(v -> true));
    }

    /**
     * A client with 2 000 waiters and one with 10 on one limiter: the server's queue holds at most
     * 4 of each client's, so the small client's callers are served among the first grants, not
     * after the big client's 2 000.
     */
    @Test
    void aClientWithTenWaitersProgressesBesideOneWithTwoThousand() throws Exception {
        RRateLimiter big = spreadLimiter(redisson, "shared", 10);
        RRateLimiter small = NativeRateLimiters.get(redisson2, "shared");
        List<RFuture<Void>> bigWaiters = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            bigWaiters.add(big.acquireAsync());
        }
        awaitBlocked(4);
        AtomicInteger smallServed = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            Thread t = new Thread(() -> {
                try {
                    small.acquire();
                    smallServed.incrementAndGet();
                } catch (Throwable e) {
                    errors.incrementAndGet();
                }
            });
            t.start();
            threads.add(t);
        }
        await("4 + 4 waiting in the server", () -> raw.blockedClients() == 8
                && NativeRateLimiters.gate(redisson2).queued() == 6);
        // One permit at a time. The server's queue is first come first served, and each client
        // sends its next caller only when one of its waits ends: the small client's callers are
        // never more than 4 + 4 grants from the head.
        int grants = 0;
        while (smallServed.get() < 10) {
            advance(100);
            grants++;
            int expected = grants;
            await("grant " + grants, () -> served(bigWaiters) + smallServed.get() == expected);
            assertTrue(grants <= 4 + 10 * 2, "the small client starved: " + smallServed.get() + " of 10 served after "
                    + grants + " grants");
        }
        for (Thread t : threads) {
            t.join(60_000);
        }
        assertEquals(0, errors.get());
        System.out.println("10 waiters of one client beside 2000 of another: all 10 served within the first "
                + grants + " grants");
        for (RFuture<Void> f : bigWaiters) {
            f.cancel(false);
        }
        awaitBlocked(0);
        await("the gate empty", () -> NativeRateLimiters.gate(redisson).inServer() == 0
                && NativeRateLimiters.gate(redisson).queued() == 0);
    }

    private static int served(List<RFuture<Void>> futures) {
        int n = 0;
        for (RFuture<Void> f : futures) {
            if (f.isDone() && !f.isCancelled()) {
                n++;
            }
        }
        return n;
    }

    /**
     * Callers queued in the JVM who give up (a cancelled future, an interrupted thread, a timeout
     * that runs out in the queue) send nothing: no ACQUIRE, no CANCEL, nothing taken.
     */
    @Test
    void callersWhoGiveUpInTheJvmQueueSendNothing() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "queued", 1);
        List<RFuture<Void>> inServer = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            inServer.add(l.acquireAsync());
            awaitBlocked(i + 1);
        }
        WaitGate gate = NativeRateLimiters.gate(redisson);
        long acquires = raw.calls("ratelimit.acquire");
        long cancels = raw.calls("ratelimit.cancel");

        RFuture<Void> cancelled = l.acquireAsync();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread interrupted = new Thread(() -> {
            try {
                l.acquire();
            } catch (Throwable t) {
                thrown.set(t);
            }
        });
        interrupted.start();
        await("two queued", () -> gate.queued() == 2);
        // Its timeout runs out while it is still queued: false, and nothing was sent for it.
        assertFalse(l.tryAcquire(1, Duration.ofMillis(200)));
        assertTrue(cancelled.cancel(true));
        interrupted.interrupt();
        interrupted.join(60_000);
        assertInstanceOf(RedisException.class, thrown.get(), "Redisson's answer to an interrupt");
        assertInstanceOf(InterruptedException.class, thrown.get().getCause());
        assertThrows(CancellationException.class, () -> cancelled.toCompletableFuture().getNow(null));
        assertEquals(0, gate.queued());
        assertEquals(acquires, raw.calls("ratelimit.acquire"), "a caller queued in the JVM sent an ACQUIRE");
        assertEquals(cancels, raw.calls("ratelimit.cancel"), "a caller queued in the JVM sent a CANCEL");

        for (int i = 0; i < 4; i++) {
            advance(1000);
            inServer.get(i).toCompletableFuture().get(60, TimeUnit.SECONDS);
        }
        assertEquals(1, logged(permitsKey("queued")), "the four waiters' permits, one a second, the last logged");
        // A slot is handed back once its connection is back in the pool, just after the reply.
        await("every slot handed back", () -> gate.inServer() == 0);
        assertEquals(acquires, raw.calls("ratelimit.acquire"), "nothing sent for the callers who gave up");
    }

    /**
     * A caller who gives up while in the server frees its slot only once its connection is back
     * in the pool (the CANCEL's effect read), and the next queued caller goes then: never more
     * connections held for waits than the bound.
     */
    @Test
    void aCallerWhoGivesUpInTheServerHandsItsSlotOn() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "handover", 1);
        List<RFuture<Boolean>> waiters = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            waiters.add(l.tryAcquireAsync(1, Duration.ofMinutes(10)));
            awaitBlocked(Math.min(i + 1, 4));
        }
        WaitGate gate = NativeRateLimiters.gate(redisson);
        assertEquals(2, gate.queued());
        long cancels = raw.calls("ratelimit.cancel");
        assertTrue(waiters.get(0).cancel(true));
        await("the CANCEL done and the next caller in the server", () -> raw.calls("ratelimit.cancel") == cancels + 1
                && gate.queued() == 1 && raw.blockedClients() == 4);
        assertEquals(4, connectionsWaiting());
        advance(1000);
        assertTrue(waiters.get(1).toCompletableFuture().get(60, TimeUnit.SECONDS));
        for (RFuture<Boolean> f : waiters.subList(2, 6)) {
            f.cancel(true);
        }
        awaitBlocked(0);
        await("the gate empty", () -> gate.inServer() == 0 && gate.queued() == 0);
        advance(1000);
        assertEquals(1, l.availablePermits(), "the callers who gave up kept nothing");
    }

    /** The server drops a waiter's connection: Redisson sends it again on its slot; the queue behind waits on. */
    @Test
    void aDroppedConnectionKeepsItsSlot() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "dropped", 1);
        List<RFuture<Boolean>> waiters = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            waiters.add(l.tryAcquireAsync(1, Duration.ofMinutes(10)));
            awaitBlocked(Math.min(i + 1, 4));
        }
        WaitGate gate = NativeRateLimiters.gate(redisson);
        String first = null;
        for (String line : String.valueOf(raw.call("CLIENT", "LIST")).split("\n")) {
            if (line.contains("cmd=ratelimit.acquire")) {
                first = line.replaceAll("^id=(\\d+) .*$", "$1").trim();
            }
        }
        assertEquals(1L, raw.call("CLIENT", "KILL", "ID", first));
        await("the wait sent again", () -> raw.blockedClients() == 4);
        assertEquals(2, gate.queued(), "the resend kept its slot");
        for (int i = 0; i < 6; i++) {
            advance(1000);
            int done = i + 1;
            await("grant " + done, () -> waiters.stream().filter(f -> f.isDone()).count() == done);
        }
        for (RFuture<Boolean> f : waiters) {
            assertTrue(f.toCompletableFuture().get(60, TimeUnit.SECONDS));
        }
        assertEquals(1, logged(permitsKey("dropped")), "one permit a second, one caller each");
    }

    /** The Reactor form goes through the same gate: 200 subscribers, 4 connections. */
    @Test
    void reactiveWaitersAreBoundedToo() {
        freezeClock();
        RRateLimiterReactive l = NativeRateLimiters.reactive(redisson, "reactive");
        l.trySetRate(RateType.OVERALL, 200, Duration.ofSeconds(1)).block();
        assertTrue(l.tryAcquire(200).block());
        List<Disposable> waiting = new ArrayList<>();
        AtomicInteger done = new AtomicInteger();
        for (int i = 0; i < 200; i++) {
            waiting.add(l.acquire().doOnSuccess(v -> done.incrementAndGet()).subscribe());
        }
        await("4 in the server, 196 in the JVM", () -> raw.blockedClients() == 4
                && NativeRateLimiters.gate(redisson).queued() == 196);
        assertEquals(4, connectionsWaiting());
        redisson.getBucket("x").set("y");
        assertEquals("y", redisson.getBucket("x").get(), "the client's other calls are answered");
        advance(1000);
        await("all 200 served", () -> done.get() == 200);
        assertEquals(200, logged(permitsKey("reactive")), "one permit per subscriber (the first ones expired)");
    }
}
