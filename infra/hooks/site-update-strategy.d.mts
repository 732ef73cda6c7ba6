// Types for site-update-strategy.mjs, which runs under plain Node (no build step) as azd's hook.

type Env = Readonly<Record<string, string | undefined>>;

export interface AzResult {
  status: number | null;
  signal?: string | null;
  stdout: string;
  stderr: string;
}

export declare const SETTING: 'BATON_SITE_UPDATE_STRATEGY';
export declare const STRATEGIES: readonly string[];
export declare const DEFAULT_STRATEGY: string;

export declare function chooseStrategy(env: Env): string;
export declare function targetOf(env: Env): string[];
export declare function azArgs(target: readonly string[], strategy: string): { set: string[]; show: string[] };
export declare function strategyIn(json: unknown): string | undefined;
export declare function findOnPath(name: string, env: Env, platform?: NodeJS.Platform): string | undefined;
export declare function lastErrorLine(stderr: string | undefined): string;
export declare function runAz(args: readonly string[], env?: Env): AzResult;
export declare function applySiteUpdateStrategy(env: Env, az?: (args: readonly string[], env: Env) => AzResult): string;
