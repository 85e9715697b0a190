package ratelimit.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * What every interop test class shares: the run's server, two Redisson clients (two instance ids,
 * for PER_CLIENT limiters), a RESP connection for the module's commands and raw key reads, and a
 * flushed database before each test.
 */
@ExtendWith(RedisServerExtension.class)
abstract class InteropBase {
    static RedissonClient redisson;
    /** A second Redisson instance: another client id for PER_CLIENT limiters. */
    static RedissonClient redisson2;
    static Resp redis;

    @BeforeAll
    static void connect() {
        RedisServer server = RedisServerExtension.server();
        redisson = client(server);
        redisson2 = client(server);
        redis = new Resp(server.port);
    }

    private static RedissonClient client(RedisServer server) {
        Config config = new Config();
        config.setThreads(4);
        config.setNettyThreads(4);
        config.useSingleServer()
                .setAddress(server.redissonAddress())
                .setConnectionMinimumIdleSize(2)
                .setConnectionPoolSize(8)
                .setTimeout(10_000);
        return Redisson.create(config);
    }

    @AfterAll
    static void disconnect() {
        redis.close();
        redisson.shutdown();
        redisson2.shutdown();
    }

    @BeforeEach
    void flush() {
        assertEquals("OK", redis.text("FLUSHALL"));
    }

    static RRateLimiter limiter(String name) {
        return redisson.getRateLimiter(name);
    }

    /** A module command: {@code rl("TRYACQUIRE", "k", 2)} sends {@code RATELIMIT.TRYACQUIRE k 2}. */
    static Object rl(String command, Object... args) {
        Object[] all = new Object[args.length + 1];
        all[0] = "RATELIMIT." + command;
        System.arraycopy(args, 0, all, 1, args.length);
        return redis.call(all);
    }

    /** The error message a module command fails with. */
    static String rlError(String command, Object... args) {
        try {
            Object reply = rl(command, args);
            throw new AssertionError("RATELIMIT." + command + " should fail, replied " + Resp.show(reply));
        } catch (Resp.Error e) {
            return e.getMessage();
        }
    }

    /** The root message of an exception Redisson throws for a failed script. */
    static String rootMessage(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return String.valueOf(t.getMessage());
    }

    // ---- the keyspace contract (naming rule: a name with '{' gets unwrapped suffixes) ----

    static String base(String name) {
        return name.contains("{") ? name : "{" + name + "}";
    }

    static String valueKey(String name) {
        return base(name) + ":value";
    }

    static String permitsKey(String name) {
        return base(name) + ":permits";
    }

    static String valueKey(String name, String client) {
        return valueKey(name) + ":" + client;
    }

    static String permitsKey(String name, String client) {
        return permitsKey(name) + ":" + client;
    }

    static Map<String, String> hash(String key) {
        @SuppressWarnings("unchecked")
        List<Object> flat = (List<Object>) redis.call("HGETALL", key);
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            map.put(Resp.str(flat.get(i)), Resp.str(flat.get(i + 1)));
        }
        return map;
    }

    static String get(String key) {
        return redis.text("GET", key);
    }

    static long exists(String... keys) {
        Object[] args = new Object[keys.length + 1];
        args[0] = "EXISTS";
        System.arraycopy(keys, 0, args, 1, keys.length);
        return redis.integer(args);
    }

    static long pttl(String key) {
        return redis.integer("PTTL", key);
    }

    /** The server's clock in unix ms (the module's clock). */
    static long serverMs() {
        @SuppressWarnings("unchecked")
        List<Object> t = (List<Object>) redis.call("TIME");
        return Long.parseLong(Resp.str(t.get(0))) * 1000 + Long.parseLong(Resp.str(t.get(1))) / 1000;
    }

    /** CONFIG's flat RESP2 reply as name -> value text. */
    static Map<String, String> moduleConfig(String name) {
        Object reply = rl("CONFIG", name);
        if (reply == null) {
            return null;
        }
        List<?> flat = (List<?>) reply;
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            map.put(Resp.str(flat.get(i)), Resp.str(flat.get(i + 1)));
        }
        return map;
    }

    /** One permit-log member, decoded the 3.17+ way: byte0 = id length, the id, u32 LE permits. */
    record Entry(byte[] id, long permits, long score) {
        String idHex() {
            StringBuilder sb = new StringBuilder();
            for (byte b : id) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        }
    }

    static Entry decode(byte[] member, long score) {
        assertTrue(member.length >= 5, "permit-log member too short: " + member.length + " bytes");
        int idLen = member[0] & 0xff;
        assertEquals(1 + idLen + 4, member.length,
                "member length must be 1 + byte0 + 4 (byte0 = " + idLen + ")");
        byte[] id = Arrays.copyOfRange(member, 1, 1 + idLen);
        int n = member.length;
        long permits = (member[n - 4] & 0xffL) | (member[n - 3] & 0xffL) << 8
                | (member[n - 2] & 0xffL) << 16 | (member[n - 1] & 0xffL) << 24;
        return new Entry(id, permits, score);
    }

    /** The permit log, oldest first. */
    static List<Entry> log(Resp conn, String key) {
        @SuppressWarnings("unchecked")
        List<Object> flat = (List<Object>) conn.call("ZRANGE", key, 0, -1, "WITHSCORES");
        List<Entry> entries = new ArrayList<>();
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            entries.add(decode((byte[]) flat.get(i), (long) Double.parseDouble(Resp.str(flat.get(i + 1)))));
        }
        return entries;
    }

    static List<Entry> log(String key) {
        return log(redis, key);
    }

    static long logged(String key) {
        return log(key).stream().mapToLong(Entry::permits).sum();
    }

    static List<Long> loggedPermits(String key) {
        return log(key).stream().map(Entry::permits).toList();
    }

    /**
     * The permits logged, as a sorted multiset: grants from both sides in the same millisecond
     * share a score, and the zset then orders them by their random ids.
     */
    static List<Long> loggedSorted(String key) {
        return log(key).stream().map(Entry::permits).sorted().toList();
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
