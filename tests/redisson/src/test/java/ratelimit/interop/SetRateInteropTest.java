package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.ratelimiter.RateLimiterArgs;

/**
 * Redisson's four ways to configure a limiter against the module's SETRATE flags:
 * trySetRate = NX, setRate = no flag, updateRate = XX, and {@code keepState(true)} = KEEPSTATE.
 */
class SetRateInteropTest extends InteropBase {

    @Test
    void trySetRateAndSetRateNxCreateTheSameHashAndNeverOverwrite() {
        assertTrue(limiter("j").trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(10)));
        assertEquals(1L, rl("SETRATE", "m", 5, 10000, "NX"));
        Map<String, String> expected = Map.of("rate", "5", "interval", "10000", "type", "0", "keepAliveTime", "0");
        assertEquals(expected, hash("j"), "hash written by Redisson trySetRate");
        assertEquals(expected, hash("m"), "hash written by SETRATE NX");

        // Each side's NX on the other side's limiter: refused, nothing changed.
        assertEquals(0L, rl("SETRATE", "j", 7, 20000, "PER_CLIENT", "NX"));
        assertFalse(limiter("m").trySetRate(RateType.PER_CLIENT, 7, Duration.ofSeconds(20)));
        assertEquals(expected, hash("j"));
        assertEquals(expected, hash("m"));
        assertEquals(Map.of("rate", "5", "interval", "10000", "type", "OVERALL", "keepAliveTime", "0"),
                moduleConfig("j"));
        RateLimiterConfig c = limiter("m").getConfig();
        assertEquals(RateType.OVERALL, c.getRateType());
        assertEquals(5L, c.getRate());
        assertEquals(10000L, c.getRateInterval());
        // NX never touches state.
        assertEquals(0L, exists(valueKey("j"), permitsKey("j"), valueKey("m"), permitsKey("m")));
    }

    @Test
    void setRateResetsTheStateTheOtherSideTook() {
        RRateLimiter j = limiter("lim");
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(3));
        assertEquals("2", get(valueKey("lim")));

        // Module SETRATE (no flag) resets what Redisson took.
        assertEquals(1L, rl("SETRATE", "lim", 4, 60000));
        assertEquals(0L, exists(valueKey("lim"), permitsKey("lim")));
        assertEquals(4L, j.availablePermits());
        assertEquals(4L, j.getConfig().getRate());

        // Redisson setRate resets what the module took.
        assertNull(rl("TRYACQUIRE", "lim", 3));
        assertEquals(3L, logged(permitsKey("lim")));
        j.setRate(RateType.OVERALL, 6, Duration.ofSeconds(60));
        assertEquals(0L, exists(valueKey("lim"), permitsKey("lim")));
        assertEquals(6L, rl("AVAILABLE", "lim"));
        assertNull(rl("TRYACQUIRE", "lim", 6));
        assertEquals(Map.of("rate", "6", "interval", "60000", "type", "0", "keepAliveTime", "0"), hash("lim"));
    }

    @Test
    void updateRateIsXxOnlyOnAnExistingLimiter() {
        // Missing limiter: both refuse and create nothing.
        assertFalse(limiter("none").updateRate(RateLimiterArgs.of(RateType.OVERALL, 5, Duration.ofSeconds(1))));
        assertEquals(0L, rl("SETRATE", "none", 5, 1000, "XX"));
        assertEquals(0L, exists("none", valueKey("none"), permitsKey("none")));

        // Module-created, module-used limiter updated by Redisson: reconfigured and reset.
        assertEquals(1L, rl("SETRATE", "a", 5, 60000));
        assertNull(rl("TRYACQUIRE", "a", 2));
        assertTrue(limiter("a").updateRate(RateLimiterArgs.of(RateType.OVERALL, 8, Duration.ofSeconds(30))));
        assertEquals(Map.of("rate", "8", "interval", "30000", "type", "OVERALL", "keepAliveTime", "0"),
                moduleConfig("a"));
        assertEquals(0L, exists(valueKey("a"), permitsKey("a")));
        assertEquals(8L, rl("AVAILABLE", "a"));

        // Redisson-created, Redisson-used limiter updated with XX: the same.
        assertTrue(limiter("b").trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(limiter("b").tryAcquire(2));
        assertEquals(1L, rl("SETRATE", "b", 8, 30000, "XX"));
        assertEquals(0L, exists(valueKey("b"), permitsKey("b")));
        assertEquals(8L, limiter("b").availablePermits());
        assertEquals(30000L, limiter("b").getConfig().getRateInterval());
    }

    @Test
    void keepStateKeepsTheOtherSidesPermitsWhenTheRateGrows() {
        // Module took 3 of 5; Redisson raises the rate to 8 keeping state: 5 left.
        assertEquals(1L, rl("SETRATE", "a", 5, 60000));
        assertNull(rl("TRYACQUIRE", "a", 3));
        assertTrue(limiter("a").updateRate(
                RateLimiterArgs.of(RateType.OVERALL, 8, Duration.ofSeconds(60)).keepState(true)));
        assertEquals("5", get(valueKey("a")));
        assertEquals(List.of(3L), loggedPermits(permitsKey("a")));
        assertEquals(5L, rl("AVAILABLE", "a"));
        assertTrue(rl("TRYACQUIRE", "a", 6) instanceof Long, "6 > 5 left: refused");
        assertNull(rl("TRYACQUIRE", "a", 5));

        // Redisson took 3 of 5; the module raises the rate to 8 with XX KEEPSTATE: 5 left.
        RRateLimiter b = limiter("b");
        assertTrue(b.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(b.tryAcquire(3));
        assertEquals(1L, rl("SETRATE", "b", 8, 60000, "XX", "KEEPSTATE"));
        assertEquals("5", get(valueKey("b")));
        assertEquals(List.of(3L), loggedPermits(permitsKey("b")));
        assertEquals(5L, b.availablePermits());
        assertFalse(b.tryAcquire(6));
        assertTrue(b.tryAcquire(5));

        // setRate(args) with keepState (no flag) on a missing limiter creates it with the whole rate,
        // on both sides alike.
        limiter("c").setRate(RateLimiterArgs.of(RateType.OVERALL, 4, Duration.ofSeconds(60)).keepState(true));
        assertEquals(1L, rl("SETRATE", "d", 4, 60000, "KEEPSTATE"));
        assertEquals(4L, rl("AVAILABLE", "c"));
        assertEquals(4L, limiter("d").availablePermits());
        assertEquals(hash("c"), hash("d"));
    }

    /**
     * Two entries on each limiter, the second more than the new interval after the first; the new
     * interval then expires the first one only, provided both rate changes run within one
     * interval of the second entries (read on the server's clock). An attempt the machine stalled
     * past that shows nothing and runs again with an interval ten times longer.
     */
    @Test
    void keepStateWithAShorterIntervalPrunesTheOtherSidesOldEntries() throws InterruptedException {
        for (long interval : new long[] {2000, 20_000}) {
            if (shorterIntervalPrunes(interval, "j" + interval, "m" + interval)) {
                return;
            }
            System.out.printf("interval %d ms: the machine stalled past it; again, longer%n", interval);
        }
        throw new AssertionError("the machine stalled past every interval tried");
    }

    private static boolean shorterIntervalPrunes(long interval, String j, String m) throws InterruptedException {
        RRateLimiter jl = limiter(j);
        assertTrue(jl.trySetRate(RateType.OVERALL, 10, Duration.ofSeconds(60)));
        assertEquals(1L, rl("SETRATE", m, 10, 60000));
        assertTrue(jl.tryAcquire(4)); // j: Redisson's entry, pruned below by the module
        assertNull(rl("TRYACQUIRE", m, 4)); // m: the module's entry, pruned below by Redisson
        long first = Math.max(log(permitsKey(j)).get(0).score(), log(permitsKey(m)).get(0).score());
        while (serverMs() <= first + interval + 100) {
            Thread.sleep(20);
        }
        assertNull(rl("TRYACQUIRE", j, 1));
        assertTrue(limiter(m).tryAcquire(1));
        long second = Math.min(log(permitsKey(j)).get(1).score(), log(permitsKey(m)).get(1).score());

        assertEquals(1L, rl("SETRATE", j, 10, interval, "XX", "KEEPSTATE"));
        assertTrue(limiter(m).updateRate(
                RateLimiterArgs.of(RateType.OVERALL, 10, Duration.ofMillis(interval)).keepState(true)));
        if (serverMs() >= second + interval) {
            return false;
        }
        assertEquals(List.of(1L), loggedPermits(permitsKey(j)));
        assertEquals(List.of(1L), loggedPermits(permitsKey(m)));
        assertEquals("9", get(valueKey(j)));
        assertEquals("9", get(valueKey(m)));
        return true;
    }
}
