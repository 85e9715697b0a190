package ratelimit.interop;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real redis-server with the module loaded, on a free loopback port, started once for the whole
 * run ({@link RedisServerExtension}) and stopped at its end.
 *
 * <p>{@code REDIS_SERVER} names the server binary (default {@code redis-server} on the PATH);
 * {@code RATELIMIT_MODULE} the module (default {@code ../../target/debug/libratelimit.so},
 * relative to this Maven project). The server runs on the real clock: Redisson stamps its permits
 * with the client's clock, the module with the server's, and here both are the same machine.
 */
final class RedisServer implements AutoCloseable {
    final int port;
    private final Process process;
    private final Path log;

    private RedisServer(int port, Process process, Path log) {
        this.port = port;
        this.process = process;
        this.log = log;
    }

    static Path projectDir() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath();
    }

    static Path modulePath() {
        String env = System.getenv("RATELIMIT_MODULE");
        Path path = env != null && !env.isEmpty()
                ? Path.of(env)
                : projectDir().resolve("../../target/debug/libratelimit.so");
        path = path.toAbsolutePath().normalize();
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException("the ratelimit module " + path + " is missing: build it first "
                    + "(`make test-redisson` from the repository root does), or set RATELIMIT_MODULE");
        }
        return path;
    }

    static RedisServer start() throws IOException, InterruptedException {
        String binary = System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
        Path module = modulePath();
        String lastLog = "";
        for (int attempt = 0; attempt < 5; attempt++) { // a free port can be taken in between
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            Path dir = projectDir().resolve("target/redis-" + port);
            Files.createDirectories(dir);
            Path log = dir.resolve("redis.log");
            Files.deleteIfExists(log);
            Process process = new ProcessBuilder(List.of(binary,
                    "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no",
                    "--dir", dir.toString(), "--logfile", log.toString(),
                    "--loadmodule", module.toString(), "debug-commands", "yes"))
                    .redirectErrorStream(true)
                    .redirectOutput(dir.resolve("stdout.log").toFile())
                    .start();
            RedisServer server = new RedisServer(port, process, log);
            if (server.awaitReady()) {
                return server;
            }
            server.close();
            lastLog = Files.exists(log) ? Files.readString(log) : "(no log)";
        }
        throw new IllegalStateException("redis-server (" + binary + ") did not start with " + module
                + ":\n" + lastLog);
    }

    private boolean awaitReady() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline && process.isAlive()) {
            try (Resp r = new Resp(port)) {
                if ("PONG".equals(r.text("PING"))) {
                    return true;
                }
            } catch (RuntimeException notYet) {
                Thread.sleep(20);
            }
        }
        return false;
    }

    String redissonAddress() {
        return "redis://127.0.0.1:" + port;
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }

    String log() {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "(log unreadable: " + e + ")";
        }
    }
}
