// Starts the built `switchyard serve --demo` binary as a child process for
// the end-to-end tests: a free loopback port, throwaway XDG config/data
// directories and history database, readiness by polling the status
// endpoint. Every wait is bounded; every started server is stopped, by the
// caller's stop() (which asserts a clean exit) or, as a last resort, killed
// when the test process exits.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The binary under test: $SWITCHYARD_BIN, else build/bin/switchyard of the repository. */
export const binary = process.env.SWITCHYARD_BIN
  ? path.resolve(process.env.SWITCHYARD_BIN)
  : path.resolve(here, '..', '..', 'build', 'bin', 'switchyard');

const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 15_000;
const START_ATTEMPTS = 3;

// Children still running, killed on exit if a test forgot (or failed before) stop().
const running = new Set();
process.on('exit', () => {
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** A loopback port that was free a moment ago (listen on 0, close). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `switchyard serve --demo` and waits until GET /switchyard/v1/status
 * answers 200. Resolves to {url, port, logs(), stop()}. stop() sends SIGTERM,
 * waits for the exit and rejects unless the exit code is 0.
 */
export async function startServer({ args = [], env = {} } = {}) {
  if (!existsSync(binary)) {
    throw new Error(
      `switchyard binary not found at ${binary}: build it first ` +
        '(cd .. && go build -o build/bin/switchyard .) or set SWITCHYARD_BIN',
    );
  }
  let lastErr;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startOnce({ args, env });
    } catch (err) {
      lastErr = err;
      // The port may have been taken between freePort() and the bind: retry
      // on a fresh port, but only when the child died on its own.
      if (!err.retryable) break;
    }
  }
  throw lastErr;
}

async function startOnce({ args, env }) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-e2e-'));
  const childEnv = {
    ...process.env,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_STATE_HOME: path.join(dir, 'state'),
    XDG_CACHE_HOME: path.join(dir, 'cache'),
    HOME: dir,
    ...env,
  };
  const child = spawn(
    binary,
    ['serve', '--demo', '--addr', `127.0.0.1:${port}`, '--db', path.join(dir, 'history.db'), ...args],
    { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);

  let output = '';
  const keep = (chunk) => {
    output += chunk;
    if (output.length > 64 * 1024) output = output.slice(-64 * 1024);
  };
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);

  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
    child.on('error', (err) => {
      running.delete(child);
      resolve({ code: null, signal: null, error: err });
    });
  });
  let exit = null;
  exited.then((e) => {
    exit = e;
  });

  const cleanupDir = () => rm(dir, { recursive: true, force: true }).catch(() => {});

  const kill = async () => {
    if (exit) return;
    child.kill('SIGKILL');
    await withTimeout(exited, 5_000, 'SIGKILL did not end the server');
  };

  // Wait for readiness.
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exit) {
      await cleanupDir();
      const err = new Error(
        `switchyard exited before it was ready (code ${exit.code}, signal ${exit.signal}` +
          `${exit.error ? `, ${exit.error.message}` : ''}):\n${output}`,
      );
      err.retryable = !exit.error;
      throw err;
    }
    try {
      const res = await fetch(`${url}/switchyard/v1/status`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await kill().catch(() => {});
      await cleanupDir();
      throw new Error(`switchyard did not answer ${url}/switchyard/v1/status within ${READY_TIMEOUT_MS} ms:\n${output}`);
    }
    await sleep(50);
  }

  let stopped = null;
  const stop = () => {
    stopped ??= (async () => {
      try {
        if (exit) {
          throw new Error(`switchyard had already exited (code ${exit.code}, signal ${exit.signal}):\n${output}`);
        }
        child.kill('SIGTERM');
        let e;
        try {
          e = await withTimeout(exited, STOP_TIMEOUT_MS, `switchyard did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM`);
        } catch (err) {
          await kill().catch(() => {});
          throw new Error(`${err.message}:\n${output}`);
        }
        if (e.code !== 0) {
          throw new Error(`switchyard exited with code ${e.code} (signal ${e.signal}); want a clean exit 0 on SIGTERM:\n${output}`);
        }
      } finally {
        await cleanupDir();
      }
    })();
    return stopped;
  };

  return { url, port, dir, logs: () => output, stop };
}

/** Rejects with message if promise does not settle within ms. */
export function withTimeout(promise, ms, message) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(message ?? `timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
