package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;

/**
 * A mixed fleet on one limiter for a few seconds on the real clock: native limiters of two
 * services, Redisson's own limiter, and the native limiter of a service that has found the module
 * missing (so it runs Redisson's scripts), with tryAcquire and waits in the server's queue.
 * Every grant is read back from the permit log, which must account for exactly the permits the
 * callers were granted and never hold more than the rate in any window.
 */
class MixedFleetTest extends ModuleTestBase {
    private static final String NAME = "fleet";
    private static final long RATE = 20;
    private static final long INTERVAL = 2000;
    private static final long RUN_MS = 4500;
    /**
     * Redisson stamps its grants with the client's clock before it sends its script, so a score
     * can precede the moment the script ran by the round trip; windows are checked over
     * {@code INTERVAL - CLOCK_SLACK} to leave that out (a property of Redisson's client clock).
     */
    private static final long CLOCK_SLACK = 25;

    @Test
    void theFleetSharesOneLimiterWithoutOverAdmission() throws Exception {
        RedissonClient withoutModule = Clients.redisson(server);
        NativeRateLimiters.support(withoutModule).forceMissing();
        try {
            RRateLimiter setup = NativeRateLimiters.get(redisson, NAME);
            assertTrue(setup.trySetRate(RateType.OVERALL, RATE, Duration.ofMillis(INTERVAL)));
            NativeRateLimiter fallback = NativeRateLimiters.get(withoutModule, NAME);
            assertFalse(fallback.usesModule());
            List<RRateLimiter> fleet = List.of(
                    NativeRateLimiters.get(redisson, NAME),
                    NativeRateLimiters.get(redisson2, NAME),
                    redisson.getRateLimiter(NAME),
                    fallback);
            AtomicLong granted = new AtomicLong();
            AtomicBoolean running = new AtomicBoolean(true);
            long deadline = System.currentTimeMillis() + RUN_MS;
            Map<String, long[]> seen = new HashMap<>(); // member -> {score, permits}
            ExecutorService pool = Executors.newFixedThreadPool(fleet.size() + 2);
            List<Future<?>> workers = new ArrayList<>();
            try {
                for (RRateLimiter member : fleet) {
                    workers.add(pool.submit(() -> work(member, deadline, granted, false)));
                }
                workers.add(pool.submit(() -> work(fleet.get(0), deadline, granted, true)));
                Future<?> sampler = pool.submit(() -> {
                    try (Raw r = new Raw(server.port)) {
                        while (running.get()) {
                            record(seen, r);
                            Thread.sleep(100);
                        }
                        record(seen, r);
                    }
                    return null;
                });
                for (Future<?> w : workers) {
                    w.get(RUN_MS + 120_000, TimeUnit.MILLISECONDS);
                }
                running.set(false);
                sampler.get(60_000, TimeUnit.MILLISECONDS);
            } finally {
                running.set(false);
                pool.shutdownNow();
            }
            long logged = seen.values().stream().mapToLong(e -> e[1]).sum();
            assertEquals(granted.get(), logged, "the log accounts for every permit granted");
            List<long[]> entries = new ArrayList<>(seen.values());
            entries.sort((a, b) -> Long.compare(a[0], b[0]));
            long worst = 0;
            for (long[] start : entries) {
                long inWindow = 0;
                for (long[] e : entries) {
                    if (e[0] >= start[0] && e[0] < start[0] + INTERVAL - CLOCK_SLACK) {
                        inWindow += e[1];
                    }
                }
                worst = Math.max(worst, inWindow);
            }
            System.out.println("mixed fleet: " + granted.get() + " permits granted in " + RUN_MS
                    + " ms, at most " + worst + " in a window (rate " + RATE + ")");
            assertTrue(worst <= RATE, "a window held " + worst + " permits, rate " + RATE);
            assertTrue(granted.get() >= RATE, "the fleet was granted permits at all");
        } finally {
            withoutModule.shutdown();
        }
    }

    /** Takes 1 or 2 permits at a time until the deadline: tryAcquire, or a wait in the queue. */
    private static Void work(RRateLimiter limiter, long deadline, AtomicLong granted, boolean waits)
            throws InterruptedException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (System.currentTimeMillis() < deadline) {
            long permits = 1 + random.nextInt(2);
            boolean ok = waits ? limiter.tryAcquire(permits, Duration.ofMillis(300)) : limiter.tryAcquire(permits);
            if (ok) {
                granted.addAndGet(permits);
            }
            Thread.sleep(random.nextInt(5, 40));
        }
        return null;
    }

    /** Entries by member; a merged module member (same id, same score) keeps its largest sum. */
    private static void record(Map<String, long[]> seen, Raw r) {
        List<Object> flat = r.zrangeBytes(permitsKey(NAME));
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            byte[] m = (byte[]) flat.get(i);
            long score = (long) Double.parseDouble(new String((byte[]) flat.get(i + 1)));
            int n = m.length;
            long permits = (m[n - 4] & 0xffL) | (m[n - 3] & 0xffL) << 8 | (m[n - 2] & 0xffL) << 16 | (m[n - 1] & 0xffL) << 24;
            String id = HexFormat.of().formatHex(m, 1, n - 4) + "@" + score;
            seen.merge(id, new long[] {score, permits}, (a, b) -> a[1] >= b[1] ? a : b);
        }
    }
}
