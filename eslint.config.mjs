// Lint: typescript-eslint's recommendedTypeChecked rules for TypeScript: the type-aware ones catch
// what the compiler does not (a promise nobody awaits, a promise passed where a callback's result is
// ignored, an await on something that is no thenable, an `any` that leaks into typed code). The
// .mjs/.js files have no type information, so the type-aware rules are off for them.
// Formatting is Prettier's (see .prettierrc.json).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'test-artifacts/**', 'tmp-probe/**', 'bench/results*.json'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    files: ['**/*.ts', '**/*.mts'],
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.mts'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // In recommendedTypeChecked as well; named here as the three this lint was first made type-aware for.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // `_`-prefixed parameters are placeholders for a position (BullMQ's processor arity, say).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A test's handler may close over a name assigned once the batcher (and so its name) exists.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // BullMQ behind one door (src/bullmq/README.md): what we rely on of its internals is named there.
    files: ['src/**/*.ts'],
    ignores: ['src/bullmq/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [{ regex: '^bullmq(/.*)?$', message: "Import BullMQ through src/bullmq (the one door to BullMQ's internals)." }],
        },
      ],
    },
  },
  {
    // The lowest layer: it imports nothing of ours.
    files: ['src/bullmq/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../*'], message: 'src/bullmq is the lowest layer: it imports nothing of ours.' }] },
      ],
    },
  },
  {
    // An example's async function stands in for the application's own I/O (a database, an API),
    // which real code awaits: the example shows the shape such code has, so it stays async.
    files: ['examples/**/*.ts'],
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    // Vitest's asymmetric matchers (expect.any, expect.stringContaining, ...) are typed `any` on purpose,
    // so they fit any expected value: each property of an expectation that uses one is an "unsafe" assignment.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  // .mjs and .js files have no type information.
  { files: ['**/*.mjs', '**/*.js'], ...tseslint.configs.disableTypeChecked },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', require: 'readonly', __dirname: 'readonly' } },
  },
);
