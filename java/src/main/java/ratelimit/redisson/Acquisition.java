package ratelimit.redisson;

import io.netty.util.Timeout;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.redisson.api.BatchOptions;
import org.redisson.api.RFuture;
import org.redisson.client.RedisException;
import org.redisson.client.RedisResponseTimeoutException;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.client.protocol.convertor.Convertor;
import org.redisson.command.CommandBatchService;
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
 * <li>Each wait carries a TICKET, a UUID of its own, the same on every send of it. When the
 * connection drops mid-wait, the server removes the waiter (nothing is taken for it) and Redisson,
 * on reconnecting, sends the same command again: if the server had granted it just before the
 * drop, it answers the resend from that grant (nil, taking nothing), so the caller gets the
 * permits it was granted and no second ones. The TIMEOUT argument is computed when it is
 * written, so the resent command waits only for what is left of the caller's timeout.
 * <li>A caller that gives up (its future cancelled, its thread interrupted, or no reply by the
 * timeout plus Redisson's response timeout) sends RATELIMIT.CANCEL with the ticket on an ordinary
 * connection. The server ends the wait (the blocked connection gets the TIMEOUT's reply and goes
 * back to Redisson's pool, undisturbed), or, if the grant was already made, gives back exactly
 * that grant; an ACQUIRE with the ticket still on its way (a resend) is refused. So the library
 * never gives anything back itself: a grant read after the give-up was given back by CANCEL.
 * Only where CANCEL itself fails (the connection to the server lost) is the command cancelled
 * instead, closing its connection as Redisson does for a cancelled BLPOP: a grant sent in that
 * instant stays logged until it leaves the window (the limiter admits less, never more). The
 * server remembers the tickets in memory: after a failover, a grant of the old master is not
 * found by CANCEL either, with the same outcome.
 * </ul>
 *
 * <p>A caller beyond the client's bound on waits in the server waits in the JVM ({@link WaitGate})
 * and sends its ACQUIRE when it gets a slot; meanwhile, as the first of its limiter's callers
 * there, it asks its limiter without waiting ({@link #ask}), and when its timeout runs out there
 * it is answered by one last ask, never refused unasked. An ask carries the wait's TICKET too
 * (RATELIMIT.ACQUIRE inside MULTI/EXEC, which answers as TRYACQUIRE would and remembers a grant;
 * TRYACQUIRE takes no ticket): a grant that reaches a caller who gave up while it was on its way,
 * or an ask whose reply was lost, is given back exactly by the ticket's CANCEL, and a resend of
 * an ask already granted takes nothing.
 */
final class Acquisition implements WaitGate.Waiter {
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
    /** This wait's name in the server, for a resend and for RATELIMIT.CANCEL. */
    private final String ticket = UUID.randomUUID().toString();
    /** Set where the module is missing: Redisson's own call runs, with nothing to cancel in the server. */
    private volatile boolean nothingToCancel;
    /** Set when the server ended the wait with an error: nothing granted, nothing to cancel. */
    private volatile boolean serverEnded;
    /** The client's gate: this wait holds one of its slots from its first send to its last reply. */
    private final WaitGate gate;
    /** The next ask, when a refused ask's hint runs out while this caller is still queued in the JVM. */
    private volatile Timeout askAgain;
    /** Set once the ticket's CANCEL is sent: it is sent at most once, whoever finds it needed. */
    private final AtomicBoolean cancelSent = new AtomicBoolean();

    /** An ask: MULTI, the command, EXEC, written together (one round trip). */
    private static final BatchOptions ASK_OPTIONS = BatchOptions.defaults()
            .executionMode(BatchOptions.ExecutionMode.IN_MEMORY_ATOMIC);

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
        this.gate = limiter.gate();
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
            // A caller still queued in the JVM when its timeout runs out sends no ACQUIRE: its line
            // asks its limiter (TRYACQUIRE) once more, in order, and that answer is the caller's.
            Timeout deadline = limiter.executor().getServiceManager().newTimeout(
                    t -> acquisition.gate.due(acquisition), timeoutMs, TimeUnit.MILLISECONDS);
            acquisition.result.whenComplete((acquired, error) -> deadline.cancel());
        }
        acquisition.result.whenComplete((acquired, error) -> {
            Timeout again = acquisition.askAgain;
            if (again != null) {
                again.cancel();
            }
        });
        acquisition.gate.enter(acquisition);
        return acquisition.result;
    }

    @Override
    public Object line() {
        return limiter.getName();
    }

    /**
     * Queued in the JVM, first of its limiter's callers: asks the limiter once without waiting
     * (holding no connection beyond its round trip), so a limiter with permits free is not kept
     * waiting behind other limiters' waits in the server. The ask is RATELIMIT.ACQUIRE with this
     * wait's TICKET between MULTI and EXEC: there it never blocks and answers exactly as
     * TRYACQUIRE would (which takes no ticket), and the server remembers a grant under the ticket,
     * so CANCEL gives it back exactly if its caller has gone by the time it arrives, and a resend
     * of the ask (Redisson retries a batch whose reply did not come) takes nothing again.
     */
    @Override
    public void ask() {
        String key = limiter.getName();
        CommandBatchService batch = new CommandBatchService(limiter.executor(), ASK_OPTIONS);
        long sentAt = System.nanoTime();
        RFuture<Long> answer = batch.writeAsync(key, StringCodec.INSTANCE, Commands.ASK,
                key, permits, "CLIENT", limiter.clientId(), "TICKET", ticket);
        batch.executeAsync().whenComplete((done, error) -> {
            if (error != null) {
                answered(sentAt, null, error);
            } else {
                answer.whenComplete((hint, e) -> answered(sentAt, hint, e));
            }
        });
    }

    private void answered(long sentAt, Long hint, Throwable error) {
        if (error != null) {
            gate.abandon(this);
            Throwable cause = ModuleSupport.unwrap(error);
            if (ModuleSupport.isUnknownCommand(cause)) {
                moduleMissing(cause);
                return;
            }
            if (isErrorReply(cause) && String.valueOf(cause.getMessage()).startsWith("EXECABORT")) {
                // The server refused the command before it ran (an unknown command, out of memory,
                // no permission, a replica): nothing granted. EXEC says no more: a plain command
                // that takes nothing tells a server without the module.
                String key = limiter.getName();
                limiter.executor().writeAsync(key, StringCodec.INSTANCE, Commands.AVAILABLE, key,
                        "CLIENT", limiter.clientId()).whenComplete((n, e) -> {
                            Throwable why = e == null ? null : ModuleSupport.unwrap(e);
                            if (why != null && ModuleSupport.isUnknownCommand(why)) {
                                moduleMissing(why);
                            } else {
                                serverEnded = true;
                                result.completeExceptionally(cause);
                            }
                        });
                return;
            }
            if (isErrorReply(cause)) {
                serverEnded = true; // the server refused the ask with an error: nothing granted
            } else {
                // No reply (the connection lost, no answer in time): the ask may have been granted.
                cancelTicket();
            }
            result.completeExceptionally(cause); // as tryAcquire() would throw it
            return;
        }
        limiter.module().found(sentAt);
        boolean granted = hint == null;
        switch (gate.answered(this, granted)) {
            case GRANTED:
                if (!result.complete(true)) {
                    cancelTicket(); // its caller gave up just now
                }
                break;
            case SEND:
                admitted();
                break;
            case WAIT:
                // Asked again when the server says the permits are free (unless a slot comes first).
                askAgain = limiter.executor().getServiceManager().newTimeout(t -> gate.askAgain(this),
                        Math.max(1, hint), TimeUnit.MILLISECONDS);
                if (result.isDone()) {
                    askAgain.cancel();
                }
                break;
            case REFUSED:
                result.complete(false);
                break;
            default: // GONE: the caller gave up while its ask was on its way
                if (granted) {
                    cancelTicket();
                }
                break;
        }
    }

    /** The ask found the module missing: Redisson's own wait serves the caller. */
    private void moduleMissing(Throwable cause) {
        limiter.module().missing(cause);
        if (!result.isDone()) {
            fallBack();
        }
    }

    /** The server's own error reply: the command ran (or was refused) and granted nothing. */
    private static boolean isErrorReply(Throwable cause) {
        return cause.getClass() == RedisException.class && cause.getCause() == null;
    }

    /** Its timeout ran out in the JVM's queue and its limiter refused a caller of its ahead of it. */
    @Override
    public void refusedInLine() {
        result.complete(false);
    }

    /**
     * The gate let this wait go to the server. A caller who gave up meanwhile, or whose timeout
     * ran out, sends nothing; where the module is known missing, Redisson's own wait (which holds
     * no connection) runs instead.
     */
    @Override
    public void admitted() {
        if (result.isDone()) {
            gate.leave(this);
            return;
        }
        if (timeoutMs >= 0 && deadlineNanos - System.nanoTime() <= 0) {
            gate.leave(this);
            result.complete(false);
            return;
        }
        if (!limiter.module().useModule()) {
            gate.leave(this);
            fallBack();
            return;
        }
        send();
    }

    private void send() {
        Attempt attempt = new Attempt();
        String key = limiter.getName();
        RFuture<Object> future = limiter.executor().writeAsync(key, StringCodec.INSTANCE, attempt.command,
                // TIMEOUT last: Redisson reads a blocking command's last argument as its timeout.
                key, permits, "CLIENT", limiter.clientId(), "TICKET", ticket, "TIMEOUT", timeoutArgument);
        track(future);
        future.whenComplete(attempt::completed);
    }

    /**
     * Notes the call in flight. Redisson's own call, started after the caller gave up, is
     * cancelled at once; an ACQUIRE resent then is not: the ticket's CANCEL refuses or ends it.
     */
    private void track(Future<?> future) {
        inFlight = future;
        if (result.isDone() && nothingToCancel) {
            future.cancel(false);
        }
    }

    /**
     * The caller gave up: the server ends the wait, or gives back its grant (RATELIMIT.CANCEL).
     * Where the module is missing, or CANCEL fails, the call in flight is cancelled instead
     * (Redisson closes the blocked connection, and the server drops the waiter with it).
     */
    private void giveUp() {
        if (gate.withdraw(this)) {
            // Still queued in the JVM: it sent no ACQUIRE. An ask of its on its way is answered
            // to answered(), which gives a grant back with the ticket's CANCEL.
            return;
        }
        if (nothingToCancel) {
            cancelInFlight();
            return;
        }
        if (serverEnded) {
            return;
        }
        cancelTicket();
    }

    /**
     * RATELIMIT.CANCEL of this wait's ticket, once: the server ends the wait, gives back exactly
     * the grant made under the ticket (an ACQUIRE's or an ask's), and refuses a resend still on
     * its way.
     */
    private void cancelTicket() {
        if (!cancelSent.compareAndSet(false, true)) {
            return;
        }
        String key = limiter.getName();
        limiter.executor().writeAsync(key, StringCodec.INSTANCE, Commands.CANCEL, key, ticket,
                "CLIENT", limiter.clientId()).whenComplete((givenBack, e) -> {
                    if (e != null) {
                        // A wait still blocked is ended by closing its connection; an ACQUIRE that
                        // failed on its own (the limiter deleted...) has nothing left to end.
                        Future<?> future = inFlight;
                        if (future != null && !future.isDone()) {
                            LOG.warn("could not cancel the wait for {} permit(s) of {} its caller gave up ({}): "
                                    + "closing its connection instead", permits, key, e.toString());
                            future.cancel(false);
                        }
                    } else {
                        if (givenBack instanceof Long && (Long) givenBack > 0) {
                            LOG.debug("gave back {} permit(s) of {}: granted as the caller gave up, or its reply lost",
                                    givenBack, key);
                        }
                        closeIfStillBlocked(key);
                    }
                });
    }

    /**
     * After a CANCEL that succeeded, the blocked connection gets its last reply at once: the wait
     * hint of the waiter removed, or the grant given back. One still blocked after the response
     * timeout was not ended (a waiter the server could not match to the ticket): its connection
     * is closed, so it is not held out of Redisson's pool for the rest of a wait nobody awaits.
     */
    private void closeIfStillBlocked(String key) {
        limiter.executor().getServiceManager().newTimeout(t -> {
            Future<?> future = inFlight;
            if (future != null && !future.isDone()) {
                LOG.warn("the wait for {} permit(s) of {} its caller gave up was still blocked after "
                        + "RATELIMIT.CANCEL: closing its connection", permits, key);
                future.cancel(false);
            }
        }, limiter.responseTimeoutMs(), TimeUnit.MILLISECONDS);
    }

    private void cancelInFlight() {
        Future<?> future = inFlight;
        if (future != null) {
            future.cancel(false);
        }
    }

    /** Where the module is missing: Redisson's own wait, for what is left of the timeout. */
    private void fallBack() {
        nothingToCancel = true;
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
        /** When it was sent first: a resend after a reconnect keeps this time, so its reply only looks older. */
        private final long sentAt = System.nanoTime();
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

        /**
         * Runs on Redisson's I/O thread for the reply it reads, even when no one waits for it. A
         * grant read after the caller gave up is left alone: the CANCEL sent when it gave up gives
         * it back in the server (giving it back here too would give it back twice).
         */
        private void replied(Object reply) {
            replied = true;
            if (reply == null) {
                granted = true;
                result.complete(true);
            }
        }

        /**
         * The ACQUIRE's last reply, or its connection closed: its slot in the gate is given up,
         * except when acquire() sends it again on the same slot.
         */
        void completed(Object reply, Throwable error) {
            if (error == null && replied && !granted && timeoutMs < 0 && !result.isDone()) {
                send(); // a wait hint to acquire() (CLIENT UNBLOCK): it waits until it has its permits
                return;
            }
            gate.leave(Acquisition.this);
            if (error != null) {
                Throwable cause = ModuleSupport.unwrap(error);
                if (!result.isDone() && ModuleSupport.isUnknownCommand(cause)) {
                    limiter.module().missing(cause);
                    fallBack();
                    return;
                }
                if (isErrorReply(cause)) {
                    // The server's error reply (the limiter deleted, the master demoted...): its
                    // wait is over, with nothing granted, so no CANCEL follows.
                    serverEnded = true;
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
            limiter.module().found(sentAt);
            if (granted) {
                return;
            }
            // A wait hint: the timeout ran out, or CLIENT UNBLOCK or CANCEL ended the wait.
            if (timeoutMs >= 0) {
                result.complete(false);
            }
        }
    }
}
