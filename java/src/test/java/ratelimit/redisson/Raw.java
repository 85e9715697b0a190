package ratelimit.redisson;

import java.util.ArrayList;
import java.util.List;
import org.redisson.client.RedisClient;
import org.redisson.client.RedisClientConfig;
import org.redisson.client.RedisConnection;
import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;

/**
 * One plain connection for what the tests check behind the library's back: the module's commands
 * sent directly, raw keys, INFO, CLIENT LIST. Redisson's low-level client (no pool, no retries),
 * replies as Redisson decodes them with a string codec: String, Long, List, null.
 */
final class Raw implements AutoCloseable {
    /** One event loop, timer and resolver for every plain connection of the run. */
    private static final class Shared {
        // Daemon threads: never shut down, they must not keep a JVM alive (make bench-java's
        // exec:java waits for every other thread to end).
        final io.netty.channel.EventLoopGroup group = new io.netty.channel.nio.NioEventLoopGroup(2,
                new io.netty.util.concurrent.DefaultThreadFactory("raw", true));
        final java.util.concurrent.ExecutorService executor = java.util.concurrent.Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "raw-connection");
            t.setDaemon(true);
            return t;
        });
        final io.netty.util.HashedWheelTimer timer = new io.netty.util.HashedWheelTimer(
                new io.netty.util.concurrent.DefaultThreadFactory("raw-timer", true));
        final io.netty.resolver.dns.DnsAddressResolverGroup resolver = new io.netty.resolver.dns.DnsAddressResolverGroup(
                io.netty.channel.socket.nio.NioDatagramChannel.class,
                io.netty.resolver.dns.DnsServerAddressStreamProviders.platformDefault());
    }

    private static final Shared SHARED = new Shared();

    private final RedisClient client;
    private final RedisConnection connection;

    Raw(int port) {
        RedisClientConfig config = new RedisClientConfig();
        config.setAddress("redis://127.0.0.1:" + port);
        config.setCommandTimeout(60_000); // a hung server fails the test instead of hanging the run
        config.setConnectTimeout(5_000);
        config.setGroup(SHARED.group);
        config.setExecutor(SHARED.executor);
        config.setTimer(SHARED.timer);
        config.setResolverGroup(SHARED.resolver);
        client = RedisClient.create(config);
        try {
            connection = client.connect();
        } catch (RuntimeException e) {
            client.shutdown();
            throw e;
        }
    }

    Object call(Object... args) {
        return connection.sync(StringCodec.INSTANCE, new RedisCommand<Object>(args[0].toString()), rest(args));
    }

    long integer(Object... args) {
        return (Long) call(args);
    }

    /** The members of a sorted set as bytes with their scores, oldest first. */
    List<Object> zrangeBytes(String key) {
        List<?> flat = connection.sync(ByteArrayCodec.INSTANCE, new RedisCommand<List<Object>>("ZRANGE"),
                key, 0, -1, "WITHSCORES");
        return new ArrayList<>(flat);
    }

    /** A module command: {@code rl("TRYACQUIRE", "k", 2)} sends {@code RATELIMIT.TRYACQUIRE k 2}. */
    Object rl(String command, Object... args) {
        Object[] all = new Object[args.length + 1];
        all[0] = "RATELIMIT." + command;
        System.arraycopy(args, 0, all, 1, args.length);
        return call(all);
    }

    /** One field of INFO's output (e.g. {@code ("commandstats", "cmdstat_eval")}), or null. */
    String info(String section, String field) {
        String text = String.valueOf(call("INFO", section));
        for (String line : text.split("\r\n")) {
            if (line.startsWith(field + ":")) {
                return line.substring(field.length() + 1);
            }
        }
        return null;
    }

    /** The calls= count of a command in INFO commandstats (0 when it has not run). */
    long calls(String command) {
        String stat = info("commandstats", "cmdstat_" + command.toLowerCase());
        if (stat == null) {
            return 0;
        }
        for (String part : stat.split(",")) {
            if (part.startsWith("calls=")) {
                return Long.parseLong(part.substring(6));
            }
        }
        return 0;
    }

    /** Scripts run: Redisson's limiter runs EVAL or EVALSHA. */
    long scripts() {
        return calls("eval") + calls("evalsha");
    }

    /** Clients blocked in the server now (INFO clients). */
    long blockedClients() {
        return Long.parseLong(info("clients", "blocked_clients"));
    }

    private static Object[] rest(Object[] args) {
        Object[] rest = new Object[args.length - 1];
        System.arraycopy(args, 1, rest, 0, rest.length);
        return rest;
    }

    @Override
    public void close() {
        connection.closeAsync().awaitUninterruptibly();
        client.shutdown();
    }
}
