package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;

/**
 * Redisson's tryAcquire(n), tryAcquire(n, timeout) and acquire() against the module's TRYACQUIRE
 * and ACQUIRE on one limiter. Waits are checked through the log's scores (a waiter's entry is
 * stamped no earlier than the moment the permits it waited for expired), never through sleeps.
 */
class AcquireInteropTest extends InteropBase {
    /** Upper bound for anything that should finish in a few seconds: fails only on a hang. */
    private static final long HANG_MS = 30_000;

    @Test
    void tryAcquirePermitsCountOnBothSides() {
        RRateLimiter j = limiter("api");
        assertEquals(1L, rl("SETRATE", "api", 5, 60000));
        long before = serverMs();
        assertTrue(j.tryAcquire(3));
        assertEquals(2L, rl("AVAILABLE", "api"));
        Object refused = rl("TRYACQUIRE", "api", 3);
        assertTrue(refused instanceof Long l && l > 0 && l <= 60000,
                "3 > 2 left: a wait in (0, 60000], got " + Resp.show(refused));
        assertNull(rl("TRYACQUIRE", "api", 2));
        long after = serverMs();
        assertFalse(j.tryAcquire(1));
        assertEquals(0L, j.availablePermits());
        assertEquals("0", get(valueKey("api")));

        // One log, same layout from both writers: a member per grant, or one member for both
        // when the module's grant lands in the millisecond Redisson logged its own (grants
        // scored alike share an entry).
        List<Entry> entries = log(permitsKey("api"));
        List<Long> logged = loggedSorted(permitsKey("api"));
        assertTrue(logged.equals(List.of(2L, 3L)) || logged.equals(List.of(5L)),
                "grants of 3 and 2 logged as " + logged);
        for (Entry e : entries) {
            assertEquals(16, e.id().length, "16-byte id");
            assertTrue(e.score() >= before - 1000 && e.score() <= after + 1000,
                    "score " + e.score() + " is a unix-ms time of this test [" + before + ", " + after + "]");
        }

        // Both refuse a request above the rate with Redisson's message.
        String redissonError = rootMessage(assertThrows(Exception.class, () -> j.tryAcquire(6)));
        assertTrue(redissonError.contains("Requested permits amount cannot exceed defined rate"), redissonError);
        assertEquals("ERR Requested permits amount cannot exceed defined rate", rlError("TRYACQUIRE", "api", 6));
    }

    @Test
    void tryAcquireWithTimeoutWaitsForPermitsTheOtherSideTook() {
        RRateLimiter j = limiter("t");
        assertTrue(j.trySetRate(RateType.OVERALL, 2, Duration.ofMillis(2000)));

        // Module holds both permits: Redisson gives up after 100 ms, then waits and gets one.
        assertNull(rl("TRYACQUIRE", "t", 2));
        long moduleScore = log(permitsKey("t")).get(0).score();
        assertFalse(j.tryAcquire(1, Duration.ofMillis(100)));
        assertTrue(j.tryAcquire(1, Duration.ofMillis(HANG_MS)));
        // Redisson's grant pruned the module's expired entry: only its own is left.
        List<Entry> entries = log(permitsKey("t"));
        assertEquals(List.of(1L), entries.stream().map(Entry::permits).toList());
        assertTrue(entries.get(0).score() >= moduleScore + 2000,
                "Redisson was granted at " + entries.get(0).score() + ", before the module's permits freed at "
                        + (moduleScore + 2000));

        // Redisson holds the limiter's 2 permits: ACQUIRE TIMEOUT 100 replies the wait, a long one gets it.
        assertEquals(1L, rl("SETRATE", "t", 2, 2000));
        assertTrue(j.tryAcquire(2));
        long redissonScore = log(permitsKey("t")).get(0).score();
        Object timedOut = rl("ACQUIRE", "t", 1, "TIMEOUT", 100);
        assertTrue(timedOut instanceof Long l && l > 0 && l <= 2000, "a wait hint, got " + Resp.show(timedOut));
        assertNull(rl("ACQUIRE", "t", 1, "TIMEOUT", HANG_MS));
        entries = log(permitsKey("t"));
        assertEquals(List.of(1L), entries.stream().map(Entry::permits).toList(), "Redisson's entry pruned");
        assertTrue(entries.get(0).score() >= redissonScore + 2000,
                "ACQUIRE was granted at " + entries.get(0).score() + ", before Redisson's permits freed");
    }

    @Test
    void acquireWithoutTimeoutBlocksUntilTheOtherSidesPermitsExpire() throws Exception {
        RRateLimiter j = limiter("b");
        assertEquals(1L, rl("SETRATE", "b", 3, 1500));

        assertNull(rl("TRYACQUIRE", "b", 3));
        long moduleScore = log(permitsKey("b")).get(0).score();
        CompletableFuture.runAsync(() -> j.acquire(2)).get(HANG_MS, TimeUnit.MILLISECONDS);
        List<Entry> entries = log(permitsKey("b"));
        assertEquals(List.of(2L), entries.stream().map(Entry::permits).toList(), "the module's 3 expired and pruned");
        assertTrue(entries.get(0).score() >= moduleScore + 1500);
        assertEquals("1", get(valueKey("b")));

        // Redisson's 2 and the 1 left taken: a module ACQUIRE (no TIMEOUT) waits for Redisson's entry.
        assertNull(rl("TRYACQUIRE", "b", 1));
        long redissonScore = entries.get(0).score();
        assertNull(rl("ACQUIRE", "b", 2));
        entries = log(permitsKey("b"));
        Entry last = entries.get(entries.size() - 1);
        assertEquals(2L, last.permits(), "the ACQUIRE's grant is the newest entry");
        assertTrue(last.score() >= redissonScore + 1500,
                "ACQUIRE granted at " + last.score() + ", Redisson's 2 permits free at " + (redissonScore + 1500));
        // Redisson's 2 pruned. The module's 1, taken a few ms after them, expires a few ms after
        // them too: still logged, unless the waiter was woken later than that (a loaded machine).
        List<Long> before = entries.subList(0, entries.size() - 1).stream().map(Entry::permits).toList();
        assertTrue(before.equals(List.of()) || before.equals(List.of(1L)),
                "only the module's 1 may precede the grant, got " + before);
        assertTrue(entries.stream().allMatch(e -> e.score() > redissonScore), "Redisson's 2 pruned");
    }

    @Test
    void redissonReleaseWakesAModuleWaiter() throws Exception {
        RRateLimiter j = limiter("w");
        assertTrue(j.trySetRate(RateType.OVERALL, 2, Duration.ofSeconds(60)));
        assertTrue(j.tryAcquire(2));
        long taken = log(permitsKey("w")).get(0).score();

        try (Resp waiter = new Resp(RedisServerExtension.server().port)) {
            CompletableFuture<Object> reply = CompletableFuture.supplyAsync(
                    () -> waiter.call("RATELIMIT.ACQUIRE", "w", 1, "TIMEOUT", 20000));
            awaitBlockedClients(1);
            j.release(1); // Redisson's script: SET {w}:value 1
            Object r = reply.get(HANG_MS, TimeUnit.MILLISECONDS);
            assertNull(r, "the waiter is served by Redisson's release, not after 60 s; got " + Resp.show(r));
        }
        List<Entry> entries = log(permitsKey("w"));
        List<Long> logged = loggedSorted(permitsKey("w"));
        // (One entry of 3 if the waiter was served in the millisecond of Redisson's grant.)
        assertTrue(logged.equals(List.of(1L, 2L)) || logged.equals(List.of(3L)),
                "grants of 2 and 1 logged as " + logged);
        long served = entries.stream().mapToLong(Entry::score).max().orElseThrow();
        assertTrue(served < taken + 60000, "served long before Redisson's permits expired");
    }

    static void awaitBlockedClients(int n) throws InterruptedException {
        long deadline = System.currentTimeMillis() + HANG_MS;
        while (System.currentTimeMillis() < deadline) {
            String info = redis.text("INFO", "clients");
            if (info.contains("blocked_clients:" + n + "\r")) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("no " + n + " blocked client(s) on the server");
    }
}
