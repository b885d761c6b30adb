// Helpers of the end-to-end tests: Switchyard's own API, the demo fleet's
// deterministic answers, raw HTTP requests and official clients wired to a
// server.

import assert from 'node:assert/strict';
import http from 'node:http';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

export const TEST_TIMEOUT_MS = 30_000;
const REQUEST_TIMEOUT_MS = 20_000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** An openai npm client for a server: no retries, so every failure shows. */
export function openaiClient(server) {
  return new OpenAI({
    baseURL: `${server.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
  });
}

/**
 * An ollama npm client for a server. The client does not expose response
 * headers, so its fetch is wrapped to keep them: responses[i] is the
 * Headers of the i-th response.
 */
export function ollamaClient(server) {
  const responses = [];
  const client = new Ollama({
    host: server.url,
    // Bound every exchange; keep the client's own signal (abort()).
    fetch: async (input, init = {}) => {
      const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
      const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
      const res = await fetch(input, { ...init, signal });
      responses.push(res.headers);
      return res;
    },
  });
  return { client, responses };
}

/** The X-Switchyard-* headers of a response. */
export function routing(headers) {
  return {
    requestId: headers.get('x-switchyard-request-id'),
    served: headers.get('x-switchyard-served-model'),
    fallback: headers.get('x-switchyard-fallback'),
  };
}

async function getJSON(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  const body = await res.json();
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** GET /switchyard/v1/status. */
export const status = (server) => getJSON(`${server.url}/switchyard/v1/status`);

// The demo fleet (backend/simfleet: DemoMembers).
export const PRIMARY = 'qwen3-8b'; // default_model of the demo fleet, priority 1: Ollama
export const SECONDARY = 'llama3.2-3b'; // priority 2, where a failed primary falls back to: an older Ollama without tool-call ids
export const DEMO_IDS = ['qwen3-8b', 'llama3.2-3b', 'qwen3-32b-vllm', 'mistral-7b-llamacpp'];

/** Upstream model names by candidate id, and the two first choices, from the status endpoint. */
export async function fleetOf(server) {
  const st = await status(server);
  const models = Object.fromEntries(st.candidates.map((c) => [c.id, c.model]));
  for (const id of DEMO_IDS) assert.ok(models[id], `status lists candidate ${id}: ${JSON.stringify(models)}`);
  assert.equal(st.default_model, PRIMARY);
  return { models, deep: st.deep_thinking_model, status: st };
}

/** The status entry of one candidate. */
export async function candidateStatus(server, id) {
  const st = await status(server);
  const c = st.candidates.find((x) => x.id === id);
  if (!c) throw new Error(`status has no candidate ${id}: ${JSON.stringify(st.candidates.map((x) => x.id))}`);
  return c;
}

/** POST /switchyard/v1/demo/fault and check the fault took. */
export async function setFault(server, candidate, fault) {
  const res = await fetch(`${server.url}/switchyard/v1/demo/fault`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ candidate, fault }),
    signal: AbortSignal.timeout(5_000),
  });
  const body = await res.json();
  if (!res.ok || body.candidate !== candidate || body.fault !== fault) {
    throw new Error(`set fault ${fault} on ${candidate}: HTTP ${res.status} ${JSON.stringify(body)}`);
  }
  return body;
}

/**
 * Polls GET /switchyard/v1/requests/{id} until the record exists and
 * until(record) holds; the history is written when the request ends,
 * which can be a moment after the client saw its last byte.
 */
export async function waitRecord(server, id, until = () => true, timeoutMs = 5_000) {
  if (!id) throw new Error('no request id to look up');
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    const res = await fetch(`${server.url}/switchyard/v1/requests/${encodeURIComponent(id)}`, {
      signal: AbortSignal.timeout(5_000),
    });
    const text = await res.text();
    if (res.ok) {
      const rec = JSON.parse(text);
      if (until(rec)) return rec;
      last = text;
    } else {
      last = `HTTP ${res.status} ${text}`;
    }
    if (Date.now() > deadline) {
      throw new Error(`history record ${id} not as expected within ${timeoutMs} ms; last: ${last}`);
    }
    await sleep(50);
  }
}

/**
 * Polls the history list until it holds a request, then waits for that
 * newest record like waitRecord; a stopped request is recorded when its
 * handler returns, a moment after the page says it stopped.
 */
export async function waitNewestRecord(server, until = () => true, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${server.url}/switchyard/v1/requests?limit=1`, { signal: AbortSignal.timeout(5_000) });
    const id = res.ok ? (await res.json()).requests?.[0]?.id : undefined;
    if (id) return waitRecord(server, id, until, Math.max(deadline - Date.now(), 0));
    if (Date.now() > deadline) throw new Error(`no request in the history within ${timeoutMs} ms`);
    await sleep(50);
  }
}

// The demo fleet answers with a deterministic text that names the server
// (backend/simfleet: Server.Answer and Server.Thinking), which tells which
// candidate produced a stream and shows mixed output. Mirrored here.
const ANSWER_TEXT =
  'Switchyard sent your request my way, and I am glad to help. ' +
  'Here is a short and friendly answer, streamed one token at a time, ' +
  'so you can always tell which server replied.';
const THINKING_TEXT =
  'The user would like a short, friendly answer. ' + 'I will keep it clear and kind, and say who I am first.';
export const ANSWER_TOKENS = 24; // simfleet.DefaultTokens

// n tokens: lead, then the words of text; the last token runs on to the
// end of its sentence, so an answer of any length ends where a sentence does.
function script(lead, text, n) {
  const words = text.split(/\s+/).filter(Boolean);
  const toks = [lead];
  let i = 0;
  for (; toks.length < n; i++) toks.push(` ${words[i % words.length]}`);
  while (!toks[n - 1].endsWith('.')) toks[n - 1] += ` ${words[i++ % words.length]}`;
  return toks.join('');
}

/** The answer of candidate id for its upstream model name. */
export const answerOf = (id, model, n = ANSWER_TOKENS) => script(`${id} here (${model}):`, ANSWER_TEXT, n);

/** The reasoning text of candidate id for its upstream (thinking) model name. */
export const thinkingOf = (id, model) => script(`${id} thinking (${model}):`, THINKING_TEXT, Math.max(1, ANSWER_TOKENS / 2));

/** The text candidate id inserts for a generate request with a suffix (simfleet: Server.Infill). */
export const infillOf = (id, model, n = ANSWER_TOKENS) => script(`${id} fills in (${model}):`, ANSWER_TEXT, n);

/**
 * The lead of candidate id's answer to a chat whose last message is a tool
 * result (simfleet: Server.ToolAnswer): the lead, then the result verbatim.
 */
export const toolAnswerLead = (id, model) => `${id} here (${model}): The tool returned: `;

/**
 * The string simfleet puts in a JSON-schema string property named name of
 * a tool call's arguments or a structured answer from candidate id
 * (simfleet: instance).
 */
export const sampleOf = (name, id) => `sample ${name} (${id})`;

/**
 * A raw HTTP/1.1 request with full control of the headers (Host, Origin).
 * An answer that arrives before the body is fully written (413) wins over
 * the write error that follows when the server closes the connection.
 */
export function rawRequest(server, { method = 'GET', path = '/', headers = {}, body, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(
      { host: '127.0.0.1', port: server.port, method, path, headers, setHost: !('Host' in headers) },
      (res) => {
        answered = true;
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (body !== undefined) {
      req.write(body, () => req.end());
    } else {
      req.end();
    }
  });
}

/** Messages of a one-line chat. */
export const hello = [{ role: 'user', content: 'Say hello.' }];
