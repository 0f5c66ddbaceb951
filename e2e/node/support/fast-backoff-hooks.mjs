// Module hooks for test/retries.test.mjs: @langchain/core's AsyncCaller
// gets a p-retry whose sleeps are 1 ms. Only time is compressed: the
// number of retries (maxRetries, 6 by default) and which errors are
// retried (its default handler) stay LangChain's own. The real backoff,
// 1 s doubling with jitter, would make the test wait 63 to 126 s.
export async function resolve(specifier, context, next) {
  if (specifier === 'p-retry' && context.parentURL?.includes('/@langchain/core/')) {
    return { url: new URL('./p-retry-fast.mjs', import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
