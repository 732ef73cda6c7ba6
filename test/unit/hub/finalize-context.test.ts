import { describe, expect, it } from 'vitest';
import { finalizeContext, MAX_ATTACHMENT_BYTES } from '../../../src/hub/finalize-context';
import { runKeys } from '../../../src/hub/run-record';
import { InvalidConfigError } from '../../../src/errors';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';

const RUN = 'nightly/2026-11-27T02:00:00.000Z';
const context = (docs = new InMemoryDocumentStore()) =>
  finalizeContext(docs, RUN, 'succeeded', { planned: 3, succeeded: 3, failed: 0 }, new AbortController().signal);

describe("finalize's context", () => {
  it('names the run and keys its side effects by it', () => {
    const ctx = context();
    expect(ctx).toMatchObject({
      runId: RUN,
      idempotencyKey: RUN,
      state: 'succeeded',
      counters: { planned: 3, succeeded: 3, failed: 0 },
    });
  });

  it('attaches a file beside the output, and a repeated attach keeps the first', async () => {
    const docs = new InMemoryDocumentStore();
    await context(docs).attach('report.md', '# first');
    await context(docs).attach('report.md', '# second');
    expect(docs.keys()).toEqual([`runs/${RUN}/attachments/report.md`]);
    expect((await docs.read(runKeys.attachment(RUN, 'report.md')))?.body).toBe('# first');
  });

  it.each([
    ['', 'an empty name'],
    ['../run.json', 'a path'],
    ['a/b.md', 'a folder'],
    ['.hidden', 'a leading dot'],
    ['x'.repeat(101), 'a name over 100 characters'],
  ])('refuses the name %j (%s) with one line, writing nothing', async (name) => {
    const docs = new InMemoryDocumentStore();
    const err = await context(docs)
      .attach(name, 'text')
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(InvalidConfigError);
    expect((err as Error).message).toMatch(/^attach: name .* must be 1-100 letters, digits/);
    expect(docs.keys()).toEqual([]);
  });

  it('refuses a file over 1 MiB, naming its size', async () => {
    const big = 'x'.repeat(MAX_ATTACHMENT_BYTES + 1);
    await expect(context().attach('big.txt', big)).rejects.toThrow(`attach(big.txt): ${MAX_ATTACHMENT_BYTES + 1} bytes is over`);
    await expect(context().attach('fits.txt', 'x'.repeat(MAX_ATTACHMENT_BYTES))).resolves.toBeUndefined();
  });
});
