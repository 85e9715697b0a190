package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
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
import org.redisson.api.RRateLimiterRx;
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

    /**
     * Asks of queued callers sent so far: each is RATELIMIT.ACQUIRE between MULTI and EXEC, the
     * only transactions of these tests.
     */
    static long asksSent() {
        return raw.calls("exec");
    }

    /** Waits sent to the server so far: the ACQUIREs that are not asks. */
    static long waitsSent() {
        return raw.calls("ratelimit.acquire") - raw.calls("exec");
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
     * that runs out in the queue) send no ACQUIRE and no CANCEL, and take nothing. The timeout
     * ends with one ask of the limiter, which the server refuses: its waiters go first.
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
        long acquires = waitsSent();
        long cancels = raw.calls("ratelimit.cancel");
        long tries = asksSent();

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
        // Its timeout runs out while it is still queued: its line asks once, refused, and no ACQUIRE.
        assertFalse(l.tryAcquire(1, Duration.ofMillis(200)));
        assertEquals(tries + 1, asksSent(), "one ask at its timeout");
        assertTrue(cancelled.cancel(true));
        interrupted.interrupt();
        interrupted.join(60_000);
        assertInstanceOf(RedisException.class, thrown.get(), "Redisson's answer to an interrupt");
        assertInstanceOf(InterruptedException.class, thrown.get().getCause());
        assertThrows(CancellationException.class, () -> cancelled.toCompletableFuture().getNow(null));
        assertEquals(0, gate.queued());
        assertEquals(acquires, waitsSent(), "a caller queued in the JVM sent an ACQUIRE");
        assertEquals(cancels, raw.calls("ratelimit.cancel"), "a caller queued in the JVM sent a CANCEL");

        for (int i = 0; i < 4; i++) {
            advance(1000);
            inServer.get(i).toCompletableFuture().get(60, TimeUnit.SECONDS);
        }
        assertEquals(1, logged(permitsKey("queued")), "the four waiters' permits, one a second, the last logged");
        // A slot is handed back once its connection is back in the pool, just after the reply.
        await("every slot handed back", () -> gate.inServer() == 0);
        assertEquals(acquires, waitsSent(), "nothing sent for the callers who gave up");
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
    /**
     * Limiter {@code name}: 1 permit every two hours, taken, and the client's 4 slots all held by
     * waits on it (the clock frozen: they end only when the test cancels them).
     */
    private static List<RFuture<Void>> fillTheBoundWithWaitsOn(String name) {
        freezeClock();
        RRateLimiter a = NativeRateLimiters.get(redisson, name);
        assertTrue(a.trySetRate(RateType.OVERALL, 1, Duration.ofHours(2)));
        assertTrue(a.tryAcquire());
        List<RFuture<Void>> waits = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            waits.add(a.acquireAsync());
            awaitBlocked(i + 1);
        }
        assertEquals(4, NativeRateLimiters.gate(redisson).inServer());
        return waits;
    }

    /** Limiter {@code name} of {@code rate} permits an hour, {@code taken} of them taken. */
    private static RRateLimiter hourly(String name, int rate, int taken) {
        RRateLimiter l = NativeRateLimiters.get(redisson, name);
        assertTrue(l.trySetRate(RateType.OVERALL, rate, Duration.ofHours(1)));
        if (taken > 0) {
            assertTrue(l.tryAcquire(taken));
        }
        return l;
    }

    private static void endWaits(List<? extends RFuture<?>> waits) {
        for (RFuture<?> f : waits) {
            f.cancel(false);
        }
        awaitBlocked(0);
        WaitGate gate = NativeRateLimiters.gate(redisson);
        await("the gate empty", () -> gate.inServer() == 0 && gate.queued() == 0 && gate.asksOnTheirWay() == 0);
    }

    /**
     * The bound full of waits on limiter a: callers of limiter b, which has permits free, are
     * granted at once (one ask each, no wait in the server), not kept in the JVM behind a's waits.
     * Once b is exhausted, its next caller asks, is refused and waits in the JVM, and a later
     * caller of b does not overtake it: it does not ask, and they go to the server in the order
     * they came.
     */
    @Test
    void aLimiterWithPermitsFreeIsNotKeptBehindOtherLimitersWaits() throws Exception {
        List<RFuture<Void>> aWaits = fillTheBoundWithWaitsOn("a");
        WaitGate gate = NativeRateLimiters.gate(redisson);
        RRateLimiter b = hourly("b", 3, 1);
        long tries = asksSent();
        long acquires = waitsSent();
        long asks = gate.asks();

        RFuture<Boolean> first = b.tryAcquireAsync(1, Duration.ofMinutes(10));
        await("b's first caller answered while a's waits fill the bound", first::isDone);
        assertTrue(first.toCompletableFuture().get());
        RFuture<Void> second = b.acquireAsync();
        await("b's second caller answered while a's waits fill the bound", second::isDone);
        second.toCompletableFuture().get();
        assertEquals(tries + 2, asksSent(), "one ask each");
        assertEquals(acquires, waitsSent(), "neither waited in the server");
        assertEquals(3, logged(permitsKey("b")));
        assertEquals(4, raw.blockedClients(), "a's waits still hold the bound");

        List<Integer> order = Collections.synchronizedList(new ArrayList<>());
        RFuture<Boolean> third = b.tryAcquireAsync(1, Duration.ofMinutes(10));
        third.whenComplete((ok, e) -> order.add(e == null && ok ? 3 : -3));
        await("the third caller's ask answered", () -> gate.asks() == asks + 3 && gate.asksOnTheirWay() == 0);
        assertEquals(tries + 3, asksSent());
        assertFalse(third.isDone(), "b is exhausted: refused, its caller waits");
        assertEquals(1, gate.queued());
        RFuture<Void> fourth = b.acquireAsync();
        fourth.whenComplete((ok, e) -> order.add(e == null ? 4 : -4));
        assertEquals(asks + 3, gate.asks(), "a later caller of b asked while an earlier one waits in the JVM");
        assertEquals(2, gate.queued());

        // An hour on: b's permits are free, a's not. a's waits still hold the bound: b's callers wait.
        advance(3_600_000);
        assertEquals(tries + 3, asksSent());
        // a's first wait ends: its slot goes to b's third caller, then to the fourth, in order.
        aWaits.get(0).cancel(false);
        await("b's callers served", () -> third.isDone() && fourth.isDone());
        assertEquals(List.of(3, 4), new ArrayList<>(order));
        assertEquals(acquires + 2, waitsSent(), "an ACQUIRE each, on a's freed slot");
        endWaits(aWaits);
    }

    /**
     * A timed tryAcquire whose timeout runs out in the JVM's queue is answered by its limiter,
     * never refused unasked: its line asks in order, from its first caller to it.
     */
    @Test
    void aTimeoutInTheJvmQueueEndsWithAnAskOfItsLimiter() throws Exception {
        List<RFuture<Void>> aWaits = fillTheBoundWithWaitsOn("a");
        WaitGate gate = NativeRateLimiters.gate(redisson);
        RRateLimiter b = hourly("b", 2, 2);
        long tries = asksSent();
        long acquires = waitsSent();

        // b exhausted: asked when it queued, and again when its timeout ran out (once, if the first
        // answer came only after the timeout).
        assertFalse(b.tryAcquire(1, Duration.ofMillis(50)));
        long asked = asksSent() - tries;
        assertTrue(asked == 1 || asked == 2, "asked " + asked + " times");

        // A caller of b asks, is refused and waits in the JVM; then b's permits free (it does not know).
        long before = asksSent();
        RFuture<Void> head = b.acquireAsync();
        await("the head's ask answered", () -> asksSent() == before + 1
                && gate.asksOnTheirWay() == 0);
        assertFalse(head.isDone());
        advance(3_600_000);
        // A timed caller behind it: when its timeout runs out, the head asks (granted), then it.
        assertTrue(b.tryAcquire(1, Duration.ofMillis(50)), "b had permits free at its timeout");
        await("the head granted in its turn", head::isDone);
        head.toCompletableFuture().get();
        assertEquals(before + 3, asksSent(), "the head's ask, then each of the two in turn");
        assertEquals(0L, b.availablePermits());

        // b exhausted again: the head of its line is refused at the timed caller's timeout, and so is it.
        long again = asksSent();
        RFuture<Void> head2 = b.acquireAsync();
        await("the second head's ask answered", () -> asksSent() == again + 1
                && gate.asksOnTheirWay() == 0);
        assertFalse(b.tryAcquire(1, Duration.ofMillis(50)));
        assertEquals(again + 2, asksSent(), "its line asked once more");
        assertFalse(head2.isDone());
        assertEquals(acquires, waitsSent(), "no caller of b got a slot");
        aWaits.add(head2);
        endWaits(aWaits);
    }

    /** The Reactor and RxJava objects go the same way: b's permits free, granted past a's waits. */
    @Test
    void reactiveAndRxCallersAskTheirLimiterToo() {
        List<RFuture<Void>> aWaits = fillTheBoundWithWaitsOn("a");
        hourly("b", 4, 0);
        long acquires = waitsSent();
        RRateLimiterReactive reactive = NativeRateLimiters.reactive(redisson, "b");
        AtomicInteger granted = new AtomicInteger();
        reactive.tryAcquire(1, Duration.ofMinutes(10)).subscribe(ok -> granted.addAndGet(ok ? 1 : 100));
        reactive.acquire().doOnSuccess(v -> granted.incrementAndGet()).subscribe();
        RRateLimiterRx rx = NativeRateLimiters.rxJava(redisson, "b");
        rx.tryAcquire(1, Duration.ofMinutes(10)).subscribe(ok -> granted.addAndGet(ok ? 1 : 100));
        rx.acquire().subscribe(granted::incrementAndGet);
        await("four callers of b granted while a's waits fill the bound", () -> granted.get() == 4);
        assertEquals(acquires, waitsSent());
        assertEquals(4, logged(permitsKey("b")));
        endWaits(aWaits);
    }
}
