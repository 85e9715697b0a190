package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiterReactive;
import org.redisson.api.RRateLimiterRx;
import org.redisson.api.RateType;
import reactor.core.Disposable;

/** The Reactor and RxJava forms: Redisson's own proxies around the native limiter. */
class ReactiveTest extends ModuleTestBase {

    @Test
    void reactorFormSendsTheModulesCommands() {
        long scripts = raw.scripts();
        long tryacquire = raw.calls("ratelimit.tryacquire");
        RRateLimiterReactive l = NativeRateLimiters.reactive(redisson, "api");
        assertTrue(l.trySetRate(RateType.OVERALL, 3, Duration.ofMinutes(1)).block());
        assertTrue(l.tryAcquire(2).block());
        assertFalse(l.tryAcquire(2).block());
        assertEquals(1L, l.availablePermits().block());
        l.acquire().block();
        assertTrue(l.isExists().block());
        assertEquals(scripts, raw.scripts());
        assertEquals(tryacquire + 2, raw.calls("ratelimit.tryacquire"));
    }

    @Test
    void aDisposedReactorWaitLeavesTheQueue() {
        freezeClock();
        RRateLimiterReactive l = NativeRateLimiters.reactive(redisson, "jobs");
        l.trySetRate(RateType.OVERALL, 1, Duration.ofSeconds(1)).block();
        assertTrue(l.tryAcquire().block());
        Disposable waiting = l.acquire().subscribe();
        awaitBlocked(1);
        waiting.dispose();
        awaitBlocked(0);
        advance(1000);
        assertEquals(1L, l.availablePermits().block());
    }

    @Test
    void rxJavaFormSendsTheModulesCommands() {
        long scripts = raw.scripts();
        RRateLimiterRx l = NativeRateLimiters.rxJava(redisson, "api");
        assertTrue(l.trySetRate(RateType.OVERALL, 3, Duration.ofMinutes(1)).blockingGet());
        assertTrue(l.tryAcquire(3).blockingGet());
        assertFalse(l.tryAcquire().blockingGet());
        assertFalse(l.tryAcquire(1, Duration.ofMillis(100)).blockingGet());
        assertEquals(0L, l.availablePermits().blockingGet());
        assertEquals(scripts, raw.scripts());
    }
}
