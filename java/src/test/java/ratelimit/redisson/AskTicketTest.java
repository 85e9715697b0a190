package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.client.RedisTimeoutException;
import org.redisson.config.SingleServerConfig;

/**
 * A caller queued in the JVM asks its limiter without waiting; the ask carries the caller's
 * TICKET, so a grant that reaches a caller who has given up (interrupted, cancelled, disposed,
 * timed out) while its ask was on its way, or an ask whose reply never came, is given back
 * exactly by RATELIMIT.CANCEL: the limiter's available permits return to what they were.
 *
 * <p>Each test holds the server's replies in a {@link Proxy}: the ask is granted in the server
 * (AVAILABLE, read beside the client, says so), the caller gives up, and only then does the
 * grant's reply reach the client. The clock is frozen: nothing leaves the window meanwhile.
 */
class AskTicketTest extends ModuleTestBase {
    private static final long RATE = 3;

    private Proxy proxy;
    private RedissonClient client;
    /** The wait on limiter "a" that fills the client's bound of 1: "b"'s callers queue in the JVM. */
    private RFuture<Void> aWait;
    private WaitGate gate;
    private long cancels;
    private long asks;

    private void start() throws Exception {
        start(s -> { });
    }

    /**
     * A client through the proxy, its bound of 1 held by a wait on "a"; "b" of RATE permits an
     * hour, all free; then the proxy holds the server's replies.
     */
    private void start(Consumer<SingleServerConfig> tune) throws Exception {
        proxy = new Proxy(server.port);
        client = Clients.redisson(proxy.address(), tune);
        NativeRateLimiters.setMaxWaitsInServer(client, 1);
        gate = NativeRateLimiters.gate(client);
        freezeClock();
        RRateLimiter a = NativeRateLimiters.get(client, "a");
        assertTrue(a.trySetRate(RateType.OVERALL, 1, Duration.ofHours(2)));
        assertTrue(a.tryAcquire());
        aWait = a.acquireAsync();
        awaitBlocked(1);
        assertTrue(NativeRateLimiters.get(client, "b").trySetRate(RateType.OVERALL, RATE, Duration.ofHours(1)));
        cancels = raw.calls("ratelimit.cancel");
        asks = gate.asks();
        proxy.hold();
    }

    @AfterEach
    void stop() throws Exception {
        if (client == null) {
            return;
        }
        proxy.release();
        aWait.cancel(false);
        awaitBlocked(0);
        await("the gate empty", () -> gate.inServer() == 0 && gate.queued() == 0 && gate.asksOnTheirWay() == 0);
        client.shutdown();
        proxy.close();
        client = null;
    }

    private static long available() {
        return (Long) raw.rl("AVAILABLE", "b");
    }

    /** The caller's ask reached the server and was granted there; its reply is held in the proxy. */
    private void awaitTheAskGranted() {
        await("the ask granted in the server", () -> gate.asks() == asks + 1 && available() == RATE - 1);
        assertEquals(1, gate.asksOnTheirWay(), "the grant's reply is not read yet");
    }

    /** The reply let through: the grant is given back, with one CANCEL, and nothing else is taken. */
    private void releaseAndAwaitTheGrantGivenBack() {
        proxy.release();
        await("the ask's answer read", () -> gate.asksOnTheirWay() == 0);
        await("the grant given back", () -> available() == RATE);
        assertEquals(cancels + 1, raw.calls("ratelimit.cancel"), "one CANCEL of the ask's ticket");
        assertEquals(0, logged(permitsKey("b")), "the grant's entry is off the log");
        assertEquals(0, gate.queued());
    }

    @Test
    void anInterruptedCallerGivesBackWhatItsAskWasGranted() throws Exception {
        start();
        RRateLimiter b = NativeRateLimiters.get(client, "b");
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread caller = new Thread(() -> {
            try {
                b.tryAcquire(1, Duration.ofMinutes(10));
            } catch (Throwable t) {
                thrown.set(t);
            }
        });
        caller.start();
        awaitTheAskGranted();
        caller.interrupt();
        caller.join(60_000);
        assertFalse(caller.isAlive());
        assertInstanceOf(RedisException.class, thrown.get(), "Redisson's answer to an interrupt");
        assertInstanceOf(InterruptedException.class, thrown.get().getCause());
        releaseAndAwaitTheGrantGivenBack();
    }

    @Test
    void aCancelledCallerGivesBackWhatItsAskWasGranted() throws Exception {
        start();
        RFuture<Void> waiting = NativeRateLimiters.get(client, "b").acquireAsync(2);
        awaitTheAskGrantedFor(2);
        assertTrue(waiting.cancel(true));
        proxy.release();
        await("the ask's answer read", () -> gate.asksOnTheirWay() == 0);
        await("the grant given back", () -> available() == RATE);
        assertEquals(cancels + 1, raw.calls("ratelimit.cancel"));
        assertEquals(0, logged(permitsKey("b")));
        assertTrue(waiting.isCancelled());
    }

    private void awaitTheAskGrantedFor(long permits) {
        await("the ask granted in the server", () -> gate.asks() == asks + 1 && available() == RATE - permits);
    }

    @Test
    void aDisposedReactiveSubscriberGivesBackWhatItsAskWasGranted() throws Exception {
        start();
        reactor.core.Disposable subscription = NativeRateLimiters.reactive(client, "b")
                .tryAcquire(1, Duration.ofMinutes(10)).subscribe();
        awaitTheAskGranted();
        subscription.dispose();
        releaseAndAwaitTheGrantGivenBack();
    }

    /** Reactor's own timeout, shorter than the caller's, runs out while the ask's reply is held: it disposes. */
    @Test
    void aReactiveCallerTimedOutGivesBackWhatItsAskWasGranted() throws Exception {
        start();
        AtomicReference<Throwable> error = new AtomicReference<>();
        NativeRateLimiters.reactive(client, "b").acquire()
                .timeout(Duration.ofMillis(100))
                .subscribe(v -> { }, error::set);
        awaitTheAskGranted();
        await("Reactor's timeout ran out", () -> error.get() != null);
        assertInstanceOf(TimeoutException.class, error.get());
        releaseAndAwaitTheGrantGivenBack();
    }

    @Test
    void aDisposedRxJavaSubscriberGivesBackWhatItsAskWasGranted() throws Exception {
        start();
        io.reactivex.rxjava3.disposables.Disposable subscription = NativeRateLimiters.rxJava(client, "b")
                .acquire().subscribe();
        awaitTheAskGranted();
        subscription.dispose();
        releaseAndAwaitTheGrantGivenBack();
    }

    /**
     * The ask's reply never comes within Redisson's response timeout (no retry): the caller gets
     * Redisson's timeout error, and the grant the server made is given back by the ticket's
     * CANCEL, which the server runs even while its reply, too, is held.
     */
    @Test
    void anAskWhoseReplyNeverCameIsGivenBack() throws Exception {
        start(s -> s.setTimeout(300).setRetryAttempts(0));
        RFuture<Boolean> waiting = NativeRateLimiters.get(client, "b").tryAcquireAsync(1, Duration.ofMinutes(10));
        awaitTheAskGranted();
        ExecutionException failed = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> waiting.toCompletableFuture().get());
        assertInstanceOf(RedisTimeoutException.class, failed.getCause(), String.valueOf(failed.getCause()));
        await("the grant given back while the replies are still held", () -> available() == RATE);
        assertEquals(cancels + 1, raw.calls("ratelimit.cancel"), "one CANCEL of the ask's ticket");
        assertEquals(0, logged(permitsKey("b")));
        proxy.release();
        await("the ask's answer read", () -> gate.asksOnTheirWay() == 0);
        assertEquals(RATE, available());
    }

    /**
     * Every connection of the client dropped while the ask's grant is on its way: Redisson resends
     * the ask (answered from the grant: the caller has it, taken once) or fails it (the ticket's
     * CANCEL gives the grant back). Either way the log holds exactly the caller's grant.
     */
    @Test
    void anAskWhoseConnectionDroppedTakesExactlyTheCallersGrant() throws Exception {
        start();
        RFuture<Boolean> waiting = NativeRateLimiters.get(client, "b").tryAcquireAsync(1, Duration.ofMinutes(10));
        awaitTheAskGranted();
        proxy.dropAll();
        boolean granted;
        try {
            granted = waiting.toCompletableFuture().get();
        } catch (ExecutionException e) {
            granted = false;
        }
        long kept = granted ? 1 : 0;
        await("the log holds the caller's grant alone", () -> available() == RATE - kept);
        assertEquals(kept, logged(permitsKey("b")));
        await("the ask's answer read", () -> gate.asksOnTheirWay() == 0);
        assertEquals(RATE - kept, available());
        System.out.println("an ask's connection dropped with its grant on the way: the caller "
                + (granted ? "got the grant from the resend" : "got an error, the grant given back"));
    }

    /**
     * An ask whose reply is late is resent by Redisson (its retry); the resend of an ask already
     * granted is answered from the grant and takes nothing again, and when no reply comes at all
     * the ticket's CANCEL gives back the one grant: nothing is left taken.
     */
    @Test
    void anAskResentAfterALateReplyTakesNothingTwice() throws Exception {
        start(s -> s.setTimeout(300).setRetryAttempts(1).setRetryInterval(0));
        long execs = raw.calls("exec");
        RFuture<Boolean> waiting = NativeRateLimiters.get(client, "b").tryAcquireAsync(1, Duration.ofMinutes(10));
        awaitTheAskGranted();
        await("the ask resent", () -> raw.calls("exec") == execs + 2);
        assertEquals(RATE - 1, available(), "the resend took nothing");
        ExecutionException failed = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> waiting.toCompletableFuture().get());
        assertInstanceOf(RedisTimeoutException.class, failed.getCause(), String.valueOf(failed.getCause()));
        await("the grant given back", () -> available() == RATE);
        assertEquals(cancels + 1, raw.calls("ratelimit.cancel"));
        assertEquals(0, logged(permitsKey("b")));
    }

    /**
     * The module unloaded while a caller waits in the JVM: its ask is refused unknown inside its
     * transaction (EXEC replies only EXECABORT), a plain command tells the module missing, and the
     * caller is served by Redisson's own limiter on the same keys, as any call that finds the
     * module missing.
     */
    @Test
    void anAskThatFindsTheModuleMissingFallsBackToRedissonsLimiter() throws Exception {
        try (RedisServer unloadable = RedisServer.withModule("--enable-module-command", "yes");
                Raw direct = new Raw(unloadable.port);
                Proxy viaProxy = new Proxy(unloadable.port)) {
            RedissonClient c = Clients.redisson(viaProxy.address(), s -> { });
            try {
                NativeRateLimiters.setMaxWaitsInServer(c, 1);
                WaitGate g = NativeRateLimiters.gate(c);
                NativeRateLimiter a = NativeRateLimiters.get(c, "a");
                assertTrue(a.trySetRate(RateType.OVERALL, 1, Duration.ofHours(1)));
                NativeRateLimiter b = NativeRateLimiters.get(c, "b");
                assertTrue(b.trySetRate(RateType.OVERALL, RATE, Duration.ofHours(1)));
                viaProxy.hold();
                // Granted at once, its reply held: a's caller holds the client's one slot meanwhile.
                RFuture<Boolean> aCaller = a.tryAcquireAsync(1, Duration.ofMinutes(10));
                await("a's caller granted in the server", () -> (Long) direct.rl("AVAILABLE", "a") == 0);
                assertEquals(1, g.inServer());
                assertEquals("OK", direct.call("MODULE", "UNLOAD", "ratelimit"));
                long scripts = direct.scripts();
                RFuture<Boolean> bCaller = b.tryAcquireAsync(1, Duration.ofMinutes(10));
                await("b's caller asked", () -> g.asks() == 1);
                viaProxy.release();
                assertTrue(aCaller.toCompletableFuture().get());
                assertTrue(bCaller.toCompletableFuture().get(), "served by Redisson's own limiter");
                assertFalse(b.usesModule());
                assertTrue(direct.scripts() > scripts, "Redisson's script ran");
                assertEquals(1, logged(direct, permitsKey("b")), "one permit taken for b's caller");
            } finally {
                c.shutdown();
            }
        }
    }

    /**
     * The caller does not give up: its ask is granted and answered, and nothing is cancelled. The
     * ticket costs the caller who keeps its grant nothing.
     */
    @Test
    void aCallerWhoWaitsKeepsItsGrant() throws Exception {
        start();
        RFuture<Boolean> waiting = NativeRateLimiters.get(client, "b").tryAcquireAsync(1, Duration.ofMinutes(10));
        awaitTheAskGranted();
        proxy.release();
        assertTrue(waiting.toCompletableFuture().get());
        assertEquals(RATE - 1, available());
        assertEquals(cancels, raw.calls("ratelimit.cancel"));
        assertEquals(1, logged(permitsKey("b")));
    }
}
