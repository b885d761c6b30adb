// ESLint flat config (`npm run lint`): ESLint's and typescript-eslint's
// recommended rules, and the Rules of Hooks. eslint-plugin-react-hooks knows
// hooks by their names, so it checks preact/hooks as it checks React's; its
// React Compiler rules are left out, as nothing here is compiled by it.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'node_modules/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.{ts,tsx}'],
    plugins: { 'react-hooks': reactHooks },
    rules: {
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
      // As tsc's noUnusedParameters: a leading underscore marks a parameter kept for its position.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
);
