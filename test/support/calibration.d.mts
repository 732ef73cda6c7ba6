export declare const REFERENCE_ROUND_MS: number;
export declare function calibrate(): Promise<{ roundsMs: number[]; medianMs: number; factor: number }>;
