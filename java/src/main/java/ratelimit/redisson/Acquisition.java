package ratelimit.redisson;

import io.netty.util.Timeout;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RFuture;
import org.redisson.client.RedisResponseTimeoutException;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.client.protocol.convertor.Convertor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One caller waiting for permits in the server's queue: RATELIMIT.ACQUIRE, sent the way Redisson
 * sends BLPOP, for {@code acquire} (no timeout) or {@code tryAcquire} with a timeout.
 *
 * <p>How a long wait survives Redisson, and why a caller who gives up never keeps a permit:
 * <ul>
 * <li>The command tells Redisson it is blocking. Redisson then holds the connection for it, never
 * resends it on a response timeout, and extends that timeout by the wait (a wait without a timeout
 * has none), so the 3 s default response timeout cannot cut a wait short.
 * <li>When the connection drops mid-wait, the server removes the waiter (nothing is taken for it)
 * and Redisson, on reconnecting, sends the same command again. Its TIMEOUT argument is computed
 * when it is written, so the resent command waits only for what is left of the caller's timeout.
 * <li>A caller that gives up (its future cancelled, its thread interrupted, or no reply by the
 * timeout plus Redisson's response timeout) cancels the command: Redisson closes the connection,
 * as it does for a cancelled BLPOP, and the server removes the waiter. A grant that was already
 * read when the caller gave up is seen by the reply's converter, which runs for every reply
 * Redisson reads, and is given back with RATELIMIT.RELEASE. One case is left: a grant the server
 * sent in the instant before the connection closed, not yet read, is lost with the connection;
 * those permits stay logged until they leave the window (the limiter admits less, never more).
 * </ul>
 */
final class Acquisition {
    private static final Logger LOG = LoggerFactory.getLogger(NativeRateLimiter.class);

    private final NativeRateLimiter limiter;
    private final long permits;
    /** -1 for a wait without end, else the caller's timeout (ms, > 0). */
    private final long timeoutMs;
    private final long deadlineNanos;
    /** true when acquired, false when the timeout ran out first. */
    private final CompletableFuture<Boolean> result = new CompletableFuture<>();
    /** The command (or, where the module is missing, Redisson's own call) now in flight. */
    private volatile Future<?> inFlight;

    /** The TIMEOUT argument, written as what is left of the caller's timeout when it is sent. */
    private final Object timeoutArgument = new Object() {
        @Override
        public String toString() {
            if (timeoutMs < 0) {
                return "0";
            }
            long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime() + 999_999);
            return Long.toString(Math.max(1, left)); // 0 would mean forever
        }
    };

    private Acquisition(NativeRateLimiter limiter, long permits, long timeoutMs) {
        this.limiter = limiter;
        this.permits = permits;
        this.timeoutMs = timeoutMs;
        this.deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, timeoutMs));
    }

    /** Waits for {@code permits}: for ever when {@code timeoutMs} is -1, else up to that many ms. */
    static CompletableFuture<Boolean> start(NativeRateLimiter limiter, long permits, long timeoutMs) {
        Acquisition acquisition = new Acquisition(limiter, permits, timeoutMs);
        acquisition.result.whenComplete((acquired, error) -> {
            if (error != null) {
                acquisition.giveUp();
            }
        });
        if (timeoutMs >= 0) {
            long grace = timeoutMs + limiter.responseTimeoutMs() + 1000;
            Timeout guard = limiter.executor().getServiceManager().newTimeout(t -> acquisition.result.completeExceptionally(
                    new RedisResponseTimeoutException("no reply to RATELIMIT.ACQUIRE within its timeout ("
                            + timeoutMs + " ms) plus the response timeout")), grace, TimeUnit.MILLISECONDS);
            acquisition.result.whenComplete((acquired, error) -> guard.cancel());
        }
        acquisition.send();
        return acquisition.result;
    }

    private void send() {
        Attempt attempt = new Attempt();
        String key = limiter.getName();
        RFuture<Object> future = limiter.executor().writeAsync(key, StringCodec.INSTANCE, attempt.command,
                key, permits, "CLIENT", limiter.clientId(), "TIMEOUT", timeoutArgument);
        track(future);
        future.whenComplete(attempt::completed);
    }

    private void track(Future<?> future) {
        inFlight = future;
        if (result.isDone()) {
            future.cancel(false);
        }
    }

    /** The caller gave up: stop the wait in the server (Redisson closes the blocked connection). */
    private void giveUp() {
        Future<?> future = inFlight;
        if (future != null) {
            future.cancel(false);
        }
    }

    /** A grant for a caller who is gone: the permits go back to the limiter. */
    private void giveBack() {
        String key = limiter.getName();
        LOG.debug("giving back {} permit(s) of {}: granted after the caller gave up", permits, key);
        limiter.executor().writeAsync(key, StringCodec.INSTANCE, Commands.RELEASE, key, permits,
                "CLIENT", limiter.clientId()).whenComplete((r, e) -> {
                    if (e != null) {
                        LOG.warn("could not give back {} permit(s) of {} granted after the caller gave up: {}",
                                permits, key, e.toString());
                    }
                });
    }

    /** Where the module is missing: Redisson's own wait, for what is left of the timeout. */
    private void fallBack() {
        RFuture<Boolean> future;
        if (timeoutMs < 0) {
            future = limiter.redissonLimiter().tryAcquireAsync(permits, Duration.ofMillis(-1));
        } else {
            long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
            future = limiter.redissonLimiter().tryAcquireAsync(permits, Duration.ofMillis(Math.max(0, left)));
        }
        track(future);
        future.whenComplete((acquired, error) -> {
            if (error != null) {
                result.completeExceptionally(ModuleSupport.unwrap(error));
            } else {
                result.complete(acquired);
            }
        });
    }

    /** One RATELIMIT.ACQUIRE sent (and resent by Redisson after a reconnect). */
    private final class Attempt {
        private volatile boolean replied;
        private volatile boolean granted;

        final RedisCommand<Object> command = new RedisCommand<Object>("RATELIMIT.ACQUIRE", new Convertor<Object>() {
            @Override
            public Object convert(Object reply) {
                replied(reply);
                return reply;
            }
        }) {
            @Override
            public boolean isBlockingCommand() {
                return true;
            }
        };

        /** Runs on Redisson's I/O thread for the reply it reads, even when no one waits for it. */
        private void replied(Object reply) {
            replied = true;
            if (reply == null) {
                granted = true;
                if (!result.complete(true)) {
                    giveBack();
                }
            }
        }

        void completed(Object reply, Throwable error) {
            if (error != null) {
                Throwable cause = ModuleSupport.unwrap(error);
                if (!result.isDone() && ModuleSupport.isUnknownCommand(cause)) {
                    limiter.module().missing(cause);
                    fallBack();
                    return;
                }
                result.completeExceptionally(cause);
                return;
            }
            if (!replied) {
                // Redisson's own guard for a blocking command that got no reply.
                result.completeExceptionally(new RedisResponseTimeoutException(
                        "no reply to RATELIMIT.ACQUIRE on " + limiter.getName()));
                return;
            }
            limiter.module().found();
            if (granted) {
                return;
            }
            // A wait hint: the timeout ran out, or CLIENT UNBLOCK ended the wait.
            if (timeoutMs < 0) {
                if (!result.isDone()) {
                    send(); // acquire() waits until it has its permits
                }
            } else {
                result.complete(false);
            }
        }
    }
}
