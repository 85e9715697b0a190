package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;

/**
 * Where the module differs from Redisson 4.7.0's scripts on purpose (README, "Differences from
 * Redisson's scripts"): each test runs the same steps through both and pins both observed results.
 */
class DifferencesTest extends InteropBase {

    @Test
    void releaseRaisesTheValueInRedissonButRemovesLogEntriesInTheModule() {
        // Redisson 4.7.0: release only raises the value; the 3 logged permits stay and count again.
        RRateLimiter j = limiter("j");
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(3));
        j.release(2);
        assertEquals("4", get(valueKey("j")));
        assertEquals(List.of(3L), loggedPermits(permitsKey("j")), "Redisson leaves the log as it was");
        assertEquals(4L, j.availablePermits());
        assertEquals(4L, rl("AVAILABLE", "j"));

        // The module on the same steps: RELEASE takes the permits out of Redisson's own entry.
        RRateLimiter m = limiter("m");
        assertTrue(m.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(m.tryAcquire(3));
        assertEquals(2L, rl("RELEASE", "m", 2));
        assertEquals("4", get(valueKey("m")));
        assertEquals(List.of(1L), loggedPermits(permitsKey("m")), "3 logged - 2 released");
        assertEquals(4L, m.availablePermits());

        // Releasing more than is logged: Redisson raises the value to the rate whatever the log
        // holds; the module gives back what is logged (1) and says so.
        j.release(10);
        assertEquals("5", get(valueKey("j")));
        assertEquals(List.of(3L), loggedPermits(permitsKey("j")));
        assertEquals(1L, rl("RELEASE", "m", 10));
        assertEquals("5", get(valueKey("m")));
        assertEquals(0L, exists(permitsKey("m")));

        // Redisson's release of permits the module took: value raised, the module's entry kept.
        assertEquals(1L, rl("SETRATE", "k", 5, 60000));
        assertNull(rl("TRYACQUIRE", "k", 3));
        limiter("k").release(2);
        assertEquals("4", get(valueKey("k")));
        assertEquals(List.of(3L), loggedPermits(permitsKey("k")));
    }

    @Test
    void availablePermitsWritesInRedissonAndOnlyReadsInTheModule() {
        RRateLimiter j = limiter("a");
        assertEquals(1L, rl("SETRATE", "a", 5, 60000, "KEEPALIVE", 600000));
        assertTrue(j.tryAcquire(2));
        assertNull(rl("TRYACQUIRE", "a", 1));
        assertEquals(2L, j.availablePermits());
        assertEquals(2L, rl("AVAILABLE", "a"));

        // The value key is lost (deleted, evicted) while 3 permits are still logged.
        assertEquals(1L, redis.integer("DEL", valueKey("a")));
        // Module: counts the log (5 - 3) and writes nothing.
        assertEquals(2L, rl("AVAILABLE", "a"));
        assertEquals(0L, exists(valueKey("a")));
        // Redisson: says the whole rate and writes it, without the limiter's TTL.
        assertEquals(5L, j.availablePermits());
        assertEquals("5", get(valueKey("a")));
        assertEquals(-1L, pttl(valueKey("a")), "Redisson's SET leaves the value without the keepAlive TTL");
        assertTrue(pttl("a") > 0);
        assertEquals(3L, logged(permitsKey("a")));
        // From then on both trust the value Redisson wrote: 3 more are granted while 3 are logged.
        assertEquals(5L, rl("AVAILABLE", "a"));
        assertNull(rl("TRYACQUIRE", "a", 3));
        assertEquals(6L, logged(permitsKey("a")), "6 permits in a window of rate 5 after Redisson's write");
    }

    @Test
    void emptyLogBehindAStaleZeroValue() {
        // Someone deleted the log while the value said 0.
        RRateLimiter j = limiter("s");
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(5));
        assertEquals(1L, redis.integer("DEL", permitsKey("s")));
        // Module: no live entry means no permit in use.
        assertEquals(5L, rl("AVAILABLE", "s"));
        // Redisson trusts the stale value and refuses; its wait computation then reads a missing
        // first entry and fails with a Lua error.
        assertEquals(0L, j.availablePermits());
        Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> j.tryAcquire(1));
        assertTrue(rootMessage(e).contains("arithmetic on a nil value"), rootMessage(e));
        // The module's grant repairs the value; Redisson is fine afterwards.
        assertNull(rl("TRYACQUIRE", "s", 1));
        assertEquals("4", get(valueKey("s")));
        assertTrue(j.tryAcquire(4));
    }
}
