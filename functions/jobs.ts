import type { JobDefinition } from '../src/jobs/job-definition';
import { demoSquares } from '../src/sample/demo-job';

/**
 * The jobs this app runs: the one place to add yours (`defineJob` from the library). Every
 * instance must register the same list.
 */
export const jobs: JobDefinition[] = [demoSquares];
