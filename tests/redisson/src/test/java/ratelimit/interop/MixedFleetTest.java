package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
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

/**
 * Redisson threads and module clients hammer one limiter on the real clock, a fixed number of
 * calls each (however long they take).
 * Every grant is read back from the permit log (sampled often enough that no entry is pruned
 * unseen), and the log must account for exactly the permits the clients were granted and never
 * hold more than {@code rate} in any window of {@code interval}.
 */
class MixedFleetTest extends InteropBase {
    private static final String NAME = "fleet";
    private static final long RATE = 30;
    private static final long INTERVAL = 2000;
    /** Calls per worker: those that wait in a blocking acquire (up to 150 ms each) make fewer. */
    private static final int CALLS = 600;
    private static final int WAITING_CALLS = 30;
    /** A bound that only a hang reaches. */
    private static final long HANG_MS = 120_000;

    @Test
    void mixedFleetNeverExceedsTheRateInAnyWindow() throws Exception {
        RRateLimiter j = limiter(NAME);
        assertTrue(j.trySetRate(RateType.OVERALL, RATE, Duration.ofMillis(INTERVAL)));
        int port = RedisServerExtension.server().port;
        AtomicLong redissonGranted = new AtomicLong();
        AtomicLong moduleGranted = new AtomicLong();
        AtomicBoolean running = new AtomicBoolean(true);
        // The longest Redisson call that was granted, on the client's clock (see below).
        AtomicLong longestGrantMs = new AtomicLong();

        // Entries keyed by id and score; a merged module member (same id) keeps its largest sum.
        Map<String, Entry> seen = new HashMap<>();
        ExecutorService pool = Executors.newFixedThreadPool(6);
        List<Future<?>> workers = new ArrayList<>();
        try {
            workers.add(pool.submit(() -> redissonWorker(j, false, redissonGranted, longestGrantMs)));
            workers.add(pool.submit(
                    () -> redissonWorker(redisson2.getRateLimiter(NAME), true, redissonGranted, longestGrantMs)));
            workers.add(pool.submit(() -> moduleWorker(port, false, moduleGranted)));
            workers.add(pool.submit(() -> moduleWorker(port, true, moduleGranted)));
            Future<?> sampler = pool.submit(() -> {
                try (Resp r = new Resp(port)) {
                    while (running.get()) {
                        record(seen, log(r, permitsKey(NAME)));
                        Thread.sleep(100);
                    }
                }
                return null;
            });
            for (Future<?> w : workers) {
                w.get(HANG_MS, TimeUnit.MILLISECONDS);
            }
            running.set(false);
            sampler.get(HANG_MS, TimeUnit.MILLISECONDS);
        } finally {
            running.set(false);
            pool.shutdownNow();
        }
        record(seen, log(permitsKey(NAME)));

        List<Entry> entries = new ArrayList<>(seen.values());
        entries.sort(Comparator.comparingLong(Entry::score));
        long logged = entries.stream().mapToLong(Entry::permits).sum();
        long granted = redissonGranted.get() + moduleGranted.get();
        assertTrue(redissonGranted.get() > 0 && moduleGranted.get() > 0,
                "both sides were granted permits: Redisson " + redissonGranted + ", module " + moduleGranted);
        assertTrue(granted >= RATE, "the fleet used the limiter: " + granted + " granted");
        assertEquals(granted, logged, "the log accounts for every granted permit, and no more");

        // Redisson stamps a grant with the client's clock before it sends the script, so its score
        // can precede the moment the script ran by up to the call's duration; a permit the module
        // freed just before can then share a window with it. Windows are checked over INTERVAL
        // less the longest granted Redisson call (measured, so a slow machine widens the slack
        // instead of failing; a property of Redisson's client clock, not of the module); the
        // strict window's count is printed for the record.
        long clockSlack = longestGrantMs.get() + 1;
        long strict = busiestWindow(entries, INTERVAL).permits;
        Busiest busiest = busiestWindow(entries, INTERVAL - clockSlack);
        assertTrue(busiest.permits <= RATE, "window " + busiest.window + " holds " + busiest.permits
                + " permits, rate " + RATE);
        assertTrue(busiest.permits >= RATE / 2, "the fleet pushed against the limit: busiest window " + busiest.permits);
        System.out.printf("mixed fleet: %d permits granted (Redisson %d, module %d) in %d log entries; busiest %d ms window %d of %d (%d ms window: %d)%n",
                granted, redissonGranted.get(), moduleGranted.get(), entries.size(), INTERVAL - clockSlack,
                busiest.permits, RATE, INTERVAL, strict);
    }

    private record Busiest(long permits, String window) {}

    /** The most permits logged in any window (end - length, end], entries sorted by score. */
    private static Busiest busiestWindow(List<Entry> entries, long length) {
        long worst = 0;
        String window = "(none)";
        int lo = 0;
        long sum = 0;
        for (int hi = 0; hi < entries.size(); hi++) {
            long end = entries.get(hi).score();
            sum += entries.get(hi).permits();
            while (entries.get(lo).score() <= end - length) {
                sum -= entries.get(lo).permits();
                lo++;
            }
            if (sum > worst) {
                worst = sum;
                window = "(" + (end - length) + ", " + end + "]";
            }
        }
        return new Busiest(worst, window);
    }

    private static void record(Map<String, Entry> seen, List<Entry> snapshot) {
        synchronized (seen) {
            for (Entry e : snapshot) {
                seen.merge(e.idHex() + "@" + e.score(), e, (a, b) -> a.permits() >= b.permits() ? a : b);
            }
        }
    }

    private static Void redissonWorker(RRateLimiter limiter, boolean waits, AtomicLong granted,
            AtomicLong longestGrantMs) throws InterruptedException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int i = 0; i < (waits ? WAITING_CALLS : CALLS); i++) {
            long n = random.nextLong(1, 4);
            long sent = System.currentTimeMillis();
            boolean ok = waits ? limiter.tryAcquire(n, Duration.ofMillis(150)) : limiter.tryAcquire(n);
            if (ok) {
                granted.addAndGet(n);
                longestGrantMs.accumulateAndGet(System.currentTimeMillis() - sent, Math::max);
            }
            Thread.sleep(random.nextInt(0, 6));
        }
        return null;
    }

    private static Void moduleWorker(int port, boolean waits, AtomicLong granted) throws InterruptedException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        try (Resp r = new Resp(port)) {
            for (int i = 0; i < (waits ? WAITING_CALLS : CALLS); i++) {
                long n = random.nextLong(1, 4);
                Object reply = waits
                        ? r.call("RATELIMIT.ACQUIRE", NAME, n, "TIMEOUT", 150)
                        : r.call("RATELIMIT.TRYACQUIRE", NAME, n);
                if (reply == null) {
                    granted.addAndGet(n);
                } else if (!(reply instanceof Long)) {
                    throw new AssertionError("unexpected reply " + Resp.show(reply));
                }
                Thread.sleep(random.nextInt(0, 6));
            }
        }
        return null;
    }
}
