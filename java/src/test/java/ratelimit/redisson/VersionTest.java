package ratelimit.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.file.Files;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The library's version is the module's: the pom's and Cargo.toml's must agree. */
class VersionTest {
    @Test
    void pomVersionIsTheModulesVersion() throws Exception {
        String cargo = Files.readString(RedisServer.projectDir().resolve("../Cargo.toml"));
        Matcher m = Pattern.compile("(?m)^version\\s*=\\s*\"([^\"]+)\"").matcher(cargo);
        assertEquals(true, m.find(), "no version in Cargo.toml");
        String pom = System.getProperty("project.version");
        assertNotNull(pom, "surefire passes project.version");
        assertEquals(m.group(1), pom, "java/pom.xml's version must be Cargo.toml's");
    }
}
