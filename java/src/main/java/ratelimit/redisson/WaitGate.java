package ratelimit.redisson;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * How many of one {@code RedissonClient}'s callers wait in the server at once. Each blocked
 * RATELIMIT.ACQUIRE holds one of Redisson's pooled connections until its last reply, as BLPOP
 * does; with hundreds of callers in {@code acquire()} the pool would run dry and every other call
 * of the client would fail with "Unable to acquire connection". So at most {@link #limit()}
 * waits are in the server per client (over all its limiters and nodes); the callers beyond wait
 * in this JVM, in the order they came, and each goes to the server when a wait there ends (its
 * grant, its timeout, its error, or the connection it held closed).
 *
 * <p>A caller queued here has sent no ACQUIRE: giving up takes it out of the queue, and there is
 * no wait to cancel in the server. A slot is held from the ACQUIRE's first send to the moment its
 * connection is back in Redisson's pool (its last reply read, or the connection closed), so the
 * connections held for waits never exceed the limit, even while a given-up wait still awaits its
 * last reply.
 *
 * <p><b>Asking without a slot.</b> The slots are shared by every limiter of the client, so a
 * queued caller could wait behind other limiters' waits while its own limiter has permits free.
 * The callers of one limiter (its <em>line</em>) therefore ask it without waiting, with one
 * RATELIMIT.TRYACQUIRE, which holds no connection beyond its round trip: only the first of the
 * line queued here asks, and only while no caller of that limiter waits in the server (whose
 * waiters the server serves first anyway), so a caller never overtakes an earlier caller of its
 * limiter. A grant lets the next of the line ask; a refusal leaves the caller queued, and it asks
 * again when the refusal's hint says its permits are free. A caller whose timeout runs out while
 * queued is not given up unasked: its line asks, in order, from its first caller to it; it is
 * granted if its turn comes with permits free, and refused if the limiter refused a caller ahead
 * of it (the server's own rule: the head of a queue is served first, a smaller request behind it
 * waits).
 */
final class WaitGate {
    /** A wait that can go to the server when the gate lets it. */
    interface Waiter {
        /** The limiter it waits on: callers of one limiter keep their order. */
        Object line();

        /** Called once, outside the gate's lock, when the waiter has its slot: it sends its ACQUIRE. */
        void admitted();

        /**
         * Called outside the gate's lock: the waiter asks its limiter once without waiting
         * (TRYACQUIRE) and reports the answer to {@link #answered}, or to {@link #abandon} on an error.
         */
        void ask();

        /** Its timeout ran out while queued, and its limiter refused a caller ahead of it in its line. */
        void refusedInLine();
    }

    /** What a waiter does with the answer to its ask. */
    enum Next {
        /** Granted: it has its permits (and holds no slot). */
        GRANTED,
        /** Refused, and it has a slot now: it sends its ACQUIRE ({@link Waiter#admitted}). */
        SEND,
        /** Refused: it stays queued, and asks again ({@link #askAgain}) when the hint says. */
        WAIT,
        /** Refused, and that was its last ask (its timeout ran out): false. */
        REFUSED,
        /** It gave up while asking: nothing more to do. */
        GONE
    }

    /** The callers of one limiter, from this client. */
    private static final class Line {
        /** Its waits in the server (slots held). */
        int inServer;
        /** Its callers queued here (including those whose timeout ran out), oldest first. */
        final LinkedHashSet<Waiter> queued = new LinkedHashSet<>();
        /** Callers whose timeout ran out while queued: they wait only for their line's asks. */
        final Set<Waiter> due = new HashSet<>();
        /** The one caller of the line whose ask is on its way, if any. */
        Waiter asking;
        /** The asking caller got a slot meanwhile: it sends its ACQUIRE if refused. */
        boolean askerAdmitted;
        /**
         * Its first caller was refused: it asks again when the refusal's hint runs out, or when
         * something changes for the line (one of its waits in the server ends, its first caller
         * leaves, a caller's timeout runs out), not for every caller that joins it.
         */
        boolean refused;

        boolean idle() {
            return inServer == 0 && queued.isEmpty() && asking == null;
        }
    }

    private volatile int limit;
    /** Waits in the server (their slots held). */
    private int inServer;
    /** Callers waiting for a slot, oldest first (those whose timeout ran out are left out). */
    private final LinkedHashSet<Waiter> queued = new LinkedHashSet<>();
    private final Map<Object, Line> lines = new HashMap<>();
    /** Asks sent since the gate was made: what the tests count. */
    private long asks;

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
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            admitQueued(then);
        }
        run(then);
    }

    private Line line(Waiter waiter) {
        return lines.computeIfAbsent(waiter.line(), k -> new Line());
    }

    /** Drops a line nobody is in. */
    private void tidy(Line line, Waiter waiter) {
        if (line.idle()) {
            lines.remove(waiter.line());
        }
    }

    /**
     * The caller waits in the server now if a slot is free and nobody is queued before it; else
     * it queues, and asks its limiter at once if it is the first of its line and none of its line
     * waits in the server.
     */
    void enter(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            Line line = line(waiter);
            if (queued.isEmpty() && inServer < limit) {
                inServer++;
                line.inServer++;
                then.add(waiter::admitted);
            } else {
                queued.add(waiter);
                line.queued.add(waiter);
                askNext(line, then);
            }
        }
        run(then);
    }

    /** A wait admitted earlier no longer holds a connection: the next queued caller goes. */
    void leave(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            Line line = line(waiter);
            inServer--;
            line.inServer--;
            line.refused = false;
            admitQueued(then);
            askNext(line, then);
            tidy(line, waiter);
        }
        run(then);
    }

    /** The answer to a waiter's ask: what it does now. */
    Next answered(Waiter waiter, boolean granted) {
        List<Runnable> then = new ArrayList<>();
        Next next;
        synchronized (this) {
            Line line = line(waiter);
            line.asking = null;
            boolean admitted = line.askerAdmitted;
            line.askerAdmitted = false;
            if (admitted) {
                if (granted) {
                    // Granted while a slot was on its way to it: the slot goes to the next caller.
                    inServer--;
                    line.inServer--;
                    admitQueued(then);
                    next = Next.GRANTED;
                } else {
                    next = Next.SEND;
                }
            } else if (!line.queued.contains(waiter)) {
                next = Next.GONE;
            } else if (granted) {
                remove(waiter, line);
                next = Next.GRANTED;
            } else {
                boolean last = line.due.contains(waiter);
                if (last) {
                    remove(waiter, line);
                }
                // The callers behind it whose timeout ran out: their limiter refused their line.
                for (Waiter due : line.due) {
                    line.queued.remove(due);
                    then.add(due::refusedInLine);
                }
                line.due.clear();
                next = last ? Next.REFUSED : Next.WAIT;
            }
            // After a refusal, the same first caller waits for its hint; a new first caller asks.
            line.refused = next == Next.WAIT;
            if (next != Next.WAIT) {
                askNext(line, then);
            }
            tidy(line, waiter);
        }
        run(then);
        return next;
    }

    /** A queued waiter's hint ran out: it asks again if it still leads its line and its line is not in the server. */
    void askAgain(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            Line line = lines.get(waiter.line());
            if (line != null && queued.contains(waiter) && first(line) == waiter) {
                line.refused = false;
                askNext(line, then);
            }
        }
        run(then);
    }

    /**
     * A queued waiter's timeout ran out: it leaves the queue for a slot, and its line asks its
     * limiter, from its first caller to it (the answer comes through {@link Waiter#ask} and
     * {@link #answered}, or {@link Waiter#refusedInLine}). False if it was not queued (it has its
     * slot: the server's TIMEOUT ends its wait).
     */
    boolean due(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            if (!queued.remove(waiter)) {
                return false;
            }
            Line line = line(waiter);
            line.due.add(waiter);
            askNext(line, then);
        }
        run(then);
        return true;
    }

    /**
     * Takes a caller that gave up out of the queue. True if it was queued (it never sent an
     * ACQUIRE; an ask of its may still be on its way); false if it was admitted already (its wait
     * is the server's to end).
     */
    boolean withdraw(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            Line line = lines.get(waiter.line());
            if (line == null || !line.queued.contains(waiter)) {
                return false;
            }
            if (first(line) == waiter) {
                line.refused = false; // the next of its line asks for itself now
            }
            remove(waiter, line);
            askNext(line, then);
            tidy(line, waiter);
        }
        run(then);
        return true;
    }

    /**
     * The waiter's ask failed (an error reply, or the module missing): it leaves the gate
     * altogether, handing on the slot it was given meanwhile, if any.
     */
    void abandon(Waiter waiter) {
        List<Runnable> then = new ArrayList<>();
        synchronized (this) {
            Line line = line(waiter);
            if (line.asking == waiter) {
                line.asking = null;
                if (line.askerAdmitted) {
                    line.askerAdmitted = false;
                    inServer--;
                    line.inServer--;
                    admitQueued(then);
                }
            }
            if (line.queued.contains(waiter)) {
                remove(waiter, line);
            }
            line.refused = false;
            askNext(line, then);
            tidy(line, waiter);
        }
        run(then);
    }

    private void remove(Waiter waiter, Line line) {
        queued.remove(waiter);
        line.queued.remove(waiter);
        line.due.remove(waiter);
    }

    private static Waiter first(Line line) {
        return line.queued.isEmpty() ? null : line.queued.iterator().next();
    }

    /**
     * The first queued caller of a line asks its limiter, unless an ask of the line is on its way,
     * or, while nobody's timeout has run out, the line waits in the server (the server serves its
     * waiters first) or its first caller awaits the hint of its refusal.
     */
    private void askNext(Line line, List<Runnable> then) {
        Waiter first = first(line);
        if (first == null || line.asking != null || (line.inServer > 0 || line.refused) && line.due.isEmpty()) {
            return;
        }
        line.asking = first;
        asks++;
        then.add(first::ask);
    }

    private void admitQueued(List<Runnable> then) {
        while (!queued.isEmpty() && inServer < limit) {
            Iterator<Waiter> oldest = queued.iterator();
            Waiter next = oldest.next();
            oldest.remove();
            Line line = line(next);
            line.queued.remove(next);
            inServer++;
            line.inServer++;
            if (line.asking == next) {
                line.askerAdmitted = true; // it sends its ACQUIRE if its ask is refused
            } else {
                then.add(next::admitted);
            }
        }
    }

    private static void run(List<Runnable> then) {
        for (Runnable r : then) {
            r.run();
        }
    }

    /** Waits in the server now. */
    synchronized int inServer() {
        return inServer;
    }

    /** Callers waiting in this JVM for a slot. */
    synchronized int queued() {
        return queued.size();
    }

    /** Asks made for queued callers so far (RATELIMIT.TRYACQUIRE). */
    synchronized long asks() {
        return asks;
    }

    /** Asks whose answer has not been taken in yet. */
    synchronized int asksOnTheirWay() {
        int n = 0;
        for (Line line : lines.values()) {
            if (line.asking != null) {
                n++;
            }
        }
        return n;
    }
}
