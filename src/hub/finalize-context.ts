import { InvalidConfigError } from '../errors';
import type { DocumentStore } from '../fencing/document-store';
import { writeOnceText } from '../fencing/write-once';
import type { FinalizeContext, RunCountersView } from '../jobs/job-definition';
import { runKeys } from './run-record';

const ATTACHMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** The attachment `baton start --once` prints under its summary. */
export const REPORT_ATTACHMENT = 'report.md';
/** An attachment is for a person to read, not a second output: past this, the job gets an error. */
export const MAX_ATTACHMENT_BYTES = 1024 * 1024;

/**
 * What a job's `finalize` hook is given, the same in both engines. Its `attach` writes once, so
 * a finalize repeated after a crash (both engines may repeat it) keeps the first file.
 */
export function finalizeContext(
  docs: DocumentStore,
  runId: string,
  state: 'succeeded' | 'failed',
  counters: RunCountersView,
  signal: AbortSignal,
): FinalizeContext {
  return {
    runId,
    idempotencyKey: runId,
    state,
    counters,
    signal,
    async attach(name: string, text: string): Promise<void> {
      if (typeof name !== 'string' || !ATTACHMENT_NAME.test(name)) {
        throw new InvalidConfigError(
          'attach',
          `attach: name ${JSON.stringify(name)} must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit`,
        );
      }
      if (typeof text !== 'string') throw new InvalidConfigError('attach', `attach(${name}): the text must be a string`);
      const bytes = Buffer.byteLength(text);
      if (bytes > MAX_ATTACHMENT_BYTES) {
        throw new InvalidConfigError(
          'attach',
          `attach(${name}): ${bytes} bytes is over the ${MAX_ATTACHMENT_BYTES} a file may have`,
        );
      }
      await writeOnceText(docs, runKeys.attachment(runId, name), text, signal);
    },
  };
}
