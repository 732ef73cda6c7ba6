export declare const BICEP_PACKAGE: string;
export declare const BICEP_VERSION: string;
export declare function ensureBicep(): string;
