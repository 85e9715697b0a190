package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.redisson.client.RedisException;

/** What the replies of the module's commands tell a client about the module, without a server. */
class ModuleSupportTest {
    private static final RedisException UNKNOWN = new RedisException("ERR unknown command 'RATELIMIT.ASK'");

    @Test
    void aReplyToACallSentBeforeTheModuleWentMissingDoesNotEndTheFallback() {
        ModuleSupport module = new ModuleSupport("test");
        long t = System.nanoTime();
        module.found(t);
        module.missing(UNKNOWN, t + 10);
        // A call sent while the module was loaded is answered after another found it unloaded.
        module.found(t + 5);
        assertTrue(module.missing(), "a stale reply leaves the module missing");
        module.found(t + 10);
        assertTrue(module.missing(), "so does one to a call sent as the refusal came");
        assertFalse(module.useModule(), "and calls keep to Redisson's scripts until the next try");
    }

    @Test
    void aReplyToACallSentAfterTheModuleWentMissingEndsTheFallback() {
        ModuleSupport module = new ModuleSupport("test");
        long t = System.nanoTime();
        module.missing(UNKNOWN, t);
        assertTrue(module.missing());
        module.found(t + 1);
        assertFalse(module.missing(), "the try's reply proves the module is back");
        assertTrue(module.useModule());
    }

    @Test
    void aFirstReplyFindsTheModuleWhenNothingWasKnown() {
        ModuleSupport module = new ModuleSupport("test");
        module.found(Long.MIN_VALUE);
        assertFalse(module.missing());
        module.missing(UNKNOWN);
        assertTrue(module.missing());
    }
}
