export declare const REFERENCE_ROUND_MS: number;
export declare const SLOWDOWN_ENV: 'BATON_TEST_SLOWDOWN';
export declare function parseSlowdown(text: string): number;
export declare function calibrate(options?: { rounds?: number }): Promise<{ roundsMs: number[]; medianMs: number; factor: number }>;
