// The UI's API types are generated: docs/openapi.json (made from the Go
// types of backend/schema, checked by a Go test) → src/api.gen.ts
// (openapi-typescript) → src/types.ts. This test fails when api.gen.ts is
// not what docs/openapi.json generates: run `npm run gen:types`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';

describe('generated API types', () => {
  // A generator run is a process of its own: 2.5 s on a quiet machine, over
  // vitest's 5 s default on two busy cores. It is bounded, not timed.
  test('src/api.gen.ts is generated from docs/openapi.json as it is', { timeout: 60_000 }, () => {
    const root = path.resolve(__dirname, '..');
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'api-types-')), 'api.gen.ts');
    execFileSync(path.join(root, 'node_modules', '.bin', 'openapi-typescript'), [path.join(root, '..', 'docs', 'openapi.json'), '-o', out], {
      stdio: 'pipe',
    });
    expect(readFileSync(path.join(root, 'src', 'api.gen.ts'), 'utf8')).toBe(readFileSync(out, 'utf8'));
  });
});
