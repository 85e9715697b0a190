package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;

/** keepAliveTime (KEEPALIVE), and limiter names with and without a '{'. */
class KeepAliveAndNamesTest extends InteropBase {

    private static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 20_000; // a bound that only a hang reaches
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("never happened: " + what);
            }
            Thread.sleep(50);
        }
    }

    @Test
    void keepAliveTimeIsSharedAndEndsTheLimiterForBothSides() throws InterruptedException {
        // Redisson creates with keepAliveTime 2 s; the module's grant applies it to value and log.
        RRateLimiter j = limiter("ka");
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(1), Duration.ofSeconds(2)));
        assertEquals("2000", moduleConfig("ka").get("keepAliveTime"));
        long hashTtl = pttl("ka");
        assertTrue(hashTtl > 0 && hashTtl <= 2000, "hash PTTL " + hashTtl);
        assertNull(rl("TRYACQUIRE", "ka", 2));
        for (String k : List.of("ka", valueKey("ka"), permitsKey("ka"))) {
            long t = pttl(k);
            assertTrue(t > 1000 && t <= 2000, k + " PTTL " + t);
        }
        eventually("the idle limiter expires", () -> !j.isExists());
        assertNull(rl("CONFIG", "ka"));
        assertEquals(0L, exists(valueKey("ka"), permitsKey("ka")));

        // The module creates with KEEPALIVE 2000; Redisson's grant applies it to value and log.
        assertEquals(1L, rl("SETRATE", "kb", 5, 1000, "KEEPALIVE", 2000));
        assertTrue(limiter("kb").tryAcquire(2));
        for (String k : List.of("kb", valueKey("kb"), permitsKey("kb"))) {
            long t = pttl(k);
            assertTrue(t > 1000 && t <= 2000, k + " PTTL " + t);
        }
        eventually("the idle limiter expires", () -> rl("CONFIG", "kb") == null);
        assertTrue(!limiter("kb").isExists());

        // Both refuse a keepAliveTime shorter than the interval.
        assertThrows(IllegalArgumentException.class,
                () -> j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(2), Duration.ofSeconds(1)));
        assertEquals("ERR KEEPALIVE must be 0 or at least the interval",
                rlError("SETRATE", "ka", 5, 2000, "KEEPALIVE", 1000));
    }

    @Test
    void namesWithAndWithoutBracesShareTheSameKeys() {
        String braced = "{tenant:7}:api";
        RRateLimiter j = limiter(braced);
        assertTrue(j.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(2));
        assertEquals(2L, exists("{tenant:7}:api:value", "{tenant:7}:api:permits"), "unwrapped suffixes");
        assertNull(rl("TRYACQUIRE", braced, 1));
        assertEquals(List.of(1L, 2L), loggedSorted("{tenant:7}:api:permits"));
        assertEquals(2L, j.availablePermits());

        String plain = "orders";
        assertEquals(1L, rl("SETRATE", plain, 5, 60000));
        assertNull(rl("TRYACQUIRE", plain, 4));
        assertEquals(2L, exists("{orders}:value", "{orders}:permits"), "wrapped suffixes");
        assertEquals(1L, limiter(plain).availablePermits());
        assertTrue(limiter(plain).tryAcquire(1));
        assertEquals(List.of(1L, 4L), loggedSorted("{orders}:permits"));

        // A '{' that is no complete hash tag still means "append unwrapped", and client keys hang
        // off the value name: "a{b:value:<id>".
        String odd = "a{b";
        String id = redisson.getId();
        assertEquals(1L, rl("SETRATE", odd, 3, 60000, "PER_CLIENT"));
        assertTrue(limiter(odd).tryAcquire(1));
        assertEquals(2L, exists("a{b:value:" + id, "a{b:permits:" + id));
        assertNull(rl("TRYACQUIRE", odd, 2, "CLIENT", id));
        assertTrue(rl("TRYACQUIRE", odd, 1, "CLIENT", id) instanceof Long);
        assertEquals(0L, limiter(odd).availablePermits());
    }
}
