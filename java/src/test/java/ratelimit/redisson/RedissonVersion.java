package ratelimit.redisson;

/** The Redisson the tests run on (surefire passes the pom's redisson.version). */
final class RedissonVersion {
    private RedissonVersion() {
    }

    static boolean atLeast(int major, int minor) {
        String[] parts = System.getProperty("redisson.version", "4.7.0").split("\\.");
        int ma = Integer.parseInt(parts[0]);
        int mi = Integer.parseInt(parts[1]);
        return ma > major || ma == major && mi >= minor;
    }
}
