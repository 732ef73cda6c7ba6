import type * as df from 'durable-functions';

/**
 * durable-functions, loaded on first use. It is about 400 modules, a third of an instance's
 * start-up, and only the durable engine needs it at run time; everything else in the shared run
 * model takes its types only, so instances and the CLI on the queue engine never load it.
 */
export function durableFunctions(): typeof df {
  return require('durable-functions') as typeof df;
}
