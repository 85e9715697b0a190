package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.api.GcraConfig;
import org.redisson.api.GcraResult;
import org.redisson.api.RGcra;

/**
 * Redisson's {@code RGcra} (4.4+, written for the {@code GCRA} command Redis compiled out of 8.8)
 * against the module's {@code GCRA}: 4.7's {@code tryAcquire} runs {@code redis.call('GCRA', ...)}
 * from a script with the rate in a {@code {name}:config} hash; the deprecated form sends
 * {@code GCRA} directly. The module's clock is frozen for each test ({@code RATELIMIT.DEBUG
 * SETCLOCK}), so every reply is exact.
 */
class GcraInteropTest extends InteropBase {
    /** 2027-01-15 08:00:00.206 UTC: later than the real clock, so PXAT expiries stay ahead. */
    static final long START = 1_800_000_000_206L;

    @BeforeEach
    void freeze() {
        assertEquals("OK", redis.text("RATELIMIT.DEBUG", "SETCLOCK", START));
    }

    @AfterEach
    void thaw() {
        assertEquals("OK", redis.text("RATELIMIT.DEBUG", "REALCLOCK"));
    }

    static void advance(long ms) {
        redis.call("RATELIMIT.DEBUG", "ADVANCE", ms);
    }

    static void assertResult(GcraResult r, boolean limited, long max, long available, long retry, long full) {
        assertEquals(List.of(limited, max, available, retry, full),
                List.of(r.isLimited(), r.getMaxTokens(), r.getAvailableTokens(), r.getRetryAfterSeconds(),
                        r.getFullBurstAfterSeconds()),
                "limited, max tokens, available, retry after, full burst after: " + r);
    }

    @Test
    void trySetRateThenBurstThenLimited() {
        RGcra gcra = redisson.getGcra("api");
        assertTrue(gcra.trySetRate(2, 4, Duration.ofSeconds(1)));
        assertFalse(gcra.trySetRate(9, 9, Duration.ofSeconds(9)), "a second trySetRate keeps the first rate");
        assertEquals(new GcraConfig(2, 4, Duration.ofSeconds(1)), gcra.getConfig());
        // T = 250 ms, tolerance 750 ms: three pass at once, the fourth waits 250 ms.
        assertResult(gcra.tryAcquire(), false, 3, 2, -1, 1);
        assertResult(gcra.tryAcquire(), false, 3, 1, -1, 1);
        assertResult(gcra.tryAcquire(), false, 3, 0, -1, 1);
        assertResult(gcra.tryAcquire(), true, 3, 0, 1, 1);
        // The state is Redis's: the TAT in microseconds, expiring at the TAT.
        long tat = (START + 750) * 1000;
        assertEquals(Long.toString(tat), get("api"));
        assertEquals(START + 750, redis.integer("PEXPIRETIME", "api"));
        advance(249);
        assertTrue(gcra.tryAcquire().isLimited(), "1 ms early");
        advance(1);
        assertResult(gcra.tryAcquire(), false, 3, 0, -1, 1);
    }

    @Test
    void tryAcquireSeveralTokens() {
        RGcra gcra = redisson.getGcra("tokens");
        assertTrue(gcra.trySetRate(3, 1, Duration.ofMillis(250)));
        assertResult(gcra.tryAcquire(2), false, 4, 2, -1, 1);
        assertResult(gcra.tryAcquire(3), true, 4, 2, 1, 1);
        assertResult(gcra.tryAcquire(2), false, 4, 0, -1, 1);
        // The same bucket, reached by the module's GCRA with the rate Redisson stored.
        assertEquals(List.of(1L, 4L, 0L, 1L, 1L), redis.call("GCRA", "tokens", 3, 1, "0.25"));
    }

    @Test
    void setRateResetsTheState() {
        RGcra gcra = redisson.getGcra("reset");
        gcra.setRate(0, 1, Duration.ofMinutes(1));
        assertFalse(gcra.tryAcquire().isLimited());
        assertResult(gcra.tryAcquire(), true, 1, 0, 60, 60);
        gcra.setRate(5, 10, Duration.ofMinutes(1));
        assertEquals(0L, exists("reset"), "setRate deletes the GCRA state");
        assertEquals(new GcraConfig(5, 10, Duration.ofMinutes(1)), gcra.getConfig());
        assertResult(gcra.tryAcquire(), false, 6, 5, -1, 6);
    }

    @Test
    void withoutARateNothingIsAcquired() {
        RGcra gcra = redisson.getGcra("none");
        assertNull(gcra.getConfig());
        Exception e = assertThrows(Exception.class, gcra::tryAcquire);
        assertTrue(rootMessage(e).contains("GCRA rate is not set"), rootMessage(e));
        assertEquals(0L, exists("none"));
    }

    @Test
    @SuppressWarnings("deprecation")
    void deprecatedTryAcquireSendsGcraDirectly() {
        RGcra gcra = redisson.getGcra("direct");
        long before = commandCalls("gcra");
        assertResult(gcra.tryAcquire(2, 4, Duration.ofSeconds(1)), false, 3, 2, -1, 1);
        assertResult(gcra.tryAcquire(2, 4, Duration.ofSeconds(1)), false, 3, 1, -1, 1);
        assertResult(gcra.tryAcquire(2, 4, Duration.ofSeconds(1), 2), true, 3, 1, 1, 1);
        assertResult(gcra.tryAcquire(2, 4, Duration.ofSeconds(1)), false, 3, 0, -1, 1);
        assertResult(gcra.tryAcquire(2, 4, Duration.ofSeconds(1)), true, 3, 0, 1, 1);
        assertEquals(before + 5, commandCalls("gcra"), "five GCRA calls reached the module");
    }

    @Test
    void expireAndDeleteActOnBothKeys() {
        RGcra gcra = redisson.getGcra("admin");
        assertTrue(gcra.trySetRate(1, 1, Duration.ofSeconds(10)));
        assertFalse(gcra.tryAcquire().isLimited());
        assertEquals(2L, exists("admin", "{admin}:config"));
        assertTrue(gcra.delete());
        assertEquals(0L, exists("admin", "{admin}:config"));
    }

    /** calls= of a command in INFO commandstats (the module's commands are lower case there). */
    static long commandCalls(String command) {
        String info = redis.text("INFO", "commandstats");
        for (String line : info.split("\r\n")) {
            if (line.startsWith("cmdstat_" + command + ":calls=")) {
                String rest = line.substring(("cmdstat_" + command + ":calls=").length());
                return Long.parseLong(rest.substring(0, rest.indexOf(',')));
            }
        }
        return 0;
    }
}
