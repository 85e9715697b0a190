package ratelimit.redisson;

import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.redisson.Redisson;
import org.redisson.api.ObjectEncoding;
import org.redisson.api.ObjectListener;
import org.redisson.api.RFuture;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.ratelimiter.RateLimiterArgs;
import org.redisson.client.codec.Codec;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.command.CommandAsyncExecutor;
import org.redisson.misc.CompletableFutureWrapper;

/**
 * Redisson's {@link RRateLimiter} served by the ratelimit module: the rate-limiting methods send
 * RATELIMIT.SETRATE, TRYACQUIRE, ACQUIRE, AVAILABLE, CONFIG and RELEASE on the limiter's own keys
 * (the keys of Redisson's limiter of the same name), and the object's other methods (expiry,
 * delete, rename, listeners...) are Redisson's own limiter's.
 *
 * <p>Where the server has no module, every method is Redisson's own limiter's (see
 * {@link NativeRateLimiters}). Get one with {@link NativeRateLimiters#get}.
 */
public final class NativeRateLimiter implements RRateLimiter {
    private final Redisson redisson;
    private final CommandAsyncExecutor executor;
    /** Redisson's own limiter on the same name: the object methods, and the fallback. */
    private final RRateLimiter redissonLimiter;
    private final ModuleSupport module;
    /** The client's bound on the waits it has in the server at once. */
    private final WaitGate gate;

    NativeRateLimiter(Redisson redisson, String name, ModuleSupport module, WaitGate gate) {
        this.redisson = redisson;
        this.executor = redisson.getCommandExecutor();
        this.redissonLimiter = redisson.getRateLimiter(name);
        this.module = module;
        this.gate = gate;
    }

    /**
     * Whether calls go to the module's commands: true unless this client has found the module
     * missing (then Redisson's scripts serve them, and the module is tried again once a minute).
     */
    public boolean usesModule() {
        return !module.missing();
    }

    CommandAsyncExecutor executor() {
        return executor;
    }

    RRateLimiter redissonLimiter() {
        return redissonLimiter;
    }

    ModuleSupport module() {
        return module;
    }

    WaitGate gate() {
        return gate;
    }

    /** The id Redisson's PER_CLIENT limiters key their state with: the client's. */
    String clientId() {
        return redisson.getId();
    }

    long responseTimeoutMs() {
        return executor.getServiceManager().getConfig().getTimeout();
    }

    // ---- calls: the module's command, or Redisson's own method where the module is missing ----

    private <T> RFuture<T> call(Supplier<CompletionStage<T>> nativeCall, Supplier<RFuture<T>> redissonCall) {
        if (!module.useModule()) {
            return redissonCall.get();
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        long sentAt = System.nanoTime();
        nativeCall.get().whenComplete((value, error) -> {
            if (error == null) {
                module.found(sentAt);
                result.complete(value);
                return;
            }
            Throwable cause = ModuleSupport.unwrap(error);
            if (!ModuleSupport.isUnknownCommand(cause)) {
                result.completeExceptionally(cause);
                return;
            }
            // The command was refused unknown, so nothing ran: Redisson's own call does the job.
            module.missing(cause);
            redissonCall.get().whenComplete((v, e) -> {
                if (e != null) {
                    result.completeExceptionally(ModuleSupport.unwrap(e));
                } else {
                    result.complete(v);
                }
            });
        });
        return new CompletableFutureWrapper<>(result);
    }

    private <T> RFuture<T> send(RedisCommand<T> command, Object... args) {
        String key = getName();
        Object[] params = new Object[args.length + 1];
        params[0] = key;
        System.arraycopy(args, 0, params, 1, args.length);
        return executor.writeAsync(key, StringCodec.INSTANCE, command, params);
    }

    private static String mode(RateType type) {
        return type == RateType.PER_CLIENT ? "PER_CLIENT" : "OVERALL";
    }

    private static void checkKeepAlive(Duration rateInterval, Duration keepAliveTime) {
        // Redisson's own check, with its message, before anything is sent.
        if (!keepAliveTime.isZero() && keepAliveTime.toMillis() < rateInterval.toMillis()) {
            throw new IllegalArgumentException("The parameter keepAliveTime should be greater than or equal to rateInterval");
        }
    }

    private static void checkPermits(long permits) {
        if (permits < 0) {
            throw new IllegalArgumentException("Permits amount can't be negative");
        }
    }

    // ---- setting the rate ----

    @Override
    public RFuture<Boolean> trySetRateAsync(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime) {
        checkKeepAlive(rateInterval, keepAliveTime);
        return call(() -> send(Commands.SETRATE, rate, rateInterval.toMillis(), mode(mode),
                        "KEEPALIVE", keepAliveTime.toMillis(), "NX"),
                () -> redissonLimiter.trySetRateAsync(mode, rate, rateInterval, keepAliveTime));
    }

    @Override
    public RFuture<Boolean> trySetRateAsync(RateType mode, long rate, Duration rateInterval) {
        return trySetRateAsync(mode, rate, rateInterval, Duration.ZERO);
    }

    @Deprecated
    @Override
    public RFuture<Boolean> trySetRateAsync(RateType mode, long rate, long rateInterval, RateIntervalUnit unit) {
        return trySetRateAsync(mode, rate, Duration.ofMillis(unit.toMillis(rateInterval)), Duration.ZERO);
    }

    @Override
    public boolean trySetRate(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime) {
        return executor.get(trySetRateAsync(mode, rate, rateInterval, keepAliveTime));
    }

    @Override
    public boolean trySetRate(RateType mode, long rate, Duration rateInterval) {
        return executor.get(trySetRateAsync(mode, rate, rateInterval));
    }

    @Deprecated
    @Override
    public boolean trySetRate(RateType mode, long rate, long rateInterval, RateIntervalUnit unit) {
        return executor.get(trySetRateAsync(mode, rate, rateInterval, unit));
    }

    /** setRate without and with KEEPSTATE, and updateRate (XX). */
    private RFuture<Boolean> setRateAsync(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime,
            boolean keepState, boolean onlyIfExists, Supplier<RFuture<Boolean>> redissonCall) {
        checkKeepAlive(rateInterval, keepAliveTime);
        return call(() -> {
            Object[] args = {rate, rateInterval.toMillis(), mode(mode), "KEEPALIVE", keepAliveTime.toMillis(),
                "CLIENT", clientId()};
            if (onlyIfExists || keepState) {
                Object[] more = new Object[args.length + (onlyIfExists ? 1 : 0) + (keepState ? 1 : 0)];
                System.arraycopy(args, 0, more, 0, args.length);
                int i = args.length;
                if (onlyIfExists) {
                    more[i++] = "XX";
                }
                if (keepState) {
                    more[i] = "KEEPSTATE";
                }
                args = more;
            }
            return send(Commands.SETRATE, args);
        }, redissonCall);
    }

    /** The future's outcome without its value; cancelling it cancels the future (a wait). */
    private static RFuture<Void> toVoid(RFuture<?> future) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        future.whenComplete((r, e) -> {
            if (e != null) {
                done.completeExceptionally(ModuleSupport.unwrap(e));
            } else {
                done.complete(null);
            }
        });
        done.whenComplete((r, e) -> {
            if (done.isCancelled()) {
                future.cancel(false);
            }
        });
        return new CompletableFutureWrapper<>(done);
    }

    @Override
    public RFuture<Void> setRateAsync(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime) {
        return toVoid(setRateAsync(mode, rate, rateInterval, keepAliveTime, false, false,
                () -> new CompletableFutureWrapper<>(redissonLimiter.setRateAsync(mode, rate, rateInterval, keepAliveTime)
                        .thenApply(r -> true))));
    }

    @Deprecated
    @Override
    public RFuture<Void> setRateAsync(RateType mode, long rate, Duration rateInterval) {
        return setRateAsync(mode, rate, rateInterval, Duration.ZERO);
    }

    @Deprecated
    @Override
    public RFuture<Void> setRateAsync(RateType mode, long rate, long rateInterval, RateIntervalUnit unit) {
        return setRateAsync(mode, rate, Duration.ofMillis(unit.toMillis(rateInterval)), Duration.ZERO);
    }

    @Override
    public RFuture<Void> setRateAsync(RateLimiterArgs args) {
        return toVoid(RateArgs.setRateAsync(this, args, false));
    }

    @Override
    public RFuture<Boolean> updateRateAsync(RateLimiterArgs args) {
        return RateArgs.setRateAsync(this, args, true);
    }

    /** The RateLimiterArgs forms (Redisson 4.4 and later), through {@link RateArgs}. */
    RFuture<Boolean> setRateAsync(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime,
            boolean keepState, boolean onlyIfExists, RateLimiterArgs args) {
        Supplier<RFuture<Boolean>> redissonCall = onlyIfExists
                ? () -> redissonLimiter.updateRateAsync(args)
                : () -> new CompletableFutureWrapper<>(redissonLimiter.setRateAsync(args).thenApply(r -> true));
        return setRateAsync(mode, rate, rateInterval, keepAliveTime, keepState, onlyIfExists, redissonCall);
    }

    @Deprecated
    @Override
    public void setRate(RateType mode, long rate, Duration rateInterval, Duration keepAliveTime) {
        executor.get(setRateAsync(mode, rate, rateInterval, keepAliveTime));
    }

    @Deprecated
    @Override
    public void setRate(RateType mode, long rate, Duration rateInterval) {
        executor.get(setRateAsync(mode, rate, rateInterval));
    }

    @Deprecated
    @Override
    public void setRate(RateType mode, long rate, long rateInterval, RateIntervalUnit unit) {
        executor.get(setRateAsync(mode, rate, rateInterval, unit));
    }

    @Override
    public void setRate(RateLimiterArgs args) {
        executor.get(setRateAsync(args));
    }

    @Override
    public boolean updateRate(RateLimiterArgs args) {
        return executor.get(updateRateAsync(args));
    }

    // ---- acquiring ----

    @Override
    public RFuture<Boolean> tryAcquireAsync(long permits) {
        checkPermits(permits);
        if (permits == 0) {
            // Redisson grants 0 permits on an initialized limiter: AVAILABLE checks that much.
            return call(() -> send(Commands.AVAILABLE, "CLIENT", clientId()).thenApply(n -> true),
                    () -> redissonLimiter.tryAcquireAsync(0));
        }
        return call(() -> send(Commands.TRYACQUIRE, permits, "CLIENT", clientId()),
                () -> redissonLimiter.tryAcquireAsync(permits));
    }

    @Override
    public RFuture<Boolean> tryAcquireAsync() {
        return tryAcquireAsync(1L);
    }

    /**
     * Redisson's timeouts: -1 ms waits for ever, any other timeout of 0 ms or less makes a single
     * attempt, a positive one waits in the server's queue up to that long.
     */
    @Override
    public RFuture<Boolean> tryAcquireAsync(long permits, Duration timeout) {
        long timeoutMs = timeout.toMillis();
        if (timeoutMs != -1 && timeoutMs <= 0 || permits == 0) {
            return tryAcquireAsync(permits);
        }
        checkPermits(permits);
        if (!module.useModule()) {
            return redissonLimiter.tryAcquireAsync(permits, timeout);
        }
        return new CompletableFutureWrapper<>(Acquisition.start(this, permits, timeoutMs));
    }

    @Override
    public RFuture<Boolean> tryAcquireAsync(Duration timeout) {
        return tryAcquireAsync(1, timeout);
    }

    @Deprecated
    @Override
    public RFuture<Boolean> tryAcquireAsync(long timeout, TimeUnit unit) {
        return tryAcquireAsync(1, Duration.ofMillis(unit.toMillis(timeout)));
    }

    @Deprecated
    @Override
    public RFuture<Boolean> tryAcquireAsync(long permits, long timeout, TimeUnit unit) {
        return tryAcquireAsync(permits, Duration.ofMillis(unit.toMillis(timeout)));
    }

    @Override
    public RFuture<Void> acquireAsync(long permits) {
        return toVoid(tryAcquireAsync(permits, Duration.ofMillis(-1)));
    }

    @Override
    public RFuture<Void> acquireAsync() {
        return acquireAsync(1);
    }

    @Override
    public boolean tryAcquire() {
        return executor.get(tryAcquireAsync());
    }

    @Override
    public boolean tryAcquire(long permits) {
        return executor.get(tryAcquireAsync(permits));
    }

    @Override
    public void acquire() {
        executor.get(acquireAsync());
    }

    @Override
    public void acquire(long permits) {
        executor.get(acquireAsync(permits));
    }

    @Deprecated
    @Override
    public boolean tryAcquire(long timeout, TimeUnit unit) {
        return executor.get(tryAcquireAsync(timeout, unit));
    }

    @Override
    public boolean tryAcquire(Duration timeout) {
        return executor.get(tryAcquireAsync(timeout));
    }

    @Deprecated
    @Override
    public boolean tryAcquire(long permits, long timeout, TimeUnit unit) {
        return executor.get(tryAcquireAsync(permits, timeout, unit));
    }

    @Override
    public boolean tryAcquire(long permits, Duration timeout) {
        return executor.get(tryAcquireAsync(permits, timeout));
    }

    // ---- releasing, reading ----

    @Override
    public RFuture<Void> releaseAsync(long permits) {
        checkPermits(permits);
        if (permits == 0) {
            return new CompletableFutureWrapper<>((Void) null);
        }
        return call(() -> send(Commands.RELEASE, permits, "CLIENT", clientId()), () -> redissonRelease(permits));
    }

    /** Redisson's own release, which Redisson has from 3.52.0 on. */
    private RFuture<Void> redissonRelease(long permits) {
        try {
            return redissonLimiter.releaseAsync(permits);
        } catch (AbstractMethodError | NoSuchMethodError olderRedisson) {
            CompletableFuture<Void> failed = new CompletableFuture<>();
            failed.completeExceptionally(new UnsupportedOperationException(
                    "release needs the ratelimit module or Redisson 3.52.0 or later"));
            return new CompletableFutureWrapper<>(failed);
        }
    }

    @Override
    public void release(long permits) {
        executor.get(releaseAsync(permits));
    }

    @Override
    public RFuture<RateLimiterConfig> getConfigAsync() {
        // A missing limiter: Redisson's answer, an OVERALL config of 0 permits per 0 ms.
        return call(() -> send(Commands.CONFIG).thenApply(c -> c != null ? c : new RateLimiterConfig(RateType.OVERALL, 0L, 0L)),
                redissonLimiter::getConfigAsync);
    }

    @Override
    public RateLimiterConfig getConfig() {
        return executor.get(getConfigAsync());
    }

    @Override
    public RFuture<Long> availablePermitsAsync() {
        return call(() -> send(Commands.AVAILABLE, "CLIENT", clientId()), redissonLimiter::availablePermitsAsync);
    }

    @Override
    public long availablePermits() {
        return executor.get(availablePermitsAsync());
    }

    // ---- RObject and RExpirable: Redisson's own limiter's, on the same keys ----

    @Override
    public Long getIdleTime() {
        return redissonLimiter.getIdleTime();
    }

    @Override
    public int getReferenceCount() {
        return redissonLimiter.getReferenceCount();
    }

    @Override
    public int getAccessFrequency() {
        return redissonLimiter.getAccessFrequency();
    }

    @Override
    public ObjectEncoding getInternalEncoding() {
        return redissonLimiter.getInternalEncoding();
    }

    @Override
    public long sizeInMemory() {
        return redissonLimiter.sizeInMemory();
    }

    @Override
    public void restore(byte[] state) {
        redissonLimiter.restore(state);
    }

    @Override
    public void restore(byte[] state, long timeToLive, TimeUnit timeUnit) {
        redissonLimiter.restore(state, timeToLive, timeUnit);
    }

    @Override
    public void restoreAndReplace(byte[] state) {
        redissonLimiter.restoreAndReplace(state);
    }

    @Override
    public void restoreAndReplace(byte[] state, long timeToLive, TimeUnit timeUnit) {
        redissonLimiter.restoreAndReplace(state, timeToLive, timeUnit);
    }

    @Override
    public byte[] dump() {
        return redissonLimiter.dump();
    }

    @Override
    public boolean touch() {
        return redissonLimiter.touch();
    }

    @Override
    public void migrate(String host, int port, int database, long timeout) {
        redissonLimiter.migrate(host, port, database, timeout);
    }

    @Override
    public void copy(String host, int port, int database, long timeout) {
        redissonLimiter.copy(host, port, database, timeout);
    }

    @Override
    public boolean copy(String destination) {
        return redissonLimiter.copy(destination);
    }

    @Override
    public boolean copy(String destination, int database) {
        return redissonLimiter.copy(destination, database);
    }

    @Override
    public boolean copyAndReplace(String destination) {
        return redissonLimiter.copyAndReplace(destination);
    }

    @Override
    public boolean copyAndReplace(String destination, int database) {
        return redissonLimiter.copyAndReplace(destination, database);
    }

    @Override
    public boolean move(int database) {
        return redissonLimiter.move(database);
    }

    @Override
    public String getName() {
        return redissonLimiter.getName();
    }

    @Override
    public boolean delete() {
        return redissonLimiter.delete();
    }

    @Override
    public boolean unlink() {
        return redissonLimiter.unlink();
    }

    @Override
    public void rename(String newName) {
        redissonLimiter.rename(newName);
    }

    @Override
    public boolean renamenx(String newName) {
        return redissonLimiter.renamenx(newName);
    }

    @Override
    public boolean isExists() {
        return redissonLimiter.isExists();
    }

    @Override
    public Codec getCodec() {
        return redissonLimiter.getCodec();
    }

    @Override
    public int addListener(ObjectListener listener) {
        return redissonLimiter.addListener(listener);
    }

    @Override
    public void removeListener(int listenerId) {
        redissonLimiter.removeListener(listenerId);
    }

    @Override
    public RFuture<Long> getIdleTimeAsync() {
        return redissonLimiter.getIdleTimeAsync();
    }

    @Override
    public RFuture<Integer> getReferenceCountAsync() {
        return redissonLimiter.getReferenceCountAsync();
    }

    @Override
    public RFuture<Integer> getAccessFrequencyAsync() {
        return redissonLimiter.getAccessFrequencyAsync();
    }

    @Override
    public RFuture<ObjectEncoding> getInternalEncodingAsync() {
        return redissonLimiter.getInternalEncodingAsync();
    }

    @Override
    public RFuture<Long> sizeInMemoryAsync() {
        return redissonLimiter.sizeInMemoryAsync();
    }

    @Override
    public RFuture<Void> restoreAsync(byte[] state) {
        return redissonLimiter.restoreAsync(state);
    }

    @Override
    public RFuture<Void> restoreAsync(byte[] state, long timeToLive, TimeUnit timeUnit) {
        return redissonLimiter.restoreAsync(state, timeToLive, timeUnit);
    }

    @Override
    public RFuture<Void> restoreAndReplaceAsync(byte[] state) {
        return redissonLimiter.restoreAndReplaceAsync(state);
    }

    @Override
    public RFuture<Void> restoreAndReplaceAsync(byte[] state, long timeToLive, TimeUnit timeUnit) {
        return redissonLimiter.restoreAndReplaceAsync(state, timeToLive, timeUnit);
    }

    @Override
    public RFuture<byte[]> dumpAsync() {
        return redissonLimiter.dumpAsync();
    }

    @Override
    public RFuture<Boolean> touchAsync() {
        return redissonLimiter.touchAsync();
    }

    @Override
    public RFuture<Void> migrateAsync(String host, int port, int database, long timeout) {
        return redissonLimiter.migrateAsync(host, port, database, timeout);
    }

    @Override
    public RFuture<Void> copyAsync(String host, int port, int database, long timeout) {
        return redissonLimiter.copyAsync(host, port, database, timeout);
    }

    @Override
    public RFuture<Boolean> copyAsync(String destination) {
        return redissonLimiter.copyAsync(destination);
    }

    @Override
    public RFuture<Boolean> copyAsync(String destination, int database) {
        return redissonLimiter.copyAsync(destination, database);
    }

    @Override
    public RFuture<Boolean> copyAndReplaceAsync(String destination) {
        return redissonLimiter.copyAndReplaceAsync(destination);
    }

    @Override
    public RFuture<Boolean> copyAndReplaceAsync(String destination, int database) {
        return redissonLimiter.copyAndReplaceAsync(destination, database);
    }

    @Override
    public RFuture<Boolean> moveAsync(int database) {
        return redissonLimiter.moveAsync(database);
    }

    @Override
    public RFuture<Boolean> deleteAsync() {
        return redissonLimiter.deleteAsync();
    }

    @Override
    public RFuture<Boolean> unlinkAsync() {
        return redissonLimiter.unlinkAsync();
    }

    @Override
    public RFuture<Void> renameAsync(String newName) {
        return redissonLimiter.renameAsync(newName);
    }

    @Override
    public RFuture<Boolean> renamenxAsync(String newName) {
        return redissonLimiter.renamenxAsync(newName);
    }

    @Override
    public RFuture<Boolean> isExistsAsync() {
        return redissonLimiter.isExistsAsync();
    }

    @Override
    public RFuture<Integer> addListenerAsync(ObjectListener listener) {
        return redissonLimiter.addListenerAsync(listener);
    }

    @Override
    public RFuture<Void> removeListenerAsync(int listenerId) {
        return redissonLimiter.removeListenerAsync(listenerId);
    }

    @Deprecated
    @Override
    public boolean expire(long timeToLive, TimeUnit timeUnit) {
        return redissonLimiter.expire(timeToLive, timeUnit);
    }

    @Deprecated
    @Override
    public boolean expireAt(long timestamp) {
        return redissonLimiter.expireAt(timestamp);
    }

    @Deprecated
    @Override
    public boolean expireAt(Date timestamp) {
        return redissonLimiter.expireAt(timestamp);
    }

    @Override
    public boolean expire(Instant time) {
        return redissonLimiter.expire(time);
    }

    @Override
    public boolean expireIfSet(Instant time) {
        return redissonLimiter.expireIfSet(time);
    }

    @Override
    public boolean expireIfNotSet(Instant time) {
        return redissonLimiter.expireIfNotSet(time);
    }

    @Override
    public boolean expireIfGreater(Instant time) {
        return redissonLimiter.expireIfGreater(time);
    }

    @Override
    public boolean expireIfLess(Instant time) {
        return redissonLimiter.expireIfLess(time);
    }

    @Override
    public boolean expire(Duration duration) {
        return redissonLimiter.expire(duration);
    }

    @Override
    public boolean expireIfSet(Duration duration) {
        return redissonLimiter.expireIfSet(duration);
    }

    @Override
    public boolean expireIfNotSet(Duration duration) {
        return redissonLimiter.expireIfNotSet(duration);
    }

    @Override
    public boolean expireIfGreater(Duration duration) {
        return redissonLimiter.expireIfGreater(duration);
    }

    @Override
    public boolean expireIfLess(Duration duration) {
        return redissonLimiter.expireIfLess(duration);
    }

    @Override
    public boolean clearExpire() {
        return redissonLimiter.clearExpire();
    }

    @Override
    public long remainTimeToLive() {
        return redissonLimiter.remainTimeToLive();
    }

    @Override
    public long getExpireTime() {
        return redissonLimiter.getExpireTime();
    }

    @Deprecated
    @Override
    public RFuture<Boolean> expireAsync(long timeToLive, TimeUnit timeUnit) {
        return redissonLimiter.expireAsync(timeToLive, timeUnit);
    }

    @Deprecated
    @Override
    public RFuture<Boolean> expireAtAsync(Date timestamp) {
        return redissonLimiter.expireAtAsync(timestamp);
    }

    @Deprecated
    @Override
    public RFuture<Boolean> expireAtAsync(long timestamp) {
        return redissonLimiter.expireAtAsync(timestamp);
    }

    @Override
    public RFuture<Boolean> expireAsync(Instant time) {
        return redissonLimiter.expireAsync(time);
    }

    @Override
    public RFuture<Boolean> expireIfSetAsync(Instant time) {
        return redissonLimiter.expireIfSetAsync(time);
    }

    @Override
    public RFuture<Boolean> expireIfNotSetAsync(Instant time) {
        return redissonLimiter.expireIfNotSetAsync(time);
    }

    @Override
    public RFuture<Boolean> expireIfGreaterAsync(Instant time) {
        return redissonLimiter.expireIfGreaterAsync(time);
    }

    @Override
    public RFuture<Boolean> expireIfLessAsync(Instant time) {
        return redissonLimiter.expireIfLessAsync(time);
    }

    @Override
    public RFuture<Boolean> expireAsync(Duration duration) {
        return redissonLimiter.expireAsync(duration);
    }

    @Override
    public RFuture<Boolean> expireIfSetAsync(Duration duration) {
        return redissonLimiter.expireIfSetAsync(duration);
    }

    @Override
    public RFuture<Boolean> expireIfNotSetAsync(Duration duration) {
        return redissonLimiter.expireIfNotSetAsync(duration);
    }

    @Override
    public RFuture<Boolean> expireIfGreaterAsync(Duration duration) {
        return redissonLimiter.expireIfGreaterAsync(duration);
    }

    @Override
    public RFuture<Boolean> expireIfLessAsync(Duration duration) {
        return redissonLimiter.expireIfLessAsync(duration);
    }

    @Override
    public RFuture<Boolean> clearExpireAsync() {
        return redissonLimiter.clearExpireAsync();
    }

    @Override
    public RFuture<Long> remainTimeToLiveAsync() {
        return redissonLimiter.remainTimeToLiveAsync();
    }

    @Override
    public RFuture<Long> getExpireTimeAsync() {
        return redissonLimiter.getExpireTimeAsync();
    }
}
