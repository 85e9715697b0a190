package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;

/**
 * PER_CLIENT limiters: each Redisson instance has its own value and log, keyed by
 * {@code RedissonClient.getId()}; the module reaches the same state with {@code CLIENT <id>}.
 */
class PerClientInteropTest extends InteropBase {

    @Test
    void redissonCreatedPerClientStateIsTheModulesClientState() {
        String id1 = redisson.getId();
        String id2 = redisson2.getId();
        assertNotEquals(id1, id2);
        RRateLimiter j1 = redisson.getRateLimiter("pc");
        RRateLimiter j2 = redisson2.getRateLimiter("pc");
        assertTrue(j1.trySetRate(RateType.PER_CLIENT, 2, Duration.ofSeconds(60)));
        assertTrue(j1.tryAcquire(2));
        assertEquals("0", get(valueKey("pc", id1)));
        assertEquals(List.of(2L), loggedPermits(permitsKey("pc", id1)));
        assertEquals(0L, exists(valueKey("pc"), permitsKey("pc")), "no OVERALL state");

        // Client 1 is spent, client 2 is not.
        assertTrue(rl("TRYACQUIRE", "pc", 1, "CLIENT", id1) instanceof Long);
        assertNull(rl("TRYACQUIRE", "pc", 1, "CLIENT", id2));
        assertEquals(1L, j2.availablePermits());
        assertFalse(j2.tryAcquire(2));
        assertTrue(j2.tryAcquire(1));
        assertEquals(0L, rl("AVAILABLE", "pc", "CLIENT", id2));
        assertEquals(List.of(1L, 1L), loggedPermits(permitsKey("pc", id2)));
        assertEquals("ERR the limiter is PER_CLIENT: CLIENT id is required", rlError("AVAILABLE", "pc"));

        // The module gives client 1 a permit back; Redisson client 1 can use it.
        assertEquals(1L, rl("RELEASE", "pc", 1, "CLIENT", id1));
        assertTrue(j1.tryAcquire(1));
        assertFalse(j1.tryAcquire(1));

        // DELETE with CLIENT removes the hash and that client's keys only, like Redisson's delete.
        assertEquals(3L, rl("DELETE", "pc", "CLIENT", id1));
        assertEquals(0L, exists("pc", valueKey("pc", id1), permitsKey("pc", id1)));
        assertEquals(2L, exists(valueKey("pc", id2), permitsKey("pc", id2)));
        assertTrue(j2.delete());
        assertEquals(0L, exists(valueKey("pc", id2), permitsKey("pc", id2)));
    }

    @Test
    void moduleCreatedPerClientLimiterServesRedissonClients() {
        String id1 = redisson.getId();
        String id2 = redisson2.getId();
        assertEquals(1L, rl("SETRATE", "pm", 3, 60000, "PER_CLIENT"));
        RateLimiterConfig c = redisson2.getRateLimiter("pm").getConfig();
        assertEquals(RateType.PER_CLIENT, c.getRateType());
        assertEquals(3L, c.getRate());

        assertNull(rl("TRYACQUIRE", "pm", 3, "CLIENT", id1));
        assertFalse(redisson.getRateLimiter("pm").tryAcquire(1));
        assertTrue(redisson2.getRateLimiter("pm").tryAcquire(3));
        assertEquals(0L, rl("AVAILABLE", "pm", "CLIENT", id2));

        // Redisson's expire reaches its own client's keys; the module's EXPIRE ... CLIENT the other's.
        assertTrue(redisson.getRateLimiter("pm").expire(Duration.ofSeconds(100)));
        assertTrue(pttl(valueKey("pm", id1)) > 0);
        assertTrue(pttl(permitsKey("pm", id1)) > 0);
        assertEquals(-1L, pttl(valueKey("pm", id2)));
        assertEquals(1L, rl("EXPIRE", "pm", 100000, "CLIENT", id2));
        assertTrue(pttl(valueKey("pm", id2)) > 0);
        assertTrue(pttl(permitsKey("pm", id2)) > 0);
        assertTrue(redisson2.getRateLimiter("pm").clearExpire());
        assertEquals(-1L, pttl(valueKey("pm", id2)));
        assertEquals(-1L, pttl("pm"));
        assertTrue(pttl(valueKey("pm", id1)) > 0, "client 2's clearExpire leaves client 1's keys alone");

        // Switching the mode with Redisson resets both the OVERALL state and this client's state.
        assertTrue(redisson.getRateLimiter("pm").updateRate(
                org.redisson.api.ratelimiter.RateLimiterArgs.of(RateType.OVERALL, 3, Duration.ofSeconds(60))
                        .keepState(true)));
        assertEquals(0L, exists(valueKey("pm", id1), permitsKey("pm", id1)));
        assertEquals(3L, rl("AVAILABLE", "pm"));
    }
}
