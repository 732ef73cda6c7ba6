import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

export interface StartAzuriteOptions {
  /** Persist blobs and queues to this folder, so a restart finds them. Default: in memory. */
  persistTo?: string;
  host?: string;
  /** Default 0: any free port. Pass the previous ports to restart a persisted Azurite in place. */
  blobPort?: number;
  queuePort?: number;
  /** Cap on in-memory blob and message bytes. Default 256 MiB; Azurite's own default is half of RAM. */
  memoryLimitBytes?: number;
  /**
   * How often Azurite sweeps deleted messages and overwritten blobs. Default 2 s. Azurite's own
   * defaults (queues every minute, blobs every 10) let thousands of dead extents pile up, and
   * removing them one by one from its indexed store takes time that grows with the square of
   * their number: after 4,000 messages a sweep froze this process for over 20 s, long enough
   * for a leader to lose its lease. Frequent small sweeps cost milliseconds each.
   */
  gcIntervalMs?: number;
}

export interface RunningAzurite {
  /** A full connection string for the Azurite account (holds the public development key). */
  connectionString: string;
  blobEndpoint: string;
  queueEndpoint: string;
  blobPort: number;
  queuePort: number;
  close(): Promise<void>;
}

interface AzuriteServer {
  start(): Promise<void>;
  close(): Promise<void>;
  getHttpServerAddress(): string;
}

/**
 * Starts Azurite's blob and queue services in this process, with no telemetry and no log files.
 * It deep-imports the servers because the package's main module needs VS Code.
 */
export async function startAzurite(options: StartAzuriteOptions = {}): Promise<RunningAzurite> {
  const host = options.host ?? '127.0.0.1';
  const modules = loadAzurite();
  const servers: AzuriteServer[] = [];
  try {
    const gcIntervalMs = options.gcIntervalMs ?? 2000;
    const blob = new modules.BlobServer(
      configure(modules, modules.BlobConfiguration, 'blob', host, options.blobPort ?? 0, options),
    );
    setGcInterval(blob, gcIntervalMs);
    servers.push(blob);
    await blob.start();
    const queue = new modules.QueueServer(
      configure(modules, modules.QueueConfiguration, 'queue', host, options.queuePort ?? 0, options),
    );
    setGcInterval(queue, gcIntervalMs);
    servers.push(queue);
    await queue.start();
    lookUpByIndexedKeys(blob, queue);
    const { accountName, accountKey } = modules;
    const blobEndpoint = `${blob.getHttpServerAddress()}/${accountName}`;
    const queueEndpoint = `${queue.getHttpServerAddress()}/${accountName}`;
    let closed: Promise<void> | undefined;
    return {
      connectionString:
        `DefaultEndpointsProtocol=http;AccountName=${accountName};AccountKey=${accountKey};` +
        `BlobEndpoint=${blobEndpoint};QueueEndpoint=${queueEndpoint};`,
      blobEndpoint,
      queueEndpoint,
      blobPort: Number(new URL(blob.getHttpServerAddress()).port),
      queuePort: Number(new URL(queue.getHttpServerAddress()).port),
      close: () => (closed ??= closeAll(servers)),
    };
  } catch (err) {
    await closeAll(servers);
    throw err;
  }
}

/** Azurite builds its GC manager with a fixed interval; the loop reads the field before each sleep. */
function setGcInterval(server: AzuriteServer, ms: number): void {
  const gc = (server as { gcManager?: { gcIntervalInMS?: unknown } }).gcManager;
  if (!gc || typeof gc.gcIntervalInMS !== 'number') {
    throw new Error('startAzurite: this azurite version has no gcManager.gcIntervalInMS; pin azurite 3.37.x');
  }
  gc.gcIntervalInMS = ms;
}

async function closeAll(servers: AzuriteServer[]): Promise<void> {
  await Promise.allSettled(servers.map((server) => server.close()));
}

interface AzuriteModules {
  BlobServer: new (config: unknown) => AzuriteServer;
  BlobConfiguration: new (...args: unknown[]) => unknown;
  QueueServer: new (config: unknown) => AzuriteServer;
  QueueConfiguration: new (...args: unknown[]) => unknown;
  MemoryExtentChunkStore: new (limitBytes: number) => unknown;
  accountName: string;
  accountKey: string;
}

let cached: AzuriteModules | undefined;

function loadAzurite(): AzuriteModules {
  if (cached) return cached;
  const req = (path: string): Record<string, unknown> => {
    try {
      return require(`azurite/dist/src/${path}`) as Record<string, unknown>;
    } catch (err) {
      throw new Error('startAzurite needs the azurite package (3.37.x): npm install --save-dev azurite@3.37', { cause: err });
    }
  };
  // Azurite only sends telemetry after its CLI calls init(); switch it off for good measure.
  const telemetry = req('common/Telemetry').AzuriteTelemetryClient as { enableTelemetry?: boolean } | undefined;
  if (telemetry) telemetry.enableTelemetry = false;
  // The emulator's well-known account comes from Azurite itself rather than being copied here.
  const constants = req('blob/utils/constants');
  patchLokiRemovals(req);
  parseUriTemplatesOnce(req);
  cached = {
    accountName: String(constants.EMULATOR_ACCOUNT_NAME),
    accountKey: String(constants.EMULATOR_ACCOUNT_KEY_STR),
    BlobServer: req('blob/BlobServer').default as AzuriteModules['BlobServer'],
    BlobConfiguration: req('blob/BlobConfiguration').default as AzuriteModules['BlobConfiguration'],
    QueueServer: req('queue/QueueServer').default as AzuriteModules['QueueServer'],
    QueueConfiguration: req('queue/QueueConfiguration').default as AzuriteModules['QueueConfiguration'],
    MemoryExtentChunkStore: req('common/persistence/MemoryExtentStore')
      .MemoryExtentChunkStore as AzuriteModules['MemoryExtentChunkStore'],
  };
  return cached;
}

/**
 * How long Azurite keeps an idle keep-alive connection, in seconds. Its default, Node's 5 s, races
 * every client that pauses about that long: the server closes the socket just as the client
 * sends its next request on it, and the call fails with "socket hang up". The lease calls make
 * one try by design, so on a busy machine that race cost a renewal or a test. Real storage
 * keeps idle connections for minutes; so does this.
 */
const KEEP_ALIVE_SECONDS = 300;

function configure(
  modules: AzuriteModules,
  Configuration: new (...args: unknown[]) => unknown,
  service: 'blob' | 'queue',
  host: string,
  port: number,
  options: StartAzuriteOptions,
): unknown {
  const inMemory = options.persistTo === undefined;
  const folder = inMemory ? '' : resolve(options.persistTo as string);
  if (!inMemory) mkdirSync(join(folder, `__${service}storage__`), { recursive: true });
  const at = (file: string): string => (inMemory ? file : join(folder, file));
  // The positional arguments of Azurite 3.37's BlobConfiguration/QueueConfiguration.
  return new Configuration(
    host,
    port,
    KEEP_ALIVE_SECONDS,
    at(`__azurite_db_${service}__.json`),
    at(`__azurite_db_${service}_extent__.json`),
    [{ locationId: 'Default', locationPath: at(`__${service}storage__`), maxConcurrency: 10 }],
    false, // enableAccessLog
    undefined,
    false, // enableDebugLog
    undefined,
    false, // loose
    true, // skipApiVersionCheck: the SDK is newer than this Azurite
    '',
    '',
    '',
    undefined, // oauth
    false, // disableProductStyleUrl
    inMemory,
    inMemory ? new modules.MemoryExtentChunkStore(options.memoryLimitBytes ?? 256 * 1024 * 1024) : undefined,
  );
}

interface LokiResults {
  find(query?: object, firstOnly?: boolean): LokiResults;
}
interface LokiCollection {
  find(query?: object): object[];
  findOne(query?: object): object | null;
  chain(...args: unknown[]): LokiResults;
  remove(doc: object | object[]): void;
  update(doc: object | object[]): void;
}
interface LokiStore {
  db: { getCollection(name: string): LokiCollection };
  checkQueueExist(account: string, queue: string, context?: unknown): void;
  MESSAGES_COLLECTION: string;
  EXTENTS_COLLECTION: string;
}

/**
 * Azurite 3.37 finds a request's operation by matching its path against the URI template of every
 * operation with the request's method, and parses each template again for every request: about
 * 25 parses per blob request, a tenth of the CPU that seeding the demo blobs took. A template is
 * a constant string and its parse has no state that a match changes, so each is parsed once.
 */
function parseUriTemplatesOnce(req: (path: string) => Record<string, unknown>): void {
  type Template = { fromUri(uri: string, options?: { strict?: boolean }): Record<string, string> | undefined };
  const parse = createRequire(require.resolve('azurite/package.json'))('uri-templates') as (template: string) => Template;
  const parsed = new Map<string, Template>();
  for (const service of ['blob', 'queue']) {
    const utils = req(`${service}/generated/utils/utils`);
    if (typeof utils.isURITemplateMatch !== 'function') {
      throw new Error(`startAzurite: this azurite version has no ${service} isURITemplateMatch; pin azurite 3.37.x`);
    }
    // The same test as Azurite's own: a strict match in which no variable is empty.
    utils.isURITemplateMatch = (url: string, template: string): boolean => {
      let uriTemplate = parsed.get(template);
      if (!uriTemplate) parsed.set(template, (uriTemplate = parse(template)));
      const result = uriTemplate.fromUri(url, { strict: true });
      return result !== undefined && Object.values(result).every((value) => value !== '');
    };
  }
}

/**
 * Azurite 3.37 keeps messages and blob extents in LokiJS collections with binary indexes, and
 * LokiJS re-sorts every index of a collection on each batch removal, even an empty one. Two of
 * Azurite's own calls remove in batches: the expired-message sweep that runs before every
 * receive, peek, delete and update (nearly always with nothing to remove), and the deletion of
 * each extent its sweep frees. Under a busy fan-out those re-sorts froze this process for up to
 * 3.6 s at a time, every instance idle meanwhile. Removing the same documents one at a time
 * updates the indexes in place, so the store stays as it was and the freezes go.
 */
function patchLokiRemovals(req: (path: string) => Record<string, unknown>): void {
  const prototypeOf = (path: string): Record<string, unknown> => {
    const store = req(path).default as { prototype: Record<string, unknown> } | undefined;
    if (!store || typeof store.prototype !== 'object') {
      throw new Error(`startAzurite: this azurite version has no ${path}; pin azurite 3.37.x`);
    }
    return store.prototype;
  };
  const messages = prototypeOf('queue/persistence/LokiQueueMetadataStore');
  const extents = prototypeOf('common/persistence/LokiExtentMetadataStore');
  if (typeof messages.clearExpiredMessages !== 'function' || typeof extents.deleteExtent !== 'function') {
    throw new Error('startAzurite: this azurite version has no clearExpiredMessages/deleteExtent; pin azurite 3.37.x');
  }
  messages.clearExpiredMessages = async function (this: LokiStore, account: string, queue: string, context?: unknown) {
    this.checkQueueExist(account, queue, context);
    const coll = this.db.getCollection(this.MESSAGES_COLLECTION);
    for (const doc of coll.find({ accountName: account, queueName: queue, expirationTime: { $lte: Date.now() } })) {
      coll.remove(doc);
    }
  };
  extents.deleteExtent = async function (this: LokiStore, extentId: string) {
    const coll = this.db.getCollection(this.EXTENTS_COLLECTION);
    for (const doc of coll.find({ id: extentId })) coll.remove(doc);
  };
}

/**
 * Azurite 3.37 finds a blob, a blob's blocks or a queue's messages with LokiJS queries whose first
 * key is the account. LokiJS uses a binary index only for a query's first key, and everything
 * shares the account, so each blob read, write and lease call scanned every blob, and each receive
 * and delete every message: with the local cluster's 2,000 demo blobs, the scans were the largest
 * share of the CPU a cluster run took. The same equalities with the most selective indexed key
 * first (a blob's name, a message's id, else its queue) let that key's index narrow the search;
 * an AND of equalities means the same in any order, so no answer changes.
 */
function lookUpByIndexedKeys(blob: AzuriteServer, queue: AzuriteServer): void {
  const collection = (server: AzuriteServer, field: string): LokiCollection => {
    const store = (server as { metadataStore?: Record<string, unknown> }).metadataStore;
    const name = store?.[field];
    const found = typeof name === 'string' ? (store as unknown as LokiStore).db.getCollection(name) : undefined;
    if (!found) throw new Error(`startAzurite: this azurite version has no ${field}; pin azurite 3.37.x`);
    return found;
  };
  preferKeys(collection(blob, 'BLOBS_COLLECTION'), ['name']);
  preferKeys(collection(blob, 'BLOCKS_COLLECTION'), ['blobName']);
  const messages = collection(queue, 'MESSAGES_COLLECTION');
  preferKeys(messages, ['messageId', 'queueName']);
  updateOneAtATime(messages);
}

/**
 * LokiJS updates an array of documents as a batch: it turns its adaptive indexes off, updates
 * each document, then rebuilds every index of the collection by sorting all of its documents.
 * Azurite 3.37's receive updates the messages it hands out as such a batch, so each receive,
 * even of one message, re-sorted the four indexes over every message of every queue: 18 ms of
 * CPU a receive with 2,000 messages waiting, 4 ms with ten (6 and 2.7 ms after). Updating the same documents one at a
 * time moves each in its indexes in place, which leaves the store as the batch would.
 */
function updateOneAtATime(collection: LokiCollection): void {
  const update = collection.update.bind(collection);
  collection.update = (doc) => {
    if (!Array.isArray(doc)) return update(doc);
    for (const one of doc as object[]) update(one);
  };
}

function preferKeys(collection: LokiCollection, keys: readonly string[]): void {
  const reorder = (query?: object): object | undefined => {
    if (!query || typeof query !== 'object') return query;
    const fields = query as Record<string, unknown>;
    // Only a plain equality: an operator object ($in, $lte) may not narrow the index at all.
    const key = keys.find((k) => k in fields && (fields[k] === null || typeof fields[k] !== 'object'));
    if (key === undefined || Object.keys(fields)[0] === key) return query;
    return { [key]: fields[key], ...fields };
  };
  const find = collection.find.bind(collection);
  const findOne = collection.findOne.bind(collection);
  const chain = collection.chain.bind(collection);
  collection.find = (query) => find(reorder(query));
  collection.findOne = (query) => findOne(reorder(query));
  collection.chain = (...args) => {
    const results = chain(...args);
    const first = results.find.bind(results);
    results.find = (query, firstOnly) => first(reorder(query), firstOnly);
    return results;
  };
}
