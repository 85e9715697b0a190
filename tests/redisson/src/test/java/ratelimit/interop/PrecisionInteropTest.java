package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;

/**
 * The module merges grants of one PRECISION bucket into one log member whose permits are the sum
 * (same layout, same 16-byte id): Redisson's scripts sum member permits, so they count merged
 * members right, and Redisson ignores the module's own `precision` hash field.
 */
class PrecisionInteropTest extends InteropBase {
    @Test
    void redissonCountsTheSumsOfMergedMembers() {
        RRateLimiter j = limiter("merged");
        // One bucket spans the whole interval: every grant of the test lands in one member.
        assertEquals(1L, rl("SETRATE", "merged", 10, 60000, "PRECISION", 60000));
        for (int i = 0; i < 4; i++) {
            assertNull(rl("TRYACQUIRE", "merged", 2));
        }
        List<Entry> entries = log(permitsKey("merged"));
        assertEquals(1, entries.size(), "four grants, one member");
        assertEquals(8L, entries.get(0).permits());
        assertEquals(16, entries.get(0).id().length);
        assertEquals("60000", redis.text("HGET", "merged", "precision"));

        assertEquals(2L, j.availablePermits());
        assertFalse(j.tryAcquire(3));
        assertTrue(j.tryAcquire(2));
        assertEquals(0L, rl("AVAILABLE", "merged"));
        assertEquals(List.of(2L, 8L), loggedSorted(permitsKey("merged")));
        // Redisson's config reads the four fields it knows.
        assertEquals(10L, j.getConfig().getRate());
    }
}
