export declare const ROOT: string;
export declare const ENTRIES: readonly string[];
export interface ApiReportResult {
  entry: string;
  /** The entry's API differs from its committed report. */
  changed: boolean;
  /** Names a public type reaches that this entry does not export (`ae-forgotten-export`). */
  forgotten: string[];
  /** Those of them that no entry exports: a user sees them but cannot import them. */
  internal: string[];
  /** API Extractor's warnings and errors, one line each. */
  problems: string[];
}
export declare function apiReports(options?: {
  update?: boolean;
  typesDir?: string;
  reportDir?: string;
  entries?: readonly string[];
}): ApiReportResult[];
