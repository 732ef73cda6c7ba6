import type { StandardSchemaV1 } from '@standard-schema/spec';
import type * as z from '../zod';
import { redactSecrets } from '../redact';

/** Longest failure reason kept for an item, in characters; reasons are stored once per failed item. */
const ERROR_TEXT_LIMIT = 500;

/** Error text for results and manifests: short, and with anything secret-looking removed. */
export function errorText(text: string): string {
  const clean = redactSecrets(text).replace(/\s+/g, ' ').trim();
  return clean.length > ERROR_TEXT_LIMIT ? `${clean.slice(0, ERROR_TEXT_LIMIT)}…` : clean;
}

/** The first problem zod found, as one short line. */
export function describeIssue(error: z.core.$ZodError): string {
  return describeIssues(error.issues);
}

/** The first issue of any Standard Schema library (zod's included) as `path: message`, the path dotted. */
export function describeIssues(issues: ReadonlyArray<StandardSchemaV1.Issue>): string {
  const issue = issues[0];
  if (!issue) return 'invalid';
  const path = (issue.path ?? []).map((segment) => String(typeof segment === 'object' ? segment.key : segment));
  return `${path.length ? `${path.join('.')}: ` : ''}${issue.message}`;
}
