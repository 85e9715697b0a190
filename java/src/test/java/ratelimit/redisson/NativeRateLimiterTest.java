package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.client.RedisException;

/**
 * Every method of RRateLimiter and RRateLimiterAsync on a server with the module: each answers as
 * Redisson's own limiter does (checked on the same steps where the two agree), through the
 * module's commands and never through a script.
 */
class NativeRateLimiterTest extends ModuleTestBase {
    private static NativeRateLimiter limiter(String name) {
        NativeRateLimiter limiter = NativeRateLimiters.get(redisson, name);
        assertTrue(limiter.usesModule());
        return limiter;
    }

    private static Map<Object, Object> hash(String key) {
        @SuppressWarnings("unchecked")
        List<Object> flat = (List<Object>) raw.call("HGETALL", key);
        Map<Object, Object> map = new java.util.HashMap<>();
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            map.put(flat.get(i), flat.get(i + 1));
        }
        return map;
    }

    @Test
    void trySetRateCreatesOnceWithRedissonsFields() {
        NativeRateLimiter l = limiter("api");
        assertTrue(l.trySetRate(RateType.OVERALL, 10, Duration.ofSeconds(1)));
        assertFalse(l.trySetRate(RateType.PER_CLIENT, 20, Duration.ofSeconds(2)));
        assertEquals(Map.of("rate", "10", "interval", "1000", "type", "0", "keepAliveTime", "0"), hash("api"));
    }

    /** The rate-limiting methods send the module's commands; not one Lua script runs. */
    @Test
    void rateMethodsSendTheModulesCommandsAndNoScript() throws Exception {
        long scripts = raw.scripts();
        long setrate = raw.calls("ratelimit.setrate");
        long tryacquire = raw.calls("ratelimit.tryacquire");
        long acquire = raw.calls("ratelimit.acquire");
        long available = raw.calls("ratelimit.available");
        long config = raw.calls("ratelimit.config");
        long release = raw.calls("ratelimit.release");
        NativeRateLimiter l = limiter("api");
        l.trySetRate(RateType.OVERALL, 10, Duration.ofMinutes(1));
        l.setRate(RateType.OVERALL, 10, Duration.ofMinutes(1), Duration.ZERO);
        l.tryAcquire();
        l.tryAcquire(2);
        l.tryAcquire(Duration.ofSeconds(1));
        l.acquire();
        l.availablePermits();
        l.getConfig();
        l.release(1);
        assertEquals(scripts, raw.scripts(), "a script ran");
        assertEquals(setrate + 2, raw.calls("ratelimit.setrate"));
        assertEquals(tryacquire + 2, raw.calls("ratelimit.tryacquire"));
        assertEquals(acquire + 2, raw.calls("ratelimit.acquire"));
        assertEquals(available + 1, raw.calls("ratelimit.available"));
        assertEquals(config + 1, raw.calls("ratelimit.config"));
        assertEquals(release + 1, raw.calls("ratelimit.release"));
    }

    @Test
    void trySetRateWithKeepAliveSetsTheHashTtl() throws Exception {
        NativeRateLimiter l = limiter("api");
        assertTrue(l.trySetRateAsync(RateType.OVERALL, 10, Duration.ofSeconds(1), Duration.ofMinutes(1)).get());
        assertEquals("60000", hash("api").get("keepAliveTime"));
        long ttl = raw.integer("PTTL", "api");
        assertTrue(ttl > 0 && ttl <= 60_000, "PTTL " + ttl);
        assertThrows(IllegalArgumentException.class,
                () -> l.trySetRate(RateType.OVERALL, 10, Duration.ofSeconds(2), Duration.ofSeconds(1)));
    }

    @Test
    @SuppressWarnings("deprecation")
    void deprecatedRateIntervalUnitForms() throws Exception {
        NativeRateLimiter l = limiter("api");
        assertTrue(l.trySetRate(RateType.OVERALL, 3, 2, RateIntervalUnit.SECONDS));
        assertFalse(l.trySetRateAsync(RateType.OVERALL, 3, 2, RateIntervalUnit.SECONDS).get());
        assertTrue(l.trySetRateAsync(RateType.OVERALL, 3, Duration.ofSeconds(2)).get() == false);
        l.setRate(RateType.OVERALL, 4, 3, RateIntervalUnit.SECONDS);
        assertEquals("3000", hash("api").get("interval"));
        l.setRateAsync(RateType.OVERALL, 5, 1, RateIntervalUnit.MINUTES).get();
        assertEquals(Map.of("rate", "5", "interval", "60000", "type", "0", "keepAliveTime", "0"), hash("api"));
        assertTrue(l.tryAcquire(1, TimeUnit.SECONDS));
        assertTrue(l.tryAcquireAsync(1, TimeUnit.SECONDS).get());
        assertTrue(l.tryAcquire(2, 1, TimeUnit.SECONDS));
        assertTrue(l.tryAcquireAsync(1, 0, TimeUnit.SECONDS).get());
        assertFalse(l.tryAcquire(1, 0, TimeUnit.SECONDS));
    }

    @Test
    @SuppressWarnings("deprecation")
    void setRateResetsTheStateAndRewritesTheFields() throws Exception {
        NativeRateLimiter l = limiter("api");
        l.setRate(RateType.OVERALL, 5, Duration.ofSeconds(10));
        assertTrue(l.tryAcquire(5));
        assertFalse(l.tryAcquire());
        l.setRate(RateType.OVERALL, 5, Duration.ofSeconds(10), Duration.ofMinutes(1));
        assertEquals(0, raw.integer("EXISTS", valueKey("api"), permitsKey("api")));
        assertEquals("60000", hash("api").get("keepAliveTime"));
        assertTrue(l.tryAcquire(5));
        l.setRateAsync(RateType.OVERALL, 2, Duration.ofSeconds(10)).get();
        assertEquals(2, l.availablePermits());
        l.setRateAsync(RateType.OVERALL, 3, Duration.ofSeconds(10), Duration.ZERO).get();
        assertEquals(Map.of("rate", "3", "interval", "10000", "type", "0", "keepAliveTime", "0"), hash("api"));
        assertThrows(IllegalArgumentException.class,
                () -> l.setRate(RateType.OVERALL, 10, Duration.ofSeconds(2), Duration.ofSeconds(1)));
    }

    @Test
    void tryAcquireTakesPermitsUntilTheRateIsSpent() throws Exception {
        NativeRateLimiter l = limiter("api");
        assertTrue(l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1)));
        assertTrue(l.tryAcquire());
        assertTrue(l.tryAcquireAsync().get());
        assertTrue(l.tryAcquire(2));
        assertFalse(l.tryAcquireAsync(2).get());
        assertTrue(l.tryAcquire(1));
        assertFalse(l.tryAcquire());
        assertEquals(5, logged(permitsKey("api")));
        assertEquals("0", raw.call("GET", valueKey("api")));
        assertEquals(0, l.availablePermits());
    }

    @Test
    void zeroPermitsAreGrantedOnAnInitializedLimiterAndNegativeOnesRefused() {
        NativeRateLimiter l = limiter("api");
        RedisException missing = assertThrows(RedisException.class, () -> l.tryAcquire(0));
        assertTrue(missing.getMessage().contains("RateLimiter is not initialized"), missing.getMessage());
        l.trySetRate(RateType.OVERALL, 1, Duration.ofMinutes(1));
        assertTrue(l.tryAcquire(1));
        assertTrue(l.tryAcquire(0));
        assertThrows(IllegalArgumentException.class, () -> l.tryAcquire(-1));
        assertThrows(IllegalArgumentException.class, () -> l.release(-1));
    }

    /** The exceptions Redisson's own limiter throws, of the same type and with its message. */
    @Test
    void errorsAreRedissonsErrors() {
        NativeRateLimiter mine = limiter("api");
        RRateLimiter theirs = redisson.getRateLimiter("api");
        for (Runnable call : List.<Runnable>of(mine::tryAcquire, mine::availablePermits, () -> mine.release(1),
                () -> mine.tryAcquire(1, Duration.ofSeconds(1)), mine::acquire)) {
            RedisException e = assertThrows(RedisException.class, call::run);
            assertTrue(e.getMessage().startsWith("ERR RateLimiter is not initialized (limiter 'api')"),
                    e.getMessage());
        }
        RedisException redissons = assertThrows(RedisException.class, theirs::tryAcquire);
        assertTrue(redissons.getMessage().contains("RateLimiter is not initialized"), redissons.getMessage());

        mine.trySetRate(RateType.OVERALL, 2, Duration.ofMinutes(1));
        RedisException over = assertThrows(RedisException.class, () -> mine.tryAcquire(3));
        assertTrue(over.getMessage().startsWith("ERR Requested permits amount cannot exceed defined rate"), over.getMessage());
        RedisException overWait = assertThrows(RedisException.class, () -> mine.acquire(3));
        assertTrue(overWait.getMessage().contains("Requested permits amount cannot exceed defined rate"));
        RedisException theirsOver = assertThrows(RedisException.class, () -> theirs.tryAcquire(3));
        assertEquals(over.getClass(), theirsOver.getClass());
        assertTrue(theirsOver.getMessage().contains("Requested permits amount cannot exceed defined rate"));
    }

    @Test
    void availablePermitsCountsWhatIsFree() throws Exception {
        NativeRateLimiter l = limiter("api");
        l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1));
        assertEquals(5, l.availablePermits());
        l.tryAcquire(3);
        assertEquals(2, l.availablePermits());
        assertEquals(2L, l.availablePermitsAsync().get());
        // Redisson's own limiter reads the same state.
        assertEquals(2, redisson.getRateLimiter("api").availablePermits());
    }

    @Test
    void getConfigIsRedissonsIncludingForAMissingLimiter() throws Exception {
        NativeRateLimiter l = limiter("api");
        RateLimiterConfig none = l.getConfig();
        RateLimiterConfig redissons = redisson.getRateLimiter("api").getConfig();
        assertEquals(redissons.getRateType(), none.getRateType());
        assertEquals(redissons.getRate(), none.getRate());
        assertEquals(redissons.getRateInterval(), none.getRateInterval());
        l.trySetRate(RateType.PER_CLIENT, 7, Duration.ofSeconds(30), Duration.ofMinutes(2));
        RateLimiterConfig c = l.getConfigAsync().get();
        assertEquals(RateType.PER_CLIENT, c.getRateType());
        assertEquals(7L, c.getRate());
        assertEquals(30_000L, c.getRateInterval());
    }

    @Test
    void releaseGivesPermitsBack() throws Exception {
        NativeRateLimiter l = limiter("api");
        l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1));
        assertTrue(l.tryAcquire(4));
        l.release(3);
        assertEquals(4, l.availablePermits());
        assertEquals(1, logged(permitsKey("api")), "the module removes released permits from the log");
        l.releaseAsync(1).get();
        assertEquals(5, l.availablePermits());
        long calls = raw.calls("ratelimit.release");
        l.release(0);
        assertEquals(calls, raw.calls("ratelimit.release"), "release(0) sends nothing, as Redisson's");
    }

    @Test
    void perClientLimitersKeepAStatePerRedissonClient() {
        NativeRateLimiter one = limiter("search");
        RRateLimiter two = NativeRateLimiters.get(redisson2, "search");
        assertTrue(one.trySetRate(RateType.PER_CLIENT, 2, Duration.ofMinutes(1)));
        assertTrue(one.tryAcquire(2));
        assertFalse(one.tryAcquire());
        assertTrue(two.tryAcquire(2));
        assertEquals(0, one.availablePermits());
        assertEquals(2, logged(permitsKey("search") + ":" + redisson.getId()));
        assertEquals(2, logged(permitsKey("search") + ":" + redisson2.getId()));
        // Redisson's own limiter of the first client sees the first client's state.
        assertEquals(0, redisson.getRateLimiter("search").availablePermits());
        one.release(1);
        assertEquals(1, redisson.getRateLimiter("search").availablePermits());
    }

    @Test
    void keepAliveRefreshesTheTtlOfEveryKey() {
        NativeRateLimiter l = limiter("api");
        l.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(1), Duration.ofMinutes(1));
        assertTrue(l.tryAcquire());
        for (String key : List.of("api", valueKey("api"), permitsKey("api"))) {
            long ttl = raw.integer("PTTL", key);
            assertTrue(ttl > 0 && ttl <= 60_000, key + " PTTL " + ttl);
        }
    }

    @Test
    void aNameWithABraceKeepsRedissonsKeyNames() {
        NativeRateLimiter l = limiter("{user:1}:limit");
        l.trySetRate(RateType.OVERALL, 3, Duration.ofMinutes(1));
        assertTrue(l.tryAcquire(2));
        assertEquals("1", raw.call("GET", "{user:1}:limit:value"));
        assertEquals(1, redisson.getRateLimiter("{user:1}:limit").availablePermits());
    }

    /** RObject and RExpirable are Redisson's own: they act on all the limiter's keys, as its do. */
    @Test
    void objectMethodsAreRedissonsOwn() throws Exception {
        NativeRateLimiter l = limiter("api");
        assertEquals("api", l.getName());
        assertFalse(l.isExists());
        l.trySetRate(RateType.OVERALL, 5, Duration.ofMinutes(1));
        l.tryAcquire(2);
        assertTrue(l.isExists());
        assertTrue(l.isExistsAsync().get());
        assertEquals(-1, l.remainTimeToLive());
        assertTrue(l.expire(Duration.ofMinutes(5)));
        for (String key : List.of("api", valueKey("api"), permitsKey("api"))) {
            assertTrue(raw.integer("PTTL", key) > 0, key);
        }
        assertTrue(l.remainTimeToLive() > 0);
        assertTrue(l.getExpireTime() > 0);
        assertTrue(l.clearExpire());
        assertEquals(-1, raw.integer("PTTL", permitsKey("api")));
        assertTrue(l.expireIfNotSetAsync(Duration.ofMinutes(1)).get());
        assertTrue(l.touch());
        assertNotNull(l.getIdleTime());
        assertTrue(l.sizeInMemory() > 0);
        assertNotNull(l.getCodec());

        l.rename("api2");
        assertEquals("api2", l.getName());
        // The native calls follow the new name (only the hash moves, as in Redisson).
        assertEquals(5, l.availablePermits());
        assertTrue(l.delete());
        assertEquals(0, raw.integer("EXISTS", "api2", valueKey("api2"), permitsKey("api2")));
        assertFalse(l.deleteAsync().get());
    }

    @Test
    void everyAsyncRateMethodAnswers() throws Exception {
        NativeRateLimiter l = limiter("api");
        assertTrue(l.trySetRateAsync(RateType.OVERALL, 4, Duration.ofMinutes(1)).get());
        l.setRateAsync(RateType.OVERALL, 4, Duration.ofMinutes(1), Duration.ofMinutes(2)).get();
        assertTrue(l.tryAcquireAsync().get());
        assertTrue(l.tryAcquireAsync(1).get());
        assertTrue(l.tryAcquireAsync(Duration.ofSeconds(1)).get());
        l.acquireAsync().get();
        assertFalse(l.tryAcquireAsync(1, Duration.ZERO).get());
        l.releaseAsync(2).get();
        l.acquireAsync(2).get();
        assertEquals(0L, l.availablePermitsAsync().get());
        assertEquals(4L, l.getConfigAsync().get().getRate());
        assertNull(l.releaseAsync(0).get());
    }

    /** A client on RESP3: CONFIG is a map there, nil is RESP3's null. */
    @Test
    void resp3ClientsGetTheSameAnswers() throws Exception {
        org.redisson.config.Config config = new org.redisson.config.Config();
        config.setProtocol(org.redisson.config.Protocol.RESP3);
        config.useSingleServer().setAddress(server.address());
        org.redisson.api.RedissonClient resp3 = org.redisson.Redisson.create(config);
        try {
            NativeRateLimiter l = NativeRateLimiters.get(resp3, "api");
            assertEquals(0L, l.getConfig().getRate());
            assertTrue(l.trySetRate(RateType.PER_CLIENT, 2, Duration.ofMinutes(1)));
            RateLimiterConfig c = l.getConfig();
            assertEquals(RateType.PER_CLIENT, c.getRateType());
            assertEquals(2L, c.getRate());
            assertEquals(60_000L, c.getRateInterval());
            assertTrue(l.tryAcquire());
            assertTrue(l.tryAcquire(1, Duration.ofSeconds(1)));
            assertFalse(l.tryAcquire());
            assertFalse(l.tryAcquire(1, Duration.ofMillis(100)));
            assertEquals(0, l.availablePermits());
        } finally {
            resp3.shutdown();
        }
    }
}
