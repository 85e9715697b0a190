package ratelimit.redisson;

import org.redisson.api.RFuture;
import org.redisson.api.ratelimiter.RateLimiterArgs;
import org.redisson.api.ratelimiter.RateLimiterParams;

/**
 * The {@code setRate(RateLimiterArgs)} and {@code updateRate(RateLimiterArgs)} forms. They are in a
 * class of their own because their types exist only from Redisson 4.4: on an older Redisson this
 * class is never loaded, and {@link NativeRateLimiter} loads without it.
 */
final class RateArgs {
    private RateArgs() {
    }

    static RFuture<Boolean> setRateAsync(NativeRateLimiter limiter, RateLimiterArgs args, boolean onlyIfExists) {
        // Redisson reads the arguments back the same way: RateLimiterArgs.of builds RateLimiterParams.
        RateLimiterParams params = (RateLimiterParams) args;
        return limiter.setRateAsync(params.getMode(), params.getRate(), params.getRateInterval(),
                params.getKeepAliveTime(), params.isKeepState(), onlyIfExists, args);
    }
}
