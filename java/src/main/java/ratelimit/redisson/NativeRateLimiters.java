package ratelimit.redisson;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import org.redisson.Redisson;
import org.redisson.RedissonReactive;
import org.redisson.RedissonRx;
import org.redisson.api.RRateLimiterAsync;
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
    /** Each client's bound on its waits in the server, dropped with the client. */
    private static final Map<RedissonClient, WaitGate> GATES = Collections.synchronizedMap(new WeakHashMap<>());

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
        return new NativeRateLimiter(client, name, support(client), gate(client));
    }

    /**
     * How many callers of this client's native limiters wait in the server at once, each holding
     * one of the client's pooled connections while it does ({@code acquire()} and
     * {@code tryAcquire} with a timeout). The callers beyond wait in the JVM, holding no
     * connection, in the order they came, and go to the server as waits there end. The default
     * is a quarter of the client's connection pool per master ({@code connectionPoolSize}, or
     * {@code masterConnectionPoolSize}), at least 1: 16 of Redisson's default 64. The bound is
     * per client, over all its limiters and, on a cluster, all its masters. A caller queued in
     * the JVM whose limiter has no caller in the server asks it with RATELIMIT.TRYACQUIRE (the
     * first of its callers there only, so none overtakes another), and is granted at once if it
     * has permits free; a timeout that runs out in the JVM ends with such an ask.
     *
     * @throws IllegalArgumentException if {@code maxWaits} is less than 1
     */
    public static void setMaxWaitsInServer(RedissonClient redisson, int maxWaits) {
        gate(redisson(redisson)).setLimit(maxWaits);
    }

    /** The bound {@link #setMaxWaitsInServer} sets, or its default. */
    public static int maxWaitsInServer(RedissonClient redisson) {
        return gate(redisson(redisson)).limit();
    }

    static WaitGate gate(RedissonClient redisson) {
        synchronized (GATES) {
            return GATES.computeIfAbsent(redisson, r -> new WaitGate(WaitGate.defaultLimit(
                    ((Redisson) r).getCommandExecutor().getServiceManager().getConfig().getMasterConnectionPoolSize())));
        }
    }

    /**
     * The same limiter with Reactor types, as {@code redisson.reactive().getRateLimiter(name)}
     * gives: Redisson's own reactive proxy around the native limiter.
     */
    public static RRateLimiterReactive reactive(RedissonClient redisson, String name) {
        RedissonReactive reactive = (RedissonReactive) redisson(redisson).reactive();
        return ReactiveProxyBuilder.create(reactive.getCommandExecutor(), asyncView(get(redisson, name)),
                RRateLimiterReactive.class);
    }

    /**
     * The same limiter with RxJava 3 types, as {@code redisson.rxJava().getRateLimiter(name)}
     * gives: Redisson's own RxJava proxy around the native limiter (RxJava must be on the class path).
     */
    public static RRateLimiterRx rxJava(RedissonClient redisson, String name) {
        RedissonRx rx = (RedissonRx) redisson(redisson).rxJava();
        return RxProxyBuilder.create(rx.getCommandExecutor(), asyncView(get(redisson, name)), RRateLimiterRx.class);
    }

    /** Each RRateLimiterAsync method as a handle on NativeRateLimiter's method of that signature. */
    private static final Map<Method, MethodHandle> ASYNC_METHODS = new ConcurrentHashMap<>();

    /**
     * The limiter as the {@code RRateLimiterAsync} of the Redisson on the class path, for Redisson's
     * reactive and RxJava proxies. They look methods up by reflection on the object's class, which
     * on a Redisson older than 4.4 would fail on NativeRateLimiter's RateLimiterArgs forms; this
     * view has exactly the methods that Redisson knows, each bound to the limiter's own.
     */
    private static RRateLimiterAsync asyncView(NativeRateLimiter limiter) {
        InvocationHandler handler = (proxy, method, args) -> {
            if (method.getDeclaringClass() == Object.class) {
                switch (method.getName()) {
                    case "equals":
                        return proxy == args[0];
                    case "hashCode":
                        return System.identityHashCode(proxy);
                    default:
                        return "async view of " + limiter.getName();
                }
            }
            MethodHandle handle = ASYNC_METHODS.computeIfAbsent(method, NativeRateLimiters::handle);
            Object[] all = new Object[args == null ? 1 : args.length + 1];
            all[0] = limiter;
            if (args != null) {
                System.arraycopy(args, 0, all, 1, args.length);
            }
            return handle.invokeWithArguments(all);
        };
        return (RRateLimiterAsync) Proxy.newProxyInstance(NativeRateLimiters.class.getClassLoader(),
                new Class<?>[] {RRateLimiterAsync.class}, handler);
    }

    private static MethodHandle handle(Method method) {
        try {
            return MethodHandles.publicLookup().findVirtual(NativeRateLimiter.class, method.getName(),
                    MethodType.methodType(method.getReturnType(), method.getParameterTypes()));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            throw new IllegalStateException("NativeRateLimiter lacks " + method, e);
        }
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
