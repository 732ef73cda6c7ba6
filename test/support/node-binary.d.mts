export declare const NODE22_VERSION: string;
export declare const NODE24_VERSION: string;
export declare function ensureNode(version: string): string;
