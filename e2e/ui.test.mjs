// Browser end-to-end tests of the UI (docs/DESIGN.md, "Testing"): Debian's Chromium
// driven by playwright-core (never a downloaded browser) against
// `switchyard serve --demo`. Screenshots land in test-artifacts/.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer } from './lib/server.mjs';
import { answerOf, candidateStatus, setFault, waitNewestRecord, waitRecord } from './lib/helpers.mjs';

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

// The desktop app's window (app.go), and the smallest size the UI is designed for.
const WINDOW = { width: 1280, height: 820 };
const SMALL = { width: 900, height: 600 };

// Each test gets its own server (fresh breakers) and page. before(page)
// runs before the UI loads (init scripts).
async function open(t, { viewport = { width: 1280, height: 860 }, before } = {}) {
  const server = await startServer();
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  t.after(async () => {
    if (!t.passed) await saveFailure(t.name, server, page);
    await page.close();
    await server.stop();
    assert.deepEqual(errors, [], 'the page threw');
  });
  await before?.(page);
  await page.goto(server.url + '/');
  await page.getByTestId('prompt').waitFor();
  return { server, page };
}

// A failed test leaves what the page showed and what the router said, so
// that a failure seen once in CI can be read afterwards.
async function saveFailure(name, server, page) {
  const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60);
  await page.screenshot({ path: path.join(artifacts, `failed-${slug}.png`) }).catch(() => {});
  try {
    const st = await (await fetch(server.url + '/switchyard/v1/status', { signal: AbortSignal.timeout(2_000) })).json();
    const breakers = st.candidates.map((c) => `${c.id}: ${c.breaker?.state} (${c.breaker?.failures} failures)`);
    console.error(`failed "${name}": breakers ${breakers.join(', ')}; screenshot failed-${slug}.png`);
  } catch (e) {
    console.error(`failed "${name}": no status (${e})`);
  }
}

const shot = (page, name) => page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: true });
/** What the window shows, as it shows it (the screens scroll inside the window, so fullPage adds nothing). */
const shotWindow = (page, name) => page.screenshot({ path: path.join(artifacts, name + '.png') });
const shotOf = (locator, name) => locator.screenshot({ path: path.join(artifacts, name + '.png') });

/** The demo fleet's servers (GET demo): the candidates a fault can be set on. */
async function demoServers(server) {
  const { servers } = await (await fetch(server.url + '/switchyard/v1/demo')).json();
  return servers.map((s) => s.candidate);
}

/** The whole seconds of a countdown's "6s left". */
const secsLeft = (text) => Number((/(\d+)s left/.exec(text) ?? [])[1]);

/** Waits until the element's trimmed text is want; a timeout says what it showed instead. */
async function waitForText(page, testId, want, timeout = 5_000) {
  const sel = `[data-testid="${testId}"]`;
  try {
    await page.waitForFunction(([s, w]) => document.querySelector(s)?.textContent?.trim() === w, [sel, want], { timeout });
  } catch (e) {
    const seen = await page.locator(sel).first().textContent({ timeout: 500 }).catch(() => null);
    throw new Error(`${testId} did not read "${want}" within ${timeout} ms; it read ${JSON.stringify(seen?.trim() ?? '(absent)')}`, { cause: e });
  }
}

async function ask(page, text) {
  await page.getByTestId('prompt').fill(text);
  await page.getByTestId('prompt').press('Enter');
}

describe('UI in Chromium', { timeout: 300_000 }, () => {
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
    // The faults pop-over shows the active fault whole, and closes on a click outside it.
    const pop = page.getByTestId('fault-compact');
    await page.getByTestId('fault-active').waitFor({ timeout: 10_000 });
    const pill = page.getByTestId('fault-active').locator('.badge');
    assert.equal(await pill.evaluate((b) => b.scrollWidth <= b.clientWidth), true, 'the pill is not cut');
    await pop.locator('summary').click();
    assert.equal(await pop.evaluate((d) => d.open), true);
    await page.locator('.chat-log').click({ position: { x: 20, y: 20 } });
    assert.equal(await pop.evaluate((d) => d.open), false, 'an outside click closes it');
    await ask(page, 'Are you there?');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    const answer = page.getByTestId('answer').last();
    const text = await answer.getByTestId('answer-content').innerText();
    assert.match(text, /^llama3\.2-3b here/, 'the answer comes from the second candidate');
    assert.doesNotMatch(text, /qwen3-8b/, 'no text from the first candidate');
    assert.match(await answer.getByTestId('served-model').innerText(), /llama3\.2-3b/);
    const notice = answer.getByTestId('failover-notice');
    await notice.waitFor({ timeout: 10_000 });
    assert.match(await notice.innerText(), /^↪ qwen3-8b failed before its first token → served by llama3\.2-3b/);
    // The raw error is inside, for those who open it.
    await notice.locator('summary').click();
    assert.match(await notice.getByTestId('failover-raw').innerText(), /^qwen3-8b: /);
    await shot(page, 'ui-chat-failover');
  });

  test('a GPU demotion says why in the chat, the timeline and the X-Switchyard-Fallback-Reason header', async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'vram_pressure');
    for (let i = 0; !(await candidateStatus(server, 'qwen3-8b')).demoted; i++) {
      assert.ok(i < 100, 'qwen3-8b is demoted');
      await new Promise((r) => setTimeout(r, 50));
    }
    const why = 'qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB) (simulated), tried last';
    // Apps get it too, in one line beside X-Switchyard-Fallback.
    const res = await fetch(server.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.text();
    assert.equal(res.headers.get('x-switchyard-fallback'), 'true');
    assert.equal(res.headers.get('x-switchyard-served-model'), 'llama3.2-3b');
    assert.equal(res.headers.get('x-switchyard-fallback-reason'), why);

    await ask(page, 'Which GPU?');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    const notice = page.getByTestId('answer').last().getByTestId('failover-notice');
    await page.waitForFunction((w) => document.querySelector('[data-testid=failover-notice]')?.textContent?.includes(w), why, { timeout: 10_000 });
    assert.equal((await notice.locator('summary').innerText()).trim(), `↪ ${why} → served by llama3.2-3b`);
    await shot(page, 'ui-chat-gpu-demotion');
    await page.getByTestId('answer').last().getByRole('link', { name: 'Timeline' }).click();
    const reason = page.getByTestId('timeline-reason');
    await reason.waitFor({ timeout: 10_000 });
    assert.equal((await reason.innerText()).trim(), `↪ ${why} → served by llama3.2-3b`);
    await shotOf(page.getByTestId('timeline'), 'ui-history-gpu-demotion');
  });

  test('a server that does not answer is said on its card, not shown healthy', async (t) => {
    const { server, page } = await open(t, { viewport: WINDOW });
    await setFault(server, 'mistral-7b-llamacpp', 'refuse');
    await page.getByTestId('nav-fleet').click();
    const badge = page.getByTestId('breaker-mistral-7b-llamacpp');
    // The next poll of its server (within the poll interval, 5 s) finds it gone.
    await waitForText(page, 'breaker-mistral-7b-llamacpp', 'unreachable', 15_000);
    assert.match(await badge.getAttribute('title'), /^Its server does not answer \(connection refused\)\. Circuit breaker: closed\.$/);
    assert.match(await page.getByTestId('server-problem-mistral-7b-llamacpp').innerText(), /^Unreachable since \d\d:\d\d:\d\d \(connection refused\)$/);
    assert.equal((await page.getByTestId('breaker-qwen3-8b').innerText()).trim(), 'healthy');
    await shotOf(page.getByTestId('candidate-mistral-7b-llamacpp'), 'ui-fleet-unreachable-card');
    await shotWindow(page, 'ui-fleet-unreachable');
    await setFault(server, 'mistral-7b-llamacpp', 'healthy');
    await waitForText(page, 'breaker-mistral-7b-llamacpp', 'healthy', 45_000);
    assert.equal(await page.getByTestId('server-problem-mistral-7b-llamacpp').count(), 0);
  });

  test('a suggestion sends; a long answer with code streams; Enter while it streams says why; a reload keeps the chat', async (t) => {
    const { page } = await open(t, { viewport: WINDOW });
    await page.locator('.suggestion', { hasText: 'Go function' }).click();
    const answer = page.getByTestId('answer').last();
    await answer.locator('[data-testid=answer-content]').filter({ hasText: 'qwen3-8b here' }).waitFor({ timeout: 10_000 });
    assert.equal(await page.getByTestId('question').locator('.msg-text').innerText(), 'Write a Go function that reverses a string, with a test.');
    await page.getByTestId('prompt').fill('And in Rust?');
    await page.getByTestId('prompt').press('Enter');
    const hint = page.getByTestId('busy-hint');
    await hint.waitFor({ timeout: 2_000 });
    assert.match(await hint.innerText(), /^An answer is still coming: your message waits in the box/);
    assert.equal(await page.getByTestId('prompt').inputValue(), 'And in Rust?');
    await shotWindow(page, 'ui-chat-enter-while-streaming');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 30_000 });
    await hint.waitFor({ state: 'detached', timeout: 2_000 });
    const code = answer.locator('pre code');
    assert.equal(await code.count(), 2, 'two Go code blocks');
    assert.match(await code.first().innerText(), /^package reverse\n\n\/\/ Reverse returns s/);
    await shotWindow(page, 'ui-chat-code-answer');

    await page.reload();
    await page.getByTestId('prompt').waitFor();
    await page.getByTestId('question').first().waitFor({ timeout: 5_000 });
    assert.equal(await page.getByTestId('question').count(), 1);
    assert.equal(await page.locator('[data-testid=answer] pre code').count(), 2, 'the answer is back after the reload');
    assert.match(await page.getByTestId('served-model').innerText(), /qwen3-8b/);
    await shotWindow(page, 'ui-chat-after-reload');
  });

  test('Stop aborts the stream upstream and history says client_abort', async (t) => {
    const { server, page } = await open(t);
    await setFault(server, 'qwen3-8b', 'slow:300ms');
    await ask(page, 'Tell me a long story');
    const answer = page.getByTestId('answer').last();
    await answer.locator('[data-testid=answer-content]').filter({ hasText: 'qwen3-8b' }).waitFor({ timeout: 10_000 });
    await page.getByTestId('stop').click();
    await page.locator('[data-testid=answer][data-phase=stopped]').waitFor({ timeout: 5_000 });
    const rec = await waitNewestRecord(server, (r) => r.status === 'client_abort');
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
    await waitForText(page, 'breaker-qwen3-8b', 'tripped, cooling down');
    assert.equal((await badge.innerText()).trim(), 'tripped, cooling down');
    const countdown = page.getByTestId('countdown-qwen3-8b');
    const first = await countdown.innerText();
    await page.waitForFunction((before) => document.querySelector('[data-testid=countdown-qwen3-8b]')?.textContent !== before, first, { timeout: 5_000 });
    const later = await countdown.innerText();
    const secs = (s) => Number((s.match(/(\d+)\s*s/) ?? [])[1]);
    assert.ok(secs(later) < secs(first), `countdown goes down: ${first} → ${later}`);
    // The breaker zeroes its failure count when it opens: the card says since when instead.
    const card = page.getByTestId('candidate-qwen3-8b');
    assert.doesNotMatch(await card.innerText(), /failures in a row/i);
    assert.match(await page.getByTestId('breaker-fact-qwen3-8b').innerText(), /tripped since\s+\d\d:\d\d:\d\d/i);
    // ... and what tripped it, seen live as it opened.
    assert.equal(await page.getByTestId('breaker-cause-qwen3-8b').innerText(), 'last failure: HTTP 500');
    assert.match(await page.getByTestId('breaker-fact-qwen3-8b').getAttribute('title'), /tripped after failures in a row/);
    assert.match(await badge.getAttribute('title'), /^Tripped \(circuit breaker open\) after repeated failures/);
    assert.equal((await page.getByTestId('breaker-llama3.2-3b').innerText()).trim(), 'healthy');
    assert.match(await page.getByTestId('breaker-llama3.2-3b').getAttribute('title'), /^Healthy \(circuit breaker closed\): requests go through/);
    await page.getByTestId('gpu-panel').waitFor();
    await shot(page, 'ui-fleet-breaker-open');
    // Healing the server does not close its breaker: the panel says why it still cools down.
    await page.getByTestId('fault-panel').getByTestId('preset-heal-all').click();
    const cooling = page.getByTestId('fault-panel').getByTestId('heal-cooling');
    await cooling.waitFor({ timeout: 5_000 });
    assert.match(await cooling.innerText(), /^Its breaker is still cooling down: qwen3-8b \(\d+s left\)\. A healed server gets requests again once its cool-down ends/);
    await shotOf(page.getByTestId('fault-panel'), 'ui-fleet-heal-all-cooling');
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
    assert.match(await page.getByTestId('timeline-reason').innerText(), /^↪ qwen3-8b failed before its first token → served by llama3\.2-3b$/);
    await shot(page, 'ui-history-timeline');
  });

  test('when every candidate is down the answer says why once, one line per candidate', async (t) => {
    const { server, page } = await open(t);
    // Every demo server answers 503 (what the fault panel sets with "Answer an HTTP error", 503).
    const ids = await demoServers(server);
    assert.equal(ids.length, 4);
    for (const id of ids) await setFault(server, id, 'status:503');
    await ask(page, 'Anyone?');
    const answer = page.locator('[data-testid=answer][data-phase=failed]');
    await answer.waitFor({ timeout: 15_000 });
    const box = answer.getByTestId('answer-error');
    const lines = box.locator(':scope > ul > li');
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid=answer-error] > ul > li').length === n, ids.length, { timeout: 10_000 });
    const text = await answer.innerText();
    assert.doesNotMatch(text, /all candidates failed:/, "the server's one-line summary is not shown next to the list");
    assert.equal(text.split('could answer').length - 1, 1, 'the heading is shown once');
    assert.match(await box.locator('strong').first().innerText(), /^None of the 4 candidates could answer:$/);
    for (const [i, id] of ids.entries()) {
      const line = await lines.nth(i).innerText();
      assert.ok(line.startsWith(id), `line ${i} names ${id}: ${line}`);
      assert.match(line, /HTTP 503/);
      // No "qwen3-8b: upstream HTTP 503: qwen3-8b: …" stutter: the UI adds no second name.
      assert.doesNotMatch(line, new RegExp(`^${id.replace(/\./g, '\\.')}:?\\s.*\\b${id.replace(/\./g, '\\.')}:`), `"${line}" names its candidate once as a prefix`);
      assert.equal(text.split(line).length - 1, 1, `"${line}" is shown once`);
    }
    // An embedding model the chain reached is set apart: it was never a way to answer a chat.
    const unfit = answer.getByTestId('attempt-unfit');
    if (await unfit.count()) assert.doesNotMatch(await unfit.innerText(), new RegExp(ids.map((x) => x.replace(/\./g, '\\.')).join('|')));
    await shot(page, 'ui-chat-all-down');

    // History's timeline of the same request says the summary once too: each reason on its row.
    await page.getByTestId('nav-history').click();
    await page.getByTestId('history-row').first().click();
    const timeline = page.getByTestId('timeline');
    await timeline.waitFor({ timeout: 5_000 });
    const tl = await timeline.innerText();
    assert.doesNotMatch(tl, /all candidates failed:/);
    assert.match(await timeline.getByTestId('timeline-error').innerText(), /candidates could answer; each one’s reason is on its row/);
    for (const id of ids) assert.equal(tl.split(`(server ${id})`).length - 1, 1, `${id}'s reason is shown once in the timeline`);
    await shotOf(timeline, 'ui-history-all-down');
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
    // The demo's server URLs are marked: they will not work if copied.
    assert.equal(await page.getByTestId('yaml-demo-line').count(), 6, 'one url line per demo candidate');
    assert.match(await page.getByTestId('demo-values-note').innerText(), /exist only while it runs/);
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

  test("a stalled candidate's first-token deadline counts down in the chat and on its Fleet card, then moves on", async (t) => {
    const { server, page } = await open(t, { viewport: WINDOW });
    // The first two candidates stall after their headers; the third answers.
    await setFault(server, 'qwen3-8b', 'hang_first_token');
    await setFault(server, 'llama3.2-3b', 'hang_first_token');
    const deadline = (await candidateStatus(server, 'qwen3-8b')).deadline_ms / 1000;
    assert.equal(deadline, 8, "the demo fleet's first-token deadline is 8 s");
    await ask(page, 'Is anyone there?');

    // Chat: the pending answer names the candidate waited on and counts its deadline down.
    const waitOn = (id) => page.locator(`[data-testid=answer] [data-testid=wait][data-candidate="${id}"]`);
    await waitOn('qwen3-8b').waitFor({ timeout: 5_000 });
    const left = page.locator('[data-testid=answer] [data-testid=wait-countdown] .deadline-text');
    const first = secsLeft(await left.innerText());
    assert.ok(first >= 6 && first <= deadline, `starts near the deadline: ${first}s`);
    await page.waitForFunction(
      (f) => Number((/(\d+)s left/.exec(document.querySelector('[data-testid=answer] [data-testid=wait-countdown] .deadline-text')?.textContent ?? '') ?? [])[1]) < f,
      first,
      { timeout: 3_000 },
    );
    assert.match(await waitOn('qwen3-8b').innerText(), /Waiting for qwen3-8b’s first token/);
    await shotWindow(page, 'ui-chat-stall-countdown');

    // Fleet: the same wait on qwen3-8b's card, and on no other.
    await page.getByTestId('nav-fleet').click();
    await page.getByTestId('wait-qwen3-8b').waitFor({ timeout: 3_000 });
    assert.ok(secsLeft(await page.getByTestId('wait-countdown-qwen3-8b').innerText()) <= deadline);
    assert.equal(await page.getByTestId('wait-llama3.2-3b').count(), 0);
    await shotWindow(page, 'ui-fleet-stall-countdown');

    // The deadline passes: the wait moves to the next candidate, on Fleet and in the chat.
    // The next wait's countdown is read as soon as its card shows it, so
    // that a slow machine's later steps do not count against it.
    await page.getByTestId('wait-llama3.2-3b').waitFor({ timeout: (deadline + 4) * 1000 });
    const nextLeft = secsLeft(await page.getByTestId('wait-countdown-llama3.2-3b').innerText());
    await page.getByTestId('wait-qwen3-8b').waitFor({ state: 'detached', timeout: 2_000 });
    assert.ok(nextLeft >= deadline - 1, `the next wait starts near its deadline: ${nextLeft}s`);
    await shotOf(page.getByTestId('candidate-llama3.2-3b'), 'ui-fleet-stall-next-card');
    await page.getByTestId('nav-chat').click();
    await waitOn('llama3.2-3b').waitFor({ timeout: 3_000 });
    assert.equal(await page.locator('[data-testid=answer] [data-testid=wait]').count(), 1, 'one wait at a time');
    assert.match(await page.getByTestId('wait-failed').first().innerText(), /qwen3-8b\s+no first token in 8s/);
    await shotWindow(page, 'ui-chat-stall-next');

    // The third candidate answers: the waits are gone, the footer says what the wait cost.
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: (deadline + 6) * 1000 });
    assert.equal(await page.getByTestId('wait').count(), 0);
    assert.match(await page.getByTestId('served-model').innerText(), /qwen3-32b-vllm/);
    assert.match(await page.getByTestId('ttft').innerText(), /^time to first token \d+ s \(model \d+ ms, failover 1\d s\)$/);
    await shotWindow(page, 'ui-chat-stall-done');
  });

  test('the GPU panel shows the simulated GPUs with memory gauges, and memory pressure fills one', async (t) => {
    const { page } = await open(t, { viewport: WINDOW });
    await page.getByTestId('nav-fleet').click();
    const panel = page.getByTestId('gpu-panel');
    await panel.getByTestId('gpu-simulated').waitFor({ timeout: 5_000 });
    assert.equal((await panel.getByTestId('gpu-simulated').innerText()).trim(), 'simulated');
    assert.match(await panel.getByTestId('gpu-simulated').getAttribute('title'), /without an NVIDIA card/);
    const gauges = panel.locator('[data-testid^=gpu-memory-]');
    assert.equal(await gauges.count(), 4, 'four simulated GPUs');
    const readings = () =>
      gauges.evaluateAll((gs) => gs.map((g) => [g.dataset.tone, Number(g.querySelector('[role=meter]').getAttribute('aria-valuenow'))]));
    assert.deepEqual(await readings(), [['ok', 38], ['ok', 38], ['ok', 38], ['ok', 38]], '9 GiB of 24 GiB each');
    assert.match(await panel.innerText(), /9\.0 GiB \/ 24\.0 GiB/);
    // Each GPU names the models on it, and draws its memory over time once it has a few readings.
    assert.equal(await panel.getByTestId('gpu-models-0').innerText(), 'Models on it: qwen3:8b, nomic-embed-text:latest');
    assert.equal(await panel.getByTestId('gpu-models-1').innerText(), 'Models on it: llama3.2:3b');
    await panel.locator('[data-testid=gpu-history-0] polyline').waitFor({ state: 'attached', timeout: 15_000 });
    // A few readings 5 s apart: the span is said in seconds.
    assert.match(await panel.getByTestId('gpu-history-0').innerText(), /^Memory used, last \d+ s · peak 9\.0 GiB$/);
    await shotOf(panel, 'ui-gpu-simulated');

    await page.getByTestId('preset-gpu-memory-pressure-on-qwen3-8b').click();
    await page.waitForFunction(() => document.querySelector('[data-testid=gpu-memory-0]')?.dataset.tone === 'bad', null, { timeout: 5_000 });
    const [full, ...rest] = await readings();
    assert.equal(full[0], 'bad');
    assert.ok(full[1] >= 95, `GPU 0 is nearly full: ${full[1]}%`);
    assert.deepEqual(rest, [['ok', 38], ['ok', 38], ['ok', 38]]);
    await panel.getByTestId('gpu-demoted-qwen3-8b').waitFor({ timeout: 5_000 });
    assert.match(await panel.getByTestId('gpu-demoted-qwen3-8b').innerText(), /qwen3-8b demoted.*GPU 0 had 0\.6 GiB free/);
    await page.getByTestId('demoted-qwen3-8b').waitFor();
    await shotOf(panel, 'ui-gpu-pressure');
    await shotWindow(page, 'ui-fleet-gpu-pressure');
  });

  test("Fleet's activity feed starts from the recent history, not 'Quiet so far'", async (t) => {
    const { server, page } = await open(t, { viewport: WINDOW });
    for (const model of ['auto', 'llama3.2-3b']) {
      await fetch(server.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => r.text());
    }
    for (let i = 0; ; i++) {
      const { requests } = await (await fetch(server.url + '/switchyard/v1/requests?limit=5')).json();
      if (requests.length >= 2) break;
      assert.ok(i < 100, 'both requests are recorded');
      await new Promise((r) => setTimeout(r, 50));
    }
    await page.reload();
    await page.getByTestId('nav-fleet').click();
    const feed = page.getByTestId('activity-feed');
    await page.waitForFunction(() => (document.querySelector('[data-testid=activity-feed]')?.textContent ?? '').includes('ok by llama3.2-3b'), null, { timeout: 10_000 });
    const text = await feed.innerText();
    assert.doesNotMatch(text, /Quiet so far/);
    assert.match(text, /ok by qwen3-8b/);
    await shotOf(feed, 'ui-fleet-activity-from-history');
  });

  test('the window says where the API listens, and why not on the address it wanted', async (t) => {
    // The desktop app takes a free port when 8484 is taken (status.listen_taken);
    // `serve` does not, so the events are changed on their way into the page.
    const { server, page } = await open(t, {
      viewport: WINDOW,
      before: (p) =>
        p.addInitScript(() => {
          const real = window.fetch.bind(window);
          window.fetch = async (input, init) => {
            const res = await real(input, init);
            const url = typeof input === 'string' ? input : input.url;
            if (!url.includes('/switchyard/v1/events') || !res.body) return res;
            const dec = new TextDecoder();
            const enc = new TextEncoder();
            const taken = new TransformStream({
              transform(chunk, ctl) {
                ctl.enqueue(enc.encode(dec.decode(chunk, { stream: true }).replaceAll('"listen_taken":""', '"listen_taken":"127.0.0.1:8484"')));
              },
            });
            return new Response(res.body.pipeThrough(taken), { status: res.status, headers: res.headers });
          };
        }),
    });
    const addr = `127.0.0.1:${server.port}`;
    const banner = page.getByTestId('listen-banner');
    await banner.waitFor({ timeout: 5_000 });
    assert.match(await banner.innerText(), new RegExp(`^127\\.0\\.0\\.1:8484 was in use \\(another Switchyard\\?\\), so the API is on ${addr.replace(/\./g, '\\.')}\\.`));
    const side = page.getByTestId('api-address');
    assert.match(await side.innerText(), new RegExp(`API\\s+${addr.replace(/\./g, '\\.')}`));
    assert.match(await side.innerText(), /127\.0\.0\.1:8484 was in use/);
    await shotWindow(page, 'ui-listen-taken');
    await page.getByTestId('nav-settings').click();
    assert.match(await page.getByTestId('settings-listen-why').innerText(), /127\.0\.0\.1:8484 was in use \(another Switchyard\?\), so the API is on/);
    await shotWindow(page, 'ui-settings-listen-taken');
    await banner.getByRole('button', { name: 'Hide' }).click();
    assert.equal(await banner.count(), 0, 'the banner can be hidden');
    assert.match(await side.innerText(), /was in use/, 'the status line still says it');
  });

  test('every screen at the window size and at 900×600: nothing cut off, overflowing or blank', async (t) => {
    const { server, page } = await open(t, { viewport: WINDOW });
    // The address, where it is wanted: no banner, the status line names it.
    await page.getByTestId('api-address').waitFor({ timeout: 5_000 });
    assert.match(await page.getByTestId('api-address').innerText(), new RegExp(`^API\\s+127\\.0\\.0\\.1:${server.port}$`));
    assert.equal(await page.getByTestId('listen-banner').count(), 0);

    // The empty chat reads from its top, even in a small window.
    await page.setViewportSize(SMALL);
    const emptyTop = await page.evaluate(() => {
      const log = document.querySelector('.chat-log');
      const h = document.querySelector('.empty-chat h2').getBoundingClientRect();
      const box = log.getBoundingClientRect();
      return { scrollTop: log.scrollTop, headingVisible: h.top >= box.top && h.bottom <= box.bottom };
    });
    assert.deepEqual(emptyTop, { scrollTop: 0, headingVisible: true });
    await shotWindow(page, 'ui-screen-chat-empty-900x600');
    await page.setViewportSize(WINDOW);

    // Something on every screen: an answer, two broken servers (the Chat header names them), history.
    await ask(page, 'Hello');
    await page.locator('[data-testid=answer][data-phase=done]').waitFor({ timeout: 15_000 });
    // History's widest rows: the longest candidate name, and a fallback whose timeline says an error.
    const chat = (model) =>
      fetch(server.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => r.text());
    await chat('mistral-7b-llamacpp');
    await setFault(server, 'qwen3-8b', 'status:500');
    await chat('auto');
    await setFault(server, 'qwen3-8b', 'healthy');
    await setFault(server, 'qwen3-32b-vllm', 'status:503');
    await setFault(server, 'mistral-7b-llamacpp', 'hang_first_token');

    const found = {};
    const ready = { chat: '[data-testid=answer]', fleet: '[data-testid=candidate-qwen3-8b]', history: '[data-testid=history-row]', timeline: '[data-testid=timeline]', settings: '[data-testid=config-yaml]' };
    for (const size of [WINDOW, SMALL]) {
      await page.setViewportSize(size);
      for (const [screen, sel] of Object.entries(ready)) {
        if (screen === 'timeline') await page.getByTestId('history-row').first().click();
        else await page.getByTestId(`nav-${screen}`).click();
        await page.locator(sel).first().waitFor({ timeout: 10_000 });
        if (screen === 'chat') await page.getByTestId('fault-active').waitFor({ timeout: 10_000 });
        await page.waitForTimeout(300);
        const problems = await page.evaluate(() => {
          const main = document.querySelector('#main');
          const out = [];
          const doc = document.documentElement;
          if (doc.scrollWidth > doc.clientWidth) out.push(`the page scrolls sideways by ${doc.scrollWidth - doc.clientWidth}px`);
          if (main.scrollWidth > main.clientWidth) out.push(`the screen scrolls sideways by ${main.scrollWidth - main.clientWidth}px`);
          // Anything sticking out past the screen's right edge, but inside a box that scrolls or clips.
          const right = main.getBoundingClientRect().left + main.clientWidth + 1;
          for (const el of main.querySelectorAll('*')) {
            let clipped = false;
            for (let p = el.parentElement; p && p !== main; p = p.parentElement) {
              if (getComputedStyle(p).overflowX !== 'visible') {
                clipped = true;
                break;
              }
            }
            const r = el.getBoundingClientRect();
            if (!clipped && r.width > 0 && r.right > right) out.push(`${el.tagName.toLowerCase()}.${el.className} ends ${Math.round(r.right - right)}px past the edge`);
            // A box that scrolls or clips sideways hides what runs past its edge: a table's
            // columns, a timeline's bars, the config's long lines. Only an answer's code blocks (which scroll by design) and text cut
            // with an ellipsis (whole on hover) may.
            const cs = getComputedStyle(el);
            const code = el.closest('.code-block, .u-wrap, .uplot');
            if (!code && !el.matches('.sr-only') && cs.overflowX !== 'visible' && cs.textOverflow !== 'ellipsis' && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
              out.push(`${el.tagName.toLowerCase()}.${el.className} hides ${el.scrollWidth - el.clientWidth}px sideways`);
          }
          // A screen head's parts side by side, not on top of each other.
          const head = [...main.querySelectorAll('.screen-head > *')].map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0);
          for (let i = 0; i < head.length; i++)
            for (let j = i + 1; j < head.length; j++) {
              const [a, b] = [head[i], head[j]];
              if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) out.push(`screen head parts ${i} and ${j} overlap`);
            }
          if (!main.innerText.trim()) out.push('the screen is blank');
          return out.slice(0, 8);
        });
        if (problems.length) found[`${screen} at ${size.width}×${size.height}`] = problems;
        await shotWindow(page, `ui-screen-${screen}-${size.width}x${size.height}`);
      }
    }
    assert.deepEqual(found, {}, 'every screen at every size shows all it has');
  });

  test('a narrow window wraps the top bar: the connection, the API address and the theme stay in sight', async (t) => {
    const { page } = await open(t, { viewport: { width: 420, height: 800 } });
    await page.getByTestId('api-address').waitFor({ timeout: 5_000 });
    const geo = await page.evaluate(() => {
      const bar = document.querySelector('.sidebar').getBoundingClientRect();
      const inSight = (el) => {
        const r = el.getBoundingClientRect();
        return r.left >= 0 && r.right <= window.innerWidth && r.top >= 0 && r.bottom <= bar.bottom + 0.5;
      };
      const addr = document.querySelector('[data-testid=api-address]');
      return {
        barHeight: Math.round(bar.height),
        conn: inSight(document.querySelector('.conn')),
        address: inSight(addr),
        addressOneLine: addr.getBoundingClientRect().height < 30,
        theme: inSight(document.querySelector('[data-testid=theme-toggle]')),
      };
    });
    await shotWindow(page, 'ui-narrow-420');
    assert.ok(geo.barHeight < 200, `the top bar is ${geo.barHeight}px tall at 420px wide`);
    assert.deepEqual({ ...geo, barHeight: 0 }, { barHeight: 0, conn: true, address: true, addressOneLine: true, theme: true });
  });

  test('served without the API\'s headers, as the desktop window serves it, the page still loads no image from another host', async (t) => {
    // The desktop window (Wails' asset server) sends none of the API's
    // headers: the page's own policy must refuse what a model's answer
    // could make the browser fetch (a table's background) on its own.
    const dist = path.resolve(here, '..', 'frontend', 'dist');
    const hits = [];
    const listen = (handler) =>
      new Promise((resolve) => {
        const srv = http.createServer(handler).listen(0, '127.0.0.1', () => resolve(srv));
        t.after(() => srv.close());
      });
    const elsewhere = await listen((req, res) => {
      hits.push(req.url);
      res.end();
    });
    const files = await listen(async (req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(await readFile(path.join(dist, 'index.html')));
    });
    const page = await browser.newPage();
    t.after(() => page.close());
    await page.goto(`http://127.0.0.1:${files.address().port}/`);
    const leak = `http://127.0.0.1:${elsewhere.address().port}/leak?q=secret`;
    const refused = await page.evaluate(
      (url) =>
        new Promise((resolve) => {
          document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective));
          setTimeout(() => resolve('no violation within 5 s'), 5_000);
          const d = document.createElement('div');
          d.innerHTML = `<table background="${url}"><tr><td>x</td></tr></table>`;
          document.body.append(d);
        }),
      leak,
    );
    assert.equal(refused, 'img-src');
    await fetch(leak.replace('/leak?q=secret', '/marker')); // after the table's fetch, had there been one
    assert.deepEqual(hits, ['/marker'], 'nothing reached the other host');
  });

  test("a request opened by a link is scrolled into sight, though far down the list", async (t) => {
    const { server, page } = await open(t, { viewport: SMALL });
    const chat = () =>
      fetch(server.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => r.headers.get('x-switchyard-request-id'));
    const first = await chat(); // the oldest: the last row, newest first
    await Promise.all(Array.from({ length: 24 }, chat));
    const deep = first;
    await waitRecord(server, deep);
    await page.goto(`${server.url}/#/history/${deep}`);
    const timeline = page.getByTestId('timeline');
    await timeline.waitFor({ timeout: 10_000 });
    await page.waitForFunction(
      () => {
        const r = document.querySelector('[data-testid=timeline]').getBoundingClientRect();
        return r.top >= 0 && r.top < window.innerHeight;
      },
      null,
      { timeout: 5_000 },
    );
    await shotWindow(page, 'ui-history-deep-link');
  });
});
