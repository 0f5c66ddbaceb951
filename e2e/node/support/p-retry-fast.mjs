// p-retry with 1 ms backoff (see fast-backoff-hooks.mjs). Each call records
// the options LangChain passed, so the test can show they are its defaults.
import pRetry from 'p-retry';

export * from 'p-retry';

export const calls = [];

export default function pRetryFast(input, options = {}) {
  calls.push({ retries: options.retries, minTimeout: options.minTimeout, factor: options.factor });
  return pRetry(input, { ...options, minTimeout: 1, maxTimeout: 1 });
}
