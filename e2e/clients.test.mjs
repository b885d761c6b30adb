// End-to-end tests of `switchyard serve --demo` with the official `openai`
// and `ollama` npm clients (docs/DESIGN.md, "Testing"): what a real client sees through the
// localhost API (docs/API.md), and how the router's streaming
// probe-and-commit (docs/DESIGN.md, "Probe and commit") looks from its side when the demo fleet is
// made to fail. The Go twin of these checks is backend/system/e2e_test.go.
//
// Run from e2e/: node --test clients.test.mjs (needs build/bin/switchyard).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import {
  DEMO_IDS,
  PRIMARY,
  SECONDARY,
  TEST_TIMEOUT_MS,
  answerOf,
  candidateStatus,
  fleetOf,
  hello,
  ollamaClient,
  openaiClient,
  rawRequest,
  routing,
  setFault,
  thinkingOf,
  waitRecord,
} from './lib/helpers.mjs';
import { startServer } from './lib/server.mjs';

/** Asserts text contains nothing that another demo candidate would say. */
function assertOnlyFrom(id, text) {
  for (const other of DEMO_IDS.filter((x) => x !== id)) {
    assert.ok(!text.includes(other), `text names ${other} too (mixed output): ${JSON.stringify(text)}`);
  }
  assert.equal(text.split(' here (').length - 1, 1, `exactly one answer lead in ${JSON.stringify(text)}`);
}

/** Streams a chat with the openai npm client; collects content and reasoning. */
async function openaiStream(server, params) {
  const client = openaiClient(server);
  const { data: stream, response } = await client.chat.completions
    .create({ model: 'auto', messages: hello, stream: true, ...params })
    .withResponse();
  const got = { ...routing(response.headers), content: '', reasoning: '', reasoningContent: '', chunks: [], error: null };
  try {
    for await (const chunk of stream) {
      got.chunks.push(chunk);
      for (const choice of chunk.choices ?? []) {
        const delta = choice.delta ?? {};
        got.content += delta.content ?? '';
        // Non-OpenAI extensions (vLLM, llama.cpp): untyped fields.
        got.reasoning += delta.reasoning ?? '';
        got.reasoningContent += delta.reasoning_content ?? '';
      }
    }
  } catch (err) {
    got.error = err;
  }
  return got;
}

/** Streams a chat with the ollama npm client; collects the parts. */
async function ollamaStream(server, params) {
  const { client, responses } = ollamaClient(server);
  const it = await client.chat({ model: 'auto', messages: hello, stream: true, ...params });
  const got = { content: '', thinking: '', parts: [], error: null };
  try {
    for await (const part of it) {
      got.parts.push(part);
      got.content += part.message?.content ?? '';
      got.thinking += part.message?.thinking ?? '';
    }
  } catch (err) {
    got.error = err;
  }
  assert.equal(responses.length, 1, 'one HTTP exchange');
  return { ...got, ...routing(responses[0]) };
}

/** A test with a server of its own, fault reset and server stopped after it. */
function faultTest(name, fn) {
  test(name, { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const server = await startServer();
    const faulted = new Set();
    t.after(async () => {
      try {
        for (const c of faulted) await setFault(server, c, 'healthy');
      } finally {
        await server.stop();
      }
    });
    const fleet = await fleetOf(server);
    const inject = async (candidate, fault) => {
      faulted.add(candidate);
      await setFault(server, candidate, fault);
    };
    await fn({ server, fleet, inject });
  });
}

/** The checks of a stream that fell back from the primary to the secondary before commit. */
async function assertFellBack(server, fleet, got, { outcome = 'error', protocol }) {
  assert.equal(got.error, null, `no stream error: ${got.error}`);
  assert.equal(got.served, SECONDARY, 'X-Switchyard-Served-Model');
  assert.equal(got.fallback, 'true', 'X-Switchyard-Fallback');
  // Only the secondary's text: the primary's failure never reached the caller.
  assert.ok(got.content.startsWith(`${SECONDARY} here`), `answer names ${SECONDARY}: ${JSON.stringify(got.content)}`);
  assert.equal(got.content, answerOf(SECONDARY, fleet.models[SECONDARY]));
  assertOnlyFrom(SECONDARY, got.content);

  const rec = await waitRecord(server, got.requestId);
  assert.equal(rec.protocol, protocol);
  assert.equal(rec.stream, true);
  assert.equal(rec.status, 'ok');
  assert.equal(rec.is_fallback, true);
  assert.equal(rec.served_candidate, SECONDARY);
  assert.ok(rec.attempts.length >= 2, `attempts: ${JSON.stringify(rec.attempts)}`);
  assert.equal(rec.attempts[0].candidate, PRIMARY);
  assert.equal(rec.attempts[0].outcome, outcome, `primary attempt: ${JSON.stringify(rec.attempts[0])}`);
  assert.ok(rec.attempts[0].error, 'the primary attempt says what failed');
  const last = rec.attempts.at(-1);
  assert.equal(last.candidate, SECONDARY);
  assert.equal(last.outcome, 'success');

  // One failure counted on the primary's breaker (threshold 2: still closed).
  const primary = await candidateStatus(server, PRIMARY);
  assert.equal(primary.breaker.state, 'closed');
  assert.equal(primary.breaker.failures, 1);
  return rec;
}

// ---------------------------------------------------------------------------
// A healthy demo fleet: one server for every test of this suite, which run
// concurrently (none of them injects a fault or fails a candidate).
describe('healthy fleet through the official clients', { concurrency: true, timeout: 60_000 }, () => {
  let server;
  let fleet;
  before(async () => {
    server = await startServer();
    fleet = await fleetOf(server);
  });
  after(async () => {
    await server?.stop();
  });

  describe('openai npm', { concurrency: true }, () => {
    test('stream: the demo answer, routing headers, [DONE]-terminated, usage, history', { timeout: TEST_TIMEOUT_MS }, async () => {
      const got = await openaiStream(server, { stream_options: { include_usage: true } });
      assert.equal(got.error, null);
      assert.equal(got.content, answerOf(PRIMARY, fleet.models[PRIMARY]));
      assert.equal(got.served, PRIMARY);
      assert.equal(got.fallback, 'false');
      assert.ok(got.requestId, 'X-Switchyard-Request-Id');
      for (const chunk of got.chunks) {
        assert.equal(chunk.object, 'chat.completion.chunk');
        assert.equal(chunk.model, fleet.models[PRIMARY], 'chunks carry the served model name');
      }
      const finish = got.chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter(Boolean);
      assert.deepEqual(finish, ['stop']);
      const usage = got.chunks.at(-1).usage;
      assert.ok(usage && usage.completion_tokens > 0, `last chunk carries usage: ${JSON.stringify(got.chunks.at(-1))}`);

      const rec = await waitRecord(server, got.requestId);
      assert.equal(rec.protocol, 'openai');
      assert.equal(rec.stream, true);
      assert.equal(rec.status, 'ok');
      assert.equal(rec.is_fallback, false);
      assert.equal(rec.served_candidate, PRIMARY);
      assert.ok(rec.ttft_ms > 0, `ttft_ms ${rec.ttft_ms}`);
      assert.deepEqual(rec.attempts.map((a) => [a.candidate, a.outcome]), [[PRIMARY, 'success']]);
    });

    test('non-stream: one chat.completion with the answer', { timeout: TEST_TIMEOUT_MS }, async () => {
      const client = openaiClient(server);
      const { data, response } = await client.chat.completions
        .create({ model: 'auto', messages: hello })
        .withResponse();
      const r = routing(response.headers);
      assert.equal(r.served, PRIMARY);
      assert.equal(r.fallback, 'false');
      assert.equal(data.object, 'chat.completion');
      assert.equal(data.model, fleet.models[PRIMARY]);
      assert.equal(data.choices[0].message.role, 'assistant');
      assert.equal(data.choices[0].message.content, answerOf(PRIMARY, fleet.models[PRIMARY]));
      assert.equal(data.choices[0].finish_reason, 'stop');
      const rec = await waitRecord(server, r.requestId);
      assert.equal(rec.stream, false);
      assert.equal(rec.status, 'ok');
    });

    test('a candidate id as model puts that candidate first', { timeout: TEST_TIMEOUT_MS }, async () => {
      const id = 'mistral-7b-llamacpp';
      const got = await openaiStream(server, { model: id });
      assert.equal(got.error, null);
      assert.equal(got.served, id);
      assert.equal(got.fallback, 'false');
      assert.equal(got.content, answerOf(id, fleet.models[id]));
    });

    test('models.list(): auto and every candidate', { timeout: TEST_TIMEOUT_MS }, async () => {
      const ids = [];
      for await (const m of openaiClient(server).models.list()) {
        assert.equal(m.object, 'model');
        ids.push(m.id);
      }
      for (const id of ['auto', ...DEMO_IDS]) assert.ok(ids.includes(id), `models ${JSON.stringify(ids)} include ${id}`);
    });

    // reasoning_effort puts the request in thinking mode (docs/DESIGN.md, "Thinking mode"): with
    // auto it goes to the deep-thinking model (an OpenAI/vLLM upstream),
    // whose events reach the caller as the server sent them (vLLM's
    // delta.reasoning; docs/API.md, "Fidelity"); naming qwen3-8b sends it
    // to an Ollama upstream, whose thinking the router translates into both
    // OpenAI reasoning fields.
    for (const model of ['auto', PRIMARY]) {
      test(`reasoning_effort: medium (${model}): reasoning in delta.reasoning and reasoning_content`, { timeout: TEST_TIMEOUT_MS }, async () => {
        const got = await openaiStream(server, { model, reasoning_effort: 'medium' });
        const id = model === 'auto' ? fleet.deep : model;
        assert.equal(got.error, null);
        assert.equal(got.served, id);
        assert.equal(got.reasoning, thinkingOf(id, fleet.models[id]));
        if (model !== 'auto') assert.equal(got.reasoningContent, thinkingOf(id, fleet.models[id]));
        assert.equal(got.content, answerOf(id, fleet.models[id]));
        const rec = await waitRecord(server, got.requestId);
        assert.equal(rec.thinking, true);
      });
    }

    test('unknown model: NotFoundError (404) with an OpenAI error body', { timeout: TEST_TIMEOUT_MS }, async () => {
      const client = openaiClient(server);
      for (const stream of [false, true]) {
        await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages: hello, stream }), (err) => {
          assert.ok(err instanceof OpenAI.NotFoundError, `${err?.constructor?.name}: ${err}`);
          assert.equal(err.status, 404);
          assert.equal(typeof err.error?.message, 'string');
          assert.match(err.error.message, /no-such-model/);
          assert.equal(err.type, 'not_found_error');
          assert.ok(err.headers.get('x-switchyard-request-id'), 'error answers carry the request id');
          return true;
        });
      }
    });

    test('malformed JSON body: 400 with error.message, both protocols', { timeout: TEST_TIMEOUT_MS }, async () => {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"model": "auto", "messages": [',
        signal: AbortSignal.timeout(10_000),
      });
      assert.equal(res.status, 400);
      const body = await res.json();
      assert.equal(typeof body.error?.message, 'string', JSON.stringify(body));
      assert.equal(body.error.type, 'invalid_request_error');

      const o = await fetch(`${server.url}/api/chat`, {
        method: 'POST',
        body: '{"model": "auto",',
        signal: AbortSignal.timeout(10_000),
      });
      assert.equal(o.status, 400);
      const obody = await o.json();
      assert.equal(typeof obody.error, 'string', `Ollama error shape: ${JSON.stringify(obody)}`);
    });

    test('body over 4 MiB: 413, both protocols', { timeout: TEST_TIMEOUT_MS }, async () => {
      const body = JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'x'.repeat(4 * 1024 * 1024 + 1024) }] });
      for (const [path, shape] of [['/v1/chat/completions', 'openai'], ['/api/chat', 'ollama']]) {
        const res = await rawRequest(server, {
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          body,
        });
        assert.equal(res.status, 413, `${path}: ${res.text.slice(0, 200)}`);
        if (shape === 'openai') assert.equal(typeof res.json?.error?.message, 'string', res.text);
        else assert.equal(typeof res.json?.error, 'string', res.text);
      }
    });

    test('foreign Host header: 403 (DNS rebinding), loopback names pass', { timeout: TEST_TIMEOUT_MS }, async () => {
      for (const path of ['/v1/models', '/api/tags', '/switchyard/v1/status']) {
        for (const host of ['evil.example', `evil.example:${server.port}`, `127.0.0.1.evil.example:${server.port}`, '']) {
          const res = await rawRequest(server, { path, headers: { Host: host } });
          assert.equal(res.status, 403, `GET ${path} with Host ${JSON.stringify(host)}: ${res.status} ${res.text}`);
        }
      }
      const chat = await rawRequest(server, {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { Host: 'evil.example', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'auto', messages: hello }),
      });
      assert.equal(chat.status, 403);
      assert.equal(typeof chat.json?.error?.message, 'string', chat.text);
      for (const host of [`127.0.0.1:${server.port}`, `localhost:${server.port}`]) {
        const res = await rawRequest(server, { path: '/v1/models', headers: { Host: host } });
        assert.equal(res.status, 200, `Host ${host}: ${res.text}`);
      }
    });

    test('foreign Origin: 403; its own origin passes', { timeout: TEST_TIMEOUT_MS }, async () => {
      for (const origin of ['http://evil.example', `http://evil.example:${server.port}`, 'null']) {
        const res = await rawRequest(server, { path: '/v1/models', headers: { Origin: origin } });
        assert.equal(res.status, 403, `Origin ${origin}: ${res.status} ${res.text}`);
        assert.equal(res.headers['access-control-allow-origin'], undefined);
      }
      const chat = await rawRequest(server, {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { Origin: 'http://evil.example', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'auto', messages: hello }),
      });
      assert.equal(chat.status, 403);
      const own = await rawRequest(server, { path: '/v1/models', headers: { Origin: server.url } });
      assert.equal(own.status, 200, own.text);
    });

    test('client abort mid-stream: history says client_abort, breaker stays closed', { timeout: TEST_TIMEOUT_MS }, async () => {
      const client = openaiClient(server);
      const { data: stream, response } = await client.chat.completions
        .create({ model: PRIMARY, messages: hello, stream: true })
        .withResponse();
      const { requestId, served } = routing(response.headers);
      assert.equal(served, PRIMARY);
      let n = 0;
      let text = '';
      try {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta?.content ?? '';
          if (++n === 3) stream.controller.abort();
        }
      } catch (err) {
        // openai v6 ends the iteration quietly on abort; an abort error is fine too.
        assert.ok(err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError', String(err));
      }
      assert.ok(answerOf(PRIMARY, fleet.models[PRIMARY]).startsWith(text) && text.length > 0, JSON.stringify(text));
      const rec = await waitRecord(server, requestId, (r) => r.status === 'client_abort');
      assert.equal(rec.attempts.length, 1, JSON.stringify(rec.attempts));
      assert.equal(rec.attempts[0].candidate, PRIMARY);
      assert.equal(rec.attempts[0].outcome, 'client_abort');
      const primary = await candidateStatus(server, PRIMARY);
      assert.equal(primary.breaker.state, 'closed');
      assert.equal(primary.breaker.failures, 0, 'a client abort is not a candidate failure');
    });
  });

  describe('ollama npm', { concurrency: true }, () => {
    test('chat stream: async-iterates the answer, last part done:true', { timeout: TEST_TIMEOUT_MS }, async () => {
      const got = await ollamaStream(server, {});
      assert.equal(got.error, null);
      assert.equal(got.content, answerOf(PRIMARY, fleet.models[PRIMARY]));
      assert.equal(got.served, PRIMARY);
      assert.equal(got.fallback, 'false');
      assert.equal(got.parts.at(-1).done, true);
      assert.equal(got.parts.filter((p) => p.done).length, 1, 'only the last part is done');
      for (const p of got.parts) assert.equal(p.model, fleet.models[PRIMARY]);
      const rec = await waitRecord(server, got.requestId);
      assert.equal(rec.protocol, 'ollama');
      assert.equal(rec.stream, true);
      assert.equal(rec.status, 'ok');
    });

    test('chat non-stream: one response with the answer', { timeout: TEST_TIMEOUT_MS }, async () => {
      const { client, responses } = ollamaClient(server);
      const res = await client.chat({ model: 'auto', messages: hello, stream: false });
      assert.equal(res.done, true);
      assert.equal(res.message.role, 'assistant');
      assert.equal(res.message.content, answerOf(PRIMARY, fleet.models[PRIMARY]));
      assert.equal(res.model, fleet.models[PRIMARY]);
      const r = routing(responses[0]);
      assert.equal(r.served, PRIMARY);
      const rec = await waitRecord(server, r.requestId);
      assert.equal(rec.stream, false);
      assert.equal(rec.status, 'ok');
    });

    // think: true with auto goes to the deep-thinking model (an OpenAI/vLLM
    // upstream, translated into message.thinking); with qwen3-8b to an
    // Ollama upstream.
    for (const model of ['auto', PRIMARY]) {
      test(`think: true (${model}): message.thinking, then the answer`, { timeout: TEST_TIMEOUT_MS }, async () => {
        const got = await ollamaStream(server, { model, think: true });
        const id = model === 'auto' ? fleet.deep : model;
        assert.equal(got.error, null);
        assert.equal(got.served, id);
        assert.equal(got.thinking, thinkingOf(id, fleet.models[id]));
        assert.equal(got.content, answerOf(id, fleet.models[id]));
        const firstContent = got.parts.findIndex((p) => p.message?.content);
        const lastThinking = got.parts.findLastIndex((p) => p.message?.thinking);
        assert.ok(lastThinking < firstContent, 'thinking comes before the answer');
      });
    }

    test('think: true, non-stream: message.thinking', { timeout: TEST_TIMEOUT_MS }, async () => {
      const { client } = ollamaClient(server);
      const res = await client.chat({ model: PRIMARY, messages: hello, think: true, stream: false });
      assert.equal(res.message.thinking, thinkingOf(PRIMARY, fleet.models[PRIMARY]));
      assert.equal(res.message.content, answerOf(PRIMARY, fleet.models[PRIMARY]));
    });

    test('list(): auto and every candidate', { timeout: TEST_TIMEOUT_MS }, async () => {
      const { client } = ollamaClient(server);
      const { models } = await client.list();
      const names = models.map((m) => m.name);
      // Ollama lists name:tag, ':latest' where a name has no tag.
      for (const id of ['auto', ...DEMO_IDS]) {
        const name = id.includes(':') ? id : `${id}:latest`;
        assert.ok(names.includes(name), `tags ${JSON.stringify(names)} include ${name}`);
      }
    });

    test('unknown model: ResponseError 404', { timeout: TEST_TIMEOUT_MS }, async () => {
      const { client } = ollamaClient(server);
      await assert.rejects(client.chat({ model: 'no-such-model', messages: hello }), (err) => {
        assert.equal(err.name, 'ResponseError');
        assert.equal(err.status_code, 404);
        assert.match(err.error, /no-such-model/);
        return true;
      });
    });

    test('abort mid-stream: history says client_abort', { timeout: TEST_TIMEOUT_MS }, async () => {
      const { client, responses } = ollamaClient(server);
      const it = await client.chat({ model: PRIMARY, messages: hello, stream: true });
      let n = 0;
      await assert.rejects(
        (async () => {
          for await (const _ of it) if (++n === 3) it.abort();
        })(),
        { name: 'AbortError' },
      );
      const rec = await waitRecord(server, routing(responses[0]).requestId, (r) => r.status === 'client_abort');
      assert.equal(rec.attempts[0].outcome, 'client_abort');
    });
  });
});

// ---------------------------------------------------------------------------
// Faults on the primary. Every test has a server of its own, so the breaker
// counts of one scenario never leak into another; they run concurrently.
describe('faults on the primary, seen through the official clients', { concurrency: true, timeout: 60_000 }, () => {
  for (const [fault, outcome] of [
    ['close_before_first', 'error'],
    ['status:503', 'error'],
    ['error_event', 'error'],
  ]) {
    faultTest(`openai stream, ${fault}: only the fallback's text, fallback header, history`, async ({ server, fleet, inject }) => {
      await inject(PRIMARY, fault);
      const got = await openaiStream(server, {});
      await assertFellBack(server, fleet, got, { outcome, protocol: 'openai' });
    });
  }

  faultTest('openai stream, die_after:3: APIError mid-stream, no mixed output; non-stream falls back', async ({ server, fleet, inject }) => {
    await inject(PRIMARY, 'die_after:3');
    const got = await openaiStream(server, {});
    assert.ok(got.error instanceof OpenAI.APIError, `stream error is an APIError: ${got.error}`);
    assert.equal(got.error.type, 'upstream_error', JSON.stringify(got.error.error));
    assert.equal(typeof got.error.error?.message, 'string');
    assert.equal(got.served, PRIMARY);
    assert.equal(got.fallback, 'false');
    const full = answerOf(PRIMARY, fleet.models[PRIMARY]);
    assert.ok(got.content.length > 0 && full.startsWith(got.content), `${JSON.stringify(got.content)} is a prefix of ${PRIMARY}'s answer`);
    assert.notEqual(got.content, full);
    assertOnlyFrom(PRIMARY, got.content);
    const rec = await waitRecord(server, got.requestId);
    assert.equal(rec.status, 'upstream_error_after_commit');
    assert.equal(rec.served_candidate, PRIMARY);
    assert.deepEqual(rec.attempts.map((a) => [a.candidate, a.outcome]), [[PRIMARY, 'failed_after_commit']]);

    // Without streaming nothing was written before the failure: it falls back.
    const { data, response } = await openaiClient(server)
      .chat.completions.create({ model: 'auto', messages: hello })
      .withResponse();
    const r = routing(response.headers);
    assert.equal(r.served, SECONDARY);
    assert.equal(r.fallback, 'true');
    assert.equal(data.choices[0].message.content, answerOf(SECONDARY, fleet.models[SECONDARY]));
  });

  faultTest('ollama stream, close_before_first: only the fallback\'s text, fallback header, history', async ({ server, fleet, inject }) => {
    await inject(PRIMARY, 'close_before_first');
    const got = await ollamaStream(server, {});
    await assertFellBack(server, fleet, got, { outcome: 'error', protocol: 'ollama' });
    assert.equal(got.parts.at(-1).done, true);
  });

  faultTest('ollama stream, die_after:3: the iteration throws, no mixed output', async ({ server, fleet, inject }) => {
    await inject(PRIMARY, 'die_after:3');
    const got = await ollamaStream(server, {});
    assert.ok(got.error instanceof Error, 'the iteration throws');
    assert.doesNotMatch(got.error.message, /Did not receive done/, 'an error line, not just a cut stream');
    assert.equal(got.served, PRIMARY);
    assert.ok(!got.parts.some((p) => p.done), 'no done:true part');
    const full = answerOf(PRIMARY, fleet.models[PRIMARY]);
    assert.ok(got.content.length > 0 && full.startsWith(got.content), `${JSON.stringify(got.content)} is a prefix of ${PRIMARY}'s answer`);
    assert.notEqual(got.content, full);
    assertOnlyFrom(PRIMARY, got.content);
    const rec = await waitRecord(server, got.requestId);
    assert.equal(rec.status, 'upstream_error_after_commit');
    assert.deepEqual(rec.attempts.map((a) => [a.candidate, a.outcome]), [[PRIMARY, 'failed_after_commit']]);
  });
});
