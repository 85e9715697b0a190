package ratelimit.redisson;

import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import org.redisson.Redisson;
import org.redisson.RedissonReactive;
import org.redisson.RedissonRx;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RRateLimiterReactive;
import org.redisson.api.RRateLimiterRx;
import org.redisson.api.RedissonClient;
import org.redisson.reactive.ReactiveProxyBuilder;
import org.redisson.rx.RxProxyBuilder;

/**
 * The one line that puts a Redisson rate limiter on the ratelimit module:
 *
 * <pre>{@code
 * RRateLimiter limiter = NativeRateLimiters.get(redisson, "limit:user:1"); // instead of redisson.getRateLimiter(...)
 * }</pre>
 *
 * <p>The limiter keeps its state in the keys of Redisson's limiter of the same name, so the module,
 * Redisson's own limiters and other clients of the module share it. Where the server has no module
 * (a managed Redis, say), the same object is Redisson's own limiter: the first {@code ERR unknown
 * command} switches every limiter of that {@code RedissonClient} to Redisson's scripts, logged
 * once, and the module is tried again once a minute.
 */
public final class NativeRateLimiters {
    /** What each client has learnt about its servers, dropped with the client. */
    private static final Map<RedissonClient, ModuleSupport> SUPPORT = Collections.synchronizedMap(new WeakHashMap<>());

    private NativeRateLimiters() {
    }

    /**
     * The rate limiter {@code name}, served by the module: a drop-in for
     * {@code redisson.getRateLimiter(name)}.
     *
     * @param redisson a client made by {@code Redisson.create} (as Spring's {@code RedissonClient} bean is)
     * @throws IllegalArgumentException if {@code redisson} is not Redisson's own client class
     */
    public static NativeRateLimiter get(RedissonClient redisson, String name) {
        Redisson client = redisson(redisson);
        return new NativeRateLimiter(client, name, support(client));
    }

    /**
     * The same limiter with Reactor types, as {@code redisson.reactive().getRateLimiter(name)}
     * gives: Redisson's own reactive proxy around the native limiter.
     */
    public static RRateLimiterReactive reactive(RedissonClient redisson, String name) {
        RedissonReactive reactive = (RedissonReactive) redisson(redisson).reactive();
        return ReactiveProxyBuilder.create(reactive.getCommandExecutor(), get(redisson, name), RRateLimiterReactive.class);
    }

    /**
     * The same limiter with RxJava 3 types, as {@code redisson.rxJava().getRateLimiter(name)}
     * gives: Redisson's own RxJava proxy around the native limiter (RxJava must be on the class path).
     */
    public static RRateLimiterRx rxJava(RedissonClient redisson, String name) {
        RedissonRx rx = (RedissonRx) redisson(redisson).rxJava();
        return RxProxyBuilder.create(rx.getCommandExecutor(), get(redisson, name), RRateLimiterRx.class);
    }

    static ModuleSupport support(RedissonClient redisson) {
        synchronized (SUPPORT) {
            return SUPPORT.computeIfAbsent(redisson, r -> new ModuleSupport(r.getId()));
        }
    }

    private static Redisson redisson(RedissonClient redisson) {
        if (!(redisson instanceof Redisson)) {
            throw new IllegalArgumentException("NativeRateLimiters needs the client Redisson.create gives, not "
                    + (redisson == null ? "null" : redisson.getClass().getName()));
        }
        return (Redisson) redisson;
    }

}
