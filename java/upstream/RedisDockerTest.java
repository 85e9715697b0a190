package org.redisson;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.Protocol;

/**
 * Ours, not Redisson's: the base class Redisson's RedissonRateLimiterTest extends, with what that
 * test uses of Redisson's own (a static {@code redisson} client made with Redisson's default
 * configuration and RESP2, a FLUSHALL before each test), but on a real redis-server started on a
 * free loopback port instead of a Docker container. {@code REDIS_SERVER} names the server binary
 * (Redis 7.0 or Valkey 9 in CI), {@code RATELIMIT_MODULE} the module it loads; the server's
 * files go under {@code UPSTREAM_DIR} (the run's build directory). See README.md beside it.
 */
public class RedisDockerTest {

    protected static final Protocol protocol = Protocol.RESP2;

    protected static RedissonClient redisson;

    private static final Process SERVER;

    private static final int PORT;

    static {
        try {
            int port = 0;
            Process process = null;
            for (int attempt = 0; attempt < 5 && process == null; attempt++) {
                try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                    port = s.getLocalPort();
                }
                process = start(port);
            }
            if (process == null) {
                throw new IllegalStateException("redis-server did not start");
            }
            SERVER = process;
            PORT = port;
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
        redisson = Redisson.create(createConfig());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            redisson.shutdown();
            SERVER.destroy();
        }));
    }

    private static Process start(int port) throws IOException, InterruptedException {
        Path dir = Path.of(System.getenv().getOrDefault("UPSTREAM_DIR", "target")).toAbsolutePath()
                .resolve("redis-" + port);
        Files.createDirectories(dir);
        List<String> args = new ArrayList<>(List.of(System.getenv().getOrDefault("REDIS_SERVER", "redis-server"),
                "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", dir.toString(), "--logfile", dir.resolve("redis.log").toString()));
        String module = System.getenv("RATELIMIT_MODULE");
        if (module != null && !module.isEmpty()) {
            args.addAll(List.of("--loadmodule", Path.of(module).toAbsolutePath().toString()));
        }
        Process process = new ProcessBuilder(args).redirectErrorStream(true)
                .redirectOutput(dir.resolve("stdout.log").toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline && process.isAlive()) {
            try (Socket probe = new Socket(InetAddress.getLoopbackAddress(), port)) {
                probe.getOutputStream().write("PING\r\n".getBytes());
                byte[] reply = new byte[7];
                if (probe.getInputStream().read(reply) > 0 && new String(reply).startsWith("+PONG")) {
                    return process;
                }
            } catch (IOException notYet) {
                Thread.sleep(20);
            }
        }
        process.destroyForcibly();
        return null;
    }

    protected static Config createConfig() {
        Config config = new Config();
        config.setProtocol(protocol);
        config.useSingleServer().setAddress("redis://127.0.0.1:" + PORT);
        return config;
    }

    public static RedissonClient createInstance() {
        return Redisson.create(createConfig());
    }

    @BeforeEach
    public void beforeEach() {
        redisson.getKeys().flushall();
    }
}
