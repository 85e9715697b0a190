//! Whole store jobs on arbitrary scripts: SETRATE, TRYACQUIRE, ALLOW, ACQUIRE, CANCEL, RELEASE,
//! PEEK, AVAILABLE and DELETE parsed by their own parsers and run by the store on an in-memory
//! dataset, between foreign writes and clock moves (see `ratelimit::fuzzing::replay`). None may panic
//! (a panic inside a command takes the whole Redis server down), and a limiter no one else
//! wrote never has more permits in its window than its rate.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ratelimit::fuzzing::replay(data);
});
