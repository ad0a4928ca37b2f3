// ESLint 10 flat config with typescript-eslint's type-aware rules for the TypeScript sources.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'dist-dev/', '.stryker-tmp/', 'reports/', 'node_modules/', 'coverage/', '.tools/', 'helm/', 'bench/results/'] },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [...tseslint.configs.strictTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // Numbers and booleans in template strings are the normal way to build messages and headers.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `(x) => callback(x)` with a void callback is idiomatic and clearer than a braced body.
      '@typescript-eslint/no-confusing-void-expression': 'off',
    },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    languageOptions: {
      // Node's globals (process, Buffer, require, fetch, timers, ...) for the scripts, bench and configs.
      globals: globals.node,
    },
  },
);
