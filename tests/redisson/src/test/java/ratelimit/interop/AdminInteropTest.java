package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;

/** getConfig, expire, clearExpire, delete and isExists against CONFIG, EXPIRE, PERSIST, DELETE. */
class AdminInteropTest extends InteropBase {

    @Test
    void getConfigAndConfigReadEachOthersLimiters() {
        assertTrue(limiter("j").trySetRate(RateType.PER_CLIENT, 3, Duration.ofSeconds(7), Duration.ofSeconds(30)));
        assertEquals(Map.of("rate", "3", "interval", "7000", "type", "PER_CLIENT", "keepAliveTime", "30000"),
                moduleConfig("j"));

        assertEquals(1L, rl("SETRATE", "m", 9, 2500));
        RateLimiterConfig c = limiter("m").getConfig();
        assertEquals(RateType.OVERALL, c.getRateType());
        assertEquals(9L, c.getRate());
        assertEquals(2500L, c.getRateInterval());

        // A missing limiter: nil from the module; Redisson's getConfig makes up OVERALL 0/0.
        assertNull(rl("CONFIG", "none"));
        RateLimiterConfig none = limiter("none").getConfig();
        assertEquals(RateType.OVERALL, none.getRateType());
        assertEquals(0L, none.getRate());
        assertEquals(0L, none.getRateInterval());
    }

    @Test
    void expireAndClearExpireCoverTheSameKeysOnBothSides() {
        RRateLimiter j = limiter("e");
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(1));
        assertNull(rl("TRYACQUIRE", "e", 1));
        String[] keys = {"e", valueKey("e"), permitsKey("e")};

        assertTrue(j.expire(Duration.ofSeconds(100)));
        for (String k : keys) {
            long t = pttl(k);
            assertTrue(t > 90_000 && t <= 100_000, k + " PTTL " + t);
        }
        assertEquals(1L, rl("PERSIST", "e"));
        for (String k : keys) {
            assertEquals(-1L, pttl(k), k);
        }
        assertEquals(-1L, j.remainTimeToLive());

        assertEquals(1L, rl("EXPIRE", "e", 50000));
        long remain = j.remainTimeToLive();
        assertTrue(remain > 40_000 && remain <= 50_000, "Redisson sees the module's TTL: " + remain);
        for (String k : keys) {
            long t = pttl(k);
            assertTrue(t > 40_000 && t <= 50_000, k + " PTTL " + t);
        }
        assertTrue(j.clearExpire());
        for (String k : keys) {
            assertEquals(-1L, pttl(k), k);
        }
        // Nothing to persist any more: both say so.
        assertEquals(0L, rl("PERSIST", "e"));
        assertFalse(j.clearExpire());
    }

    @Test
    void deleteAndIsExistsInBothDirections() {
        assertEquals(1L, rl("SETRATE", "d", 5, 60000));
        assertNull(rl("TRYACQUIRE", "d", 2));
        RRateLimiter j = limiter("d");
        assertTrue(j.isExists());
        assertTrue(j.delete());
        assertNull(rl("CONFIG", "d"));
        assertEquals(0L, exists("d", valueKey("d"), permitsKey("d")));
        assertFalse(j.isExists());
        assertEquals("ERR RateLimiter is not initialized (limiter 'd')", rlError("TRYACQUIRE", "d"));

        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(2));
        assertEquals(3L, rl("DELETE", "d"), "hash, value and log");
        assertFalse(j.isExists());
        assertFalse(j.delete());
        assertEquals(0L, rl("DELETE", "d"));
        String error = rootMessage(assertThrows(Exception.class, () -> j.tryAcquire(1)));
        assertTrue(error.contains("RateLimiter is not initialized"), error);
    }
}
