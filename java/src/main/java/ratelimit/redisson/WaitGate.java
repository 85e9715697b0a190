package ratelimit.redisson;

import java.util.Iterator;
import java.util.LinkedHashSet;

/**
 * How many of one {@code RedissonClient}'s callers wait in the server at once. Each blocked
 * RATELIMIT.ACQUIRE holds one of Redisson's pooled connections until its last reply, as BLPOP
 * does; with hundreds of callers in {@code acquire()} the pool would run dry and every other call
 * of the client would fail with "Unable to acquire connection". So at most {@link #limit()}
 * waits are in the server per client (over all its limiters and nodes); the callers beyond wait
 * in this JVM, in the order they came, and each goes to the server when a wait there ends (its
 * grant, its timeout, its error, or the connection it held closed).
 *
 * <p>A caller queued here has sent nothing: giving up takes it out of the queue, and there is
 * nothing to cancel in the server. A slot is held from the ACQUIRE's first send to the moment its
 * connection is back in Redisson's pool (its last reply read, or the connection closed), so the
 * connections held for waits never exceed the limit, even while a given-up wait still awaits its
 * last reply.
 */
final class WaitGate {
    /** A wait that can go to the server when the gate lets it. */
    interface Waiter {
        /** Called once, outside the gate's lock, when the waiter has its slot. */
        void admitted();
    }

    private volatile int limit;
    /** Waits in the server (their slots held). */
    private int inServer;
    /** Callers waiting for a slot, oldest first. */
    private final LinkedHashSet<Waiter> queued = new LinkedHashSet<>();

    WaitGate(int limit) {
        this.limit = checked(limit);
    }

    /**
     * The default: a quarter of the client's connection pool (per master), at least 1. With
     * Redisson's defaults (64) that is 16, leaving 48 connections for every other call.
     */
    static int defaultLimit(int poolSize) {
        return Math.max(1, poolSize / 4);
    }

    private static int checked(int limit) {
        if (limit < 1) {
            throw new IllegalArgumentException("the waits in the server must be at least 1, not " + limit);
        }
        return limit;
    }

    int limit() {
        return limit;
    }

    /** A new limit; more waits go at once if it grew, the extra ones end on their own if it shrank. */
    void setLimit(int limit) {
        this.limit = checked(limit);
        admitQueued();
    }

    /** The caller waits in the server now if a slot is free and nobody is queued before it, else queues. */
    void enter(Waiter waiter) {
        synchronized (this) {
            if (!queued.isEmpty() || inServer >= limit) {
                queued.add(waiter);
                return;
            }
            inServer++;
        }
        waiter.admitted();
    }

    /** A wait admitted earlier no longer holds a connection: the next queued caller goes. */
    void leave() {
        synchronized (this) {
            inServer--;
        }
        admitQueued();
    }

    private void admitQueued() {
        while (true) {
            Waiter next;
            synchronized (this) {
                if (queued.isEmpty() || inServer >= limit) {
                    return;
                }
                Iterator<Waiter> first = queued.iterator();
                next = first.next();
                first.remove();
                inServer++;
            }
            next.admitted();
        }
    }

    /**
     * Takes a caller that gave up out of the queue. True if it was queued (it never went to the
     * server); false if it was admitted already (its wait is the server's to end).
     */
    synchronized boolean withdraw(Waiter waiter) {
        return queued.remove(waiter);
    }

    /** Waits in the server now. */
    synchronized int inServer() {
        return inServer;
    }

    /** Callers waiting in this JVM for a slot. */
    synchronized int queued() {
        return queued.size();
    }
}
