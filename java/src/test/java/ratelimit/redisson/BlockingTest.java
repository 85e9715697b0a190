package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;

/**
 * acquire and tryAcquire(timeout) wait in the server's queue: one command per wait, served first
 * come first served, whatever Redisson's response timeout, through a dropped connection, and a
 * caller who gives up keeps nothing. The module's clock is frozen: waits end when the test moves
 * it, never on the machine's speed.
 */
class BlockingTest extends ModuleTestBase {

    private static RRateLimiter fullLimiter(RedissonClient client, String name, long rate) {
        freezeClock();
        RRateLimiter l = NativeRateLimiters.get(client, name);
        assertTrue(l.trySetRate(RateType.OVERALL, rate, Duration.ofSeconds(1)));
        assertTrue(l.tryAcquire(rate));
        return l;
    }

    private static <T> T get(RFuture<T> future) throws Exception {
        return future.toCompletableFuture().get(60, TimeUnit.SECONDS);
    }

    @Test
    void acquireWaitsInTheServerWithoutPolling() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "jobs", 2);
        RFuture<Void> waiting = l.acquireAsync();
        awaitBlocked(1);
        long sent = raw.calls("ratelimit.acquire") + raw.calls("ratelimit.tryacquire") + raw.scripts();
        for (int i = 0; i < 20; i++) {
            raw.call("PING");
        }
        assertEquals(sent, raw.calls("ratelimit.acquire") + raw.calls("ratelimit.tryacquire") + raw.scripts(),
                "the waiting client sent something: it polls");
        assertFalse(waiting.isDone());
        advance(1000);
        get(waiting);
        assertEquals(1, logged(permitsKey("jobs")), "the two first permits expired, one is logged");
        awaitBlocked(0);
    }

    @Test
    void waitersAreServedFirstComeFirstServed() throws Exception {
        freezeClock();
        RRateLimiter l = NativeRateLimiters.get(redisson, "api");
        l.trySetRate(RateType.OVERALL, 2, Duration.ofSeconds(1));
        assertTrue(l.tryAcquire());
        advance(100);
        assertTrue(l.tryAcquire());
        RFuture<Void> big = l.acquireAsync(2);
        awaitBlocked(1);
        RFuture<Boolean> small = NativeRateLimiters.get(redisson2, "api").tryAcquireAsync(1, Duration.ofMinutes(1));
        awaitBlocked(2);

        advance(900); // one permit free: not enough for the head, owed to it all the same
        assertEquals(0, l.availablePermits());
        assertFalse(l.tryAcquire(), "TRYACQUIRE goes behind the queue");
        assertEquals(2, raw.blockedClients());
        assertFalse(big.isDone() || small.isDone());

        advance(100); // both free: the head takes them
        get(big);
        awaitBlocked(1);
        assertFalse(small.isDone());
        advance(1000);
        assertTrue(get(small));
        awaitBlocked(0);
    }

    /** Redisson's response timeout (here 300 ms) does not cut a longer wait short. */
    @Test
    void waitsOutlastRedissonsResponseTimeout() throws Exception {
        RedissonClient impatient = Clients.redisson(server, c -> c.setTimeout(300).setRetryAttempts(0));
        try {
            RRateLimiter l = fullLimiter(impatient, "slow", 1);
            long started = System.nanoTime();
            assertFalse(l.tryAcquire(1, Duration.ofMillis(1500)), "the timeout runs out in the server: false");
            // The server counts the TIMEOUT on its millisecond clock from when the command
            // arrives, so it may end a fraction of a millisecond before 1500 ms of ours: what this
            // proves is that it outlasted Redisson's 300 ms response timeout several times over.
            assertTrue(System.nanoTime() - started >= TimeUnit.MILLISECONDS.toNanos(1200),
                    "returned long before its timeout: cut short by the client");

            RFuture<Boolean> timed = l.tryAcquireAsync(1, Duration.ofMinutes(1));
            // Queued first: two commands on two connections may reach the server in either order.
            awaitBlocked(1);
            RFuture<Void> forever = NativeRateLimiters.get(impatient, "slow").acquireAsync();
            awaitBlocked(2);
            Thread.sleep(1000); // more than three response timeouts go by
            assertFalse(timed.isDone() || forever.isDone());
            advance(1000);
            assertTrue(get(timed));
            advance(1000);
            get(forever);
        } finally {
            impatient.shutdown();
        }
    }

    private static long waiterClientId() {
        for (String line : String.valueOf(raw.call("CLIENT", "LIST")).split("\n")) {
            if (line.contains("cmd=ratelimit.acquire")) {
                return Long.parseLong(line.replaceAll("^id=(\\d+) .*$", "$1").trim());
            }
        }
        return -1;
    }

    /** The server drops the waiter with its connection; Redisson reconnects and sends it again. */
    @Test
    void aDroppedConnectionJoinsTheQueueAgain() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "drop", 1);
        RFuture<Boolean> waiting = l.tryAcquireAsync(1, Duration.ofMinutes(1));
        awaitBlocked(1);
        long first = waiterClientId();
        assertEquals(1L, raw.call("CLIENT", "KILL", "ID", first));
        await("the wait resent on a new connection", () -> {
            long id = waiterClientId();
            return id != -1 && id != first;
        });
        assertFalse(waiting.isDone());
        advance(1000);
        assertTrue(get(waiting));
        assertEquals(1, logged(permitsKey("drop")), "one grant, for the one caller");
        awaitBlocked(0);
    }

    @Test
    void aCancelledWaitTakesNothing() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "cancel", 2);
        RFuture<Boolean> waiting = l.tryAcquireAsync(1, Duration.ofMinutes(1));
        RFuture<Void> forever = l.acquireAsync(2);
        awaitBlocked(2);
        List<Long> waiters = waiterClientIds();
        assertEquals(2, waiters.size());
        long cancels = raw.calls("ratelimit.cancel");
        assertTrue(waiting.cancel(true));
        assertTrue(forever.cancel(true));
        awaitBlocked(0);
        await("both CANCELs done", () -> raw.calls("ratelimit.cancel") == cancels + 2);
        for (long id : waiters) {
            assertTrue(connected(id), "the blocked connection was closed: Redisson's pool disturbed");
        }
        advance(1000);
        assertEquals(2, l.availablePermits());
        assertEquals(0, logged(permitsKey("cancel")) - 2, "only the first two permits, now expired, are logged");
        assertThrows(CancellationException.class, () -> get(waiting));
    }

    @Test
    void anInterruptedAcquireTakesNothing() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "interrupt", 1);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread caller = new Thread(() -> {
            try {
                l.acquire();
            } catch (Throwable t) {
                thrown.set(t);
            }
        });
        caller.start();
        awaitBlocked(1);
        long cancels = raw.calls("ratelimit.cancel");
        caller.interrupt();
        caller.join(60_000);
        assertInstanceOf(RedisException.class, thrown.get(), "Redisson's answer to an interrupt");
        assertInstanceOf(InterruptedException.class, thrown.get().getCause());
        awaitBlocked(0);
        await("the CANCEL done", () -> raw.calls("ratelimit.cancel") == cancels + 1);
        assertEquals(1, logged(permitsKey("interrupt")), "only the first permit is logged");
        advance(1000);
        assertEquals(1, l.availablePermits());
    }

    /** The ids of the connections blocked in RATELIMIT.ACQUIRE now. */
    private static List<Long> waiterClientIds() {
        List<Long> ids = new ArrayList<>();
        for (String line : String.valueOf(raw.call("CLIENT", "LIST")).split("\n")) {
            if (line.contains("flags=b") && line.contains("cmd=ratelimit.acquire")) {
                ids.add(Long.parseLong(line.replaceAll("^id=(\\d+) .*$", "$1").trim()));
            }
        }
        return ids;
    }

    private static boolean connected(long clientId) {
        return String.valueOf(raw.call("CLIENT", "LIST")).contains("id=" + clientId + " ");
    }

    private static long stat(String name) {
        return Long.parseLong(raw.info("ratelimit", "ratelimit_" + name));
    }

    /**
     * A grant racing with the caller giving up: rounds of a release (which serves the waiter at
     * once) sent at the same moment as the cancel. The permit ends up the caller's (its future
     * says true) or back in the limiter: RATELIMIT.CANCEL, sent as the caller gives up, ends the
     * wait or gives back exactly the grant made. On a frozen clock, so nothing expires: each
     * round's log holds exactly the permits of the callers told true, never a waiter is left in
     * the queue, and the library releases nothing itself.
     */
    @Test
    void aGrantRacingAGiveUpIsKeptOnlyByItsCaller() throws Exception {
        freezeClock();
        int kept = 0;
        int ended = 0;
        int givenBack = 0;
        for (int round = 0; round < 100; round++) {
            String name = "race" + round;
            RRateLimiter l = NativeRateLimiters.get(redisson, name);
            l.trySetRate(RateType.OVERALL, 1, Duration.ofSeconds(1));
            assertTrue(l.tryAcquire());
            RFuture<Boolean> waiting = l.tryAcquireAsync(1, Duration.ofMinutes(1));
            awaitBlocked(1);
            long releases = raw.calls("ratelimit.release");
            long cancels = raw.calls("ratelimit.cancel");
            long acquired = stat("acquired");
            CountDownLatch go = new CountDownLatch(1);
            Thread releaser = new Thread(() -> {
                try (Raw own = new Raw(server.port)) {
                    go.await();
                    own.rl("RELEASE", name, 1);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            releaser.start();
            go.countDown();
            boolean cancelled = waiting.cancel(true);
            releaser.join(60_000);
            if (cancelled) {
                await("the CANCEL done", () -> raw.calls("ratelimit.cancel") == cancels + 1);
            }
            awaitBlocked(0);
            long held = cancelled ? 0 : (get(waiting) ? 1 : 0);
            assertEquals(held, logged(permitsKey(name)), name + ": the log holds the permits of the callers told true");
            assertEquals(releases + 1, raw.calls("ratelimit.release"), name + ": the library released nothing");
            boolean granted = stat("acquired") == acquired + 1;
            kept += held;
            if (cancelled && granted) {
                givenBack++;
            } else if (cancelled) {
                ended++;
            }
        }
        assertEquals(0, raw.blockedClients());
        System.out.println("grant/give-up race, 100 rounds: " + kept + " grants kept by their caller, "
                + givenBack + " granted as the caller gave up and given back by CANCEL, " + ended
                + " waits ended by CANCEL, 0 lost");
    }

    /**
     * The connection drops just after the server sent a grant the client never read: Redisson
     * resends the ACQUIRE on a new connection, and the server answers it from the first grant
     * (same ticket) instead of taking a second permit or making the caller wait again.
     */
    @Test
    void aGrantLostWithItsConnectionIsNotTakenTwice() throws Exception {
        try (Proxy proxy = new Proxy(server.port)) {
            RedissonClient proxied = Clients.redisson(proxy.address(), c -> { });
            try {
                RRateLimiter l = fullLimiter(proxied, "lost", 1);
                RFuture<Boolean> waiting = l.tryAcquireAsync(1, Duration.ofMinutes(1));
                awaitBlocked(1);
                long acquired = stat("acquired");
                proxy.hold();
                advance(1000); // the server grants; the proxy holds the reply
                awaitBlocked(0);
                assertEquals(acquired + 1, stat("acquired"));
                long acquires = raw.calls("ratelimit.acquire");
                proxy.dropAll();
                assertTrue(get(waiting), "the resend is answered from the first grant");
                assertTrue(raw.calls("ratelimit.acquire") > acquires, "Redisson resent the ACQUIRE");
                assertEquals(acquired + 1, stat("acquired"), "no second grant");
                assertEquals(1, logged(permitsKey("lost")), "one permit logged, the caller's");
                assertEquals(0, raw.blockedClients());
            } finally {
                proxied.shutdown();
            }
        }
    }

    /** Many waiters on one limiter: each served once, in order, on one command each. */
    @Test
    void manyWaitersAreServedInTheOrderTheyCame() throws Exception {
        RRateLimiter l = fullLimiter(redisson, "queue", 1);
        List<RFuture<Void>> waiters = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            waiters.add(NativeRateLimiters.get(i % 2 == 0 ? redisson : redisson2, "queue").acquireAsync());
            awaitBlocked(i + 1);
        }
        for (int i = 0; i < 8; i++) {
            advance(1000);
            get(waiters.get(i));
            for (int j = i + 1; j < 8; j++) {
                assertFalse(waiters.get(j).isDone(), "waiter " + j + " served before waiter " + i);
            }
            awaitBlocked(7 - i);
        }
        assertNotEquals(0, raw.calls("ratelimit.acquire"));
    }
}
