package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.slf4j.LoggerFactory;

/**
 * A server without the module: the same object is Redisson's own limiter on the same keys. The
 * missing module is found by the first call (one {@code ERR unknown command}, then none), and
 * said once in the log.
 */
class FallbackTest {
    static RedisServer server;
    static RedissonClient redisson;
    static Raw raw;
    static ListAppender<ILoggingEvent> log = new ListAppender<>();

    @BeforeAll
    static void start() {
        server = RedisServer.withoutModule();
        redisson = Clients.redisson(server);
        raw = new Raw(server.port);
        ((Logger) LoggerFactory.getLogger(NativeRateLimiters.class)).addAppender(log);
        log.start();
    }

    @AfterAll
    static void stop() {
        ((Logger) LoggerFactory.getLogger(NativeRateLimiters.class)).detachAppender(log);
        raw.close();
        redisson.shutdown();
        server.close();
    }

    @BeforeEach
    void flush() {
        raw.call("FLUSHALL");
    }

    private static long unknownCommands() {
        String stat = raw.info("errorstats", "errorstat_ERR");
        return stat == null ? 0 : Long.parseLong(stat.replaceAll("^count=(\\d+).*$", "$1"));
    }

    @Test
    void theMissingModuleIsFoundOnceAndSaidOnce() {
        NativeRateLimiter l = NativeRateLimiters.get(redisson, "api");
        long errors = unknownCommands();
        assertTrue(l.trySetRate(RateType.OVERALL, 100, Duration.ofMinutes(1)));
        assertFalse(l.usesModule());
        long afterFirst = unknownCommands();
        assertTrue(afterFirst - errors <= 1, "one unknown command at most (none if an earlier test found it)");
        for (int i = 0; i < 20; i++) {
            NativeRateLimiter other = NativeRateLimiters.get(redisson, "api");
            assertTrue(other.tryAcquire());
            other.availablePermits();
            other.getConfig();
        }
        assertEquals(afterFirst, unknownCommands(), "no call after the first tried the module");
        List<ILoggingEvent> lines = log.list.stream()
                .filter(e -> e.getFormattedMessage().contains("module missing")).toList();
        assertEquals(1, lines.size(), "said once: " + lines);
        assertTrue(lines.get(0).getFormattedMessage().contains("ERR unknown command"), lines.get(0).getFormattedMessage());
    }

    @Test
    @SuppressWarnings("deprecation")
    void everyMethodIsRedissonsOwnOnTheSameKeys() throws Exception {
        NativeRateLimiter l = NativeRateLimiters.get(redisson, "api");
        RRateLimiter theirs = redisson.getRateLimiter("api");
        long scripts = raw.scripts();
        assertTrue(l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1)));
        assertFalse(l.trySetRateAsync(RateType.OVERALL, 5, Duration.ofMinutes(1), Duration.ZERO).get());
        assertTrue(raw.scripts() > scripts, "Redisson's scripts ran");
        assertTrue(l.tryAcquire(2));
        assertEquals(3, theirs.availablePermits());
        assertTrue(theirs.tryAcquire());
        assertEquals(2, l.availablePermits());
        assertTrue(l.tryAcquireAsync(1).get());
        assertTrue(l.tryAcquire(Duration.ofSeconds(1)));
        assertFalse(l.tryAcquire(1, Duration.ofMillis(50)), "Redisson's own wait, with a timeout");
        if (RedissonVersion.atLeast(3, 52)) { // Redisson's release came with 3.52.0
            l.release(1);
            assertEquals(1, theirs.availablePermits());
            l.acquire(); // Redisson's polling, served at once
        } else {
            RedisException e = assertThrows(RedisException.class, () -> l.release(1));
            assertTrue(e.getCause() instanceof UnsupportedOperationException, String.valueOf(e.getCause()));
        }
        RateLimiterConfig c = l.getConfig();
        assertEquals(5L, c.getRate());
        assertEquals(60_000L, c.getRateInterval());
        l.setRate(RateType.OVERALL, 2, Duration.ofMinutes(1), Duration.ZERO);
        assertEquals(2, l.availablePermits());
        assertTrue(l.expire(Duration.ofMinutes(1)));
        assertTrue(l.delete());
        assertEquals(0, raw.integer("EXISTS", "api", "{api}:value", "{api}:permits"));
        RedisException e = assertThrows(RedisException.class, l::tryAcquire);
        assertTrue(e.getMessage().contains("RateLimiter is not initialized"), e.getMessage());
    }

    @Test
    void aWaitIsRedissonsPollingThere() throws Exception {
        NativeRateLimiter l = NativeRateLimiters.get(redisson, "jobs");
        l.trySetRate(RateType.OVERALL, 1, Duration.ofMillis(300));
        assertTrue(l.tryAcquire());
        RFuture<Void> waiting = l.acquireAsync();
        waiting.toCompletableFuture().get(60, TimeUnit.SECONDS);
        assertFalse(l.usesModule());
        assertEquals(0, raw.blockedClients());
    }
}
