package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.redisson.api.RedissonClient;

/**
 * A server with the module for a test class, two Redisson clients (two client ids, for PER_CLIENT
 * limiters), a plain connection, and a flushed database on the real clock before each test.
 */
abstract class ModuleTestBase {
    static RedisServer server;
    static RedissonClient redisson;
    static RedissonClient redisson2;
    static Raw raw;

    @BeforeAll
    static void startServer() {
        server = RedisServer.withModule();
        redisson = Clients.redisson(server);
        redisson2 = Clients.redisson(server);
        raw = new Raw(server.port);
    }

    @AfterAll
    static void stopServer() {
        raw.close();
        redisson.shutdown();
        redisson2.shutdown();
        server.close();
    }

    @BeforeEach
    void flush() {
        assertEquals("OK", raw.rl("DEBUG", "REALCLOCK"));
        assertEquals("OK", raw.call("FLUSHALL"));
    }

    /** Freezes the module's clock at a round instant: waits move only with {@link #advance}. */
    static void freezeClock() {
        assertEquals("OK", raw.rl("DEBUG", "SETCLOCK", 1767225600000L));
    }

    static void advance(long ms) {
        raw.rl("DEBUG", "ADVANCE", ms);
    }

    static String valueKey(String name) {
        return (name.contains("{") ? name : "{" + name + "}") + ":value";
    }

    static String permitsKey(String name) {
        return (name.contains("{") ? name : "{" + name + "}") + ":permits";
    }

    /** The permits the log holds: the sum of each member's last four bytes (little-endian). */
    static long logged(Raw conn, String key) {
        List<Object> flat = conn.zrangeBytes(key);
        long sum = 0;
        for (int i = 0; i < flat.size(); i += 2) {
            byte[] m = (byte[]) flat.get(i);
            int n = m.length;
            sum += (m[n - 4] & 0xffL) | (m[n - 3] & 0xffL) << 8 | (m[n - 2] & 0xffL) << 16 | (m[n - 1] & 0xffL) << 24;
        }
        return sum;
    }

    static long logged(String key) {
        return logged(raw, key);
    }

    /**
     * Waits until the server says so (clients blocked, a key written...). Not a timed assertion:
     * the bound only keeps a broken run from hanging.
     */
    static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "never happened: " + what);
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    static void awaitBlocked(long n) {
        await(n + " client(s) blocked", () -> raw.blockedClients() == n);
    }

    /** The root message of what Redisson threw. */
    static String rootMessage(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return String.valueOf(t.getMessage());
    }
}
