/**
 * The reference app in functions/ (this repository's first consumer of the package): its own
 * setting, checked by the app as a user's app would check one, and the jobs it registers.
 */
import { describe, expect, it } from 'vitest';
import { auditContainerName, createJobs, DEFAULT_AUDIT_CONTAINER, sampleJobEnabled } from '../../functions/jobs';
import { InvalidSettingError } from '../../src/index';

const STORAGE = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };

describe('the reference app', () => {
  it.each([
    ['Audit_Demo', 'BATON_AUDIT_CONTAINER must be a container name: lowercase'],
    ['ab', 'BATON_AUDIT_CONTAINER must be a container name of at least 3 characters'],
    ['a'.repeat(64), 'BATON_AUDIT_CONTAINER must be a container name of at most 63 characters'],
    ['audit--demo', 'BATON_AUDIT_CONTAINER must be a container name: lowercase'],
    ['audit-', 'BATON_AUDIT_CONTAINER must be a container name: lowercase'],
  ])('refuses BATON_AUDIT_CONTAINER=%s with one line naming it', (value, message) => {
    let err: unknown;
    try {
      createJobs({ ...STORAGE, BATON_AUDIT_CONTAINER: value });
    } catch (caught) {
      err = caught;
    }
    expect(err).toBeInstanceOf(InvalidSettingError);
    expect((err as InvalidSettingError).setting).toBe('BATON_AUDIT_CONTAINER');
    expect((err as Error).message.startsWith(message)).toBe(true);
    expect((err as Error).message).not.toContain('\n');
  });

  it('audits audit-demo unless told otherwise, and a blank setting is unset', () => {
    expect(auditContainerName({})).toBe(DEFAULT_AUDIT_CONTAINER);
    expect(auditContainerName({ BATON_AUDIT_CONTAINER: '  ' })).toBe('audit-demo');
    expect(auditContainerName({ BATON_AUDIT_CONTAINER: 'my-audit' })).toBe('my-audit');
  });

  it('registers the sample, and the synthetic jobs only when BATON_SYNTHETIC_JOBS asks', () => {
    expect(createJobs(STORAGE).map((j) => j.name)).toEqual(['blob-audit']);
    const withSynthetic = createJobs({ ...STORAGE, BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3}]' });
    expect(withSynthetic.map((j) => j.name)).toEqual(['blob-audit', 'sum']);
  });

  it('leaves the sample out when BATON_SAMPLE_JOB is false, without reading its container', () => {
    expect(createJobs({ ...STORAGE, BATON_SAMPLE_JOB: 'false' })).toEqual([]);
    // Its setting is not read either: a deploy without the sample does not write it.
    expect(createJobs({ ...STORAGE, BATON_SAMPLE_JOB: 'FALSE', BATON_AUDIT_CONTAINER: 'Not_A_Name' })).toEqual([]);
    const synthetic = createJobs({ ...STORAGE, BATON_SAMPLE_JOB: 'false', BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":3}]' });
    expect(synthetic.map((j) => j.name)).toEqual(['sum']);
    expect(createJobs({ ...STORAGE, BATON_SAMPLE_JOB: ' true ' }).map((j) => j.name)).toEqual(['blob-audit']);
    expect(sampleJobEnabled({ BATON_SAMPLE_JOB: '' })).toBe(true);
  });

  it('refuses a BATON_SAMPLE_JOB that is not true or false, with one line naming it', () => {
    let err: unknown;
    try {
      createJobs({ ...STORAGE, BATON_SAMPLE_JOB: 'yes' });
    } catch (caught) {
      err = caught;
    }
    expect(err).toBeInstanceOf(InvalidSettingError);
    expect((err as InvalidSettingError).setting).toBe('BATON_SAMPLE_JOB');
    expect((err as Error).message).toBe('BATON_SAMPLE_JOB must be true or false');
  });

  it('reads the audit container through the connection the hub uses', () => {
    const [audit] = createJobs({
      AzureWebJobsStorage__blobServiceUri: 'https://acct.blob.core.windows.net',
      AzureWebJobsStorage__queueServiceUri: 'https://acct.queue.core.windows.net',
    });
    expect(audit?.name).toBe('blob-audit');
    expect(() => createJobs({})).toThrow(/^AzureWebJobsStorage is not set/);
  });
});
