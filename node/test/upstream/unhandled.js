// Preloaded into the mocha run: an assertion that fails inside a promise the suite does not
// return (its `done`-style tests read the key in a nested `.then`) is an unhandled rejection,
// which would show as a 5.5 s timeout. Thrown, mocha fails the running test with the assertion.
'use strict';

process.on('unhandledRejection', (reason) => { throw reason; });
