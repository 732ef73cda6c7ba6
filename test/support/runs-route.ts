import { HttpRequest, InvocationContext } from '@azure/functions';
import { httpApiRegistrations } from '../../src/app/http-api';
import type { DocumentStore } from '../../src/fencing/document-store';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';

/** The runs route of the HTTP API on `docs` alone (it reads no lease), as a test or benchmark calls it. */
export function runsRoute(
  docs: DocumentStore,
  hub = 'test',
): (query: Record<string, string>) => Promise<{ status: number; body: unknown }> {
  const route = httpApiRegistrations({
    hub,
    endpoint: 'http://127.0.0.1/acct',
    container: `baton-${hub}`,
    docs,
    lease: new InMemoryLeaseStore(),
    clock: { date: () => new Date(), synced: true },
    log: { warn: () => undefined },
    appliesRequests: true,
  }).find((r) => r.name === 'baton-api-runs');
  if (!route || route.kind !== 'http') throw new Error('no runs route');
  return async (query) => {
    const response = await route.handler(
      new HttpRequest({ method: 'GET', url: `http://localhost/api/baton/runs?${new URLSearchParams(query)}`, query }),
      new InvocationContext({ functionName: route.name }),
    );
    return { status: response.status ?? 200, body: response.jsonBody };
  };
}
