// Browser end-to-end tests of the UI (SPEC 6.4, 8): Debian's Chromium
// driven by playwright-core (never a downloaded browser) against
// `switchyard serve --demo`. Screenshots land in test-artifacts/.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer } from './lib/server.mjs';
import { answerOf, setFault, waitRecord } from './lib/helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.resolve(here, '..', process.env.ARTIFACTS ?? 'test-artifacts');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

let browser;
before(async () => {
  await mkdir(artifacts, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});
after(async () => browser?.close());

// Each test gets its own server (fresh breakers) and page.
async function open(t) {
  const server = await startServer();
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  t.after(async () => {
    await page.close();
    await server.stop();
    assert.deepEqual(errors, [], 'the page threw');
  });
  await page.goto(server.url + '/');
  await page.getByTestId('prompt').waitFor();
  return { server, page };
}

const shot = (page, name) => page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: true });

async function ask(page, text) {
  await page.getByTestId('prompt').fill(text);
  await page.getByTestId('prompt').press('Enter');
}

describe('UI in Chromium', { timeout: 90_000 }, () => {
  test('a chat streams committed tokens and names the served model', async (t) => {
    const { page } = await open(t);
    await ask(page, 'Hello there');
    const answer = page.getByTestId('answer').last();
    // Tokens arrive while the answer is streaming, not all at the end.
    await answer.locator('[data-testid=answer-content]').filter({ hasText: 'qwen3-8b here' }).waitFor({ timeout: 10_000 });
    const partial = await answer.getByTestId('answer-content').innerText();
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    const full = await answer.getByTestId('answer-content').innerText();
    assert.ok(partial.length < full.length || partial === full, 'content grows while streaming');
    assert.equal(full.replace(/\s+/g, ' ').trim(), answerOf('qwen3-8b', 'qwen3:8b').replace(/\s+/g, ' ').trim());
    assert.match(await answer.getByTestId('served-model').innerText(), /qwen3-8b/);
    assert.match(await answer.getByTestId('ttft').innerText(), /\d+\s*ms/);
    assert.equal(await answer.getByTestId('failover-notice').count(), 0);
    await shot(page, 'ui-chat-answer');
  });

  test('a crash before the first token fails over silently, with a notice', async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'close_before_first');
    await ask(page, 'Are you there?');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    const answer = page.getByTestId('answer').last();
    const text = await answer.getByTestId('answer-content').innerText();
    assert.match(text, /^llama3\.2-3b here/, 'the answer comes from the second candidate');
    assert.doesNotMatch(text, /qwen3-8b/, 'no text from the first candidate');
    assert.match(await answer.getByTestId('served-model').innerText(), /llama3\.2-3b/);
    const notice = answer.getByTestId('failover-notice');
    await notice.waitFor({ timeout: 10_000 });
    assert.match(await notice.innerText(), /qwen3-8b.*llama3\.2-3b/s);
    await shot(page, 'ui-chat-failover');
  });

  test('Stop aborts the stream upstream and history says client_abort', async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'slow:300ms');
    await ask(page, 'Tell me a long story');
    const answer = page.getByTestId('answer').last();
    await answer.locator('[data-testid=answer-content]').filter({ hasText: 'qwen3-8b' }).waitFor({ timeout: 10_000 });
    await page.getByTestId('stop').click();
    await page.locator('[data-testid=answer][data-phase=stopped]').waitFor({ timeout: 5_000 });
    const recs = await (await fetch(server.url + '/switchyard/v1/requests?limit=1')).json();
    const rec = await waitRecord(server, recs.requests[0]?.id, (r) => r.status === 'client_abort');
    assert.equal(rec.status, 'client_abort');
    assert.equal(rec.attempts.at(-1).outcome, 'client_abort');
    const st = await (await fetch(server.url + '/switchyard/v1/status')).json();
    assert.equal(st.candidates.find((c) => c.id === 'qwen3-8b').breaker.failures, 0, 'an abort never counts');
    await shot(page, 'ui-chat-stopped');
  });

  test('a breaker opens and its cool-down counts down on Fleet', async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'status:500');
    for (const q of ['one', 'two']) {
      await ask(page, q);
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid=answer][data-phase=done]').length >= n, q === 'one' ? 1 : 2, { timeout: 15_000 });
    }
    await page.getByTestId('nav-fleet').click();
    const badge = page.getByTestId('breaker-qwen3-8b');
    await page.waitForFunction(() => document.querySelector('[data-testid=breaker-qwen3-8b]')?.textContent?.trim() === 'open', null, { timeout: 5_000 });
    assert.equal((await badge.innerText()).trim(), 'open');
    const countdown = page.getByTestId('countdown-qwen3-8b');
    const first = await countdown.innerText();
    await page.waitForFunction((before) => document.querySelector('[data-testid=countdown-qwen3-8b]')?.textContent !== before, first, { timeout: 5_000 });
    const later = await countdown.innerText();
    const secs = (s) => Number((s.match(/(\d+)\s*s/) ?? [])[1]);
    assert.ok(secs(later) < secs(first), `countdown goes down: ${first} → ${later}`);
    await page.getByTestId('gpu-panel').waitFor();
    await shot(page, 'ui-fleet-breaker-open');
  });

  test("History opens a request's attempt timeline", async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'error_event');
    await ask(page, 'Timeline please');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    await page.getByTestId('nav-history').click();
    const row = page.getByTestId('history-row').first();
    await row.waitFor({ timeout: 10_000 });
    await row.click();
    await page.getByTestId('timeline').waitFor({ timeout: 5_000 });
    const bars = page.getByTestId('timeline-bar');
    assert.equal(await bars.count(), 2, 'one bar per attempt');
    assert.equal(await bars.nth(0).getAttribute('data-outcome'), 'error');
    assert.equal(await bars.nth(1).getAttribute('data-outcome'), 'success');
    await shot(page, 'ui-history-timeline');
  });
});
