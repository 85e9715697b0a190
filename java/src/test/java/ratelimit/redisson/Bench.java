package ratelimit.redisson;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.IntFunction;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * The native limiter against Redisson's own, from Java, on the same limiters of one server with
 * the module (`make bench-java`, java/README.md):
 * <ul>
 * <li>server CPU per call (INFO commandstats: usec per RATELIMIT.TRYACQUIRE against usec per
 * EVAL/EVALSHA of Redisson's script) and client latency p50/p99, on one hot limiter and on
 * 200 000 per-user limiters;
 * <li>how soon a waiting {@code acquire()} notices permits that free up: when a permit expires
 * from the window, and when another client releases one;
 * <li>1, 200 and 2 000 threads looping in {@code acquire()} on one limiter of a client with
 * Redisson's default configuration: the grants, the server commands each cost, and the latency
 * and errors of the client's other calls meanwhile (one GET every 5 ms);
 * <li>with 200 threads in acquire() on one limiter, how long {@code tryAcquire(1, 5 s)} takes on
 * another limiter of the same client whose permits are free.
 * </ul>
 * Arguments: {@code --quick} for a short run.
 */
public final class Bench {
    private static final int THREADS = 4;
    /** The commands each side's tryAcquire runs: Redisson's script (EVAL or EVALSHA), TRYACQUIRE. */
    private static final String[] SCRIPT = {"eval", "evalsha"};
    private static final String[] NATIVE = {"ratelimit.tryacquire"};

    private Bench() {
    }

    public static void main(String[] args) throws Exception {
        boolean quick = Arrays.asList(args).contains("--quick");
        int hotCalls = quick ? 5_000 : 40_000;
        int users = quick ? 20_000 : 200_000;
        int waits = quick ? 5 : 20;
        try (RedisServer server = RedisServer.withModule("--maxmemory-policy", "noeviction");
                Raw raw = new Raw(server.port)) {
            RedissonClient redisson = Clients.redisson(server, c -> c.setConnectionPoolSize(32));
            try {
                System.out.printf("ratelimit-redisson bench: %s, Redisson %s, %d client threads, %s cores, load %s%n",
                        raw.info("server", "redis_version") == null ? "?" : "server " + raw.info("server", "redis_version"),
                        org.redisson.Version.class.getPackage().getImplementationVersion(), THREADS,
                        Runtime.getRuntime().availableProcessors(), loadAverage());
                System.out.println("(a busy machine: compare the two columns, not the absolute numbers)");
                System.out.println();
                System.out.printf("%-34s %12s %12s %10s %10s%n", "", "server us/call", "calls/s", "p50 us", "p99 us");

                // One hot limiter: 4 threads on one name, most calls refused once the window is full.
                String hot = "hot";
                NativeRateLimiters.get(redisson, hot).trySetRate(RateType.OVERALL, 5_000, Duration.ofSeconds(1));
                warm(redisson, hot);
                row(raw, "hot limiter, Redisson's own", SCRIPT, hotCalls, i -> redisson.getRateLimiter(hot));
                row(raw, "hot limiter, native", NATIVE, hotCalls, i -> NativeRateLimiters.get(redisson, hot));

                // Per-user limiters: each call on a user at random, 200 000 users.
                System.out.printf("creating %d per-user limiters...%n", users);
                create(redisson, users);
                row(raw, users + " users, Redisson's own", SCRIPT, users,
                        i -> redisson.getRateLimiter(user(ThreadLocalRandom.current().nextInt(users))));
                row(raw, users + " users, native", NATIVE, users,
                        i -> NativeRateLimiters.get(redisson, user(ThreadLocalRandom.current().nextInt(users))));
                System.out.printf("used_memory after both: %s%n%n", raw.info("memory", "used_memory_human"));

                noticing(raw, redisson, waits);
            } finally {
                redisson.shutdown();
            }
            waiters(raw, server, quick ? 2_000 : 5_000);
        }
    }

    /**
     * {@code n} threads in a loop of acquire() on a limiter of 100 permits a second, for
     * {@code millis}, on a client with Redisson's default configuration (64 pooled connections),
     * while another thread of the same client reads a key every 5 ms.
     */
    private static void waiters(Raw raw, RedisServer server, long millis) throws Exception {
        Config config = new Config();
        config.useSingleServer().setAddress(server.address());
        RedissonClient client = Redisson.create(config);
        try {
            System.out.println();
            System.out.printf("%-34s %9s %11s %9s %9s %11s %12s%n",
                    "callers in acquire(), 100 permits/s", "grants/s", "cmds/grant", "GET p50us", "GET p99us",
                    "GET errors", "acquire errs");
            client.getBucket("other").set("value");
            waitersRow(raw, client, "no callers waiting (idle)", 0, false, millis);
            for (int n : new int[] {1, 200, 2000}) {
                for (boolean nativeSide : new boolean[] {true, false}) {
                    waitersRow(raw, client, n + (nativeSide ? ", native" : ", Redisson's own"), n, nativeSide, millis);
                }
            }
            System.out.println();
            System.out.printf("%-34s %9s %9s %9s %9s %11s%n",
                    "tryAcquire(5 s) on another limiter", "calls", "p50 ms", "p99 ms", "false", "asks/call");
            for (boolean nativeSide : new boolean[] {true, false}) {
                otherLimiterRow(raw, client, nativeSide, millis);
            }
        } finally {
            client.shutdown();
        }
    }

    private static void waitersRow(Raw raw, RedissonClient client, String label, int n, boolean nativeSide,
            long millis) throws Exception {
        String name = "waiters:" + label;
        RRateLimiter l = nativeSide ? NativeRateLimiters.get(client, name) : client.getRateLimiter(name);
        l.trySetRate(RateType.OVERALL, 100, Duration.ofSeconds(1));
        String[] commands = {"eval", "evalsha", "ratelimit.acquire", "ratelimit.tryacquire"};
        java.util.concurrent.atomic.AtomicLong grants = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong waiterErrors = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(() -> {
                while (!stop.get()) {
                    try {
                        l.acquire();
                        grants.incrementAndGet();
                    } catch (RuntimeException e) {
                        if (stop.get()) {
                            return;
                        }
                        waiterErrors.incrementAndGet();
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        // Measured from when every caller is started (2 000 threads take a while to start).
        double[] before = stat(raw, commands);
        long grantsBefore = grants.get();
        long started = System.nanoTime();
        List<Long> latencies = new ArrayList<>();
        long getErrors = 0;
        org.redisson.api.RBucket<String> other = client.getBucket("other");
        while (System.nanoTime() - started < millis * 1_000_000L) {
            long t0 = System.nanoTime();
            try {
                other.get();
                latencies.add(System.nanoTime() - t0);
            } catch (RuntimeException e) {
                getErrors++;
            }
            Thread.sleep(5);
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        long granted = grants.get() - grantsBefore;
        double[] after = stat(raw, commands);
        stop.set(true);
        for (Thread t : threads) {
            t.interrupt();
        }
        for (Thread t : threads) {
            t.join();
        }
        latencies.sort(Long::compare);
        System.out.printf(Locale.ROOT, "%-34s %9.0f %11.2f %9.0f %9.0f %11d %12d%n", label, granted / seconds,
                granted == 0 ? 0.0 : (after[0] - before[0]) / granted,
                latencies.isEmpty() ? Double.NaN : latencies.get(latencies.size() / 2) / 1e3,
                latencies.isEmpty() ? Double.NaN : latencies.get((int) (latencies.size() * 0.99)) / 1e3,
                getErrors, waiterErrors.get());
        // The callers interrupted: their waits leave the server, and Redisson's own polling (which
        // an interrupt does not always stop at once) ends, before the next row starts.
        long deadline = System.nanoTime() + 60_000_000_000L;
        WaitGate gate = NativeRateLimiters.gate(client);
        double calls = -1;
        while (System.nanoTime() < deadline) {
            double now = stat(raw, commands)[0];
            if (now == calls && raw.blockedClients() == 0 && gate.inServer() == 0 && gate.queued() == 0) {
                break;
            }
            calls = now;
            Thread.sleep(500);
        }
    }

    /**
     * 200 threads loop in acquire() on limiter a (100 permits a second) while one thread calls
     * tryAcquire(1, 5 s) every 5 ms on limiter b of the same client, whose permits are always free:
     * how long b's callers take, and how many are refused. The native callers of a fill the
     * client's bound on waits in the server (16), the rest wait in the JVM.
     */
    private static void otherLimiterRow(Raw raw, RedissonClient client, boolean nativeSide, long millis)
            throws Exception {
        String side = nativeSide ? "native" : "Redisson's own";
        RRateLimiter a = nativeSide ? NativeRateLimiters.get(client, "busy:" + side) : client.getRateLimiter("busy:" + side);
        a.trySetRate(RateType.OVERALL, 100, Duration.ofSeconds(1));
        RRateLimiter b = nativeSide ? NativeRateLimiters.get(client, "free:" + side) : client.getRateLimiter("free:" + side);
        b.trySetRate(RateType.OVERALL, 1_000_000, Duration.ofSeconds(1));
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            Thread t = new Thread(() -> {
                while (!stop.get()) {
                    try {
                        a.acquire();
                    } catch (RuntimeException e) {
                        if (stop.get()) {
                            return;
                        }
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        Thread.sleep(500); // the 200 callers of a waiting
        String[] commands = {"eval", "evalsha", "ratelimit.acquire", "ratelimit.tryacquire"};
        double tries = stat(raw, "exec")[0];
        List<Long> latencies = new ArrayList<>();
        long refused = 0;
        long started = System.nanoTime();
        while (System.nanoTime() - started < millis * 1_000_000L) {
            long t0 = System.nanoTime();
            if (!b.tryAcquire(1, Duration.ofSeconds(5))) {
                refused++;
            }
            latencies.add(System.nanoTime() - t0);
            Thread.sleep(5);
        }
        stop.set(true);
        for (Thread t : threads) {
            t.interrupt();
        }
        for (Thread t : threads) {
            t.join();
        }
        latencies.sort(Long::compare);
        // The native callers of a wait in the server (their limiter always has waits there), so
        // the transactions are b's asks (MULTI, RATELIMIT.ACQUIRE with a TICKET, EXEC); Redisson's
        // own callers of a and b both run its script.
        double asks = (stat(raw, "exec")[0] - tries) / latencies.size();
        System.out.printf(Locale.ROOT, "%-34s %9d %9.1f %9.1f %9d %11s%n", "200 waiting on a, " + side,
                latencies.size(), latencies.get(latencies.size() / 2) / 1e6,
                latencies.get((int) (latencies.size() * 0.99)) / 1e6, refused,
                nativeSide ? String.format(Locale.ROOT, "%.2f", asks) : "-");
        long deadline = System.nanoTime() + 60_000_000_000L;
        WaitGate gate = NativeRateLimiters.gate(client);
        double calls = -1;
        while (System.nanoTime() < deadline) {
            double now = stat(raw, commands)[0];
            if (now == calls && raw.blockedClients() == 0 && gate.inServer() == 0 && gate.queued() == 0) {
                break;
            }
            calls = now;
            Thread.sleep(500);
        }
    }

    private static String user(int i) {
        return "limit:user:" + i;
    }

    private static String loadAverage() {
        return String.format(Locale.ROOT, "%.2f", java.lang.management.ManagementFactory.getOperatingSystemMXBean()
                .getSystemLoadAverage());
    }

    /** Redisson loads its script (EVAL, then EVALSHA) and both sides' classes warm up. */
    private static void warm(RedissonClient redisson, String name) {
        for (int i = 0; i < 2_000; i++) {
            redisson.getRateLimiter(name).tryAcquire();
            NativeRateLimiters.get(redisson, name).tryAcquire();
        }
    }

    private static void create(RedissonClient redisson, int users) throws Exception {
        List<RFuture<Boolean>> batch = new ArrayList<>();
        for (int i = 0; i < users; i++) {
            batch.add(NativeRateLimiters.get(redisson, user(i)).trySetRateAsync(RateType.OVERALL, 100, Duration.ofMinutes(1)));
            if (batch.size() == 1_000) {
                for (RFuture<Boolean> f : batch) {
                    f.toCompletableFuture().get();
                }
                batch.clear();
            }
        }
        for (RFuture<Boolean> f : batch) {
            f.toCompletableFuture().get();
        }
    }

    /** Latencies (ns) of {@code calls} tryAcquire calls over THREADS threads, and the wall time. */
    private record Run(long[] latencies, long wallNanos) {
    }

    private static Run run(int calls, IntFunction<RRateLimiter> limiter) throws Exception {
        long[] latencies = new long[calls];
        long start = System.nanoTime();
        List<CompletableFuture<Void>> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int first = t;
            threads.add(CompletableFuture.runAsync(() -> {
                for (int i = first; i < calls; i += THREADS) {
                    RRateLimiter l = limiter.apply(i);
                    long t0 = System.nanoTime();
                    l.tryAcquire();
                    latencies[i] = System.nanoTime() - t0;
                }
            }, command -> new Thread(command).start()));
        }
        for (CompletableFuture<Void> t : threads) {
            t.get();
        }
        return new Run(latencies, System.nanoTime() - start);
    }

    /** calls and usec of INFO commandstats, summed over the commands. */
    private static double[] stat(Raw raw, String... commands) {
        double calls = 0;
        double usec = 0;
        for (String command : commands) {
            String stat = raw.info("commandstats", "cmdstat_" + command);
            if (stat == null) {
                continue;
            }
            for (String part : stat.split(",")) {
                if (part.startsWith("calls=")) {
                    calls += Double.parseDouble(part.substring(6));
                } else if (part.startsWith("usec=")) {
                    usec += Double.parseDouble(part.substring(5));
                }
            }
        }
        return new double[] {calls, usec};
    }

    private static void row(Raw raw, String label, String[] commands, int calls, IntFunction<RRateLimiter> limiter)
            throws Exception {
        double[] before = stat(raw, commands);
        Run run = run(calls, limiter);
        double[] after = stat(raw, commands);
        long[] sorted = run.latencies().clone();
        Arrays.sort(sorted);
        System.out.printf(Locale.ROOT, "%-34s %12.2f %12.0f %10.0f %10.0f%n", label,
                (after[1] - before[1]) / Math.max(1, after[0] - before[0]),
                calls / (run.wallNanos() / 1e9),
                sorted[sorted.length / 2] / 1e3, sorted[(int) (sorted.length * 0.99)] / 1e3);
    }

    /**
     * How soon acquire() returns once a permit is free: a limiter of 1 permit per second, full;
     * a caller waits; then the permit frees up by expiring from the window, or by a release from
     * another client half a second in. Measured from that moment to acquire()'s return, with the
     * commands the wait cost the server.
     */
    private static void noticing(Raw raw, RedissonClient redisson, int waits) throws Exception {
        System.out.printf("%-42s %10s %10s %14s%n", "acquire() noticing a freed permit", "median ms", "max ms",
                "commands/wait");
        for (boolean release : new boolean[] {false, true}) {
            for (boolean nativeSide : new boolean[] {false, true}) {
                List<Double> lags = new ArrayList<>();
                double[] before = stat(raw, "eval", "evalsha", "ratelimit.tryacquire", "ratelimit.acquire");
                for (int i = 0; i < waits; i++) {
                    String name = "wait:" + release + ":" + nativeSide + ":" + i;
                    RRateLimiter l = nativeSide ? NativeRateLimiters.get(redisson, name) : redisson.getRateLimiter(name);
                    l.trySetRate(RateType.OVERALL, 1, Duration.ofSeconds(1));
                    long taken = System.currentTimeMillis();
                    l.tryAcquire();
                    CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
                        l.acquire();
                        return System.currentTimeMillis();
                    }, command -> new Thread(command).start());
                    long freed;
                    if (release) {
                        Thread.sleep(500);
                        freed = System.currentTimeMillis();
                        raw.rl("RELEASE", name, 1); // what any client of the module does
                    } else {
                        freed = taken + 1000;
                    }
                    lags.add((double) (waiter.get() - freed));
                }
                double[] after = stat(raw, "eval", "evalsha", "ratelimit.tryacquire", "ratelimit.acquire");
                lags.sort(Double::compare);
                System.out.printf(Locale.ROOT, "%-42s %10.1f %10.1f %14.1f%n",
                        (release ? "released by another client, " : "expired from the window, ")
                                + (nativeSide ? "native" : "Redisson's own"),
                        lags.get(lags.size() / 2), lags.get(lags.size() - 1),
                        // less the setup: Redisson's trySetRate is a script too, and the first tryAcquire
                        (after[0] - before[0]) / waits - (nativeSide ? 1 : 2));
            }
        }
    }
}
