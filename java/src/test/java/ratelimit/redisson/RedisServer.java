package ratelimit.redisson;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real redis-server on a free loopback port, with or without the ratelimit module, stopped by
 * {@link #close}. {@code REDIS_SERVER} names the binary (default {@code redis-server} on the
 * PATH), {@code RATELIMIT_MODULE} the module (default {@code ../target/debug/libratelimit.so}
 * relative to this Maven project).
 */
final class RedisServer implements AutoCloseable {
    final int port;
    final boolean module;
    private final Process process;
    private final Path dir;

    private RedisServer(int port, boolean module, Process process, Path dir) {
        this.port = port;
        this.module = module;
        this.process = process;
        this.dir = dir;
    }

    static Path projectDir() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath();
    }

    static Path modulePath() {
        String env = System.getenv("RATELIMIT_MODULE");
        Path path = (env != null && !env.isEmpty() ? Path.of(env)
                : projectDir().resolve("../target/debug/libratelimit.so")).toAbsolutePath().normalize();
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException("the ratelimit module " + path + " is missing: build it first "
                    + "(`make test-java` from the repository root does), or set RATELIMIT_MODULE");
        }
        return path;
    }

    /** A server with the module (and its debug clock). */
    static RedisServer withModule(String... extra) {
        return start(true, extra);
    }

    /** A server without the module: {@code RATELIMIT.*} are unknown commands there. */
    static RedisServer withoutModule(String... extra) {
        return start(false, extra);
    }

    /**
     * A free loopback port any server can take, a cluster node included: at most 55535 (a node's
     * bus port is 10 000 above its own, and the server refuses a port beyond that), with that bus
     * port free too. The kernel's own pick (port 0) comes from the ephemeral range, up to 60999,
     * and in sequence: once above 55535, every retry would be too.
     */
    static int freePort() throws IOException {
        java.util.Random random = new java.util.Random();
        for (int i = 0; i < 200; i++) {
            int port = 20000 + random.nextInt(55536 - 20000);
            if (bindable(port) && bindable(port + 10000)) {
                return port;
            }
        }
        throw new IOException("no free loopback port from 20000 to 55535 with its bus port free");
    }

    private static boolean bindable(int port) {
        try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static RedisServer start(boolean module, String... extra) {
        String binary = System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
        String lastLog = "";
        try {
            for (int attempt = 0; attempt < 5; attempt++) { // a free port can be taken in between
                int port = freePort();
                Path dir = projectDir().resolve("target/redis-" + port);
                Files.createDirectories(dir);
                Path log = dir.resolve("redis.log");
                Files.deleteIfExists(log);
                List<String> args = new ArrayList<>(List.of(binary, "--port", Integer.toString(port),
                        "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", dir.toString(), "--logfile", log.toString()));
                if (module) {
                    args.addAll(List.of("--loadmodule", modulePath().toString(), "debug-commands", "yes"));
                }
                args.addAll(List.of(extra));
                Process process = new ProcessBuilder(args).redirectErrorStream(true)
                        .redirectOutput(dir.resolve("stdout.log").toFile()).start();
                RedisServer server = new RedisServer(port, module, process, dir);
                if (server.awaitReady()) {
                    return server;
                }
                server.close();
                lastLog = Files.exists(log) ? Files.readString(log) : "(no log)";
            }
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException("could not start " + binary, e);
        }
        throw new IllegalStateException("redis-server (" + binary + ") did not start:\n" + lastLog);
    }

    private boolean awaitReady() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline && process.isAlive()) {
            try (Raw r = new Raw(port)) {
                if ("PONG".equals(r.call("PING"))) {
                    return true;
                }
            } catch (RuntimeException notYet) {
                Thread.sleep(20);
            }
        }
        return false;
    }

    String address() {
        return "redis://127.0.0.1:" + port;
    }

    Path dir() {
        return dir;
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
