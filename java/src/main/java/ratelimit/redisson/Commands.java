package ratelimit.redisson;

import java.util.List;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.client.protocol.RedisCommand;
import org.redisson.client.protocol.convertor.Convertor;
import org.redisson.client.protocol.decoder.MultiDecoder;

/**
 * The module's commands as Redisson sends them, each with the conversion of its reply into what
 * {@code RRateLimiter} returns. The blocking RATELIMIT.ACQUIRE is not here: each wait builds its
 * own ({@link Acquisition}).
 */
final class Commands {
    private Commands() {
    }

    /** SETRATE's 1 (applied, or created with NX) or 0. */
    static final RedisCommand<Boolean> SETRATE = new RedisCommand<>("RATELIMIT.SETRATE", new Convertor<Boolean>() {
        @Override
        public Boolean convert(Object reply) {
            return reply instanceof Long && (Long) reply == 1L;
        }
    });

    /** TRYACQUIRE's nil (acquired) or wait in ms (refused): acquired or not. */
    static final RedisCommand<Boolean> TRYACQUIRE = new RedisCommand<>("RATELIMIT.TRYACQUIRE", new Convertor<Boolean>() {
        @Override
        public Boolean convert(Object reply) {
            return reply == null;
        }
    });

    /**
     * A queued caller's ask ({@link Acquisition#ask}): RATELIMIT.ACQUIRE with the caller's TICKET,
     * sent between MULTI and EXEC, where it never blocks and answers as TRYACQUIRE would (nil, or
     * the ms until the permits are free), while the server remembers a grant under the ticket for
     * RATELIMIT.CANCEL. Not a blocking command for Redisson: the ask holds its connection for one
     * round trip.
     */
    static final RedisCommand<Long> ASK = new RedisCommand<>("RATELIMIT.ACQUIRE");

    static final RedisCommand<Long> AVAILABLE = new RedisCommand<>("RATELIMIT.AVAILABLE");

    /** RELEASE's count of permits released; RRateLimiter.release returns nothing. */
    static final RedisCommand<Void> RELEASE = new RedisCommand<>("RATELIMIT.RELEASE", new Convertor<Void>() {
        @Override
        public Void convert(Object reply) {
            return null;
        }
    });

    /** CANCEL's count of the permits it gave back (0 when it ended a wait, or found nothing). */
    static final RedisCommand<Long> CANCEL = new RedisCommand<>("RATELIMIT.CANCEL");

    /**
     * CONFIG's names and values (a flat array in RESP2, a map in RESP3, which Redisson also hands
     * over flat), or nil for a missing limiter: then null, which the caller turns into Redisson's
     * answer for a missing limiter.
     */
    static final RedisCommand<RateLimiterConfig> CONFIG = new RedisCommand<>("RATELIMIT.CONFIG",
            new MultiDecoder<RateLimiterConfig>() {
                @Override
                public RateLimiterConfig decode(List<Object> parts, org.redisson.client.handler.State state) {
                    RateType type = RateType.OVERALL;
                    Long rate = null;
                    Long interval = null;
                    for (int i = 0; i + 1 < parts.size(); i += 2) {
                        String name = String.valueOf(parts.get(i));
                        Object value = parts.get(i + 1);
                        if ("rate".equals(name)) {
                            rate = Long.valueOf(String.valueOf(value));
                        } else if ("interval".equals(name)) {
                            interval = Long.valueOf(String.valueOf(value));
                        } else if ("type".equals(name)) {
                            type = RateType.valueOf(String.valueOf(value));
                        }
                    }
                    return new RateLimiterConfig(type, interval, rate);
                }
            });
}
