import type { RequestPolicy, RequestPolicyFactory, WebResource } from '@azure/storage-blob';
import type { StorageTimeClock } from '../clock/storage-time-clock.js';

interface WithHeaders {
  headers?: { get(name: string): string | undefined };
}

/**
 * Feeds `clock` the `Date` header of every answer a client receives, error answers included
 * (a 409 from a lease acquire is as good a time signal as a 200). The SDK throws error answers
 * as a `RestError` carrying the response, so both paths are read.
 */
export function storageTimePolicyFactory(clock: StorageTimeClock): RequestPolicyFactory {
  return {
    create: (next: RequestPolicy): RequestPolicy => ({
      sendRequest: async (request: WebResource) => {
        try {
          const response = await next.sendRequest(request);
          clock.observe(response.headers.get('date'), clock.now());
          return response;
        } catch (err) {
          const response = (err as { response?: WithHeaders } | undefined)?.response;
          clock.observe(response?.headers?.get('date'), clock.now());
          throw err;
        }
      },
    }),
  };
}
