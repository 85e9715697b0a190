// The package's types from CommonJS (checked by tsc in types.test.js).
import type { Store } from 'express-rate-limit';
import ratelimit = require('ratelimit-node');

const store: Store = new ratelimit.RedisStore({ sendCommand: async (...args: string[]) => args.length });
const byDefault: Store = new ratelimit.default({ sendCommand: async () => 0 });
export { store, byDefault };
