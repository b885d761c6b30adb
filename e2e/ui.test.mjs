// Browser end-to-end tests of the UI (docs/DESIGN.md, "Testing"): Debian's Chromium
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
    const ttft = answer.getByTestId('ttft');
    assert.match(await ttft.innerText(), /^time to first token \d+(\.\d)?\s*m?s/);
    assert.doesNotMatch(await ttft.innerText(), /router/);
    assert.match(await ttft.getAttribute('title'), /measured in this browser/);
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
    // The breaker zeroes its failure count when it opens: the card says since when instead.
    const card = page.getByTestId('candidate-qwen3-8b');
    assert.doesNotMatch(await card.innerText(), /failures in a row/i);
    assert.match(await page.getByTestId('breaker-fact-qwen3-8b').innerText(), /open since\s+\d\d:\d\d:\d\d/i);
    assert.match(await badge.getAttribute('title'), /tripped after repeated failures/);
    assert.match(await page.getByTestId('breaker-llama3.2-3b').getAttribute('title'), /healthy: requests go through/);
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

  test('when every candidate is down the answer says why once, one line per candidate', async (t) => {
    const { server, page } = await open(t);
    const st = await (await fetch(server.url + '/switchyard/v1/status')).json();
    const ids = st.candidates.map((c) => c.id);
    for (const id of ids) await setFault(server, id, 'status:500');
    await ask(page, 'Anyone?');
    const answer = page.locator('[data-testid=answer][data-phase=failed]');
    await answer.waitFor({ timeout: 15_000 });
    const lines = answer.locator('[data-testid=answer-error] li');
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid=answer-error] li').length === n, ids.length, { timeout: 10_000 });
    const text = await answer.innerText();
    assert.doesNotMatch(text, /all candidates failed:/, "the server's one-line summary is not shown next to the list");
    for (const [i, id] of ids.entries()) {
      const line = await lines.nth(i).innerText();
      assert.ok(line.startsWith(id), `line ${i} names ${id}: ${line}`);
      assert.equal(text.split(line).length - 1, 1, `"${line}" is shown once`);
    }
    await shot(page, 'ui-chat-all-down');
  });

  test("a long config path stays in its column at 1280 and 900 px", async (t) => {
    const { page } = await open(t);
    const long = '/home/someone-with-a-long-name/.config/switchyard/config.yaml';
    await page.route('**/switchyard/v1/config', async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, json: { ...(await res.json()), path: long } });
    });
    await page.getByTestId('nav-settings').click();
    const path = page.getByTestId('config-path');
    await path.waitFor();
    assert.equal(await path.getAttribute('title'), long, 'the whole path on hover');
    assert.equal((await path.innerText()).replace(/\s+/g, ''), long);
    for (const width of [1280, 900]) {
      await page.setViewportSize({ width, height: 860 });
      const geo = await path.evaluate((dd) => {
        const text = document.createRange();
        text.selectNodeContents(dd);
        const r = text.getBoundingClientRect();
        const cell = dd.getBoundingClientRect();
        const others = [...dd.closest('dl').querySelectorAll('dd')].filter((o) => o !== dd).map((o) => o.getBoundingClientRect());
        const overlaps = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        return {
          inside: r.left >= cell.left - 0.5 && r.right <= cell.right + 0.5,
          overflow: dd.scrollWidth - dd.clientWidth,
          hits: others.filter((o) => overlaps(r, o)).length,
        };
      });
      assert.deepEqual(geo, { inside: true, overflow: 0, hits: 0 }, `at ${width} px`);
      await shot(page, `ui-settings-path-${width}`);
    }
  });

  test('History charts show the latest values until hovered', async (t) => {
    const { server, page } = await open(t);
    await ask(page, 'first');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    await setFault(server, 'qwen3-8b', 'close_before_first');
    await ask(page, 'second');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=answer][data-phase=done]').length >= 2, null, { timeout: 15_000 });
    // The charts read the history, which is written a moment after each answer.
    for (let i = 0; ; i++) {
      const { requests } = await (await fetch(server.url + '/switchyard/v1/requests?limit=5')).json();
      if (requests.length >= 2) break;
      assert.ok(i < 100, 'both requests are recorded');
      await new Promise((r) => setTimeout(r, 50));
    }
    await page.getByTestId('nav-history').click();
    const legend = page.locator('[data-testid=chart-ttft] .u-legend');
    await legend.waitFor({ timeout: 10_000 });
    await page.locator('[data-testid=chart-failover] .u-legend').waitFor({ timeout: 10_000 });
    const values = (chart) =>
      page.locator(`[data-testid=${chart}] .u-legend .u-series`).evaluateAll((rows) =>
        rows.map((r) => [r.querySelector('.u-label')?.textContent ?? '', r.querySelector('.u-value')?.textContent ?? '']),
      );
    for (const chart of ['chart-ttft', 'chart-failover']) {
      const rows = await values(chart);
      assert.ok(rows.length >= 3, `${chart} has a legend: ${JSON.stringify(rows)}`);
      assert.deepEqual(rows[0], ['Time', 'latest'], `${chart}: the time row says what the values are`);
      for (const [label, value] of rows.slice(1)) assert.match(value, /\d/, `${chart}: ${label} shows its latest value, not "${value}"`);
    }
    await page.locator('[data-testid=chart-ttft]').scrollIntoViewIfNeeded();
    await shot(page, 'ui-history-charts');
    const over = await page.locator('[data-testid=chart-ttft] .u-over').boundingBox();
    await page.mouse.move(over.x + over.width - 3, over.y + over.height / 2);
    await page.waitForFunction(() => /^\d\d:\d\d–\d\d:\d\d$/.test(document.querySelector('[data-testid=chart-ttft] .u-legend .u-series .u-value')?.textContent ?? ''), null, { timeout: 5_000 });
    await shot(page, 'ui-history-charts-hover');
  });
});
