package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * What the two tests of Redisson's RedissonRateLimiterTest that the native limiter is excused from
 * (docs/java.md, java/upstream/exceptions.txt) measure, counted from the server's own log (the
 * permits zset) instead of the client's clock or the zset's entry count, on the module's frozen
 * clock.
 */
class ServerWindowTest extends ModuleTestBase {
    /** The instant {@link #freezeClock} sets. */
    private static final long FROZEN_AT = 1767225600000L;

    /** One log entry: when it was written (the server's ms) and the permits it holds. */
    private record Entry(long at, long permits) {
    }

    /** The log's entries now, by member. */
    private static Map<String, Entry> log(String key) {
        Map<String, Entry> entries = new HashMap<>();
        List<Object> flat = raw.zrangeBytes(key);
        for (int i = 0; i < flat.size(); i += 2) {
            byte[] m = (byte[]) flat.get(i);
            int n = m.length;
            long permits = (m[n - 4] & 0xffL) | (m[n - 3] & 0xffL) << 8 | (m[n - 2] & 0xffL) << 16
                    | (m[n - 1] & 0xffL) << 24;
            long at = (long) Double.parseDouble(new String((byte[]) flat.get(i + 1)));
            // Keyed by the entry's id (the member less its permits) and its score: a grant merged
            // into the entry of its millisecond updates it, and an expired entry recycled for a new
            // grant (the same id at a later score) is another grant.
            entries.put(java.util.HexFormat.of().formatHex(m, 0, n - 4) + "@" + at, new Entry(at, permits));
        }
        return entries;
    }

    /** The permits of the entries written in [from, to), or [from, to] when {@code closed}. */
    private static long within(Iterable<Entry> entries, long from, long to, boolean closed) {
        long sum = 0;
        for (Entry e : entries) {
            if (e.at() >= from && (e.at() < to || closed && e.at() == to)) {
                sum += e.permits();
            }
        }
        return sum;
    }

    /**
     * testConcurrency2's load: 8 threads in acquire() on 18 per second until 200 grants. The clock
     * moves 50 ms at a time; after each step the log is read once every caller is waiting again,
     * so the union of those reads is every grant made. No window [t, t + 1000) of the server's
     * clock holds more than 18; a closed window [t, t + 1000], which testConcurrency2 counts on
     * the client's clock, holds 36, because the module grants in the very millisecond a permit
     * leaves the window.
     */
    @Test
    void theLogNeverHoldsMoreThanTheRateInAHalfOpenWindow() throws Exception {
        freezeClock();
        RRateLimiter l = NativeRateLimiters.get(redisson, "test");
        assertTrue(l.trySetRate(RateType.OVERALL, 18, Duration.ofSeconds(1)));
        long acquiredBefore = Long.parseLong(raw.info("ratelimit", "ratelimit_acquired"));
        AtomicInteger granted = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        l.acquire();
                        if (granted.incrementAndGet() >= 200) {
                            break;
                        }
                    }
                } catch (Throwable e) {
                    errors.incrementAndGet();
                }
            });
            t.start();
            threads.add(t);
        }
        WaitGate gate = NativeRateLimiters.gate(redisson);
        Map<String, Entry> seen = new HashMap<>();
        while (threads.stream().anyMatch(Thread::isAlive)) {
            long alive = threads.stream().filter(Thread::isAlive).count();
            // Settled: the server's grants all read by their callers, every live caller waiting again.
            await("the callers settled", () -> {
                long served = Long.parseLong(raw.info("ratelimit", "ratelimit_acquired")) - acquiredBefore;
                long waiting = threads.stream().filter(Thread::isAlive).count();
                return served == granted.get() && raw.blockedClients() + gate.queued() == waiting
                        || waiting < alive;
            });
            seen.putAll(log(permitsKey("test")));
            advance(50);
        }
        // The grants made after the last read, before the last caller left.
        seen.putAll(log(permitsKey("test")));
        assertEquals(0, errors.get());
        long total = seen.values().stream().mapToLong(Entry::permits).sum();
        assertEquals(granted.get(), total, "every grant read from the log");
        long halfOpen = 0;
        long closed = 0;
        for (Entry e : seen.values()) {
            halfOpen = Math.max(halfOpen, within(seen.values(), e.at(), e.at() + 1000, false));
            closed = Math.max(closed, within(seen.values(), e.at(), e.at() + 1000, true));
        }
        System.out.println(total + " grants at 18/s: at most " + halfOpen + " in any [t, t+1000) of the server's clock, "
                + closed + " in a closed [t, t+1000]");
        assertEquals(18, halfOpen, "the rate, and never more");
        assertEquals(36, closed, "the closed window counts the grants on both of its edges");
    }

    /**
     * testRateValue's load: Redisson's default client, 200 threads in acquire() on 10 000 per
     * 10 s. Once every permit is taken, the log holds exactly 10 000 permits, but in far fewer
     * entries than 10 000 (ZCARD, which testRateValue counts): the module writes the grants of
     * one millisecond into one entry. Twice: the window filled, and filled again after it moved.
     */
    @Test
    void theLogHoldsTheRateInPermitsNotInEntries() throws Exception {
        freezeClock();
        Config config = new Config();
        config.useSingleServer().setAddress(server.address());
        RedissonClient client = Redisson.create(config);
        try {
            RRateLimiter l = NativeRateLimiters.get(client, "test1");
            l.setRate(RateType.OVERALL, 10_000, Duration.ofSeconds(10));
            AtomicInteger granted = new AtomicInteger();
            AtomicInteger errors = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                Thread t = new Thread(() -> {
                    try {
                        while (true) {
                            l.acquire();
                            granted.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        if (!Thread.currentThread().isInterrupted() && !(e.getCause() instanceof InterruptedException)) {
                            errors.incrementAndGet();
                        }
                    }
                });
                t.start();
                threads.add(t);
            }
            WaitGate gate = NativeRateLimiters.gate(client);
            for (int round = 1; round <= 2; round++) {
                int expected = 10_000 * round;
                await("the window full", () -> granted.get() == expected && raw.blockedClients() == 16
                        && gate.queued() == 200 - 16);
                Map<String, Entry> entries = log(permitsKey("test1"));
                long now = FROZEN_AT + 10_000L * (round - 1);
                long permits = within(entries.values(), now - 10_000 + 1, now + 1, false);
                long zcard = raw.integer("ZCARD", permitsKey("test1"));
                System.out.println("round " + round + ": " + permits + " permits in the window, in " + zcard + " entries");
                assertEquals(10_000, permits, "the window holds the rate in permits");
                assertTrue(zcard < 10_000, "one entry per grant: " + zcard);
                advance(10_000);
            }
            for (Thread t : threads) {
                t.interrupt();
            }
            for (Thread t : threads) {
                t.join(60_000);
            }
            assertEquals(0, errors.get());
        } finally {
            client.shutdown();
        }
    }
}
