package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.ratelimiter.RateLimiterArgs;

/**
 * setRate(RateLimiterArgs) and updateRate(RateLimiterArgs) (Redisson 4.4 and later; the redisson3
 * profile leaves this class out): SETRATE with and without KEEPSTATE, and XX.
 */
class RateArgsTest extends ModuleTestBase {

    @Test
    void updateRateChangesOnlyAnExistingLimiter() throws Exception {
        RRateLimiter l = NativeRateLimiters.get(redisson, "api");
        long scripts = raw.scripts();
        assertFalse(l.updateRate(RateLimiterArgs.of(RateType.OVERALL, 5, Duration.ofMinutes(1))));
        assertEquals(0, raw.integer("EXISTS", "api"));
        l.setRate(RateLimiterArgs.of(RateType.OVERALL, 5, Duration.ofMinutes(1)));
        assertTrue(l.tryAcquire(4));
        // keepState: the 4 permits stay taken under the new rate
        assertTrue(l.updateRate(RateLimiterArgs.of(RateType.OVERALL, 10, Duration.ofMinutes(1)).keepState(true)));
        assertEquals(6, l.availablePermits());
        // without keepState the state is reset
        assertTrue(l.updateRateAsync(RateLimiterArgs.of(RateType.OVERALL, 10, Duration.ofMinutes(1))).get());
        assertEquals(10, l.availablePermits());
        l.setRateAsync(RateLimiterArgs.of(RateType.OVERALL, 3, Duration.ofMinutes(1))
                .keepAliveTime(Duration.ofMinutes(5))).get();
        assertTrue(raw.integer("PTTL", "api") > 0);
        assertEquals(scripts, raw.scripts());
        assertEquals(redisson.getRateLimiter("api").getConfig().getRate(), l.getConfig().getRate());
        assertThrows(IllegalArgumentException.class, () -> l.setRate(RateLimiterArgs.of(RateType.OVERALL, 3,
                Duration.ofMinutes(1)).keepAliveTime(Duration.ofSeconds(1))));
    }

    /** A rate lowered with keepState: the module keeps the debt where Redisson's script clamps at 0. */
    @Test
    void aLoweredRateKeepsTheWindowsPermits() {
        RRateLimiter l = NativeRateLimiters.get(redisson, "api");
        l.setRate(RateLimiterArgs.of(RateType.OVERALL, 10, Duration.ofMinutes(1)));
        assertTrue(l.tryAcquire(8));
        l.setRate(RateLimiterArgs.of(RateType.OVERALL, 5, Duration.ofMinutes(1)).keepState(true));
        assertEquals(0, l.availablePermits());
        assertEquals("-3", raw.call("GET", valueKey("api")));
        assertFalse(l.tryAcquire());
    }
}
