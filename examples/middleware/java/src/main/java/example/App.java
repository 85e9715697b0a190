package example;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.util.JedisURIHelper;
import redis.clients.jedis.util.SafeEncoder;

/**
 * Per-user rate limiting for com.sun.net.httpserver with one RATELIMIT.ALLOW call per request.
 *
 * <pre>
 *   REDIS_URL=redis://127.0.0.1:6379 PORT=8080 java -cp 'target/classes:target/lib/*' example.App
 *   curl -i -H 'X-User: alice' http://127.0.0.1:8080/
 * </pre>
 *
 * <p>With REDIS_CLUSTER=host:port[,host:port...] it uses a Redis Cluster seeded with those nodes
 * instead. Jedis routes {@code executeCommand} by the keys declared with {@code
 * CommandArguments.key()}/{@code keys()}, so every command built that way goes straight to the
 * master of its key's slot, the module's included.
 *
 * <p>Requests are keyed by the X-User header (use your authenticated user id in a real app), or
 * by the remote address. Each user's limiter is created by its first request (RATE) and removed
 * by Redis once the user is idle for a whole interval (KEEPALIVE), so no setup call is needed.
 */
public final class App {
    static final int LIMIT = 10; // requests per user ...
    static final long INTERVAL_MS = 60_000; // ... per minute
    static final long REPORTS_TIMEOUT_MS = 1_000; // /report waits at most this long for its turn
    static final long DAY_MS = 86_400_000;
    /** /search's own limits per user (name, rate, interval), taken together with ALLOWALL. */
    static final List<Object[]> SEARCH_LIMITS =
            List.of(new Object[] {"minute", 3, 60_000L}, new Object[] {"day", 100, DAY_MS});

    static final ProtocolCommand ALLOW = () -> SafeEncoder.encode("RATELIMIT.ALLOW");
    static final ProtocolCommand ACQUIRE = () -> SafeEncoder.encode("RATELIMIT.ACQUIRE");
    static final ProtocolCommand ALLOWALL = () -> SafeEncoder.encode("RATELIMIT.ALLOWALL");
    static final ProtocolCommand SETRATE = () -> SafeEncoder.encode("RATELIMIT.SETRATE");

    /** Milliseconds as whole seconds, rounded up: a client that waits this long is never early. */
    static String seconds(long ms) {
        return Long.toString((ms + 999) / 1000);
    }

    static String userOf(HttpExchange exchange) {
        String user = exchange.getRequestHeaders().getFirst("X-User");
        return user != null && !user.isEmpty()
                ? user
                : exchange.getRemoteAddress().getAddress().getHostAddress();
    }

    /** 429 with Retry-After once a user is over the limit, X-RateLimit-* always. */
    static final class RateLimit extends Filter {
        private final UnifiedJedis redis;

        RateLimit(UnifiedJedis redis) {
            this.redis = redis;
        }

        @Override
        public String description() {
            return "per-user rate limit";
        }

        @Override
        public void doFilter(HttpExchange exchange, Chain chain) throws IOException {
            Map<String, Object> r;
            try {
                // KEEPALIVE = interval: an idle limiter expires only when all its permits have.
                r = fields(redis.executeCommand(new CommandArguments(ALLOW)
                        .key("api:user:" + userOf(exchange))
                        .add("RATE").add(LIMIT).add(INTERVAL_MS).add("OVERALL")
                        .add("KEEPALIVE").add(INTERVAL_MS)));
            } catch (JedisException e) {
                send(exchange, 503, "rate limiter unavailable\n");
                return;
            }
            Headers h = exchange.getResponseHeaders();
            h.set("X-RateLimit-Limit", r.get("limit").toString());
            h.set("X-RateLimit-Remaining", r.get("remaining").toString());
            h.set("X-RateLimit-Reset", seconds((Long) r.get("reset_after")));
            if ((Long) r.get("allowed") == 0) {
                h.set("Retry-After", seconds((Long) r.get("retry_after")));
                send(exchange, 429, "too many requests\n");
                return;
            }
            chain.doFilter(exchange);
        }
    }

    /**
     * ALLOW's (and ALLOWALL's) reply as name to value, a Long or, for limited_by, a byte[] or
     * null: with RESP3, Jedis' default, a list of map entries; with RESP2, name, value, ...
     */
    static Map<String, Object> fields(Object reply) {
        Map<String, Object> fields = new HashMap<>();
        List<?> items = (List<?>) reply;
        for (int i = 0; i < items.size(); i++) {
            if (items.get(i) instanceof Map.Entry<?, ?> entry) {
                fields.put(SafeEncoder.encode((byte[]) entry.getKey()), entry.getValue());
            } else {
                fields.put(SafeEncoder.encode((byte[]) items.get(i)), items.get(++i));
            }
        }
        return fields;
    }

    /**
     * RATELIMIT.ALLOWALL: a permit from each of the user's search limits, or from none of them.
     * ALLOWALL takes no RATE: the limiters are made with SETRATE ... NX when it says they are
     * missing. Their keys share a hash tag, hence a slot in a cluster; {@code keys()} declares
     * them, which routes the command there.
     */
    static Map<String, Object> allowAll(UnifiedJedis redis, String user) {
        List<String> keys = SEARCH_LIMITS.stream()
                .map(limit -> "{search:" + user + "}:" + limit[0])
                .collect(Collectors.toList());
        CommandArguments allowAll = new CommandArguments(ALLOWALL).add(keys.size()).keys(keys);
        try {
            return fields(redis.executeCommand(allowAll));
        } catch (JedisDataException e) {
            if (e.getMessage() == null || !e.getMessage().contains("not initialized")) {
                throw e;
            }
        }
        for (int i = 0; i < keys.size(); i++) {
            Object[] limit = SEARCH_LIMITS.get(i);
            redis.executeCommand(new CommandArguments(SETRATE).key(keys.get(i))
                    .add(limit[1]).add(limit[2]).add("KEEPALIVE").add(DAY_MS).add("NX"));
        }
        return fields(redis.executeCommand(allowAll));
    }

    /**
     * RATELIMIT.ACQUIRE: waits in Redis, first come first served, up to timeoutMs. Returns null
     * once the permit is ours, else the wait hint in ms. {@code waiters} is a client of its own,
     * so blocked waiters never hold the connections ALLOW needs, built by {@link #waiters} with a
     * blocking socket timeout that outlasts TIMEOUT. Jedis does not retry, and closes a
     * connection that failed, which takes its waiter out of Redis' queue.
     */
    static Long acquire(UnifiedJedis waiters, String key, long timeoutMs) {
        return (Long) waiters.executeCommand(new CommandArguments(ACQUIRE).key(key)
                .add("TIMEOUT").add(timeoutMs)
                .add("RATE").add(1).add(60_000).add("KEEPALIVE").add(60_000)
                .blocking());
    }

    /**
     * A client of REDIS_CLUSTER's cluster if set, else of the server at REDIS_URL. A cluster
     * client makes {@code attempts} tries of a command; the waiters' makes one, as a retry after a
     * timeout would queue a second waiter.
     */
    static UnifiedJedis connect(JedisClientConfig config, int attempts) {
        String seeds = System.getenv("REDIS_CLUSTER");
        if (seeds != null && !seeds.isEmpty()) {
            Set<HostAndPort> nodes = Arrays.stream(seeds.split(","))
                    .map(HostAndPort::from)
                    .collect(Collectors.toSet());
            return RedisClusterClient.builder()
                    .nodes(nodes)
                    .clientConfig(config)
                    .maxAttempts(attempts)
                    .build();
        }
        return RedisClient.builder()
                .hostAndPort(JedisURIHelper.getHostAndPort(url()))
                .clientConfig(config)
                .build();
    }

    static URI url() {
        return URI.create(System.getenv().getOrDefault("REDIS_URL", "redis://127.0.0.1:6379"));
    }

    static UnifiedJedis waiters(long timeoutMs) {
        return connect(DefaultJedisClientConfig.builder(url())
                .blockingSocketTimeoutMillis((int) timeoutMs + 5_000)
                .build(), 1);
    }

    static void send(HttpExchange exchange, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain");
        exchange.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(System.getenv().getOrDefault("PORT", "8080"));
        UnifiedJedis redis = connect(DefaultJedisClientConfig.builder(url()).build(),
                RedisClusterClient.DEFAULT_MAX_ATTEMPTS);
        UnifiedJedis waiters = waiters(REPORTS_TIMEOUT_MS);

        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/report", exchange -> {
            // Expensive reports: one a minute across all users; wait briefly for a turn.
            Long wait;
            try {
                wait = acquire(waiters, "reports", REPORTS_TIMEOUT_MS);
            } catch (JedisException e) {
                send(exchange, 503, "rate limiter unavailable\n");
                return;
            }
            if (wait != null) {
                exchange.getResponseHeaders().set("Retry-After", seconds(wait));
                send(exchange, 503, "reports are busy\n");
                return;
            }
            send(exchange, 200, "report for " + userOf(exchange) + "\n");
        }).getFilters().add(new RateLimit(redis));
        server.createContext("/search", exchange -> {
            Map<String, Object> r;
            try {
                r = allowAll(redis, userOf(exchange));
            } catch (JedisException e) {
                send(exchange, 503, "rate limiter unavailable\n");
                return;
            }
            if ((Long) r.get("allowed") == 0) {
                exchange.getResponseHeaders().set("Retry-After", seconds((Long) r.get("retry_after")));
                send(exchange, 429, "search limit reached: "
                        + SafeEncoder.encode((byte[]) r.get("limited_by")) + "\n");
                return;
            }
            send(exchange, 200, "results for " + userOf(exchange) + "\n");
        }).getFilters().add(new RateLimit(redis));
        server.createContext("/", exchange -> send(exchange, 200, "hello " + userOf(exchange) + "\n"))
                .getFilters().add(new RateLimit(redis));
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
        System.out.println("listening on http://127.0.0.1:" + port);
    }
}
