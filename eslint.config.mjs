// @ts-check
/**
 * The lint (`npm run lint` runs it in .ci/typecheck-lint.mjs, with the type-check, on the same
 * program): almost all of Baton is async, so the rules are the ones that catch a promise nobody
 * waits for or whose rejection nobody sees. Formatting is
 * prettier's job (`npm run format`), and style rules are left out on purpose.
 *
 * The rules need types, from one program over everything (tsconfig.test.json): whether a value is a
 * promise does not depend on the module format, and the build already checks src/ and functions/
 * as the CommonJS the Functions host loads. A second program for them cost a fifth of the lint.
 */
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/**', 'coverage/**', 'bench/results/**'] },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.ts', '**/*.mts'],
    plugins: { '@typescript-eslint': tseslint.plugin },
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        project: ['./tsconfig.test.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // A promise must be awaited, given a rejection handler, or marked `void` with a comment
      // saying why nobody needs to wait for it.
      '@typescript-eslint/no-floating-promises': 'error',
      // No async function where a void callback is expected (event listeners, timers, servers):
      // its rejection would go nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
      // `await` on something that is not a promise usually means a call that was meant to be async.
      '@typescript-eslint/await-thenable': 'error',
      // Inside try/catch/finally, `return promise` skips the catch and runs the finally too early.
      '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
    },
  },
);
