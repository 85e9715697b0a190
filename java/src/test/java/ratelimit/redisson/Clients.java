package ratelimit.redisson;

import java.util.function.Consumer;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.SingleServerConfig;

/** Redisson clients for the tests: small thread pools, one server, Redisson's defaults otherwise. */
final class Clients {
    private Clients() {
    }

    static RedissonClient redisson(RedisServer server) {
        return redisson(server, s -> { });
    }

    static RedissonClient redisson(RedisServer server, Consumer<SingleServerConfig> tune) {
        return redisson(server.address(), tune);
    }

    static RedissonClient redisson(String address, Consumer<SingleServerConfig> tune) {
        Config config = new Config();
        config.setThreads(4);
        config.setNettyThreads(4);
        SingleServerConfig single = config.useSingleServer()
                .setAddress(address)
                .setConnectionMinimumIdleSize(2)
                .setConnectionPoolSize(16);
        tune.accept(single);
        return Redisson.create(config);
    }
}
