package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.Environment;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Boot application on redisson-spring-boot-starter: the starter makes the
 * RedissonClient from spring.data.redis.*, the application makes the native limiter a bean from
 * it in one line, and a controller answers 429 once the limit is spent. Real HTTP on a random
 * port, a real server with the module.
 */
@SpringBootTest(classes = SpringBootAppTest.App.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class SpringBootAppTest {
    static RedisServer server;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry registry) {
        server = RedisServer.withModule();
        registry.add("spring.data.redis.host", () -> "127.0.0.1");
        registry.add("spring.data.redis.port", () -> server.port);
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import(Api.class)
    static class App {
        /** The one line: the native limiter instead of redisson.getRateLimiter(...). */
        @Bean
        RRateLimiter apiLimiter(RedissonClient redisson) {
            RRateLimiter limiter = NativeRateLimiters.get(redisson, "limit:api");
            limiter.trySetRate(RateType.OVERALL, 3, Duration.ofHours(1));
            return limiter;
        }
    }

    @RestController
    static class Api {
        private final RRateLimiter limiter;

        Api(RRateLimiter limiter) {
            this.limiter = limiter;
        }

        @GetMapping("/hello")
        ResponseEntity<String> hello() {
            if (!limiter.tryAcquire()) {
                return ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS).body("slow down\n");
            }
            return ResponseEntity.ok("hello\n");
        }
    }

    @Autowired
    RRateLimiter limiter;

    @Autowired
    Environment environment;

    @Test
    void theNativeLimiterBeanServesRateLimitedRequests() throws Exception {
        assertInstanceOf(NativeRateLimiter.class, limiter);
        HttpClient http = HttpClient.newHttpClient();
        URI uri = URI.create("http://127.0.0.1:" + environment.getProperty("local.server.port") + "/hello");
        try (Raw raw = new Raw(server.port)) {
            long scripts = raw.scripts();
            long tryacquire = raw.calls("ratelimit.tryacquire");
            int[] statuses = new int[5];
            for (int i = 0; i < statuses.length; i++) {
                statuses[i] = http.send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
            }
            assertEquals("[200, 200, 200, 429, 429]", java.util.Arrays.toString(statuses));
            assertTrue(((NativeRateLimiter) limiter).usesModule());
            assertEquals(tryacquire + 5, raw.calls("ratelimit.tryacquire"), "each request one RATELIMIT.TRYACQUIRE");
            assertEquals(scripts, raw.scripts(), "no Lua script");
            assertEquals("0", raw.call("GET", "{limit:api}:value"));
        }
    }
}
