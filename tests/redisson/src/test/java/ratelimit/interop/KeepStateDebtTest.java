package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.ratelimiter.RateLimiterArgs;

/**
 * Lowering the rate below what the window holds, keeping state: Redisson's script clamps the value
 * at 0; the module stores the debt (a negative value) and pays it as entries expire, so the window
 * never holds more than the new rate. Replies (AVAILABLE) clamp at 0 on the module's side.
 */
class KeepStateDebtTest extends InteropBase {

    private static RateLimiterArgs rate5(long intervalMs) {
        return RateLimiterArgs.of(RateType.OVERALL, 5, Duration.ofMillis(intervalMs)).keepState(true);
    }

    @Test
    void loweringTheRateKeepsTheDebtInTheModuleAndClampsItInRedisson() {
        // Twins: 8 of 10 taken in each; then the rate drops to 5.
        assertEquals(1L, rl("SETRATE", "j", 10, 60000));
        assertEquals(1L, rl("SETRATE", "m", 10, 60000));
        assertNull(rl("TRYACQUIRE", "j", 8));
        assertTrue(limiter("m").tryAcquire(8));

        assertTrue(limiter("j").updateRate(rate5(60000)));
        assertEquals(1L, rl("SETRATE", "m", 5, 60000, "XX", "KEEPSTATE"));

        assertEquals("0", get(valueKey("j")), "Redisson clamps at 0");
        assertEquals("-3", get(valueKey("m")), "the module keeps the debt: 5 - 8");
        assertEquals(0L, rl("AVAILABLE", "j"));
        assertEquals(0L, rl("AVAILABLE", "m"), "AVAILABLE clamps its reply at 0");
        assertEquals(0L, limiter("j").availablePermits());
        // Redisson's availablePermits returns the stored value as it is.
        assertEquals(-3L, limiter("m").availablePermits(), "Redisson reports the module's debt raw");
        assertFalse(limiter("j").tryAcquire(1));
        assertFalse(limiter("m").tryAcquire(1));
        assertTrue(rl("TRYACQUIRE", "m", 1) instanceof Long);
    }

    /**
     * Real clock (Redisson stamps its grants with the client's clock): the checks must run after
     * the first grants expired and before the second ones do. An attempt the machine stalled past
     * that window (read on the server's clock) shows nothing and runs again with an interval ten
     * times longer.
     */
    @Test
    void afterAPartialExpiryRedissonsClampOverAdmitsAndTheDebtDoesNot() throws InterruptedException {
        for (long interval : new long[] {4000, 40_000}) {
            if (partialExpiry(interval, "j" + interval, "m" + interval)) {
                return;
            }
            System.out.printf("interval %d ms: the machine stalled past the check window; again, longer%n", interval);
        }
        throw new AssertionError("the machine stalled past every check window");
    }

    private static boolean partialExpiry(long interval, String j, String m) throws InterruptedException {
        assertEquals(1L, rl("SETRATE", j, 10, interval));
        assertEquals(1L, rl("SETRATE", m, 10, interval));
        assertNull(rl("TRYACQUIRE", j, 4));
        assertNull(rl("TRYACQUIRE", m, 4));
        long firstGrant = Math.max(log(permitsKey(j)).get(0).score(), log(permitsKey(m)).get(0).score());
        long firstFree = firstGrant + interval;
        // The second grants half an interval later, on the server's clock.
        while (serverMs() < firstGrant + interval / 2) {
            Thread.sleep(20);
        }
        assertTrue(limiter(j).tryAcquire(4));
        assertTrue(limiter(m).tryAcquire(4));
        long secondFree = Math.min(log(permitsKey(j)).get(1).score(), log(permitsKey(m)).get(1).score()) + interval;

        // 8 permits in the window; the rate drops to 5 (Redisson on j, the module on m).
        assertTrue(limiter(j).updateRate(rate5(interval)));
        assertEquals(1L, rl("SETRATE", m, 5, interval, "XX", "KEEPSTATE"));

        // Wait until the first 4 permits are free and the second 4 are still in the window.
        while (serverMs() < firstFree + 50) {
            Thread.sleep(20);
        }
        if (serverMs() >= secondFree - 500) {
            return false;
        }

        // j (value 0 + 4 freed = 4): Redisson grants 4 more while 4 are still logged: 8 > rate 5.
        assertTrue(limiter(j).tryAcquire(4));
        assertEquals(List.of(4L, 4L), loggedPermits(permitsKey(j)), "8 permits in one window of rate 5");
        // m (value -3 + 4 freed = 1): Redisson refuses 4, the module grants the 1 that is left.
        assertFalse(limiter(m).tryAcquire(4));
        assertNull(rl("TRYACQUIRE", m, 1));
        assertTrue(rl("TRYACQUIRE", m, 1) instanceof Long);
        assertEquals(List.of(4L, 1L), loggedPermits(permitsKey(m)), "5 permits in the window: the rate");
        return serverMs() < secondFree;
    }
}
