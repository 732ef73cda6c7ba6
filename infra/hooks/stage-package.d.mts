// Types for stage-package.mjs, which runs under plain Node (no build step) as azd's hook.

export declare const STAGE_DIR: string;
export declare const PACKAGE_FILES: Readonly<Record<string, string>>;
export declare const APP_MAIN: string;
export declare const INSTALL_ARGS: readonly string[];
export declare const APP_PEERS: readonly string[];
export declare function appManifest(pkg: {
  name: string;
  version: string;
  engines?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}): {
  name: string;
  version: string;
  private: true;
  main: string;
  engines?: Record<string, string>;
  dependencies: Record<string, string>;
};
export declare const FUNCIGNORE: string;

export declare function runNpm(cwd: string, args: readonly string[]): void;

export declare function stagePackage(
  root: string,
  options?: { npm?: (cwd: string, args: readonly string[]) => void; log?: (line: string) => void },
): string;
