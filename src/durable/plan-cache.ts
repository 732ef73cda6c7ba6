import type { DocumentStore } from '../fencing/document-store';

/**
 * Recently read plan blobs, parsed into lines. Every message of a chunk lives in the same blob,
 * and a chunk's process activities mostly land on the same few instances, so without a cache
 * a chunk of K single-item messages would download its blob K times. Plan blobs never change
 * once a run record names them (a new split attempt writes a new directory), so an entry never
 * goes stale. Bounded by bytes (least recently used first out); bigger blobs are not kept.
 */
export class PlanCache {
  private readonly entries = new Map<string, { lines: string[]; bytes: number }>();
  private bytes = 0;

  constructor(private readonly maxBytes = 32 * 1024 * 1024) {}

  async lines(docs: DocumentStore, key: string, signal?: AbortSignal): Promise<string[] | undefined> {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.lines;
    }
    const stored = await docs.read(key, { abortSignal: signal });
    if (!stored) return undefined;
    const lines = stored.body.split('\n').filter((line) => line !== '');
    const bytes = Buffer.byteLength(stored.body);
    if (bytes <= this.maxBytes) {
      this.entries.set(key, { lines, bytes });
      this.bytes += bytes;
      for (const [oldest, entry] of this.entries) {
        if (this.bytes <= this.maxBytes) break;
        this.entries.delete(oldest);
        this.bytes -= entry.bytes;
      }
    }
    return lines;
  }
}
