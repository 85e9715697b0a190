"""Compares the runs of Redisson's RedissonRateLimiterTest made by java/upstream/run: per server,
every test that passed against Redisson's own limiter (the referee) must pass against the native
limiter, unless exceptions.txt lists it. Prints a table of every test on every run, and fails when
a run has no report or not every test of the file ran.

usage: compare.py exceptions.txt out-dir name=server..."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPORT = "surefire-reports/TEST-org.redisson.RedissonRateLimiterTest.xml"


def outcomes(run: Path) -> dict:
    """Each test's outcome in one run: pass, fail (an assertion) or error (an exception)."""
    report = run / REPORT
    if not report.is_file():
        sys.exit(f"{run.name}: no report ({report}); see {run / 'mvn.log'}")
    result = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name").split("(")[0]
        if case.find("failure") is not None:
            result[name] = "FAIL"
        elif case.find("error") is not None:
            result[name] = "ERROR"
        elif case.find("skipped") is not None:
            result[name] = "skipped"
        else:
            result[name] = "pass"
    return result


def main() -> None:
    exceptions_file, out = Path(sys.argv[1]), Path(sys.argv[2])
    names = [spec.split("=", 1)[0] for spec in sys.argv[3:]]
    exceptions = {}
    for line in exceptions_file.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            test, _, why = line.partition(" ")
            exceptions[test] = why.strip()
    pinned = Path(__file__).with_name("RedissonRateLimiterTest.java").read_text()
    expected = pinned.count("@Test")

    runs = {}
    for name in names:
        for variant in ("referee", "native"):
            runs[(name, variant)] = outcomes(out / f"{name}-{variant}")
    tests = sorted({t for r in runs.values() for t in r})
    columns = [f"{n} {v}" for n, v in runs]
    width = max(len(t) for t in tests)
    print()
    print(f"Redisson 4.7.0 RedissonRateLimiterTest ({expected} tests): referee = Redisson's own limiter, "
          "native = NativeRateLimiters.get")
    print(f"{'':{width}}  " + "  ".join(f"{c:>16}" for c in columns))
    problems = []
    for test in tests:
        cells = []
        for name, variant in runs:
            cells.append(runs[(name, variant)].get(test, "-"))
        mark = ""
        for name in names:
            referee = runs[(name, "referee")].get(test)
            native = runs[(name, "native")].get(test)
            if referee == "pass" and native != "pass":
                if test in exceptions:
                    mark = "  (listed: " + exceptions[test] + ")"
                else:
                    problems.append(f"{test} passed for Redisson's own limiter on {name} but not natively ({native})")
        print(f"{test:{width}}  " + "  ".join(f"{c:>16}" for c in cells) + mark)
    for (name, variant), result in runs.items():
        passed = sum(1 for o in result.values() if o == "pass")
        print(f"{name} {variant}: {passed} of {len(result)} passed")
        if len(result) != expected:
            problems.append(f"{name} {variant}: {len(result)} tests ran, the file has {expected}")
        if variant == "referee" and passed < expected // 2:
            # Redisson's own limiter failing most of its own tests: the run is broken (the server
            # did not start...), and comparing with it would prove nothing.
            problems.append(f"{name} referee: only {passed} of {expected} passed for Redisson's own limiter; "
                            f"see {out / (name + '-referee') / 'mvn.log'}")
    for problem in problems:
        print("FAILED: " + problem)
    if problems:
        sys.exit(1)
    print("every test that passed for Redisson's own limiter passed natively, but the ones listed")


if __name__ == "__main__":
    main()
