package ratelimit.redisson;

import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.client.RedisException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the servers one {@code RedissonClient} talks to have the ratelimit module: learnt from
 * the replies of the module's commands, kept for the client, never asked for by a call of its own.
 *
 * <p>A reply proves the module is there; {@code ERR unknown command} proves it is not, and the
 * call that got it is then made with Redisson's own scripts. While the module is missing, every
 * call goes to Redisson's scripts; one call a minute tries the module again, so a server that
 * gets the module (a restart, a failover to a server that has it) is found without a restart of
 * the application. Each change is logged once.
 */
final class ModuleSupport {
    private static final Logger LOG = LoggerFactory.getLogger(NativeRateLimiters.class);
    static final long RECHECK_NANOS = TimeUnit.MINUTES.toNanos(1);

    private enum State { UNKNOWN, PRESENT, ABSENT }

    private final String client;
    private volatile State state = State.UNKNOWN;
    /** System.nanoTime() of the last try of the module while it is missing. */
    private final AtomicLong lastTry = new AtomicLong();
    /** System.nanoTime() of the last reply that found the module missing. */
    private volatile long missingAt;

    ModuleSupport(String client) {
        this.client = client;
    }

    /**
     * Whether a call should use the module's commands: yes unless the module was found missing,
     * and then once a minute (one call wins the try).
     */
    boolean useModule() {
        if (state != State.ABSENT) {
            return true;
        }
        long last = lastTry.get();
        long now = System.nanoTime();
        return now - last >= RECHECK_NANOS && lastTry.compareAndSet(last, now);
    }

    /** Whether the module is known to be missing (until the next try). */
    boolean missing() {
        return state == State.ABSENT;
    }

    /**
     * A module command sent at {@code sentAt} (System.nanoTime()) was answered. A reply to a call
     * sent before the module was last found missing proves nothing now (the module may have been
     * unloaded since it was sent), so only a newer call's reply ends the fallback.
     */
    void found(long sentAt) {
        if (state == State.PRESENT) {
            return;
        }
        synchronized (this) {
            if (state == State.ABSENT && sentAt - missingAt <= 0) {
                return;
            }
            if (state != State.PRESENT) {
                LOG.info("ratelimit module found (Redisson client {}): rate limiters use its RATELIMIT.* commands", client);
                state = State.PRESENT;
            }
        }
    }

    /**
     * A module command was refused as unknown. Unlike {@link #found}, a late refusal is
     * believed whenever its call was sent: it can only send calls to Redisson's scripts, which
     * serve them correctly, until the next try of the module a minute later.
     */
    void missing(Throwable cause) {
        missing(cause, System.nanoTime());
    }

    /** {@link #missing(Throwable)} at {@code now} (System.nanoTime()); tests give the time. */
    void missing(Throwable cause, long now) {
        lastTry.set(now);
        synchronized (this) {
            missingAt = now;
            if (state != State.ABSENT) {
                LOG.warn("ratelimit module missing (Redisson client {}: {}): rate limiters use Redisson's own scripts "
                        + "on the same keys; the module is tried again once a minute", client, firstLine(cause));
                state = State.ABSENT;
            }
        }
    }

    /** Test hook: the state a client that has met a server without the module is in. */
    void forceMissing() {
        missing(new RedisException("ERR unknown command (forced)"));
    }

    /** Whether the error is the server's answer to a command it does not know. */
    static boolean isUnknownCommand(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof RedisException && t.getMessage() != null
                    && t.getMessage().startsWith("ERR unknown command")) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }

    /** The error a future failed with, without the wrappers of the future's own stages. */
    static Throwable unwrap(Throwable error) {
        Throwable t = error;
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    private static String firstLine(Throwable cause) {
        String message = String.valueOf(unwrap(cause).getMessage());
        int dot = message.indexOf(". channel:");
        return dot > 0 ? message.substring(0, dot) : message;
    }
}
