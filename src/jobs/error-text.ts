import type { z } from 'zod';
import { redactSecrets } from '../redact';

/** Longest failure reason kept for an item, in characters; reasons are stored once per failed item. */
const ERROR_TEXT_LIMIT = 500;

/** Error text for results and manifests: short, and with anything secret-looking removed. */
export function errorText(text: string): string {
  const clean = redactSecrets(text).replace(/\s+/g, ' ').trim();
  return clean.length > ERROR_TEXT_LIMIT ? `${clean.slice(0, ERROR_TEXT_LIMIT)}…` : clean;
}

/** The first problem zod found, as one short line. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid';
  return `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`;
}
