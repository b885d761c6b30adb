import { defineConfig } from 'vitest/config';

// base './' keeps every asset path relative, so the same dist works from
// wails://wails/ (the desktop webview) and from http://127.0.0.1:8484/ (serve).
export default defineConfig({
  base: './',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 400,
  },
  server: {
    // An address, not "localhost": Vite and Vitest look that name up, and a
    // machine without /etc/hosts (a bare chroot) can't resolve it.
    host: '127.0.0.1',
    // `npm run dev` proxies the API to a running `switchyard serve`.
    proxy: {
      '/v1': 'http://127.0.0.1:8484',
      '/switchyard': 'http://127.0.0.1:8484',
    },
  },
  test: {
    include: ['src/**/*.test.{ts,tsx}'],
    environment: 'node',
  },
});
