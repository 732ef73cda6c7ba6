export declare const NODE22_VERSION: string;
export declare function ensureNode22(): string;
