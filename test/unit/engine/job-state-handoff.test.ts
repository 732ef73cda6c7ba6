/**
 * The job states a leader hands over as its term ends: fenced like every leader's write, so a
 * leader that lost its lease cannot replace a newer one's; a damaged one is replaced.
 */
import { describe, expect, it } from 'vitest';
import { JOB_STATES_HANDOFF_KEY, readJobStatesHandoff, writeJobStatesHandoff } from '../../../src/engine/job-state-handoff';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { jobStateKey, newJobState } from '../../../src/hub/job-state';

describe('the job-state hand-off', () => {
  it('a leader behind a newer epoch does not replace the newer hand-off', async () => {
    const docs = new InMemoryDocumentStore();
    await writeJobStatesHandoff(docs, 5, [{ value: newJobState('a'), etag: '"new"' }]);
    await writeJobStatesHandoff(docs, 4, [{ value: newJobState('a'), etag: '"stale"' }]);
    expect((await new FencedDocuments(docs).read(JOB_STATES_HANDOFF_KEY))?.epoch).toBe(5);
    expect((await readJobStatesHandoff(docs))?.get(jobStateKey('a'))?.etag).toBe('"new"');
  });

  it('a damaged one reads as none, and the next hand-off replaces it', async () => {
    const docs = new InMemoryDocumentStore();
    await docs.write(JOB_STATES_HANDOFF_KEY, '{"epoch":9,"value":{"v":2}}', {});
    expect(await readJobStatesHandoff(docs)).toBeUndefined();
    await writeJobStatesHandoff(docs, 3, [{ value: newJobState('b'), etag: '"b1"' }]);
    expect((await readJobStatesHandoff(docs))?.get(jobStateKey('b'))?.etag).toBe('"b1"');
  });
});
