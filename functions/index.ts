import { app } from '@azure/functions';
import { registerBaton } from '../src/functions';
import { createJobs } from './jobs';

// Everything Baton runs, on this app: settings and jobs are checked here, at start-up, and a bad
// one stops the app with one line naming it.
registerBaton(app, { jobs: createJobs(process.env) });
