package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The gate's rules on their own, step by step, with callers that only note what the gate tells
 * them to do (WaitersTest runs the same rules against a server): slots in the order callers
 * came; the first caller of a limiter's line asks, the others wait their turn; a slot that comes
 * while an ask is on its way; a timeout answered in line order.
 */
class WaitGateTest {
    private final List<String> told = new ArrayList<>();

    private final class Caller implements WaitGate.Waiter {
        final String name;
        final String line;

        Caller(String name, String line) {
            this.name = name;
            this.line = line;
        }

        @Override
        public Object line() {
            return line;
        }

        @Override
        public void admitted() {
            told.add(name + " sends ACQUIRE");
        }

        @Override
        public void ask() {
            told.add(name + " asks");
        }

        @Override
        public void refusedInLine() {
            told.add(name + " refused in line");
        }
    }

    /** What the gate told the callers since the last look. */
    private List<String> told() {
        List<String> now = new ArrayList<>(told);
        told.clear();
        return now;
    }

    @Test
    void theFirstOfALineAsksAndTheOthersWaitTheirTurn() {
        WaitGate gate = new WaitGate(1);
        Caller a1 = new Caller("a1", "a");
        Caller a2 = new Caller("a2", "a");
        Caller b1 = new Caller("b1", "b");
        Caller b2 = new Caller("b2", "b");
        Caller b3 = new Caller("b3", "b");
        gate.enter(a1);
        gate.enter(a2);
        assertEquals(List.of("a1 sends ACQUIRE"), told(), "a's line waits in the server: a2 does not ask");
        gate.enter(b1);
        gate.enter(b2);
        assertEquals(List.of("b1 asks"), told(), "b2 waits for b1's answer");
        assertEquals(WaitGate.Next.GRANTED, gate.answered(b1, true));
        assertEquals(List.of("b2 asks"), told(), "the next of b's line asks in turn");
        assertEquals(WaitGate.Next.WAIT, gate.answered(b2, false));
        gate.enter(b3);
        assertEquals(List.of(), told(), "a caller joining a refused line asks nothing, nor makes its first ask again");
        gate.askAgain(b3);
        assertEquals(List.of(), told(), "only the first of the line asks again at its hint");
        gate.askAgain(b2);
        assertEquals(List.of("b2 asks"), told());
        assertEquals(WaitGate.Next.WAIT, gate.answered(b2, false));
        gate.leave(a1);
        assertEquals(List.of("a2 sends ACQUIRE"), told(), "the slot goes to the oldest queued caller");
        gate.leave(a2);
        assertEquals(List.of("b2 sends ACQUIRE"), told());
        gate.leave(b2);
        assertEquals(List.of("b3 sends ACQUIRE"), told(), "b2 before b3: the order they came");
        gate.leave(b3);
        assertEquals(0, gate.inServer());
        assertEquals(0, gate.queued());
    }

    @Test
    void aSlotThatComesWhileTheAskIsOnItsWayIsKeptForTheAsker() {
        WaitGate gate = new WaitGate(1);
        Caller a1 = new Caller("a1", "a");
        Caller b1 = new Caller("b1", "b");
        Caller b2 = new Caller("b2", "b");
        Caller c1 = new Caller("c1", "c");
        gate.enter(a1);
        gate.enter(b1);
        gate.enter(b2);
        assertEquals(List.of("a1 sends ACQUIRE", "b1 asks"), told());
        gate.leave(a1);
        assertEquals(List.of(), told(), "b1 has the slot, and sends nothing before its answer");
        assertEquals(1, gate.inServer());
        assertEquals(WaitGate.Next.SEND, gate.answered(b1, false), "refused: it goes to the server on its slot");
        assertEquals(List.of(), told(), "b2 does not ask while b1 is in the server");
        gate.leave(b1);
        assertEquals(List.of("b2 sends ACQUIRE"), told());

        // Granted with a slot on its way: the slot goes on to the next caller.
        gate.enter(c1);
        assertEquals(List.of("c1 asks"), told());
        gate.leave(b2);
        assertEquals(List.of(), told());
        Caller a2 = new Caller("a2", "a");
        gate.enter(a2);
        assertEquals(List.of("a2 asks"), told());
        assertEquals(WaitGate.Next.GRANTED, gate.answered(c1, true));
        assertEquals(List.of(), told(), "a2's ask is still on its way: the slot is kept for it");
        assertEquals(1, gate.inServer());
        assertEquals(WaitGate.Next.SEND, gate.answered(a2, false));
        gate.leave(a2);
        assertEquals(0, gate.inServer());
        assertEquals(0, gate.queued());
        assertEquals(0, gate.asksOnTheirWay());
    }

    @Test
    void aTimeoutIsAnsweredInLineOrder() {
        WaitGate gate = new WaitGate(1);
        Caller a1 = new Caller("a1", "a");
        Caller b1 = new Caller("b1", "b");
        Caller b2 = new Caller("b2", "b");
        Caller b3 = new Caller("b3", "b");
        gate.enter(a1);
        gate.enter(b1);
        assertEquals(WaitGate.Next.WAIT, gate.answered(b1, false));
        gate.enter(b2);
        gate.enter(b3);
        assertEquals(List.of("a1 sends ACQUIRE", "b1 asks"), told());

        // b3's timeout runs out: its line asks from its first caller.
        assertTrue(gate.due(b3));
        assertEquals(List.of("b1 asks"), told());
        assertEquals(WaitGate.Next.GRANTED, gate.answered(b1, true));
        assertEquals(List.of("b2 asks"), told(), "then the next, up to b3");
        assertEquals(WaitGate.Next.GRANTED, gate.answered(b2, true));
        assertEquals(List.of("b3 asks"), told());
        assertEquals(WaitGate.Next.GRANTED, gate.answered(b3, true), "b3's own last ask");
        assertEquals(0, gate.queued());

        // Refused ahead of it: the caller whose timeout ran out is refused in line.
        Caller b4 = new Caller("b4", "b");
        Caller b5 = new Caller("b5", "b");
        gate.enter(b4);
        assertEquals(WaitGate.Next.WAIT, gate.answered(b4, false));
        gate.enter(b5);
        assertTrue(gate.due(b5));
        assertEquals(List.of("b4 asks", "b4 asks"), told());
        assertEquals(WaitGate.Next.WAIT, gate.answered(b4, false));
        assertEquals(List.of("b5 refused in line"), told());
        assertEquals(1, gate.queued(), "b4 still waits");

        // The first caller's own timeout: its answer is its last.
        assertTrue(gate.due(b4));
        assertEquals(List.of("b4 asks"), told());
        assertEquals(WaitGate.Next.REFUSED, gate.answered(b4, false));
        assertFalse(gate.due(b4));
        assertFalse(gate.due(a1), "a caller with its slot is the server's to time out");
        gate.leave(a1);
        assertEquals(0, gate.inServer());
        assertEquals(0, gate.queued());
    }

    @Test
    void aCallerThatGivesUpHandsTheAskOn() {
        WaitGate gate = new WaitGate(1);
        Caller a1 = new Caller("a1", "a");
        Caller b1 = new Caller("b1", "b");
        Caller b2 = new Caller("b2", "b");
        gate.enter(a1);
        gate.enter(b1);
        gate.enter(b2);
        assertEquals(List.of("a1 sends ACQUIRE", "b1 asks"), told());
        assertTrue(gate.withdraw(b1), "queued: it sent no ACQUIRE");
        assertEquals(List.of(), told(), "one ask of a line at a time");
        assertEquals(WaitGate.Next.GONE, gate.answered(b1, true));
        assertEquals(List.of("b2 asks"), told());
        assertEquals(WaitGate.Next.WAIT, gate.answered(b2, false));
        assertTrue(gate.withdraw(b2));
        assertFalse(gate.withdraw(a1), "in the server: its CANCEL ends it");
        gate.leave(a1);
        assertEquals(0, gate.inServer());
        assertEquals(0, gate.queued());
        assertEquals(0, gate.asksOnTheirWay());
    }
}
