// Types of ratelimit-node/flexible as an ES module (flexible.mjs): the same declarations.
import * as flexible from './flexible.js';

export * from './flexible.js';
export default flexible;
