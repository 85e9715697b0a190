package ratelimit.interop;

import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Starts the one {@link RedisServer} of the run before the first test class that needs it, and
 * stops it when JUnit closes the root context (after the last class).
 */
final class RedisServerExtension implements BeforeAllCallback {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(RedisServerExtension.class);

    /** Holder JUnit closes at the end of the run (JUnit 5.14 closes AutoCloseable store values). */
    private record Running(RedisServer server) implements AutoCloseable {
        @Override
        public void close() throws InterruptedException {
            server.close();
        }
    }

    private static volatile RedisServer server;

    @Override
    public void beforeAll(ExtensionContext context) {
        Running running = context.getRoot().getStore(NS).getOrComputeIfAbsent("server", k -> {
            try {
                return new Running(RedisServer.start());
            } catch (Exception e) {
                throw new IllegalStateException(e.getMessage(), e);
            }
        }, Running.class);
        server = running.server();
    }

    static RedisServer server() {
        if (server == null) {
            throw new IllegalStateException("no server: the test class lacks @ExtendWith(RedisServerExtension.class)");
        }
        return server;
    }
}
