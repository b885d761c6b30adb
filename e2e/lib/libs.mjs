// Helpers of libs.test.mjs: every library wired to a Switchyard server
// through one recording fetch, the demo fleet's models and vectors
// mirrored from backend/simfleet, and the checks the libraries share.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOllama, OllamaEmbeddings } from '@langchain/ollama';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { z } from 'zod';

import { candidateStatus, routing, sampleOf, toolAnswerLead, waitRecord } from './helpers.mjs';

/** How long one HTTP exchange of a library may take. */
export const REQUEST_TIMEOUT_MS = 20_000;

/**
 * A fetch for a library: it reaches only 127.0.0.1, bounds every exchange
 * in time (keeping the library's own abort signal), and records each
 * response: responses[i] is {path, status, headers}. last() is the routing
 * headers of the latest response, requestIds() the request ids of all.
 */
export function recorder() {
  const responses = [];
  const recordingFetch = async (input, init = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if (url.hostname !== '127.0.0.1') {
      throw new Error(`refused to reach ${url.origin}: the end-to-end tests talk to 127.0.0.1 only`);
    }
    const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
    const own = init.signal ?? (input instanceof Request ? input.signal : undefined);
    const signal = own ? AbortSignal.any([own, timeout]) : timeout;
    const res = await fetch(input, { ...init, signal });
    responses.push({ path: url.pathname, status: res.status, headers: res.headers });
    return res;
  };
  return {
    fetch: recordingFetch,
    responses,
    last: () => routing(responses.at(-1).headers),
    requestIds: () => responses.map((r) => r.headers.get('x-switchyard-request-id')),
  };
}

// ---------------------------------------------------------------------------
// The libraries, each pointed at a server with a recorder's fetch.

export const openaiLib = (server, rec) =>
  new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: REQUEST_TIMEOUT_MS, fetch: rec.fetch });

export const ollamaLib = (server, rec) => new Ollama({ host: server.url, fetch: rec.fetch });

/** The AI SDK's OpenAI-compatible provider, with json_schema structured outputs. */
export const aiCompatible = (server, rec) =>
  createOpenAICompatible({
    name: 'switchyard',
    baseURL: `${server.url}/v1`,
    apiKey: 'unused',
    includeUsage: true,
    supportsStructuredOutputs: true,
    fetch: rec.fetch,
  });

/** The AI SDK's OpenAI provider: provider(model) speaks the Responses API. */
export const aiOpenAI = (server, rec) => createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', fetch: rec.fetch });

export const langchainOpenAI = (server, rec, model = 'auto') =>
  new ChatOpenAI({
    model,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
    configuration: { baseURL: `${server.url}/v1`, fetch: rec.fetch },
  });

export const langchainOpenAIEmbeddings = (server, rec, model) =>
  new OpenAIEmbeddings({ model, apiKey: 'unused', maxRetries: 0, configuration: { baseURL: `${server.url}/v1`, fetch: rec.fetch } });

export const langchainOllama = (server, rec, model = 'auto') => new ChatOllama({ model, baseUrl: server.url, fetch: rec.fetch, maxRetries: 0 });

export const langchainOllamaEmbeddings = (server, rec, model) =>
  new OllamaEmbeddings({ model, baseUrl: server.url, fetch: rec.fetch, maxRetries: 0 });

// ---------------------------------------------------------------------------
// The demo fleet's tools, structured answers and vectors.

/**
 * The candidates a tool round trip goes through, by the model a client
 * names: the primary (an Ollama 0.17.4, whose calls have ids), the older
 * Ollama whose calls have none, and a vLLM-style server that streams a call
 * in fragments.
 */
export const TOOL_TARGETS = [
  { model: 'auto', id: 'qwen3-8b', what: 'Ollama with call ids' },
  { model: 'llama3.2-3b', id: 'llama3.2-3b', what: 'older Ollama without call ids' },
  { model: 'mistral-7b-llamacpp', id: 'mistral-7b-llamacpp', what: 'vLLM-style, calls streamed in fragments' },
];

/** The tool every library offers: its parameters, and what it returns. */
export const weather = {
  name: 'get_weather',
  description: 'The current weather in a city.',
  parameters: z.object({ city: z.string().describe('The city') }),
  run: ({ city }) => `Sunny, 21 °C in ${city}`,
};

/** The tool as JSON schema, for libraries that take it raw. */
export const weatherJSON = {
  type: 'function',
  function: { name: weather.name, description: weather.description, parameters: z.toJSONSchema(weather.parameters) },
};

/** The arguments candidate id's server calls the tool with (simfleet: instance). */
export const weatherArgs = (id) => ({ city: sampleOf('city', id) });

/** The schema of the structured-output tests, and the instance candidate id answers. */
export const person = z.object({
  name: z.string(),
  age: z.number().int().min(0),
  tags: z.array(z.string()),
});
export const personOf = (id) => ({ name: sampleOf('name', id), age: 42, tags: [sampleOf('tags', id)] });

/** The demo fleet's embedding models: the name a client sends, the server's own name, dimensions. */
export const EMBEDDERS = [
  { model: 'nomic-embed-text', upstream: 'nomic-embed-text:latest', dims: 768, on: 'an Ollama' },
  { model: 'Qwen/Qwen3-Embedding-0.6B', upstream: 'Qwen/Qwen3-Embedding-0.6B', dims: 1024, on: 'a vLLM-style server' },
];

/**
 * The vector the demo fleet gives text with model (its own name): a unit
 * vector from SHA-256 blocks of model, text and block number (simfleet:
 * Embedding), as float32s.
 */
export function embeddingOf(model, text, dims) {
  const v = new Float64Array(dims);
  let block;
  for (let i = 0; i < dims; i++) {
    if (i % 8 === 0) block = createHash('sha256').update(`${model}\0${text}\0${Math.floor(i / 8)}`).digest();
    v[i] = block.readUInt32BE((i % 8) * 4) / 2 ** 31 - 1;
  }
  let norm = 0;
  for (const x of v) norm += x * x;
  norm = Math.sqrt(norm);
  return Array.from(v, (x) => Math.fround(norm > 0 ? x / norm : x));
}

/** Asserts got (numbers, or a Float32Array) is the vector of text from an embedder. */
export function assertVector(got, embedder, text) {
  const want = embeddingOf(embedder.upstream, text, embedder.dims);
  assert.equal(got.length, want.length, `a vector of ${embedder.dims} numbers from ${embedder.model}`);
  for (let i = 0; i < want.length; i++) {
    if (Math.fround(got[i]) !== want[i]) {
      assert.fail(`component ${i} of the vector of ${JSON.stringify(text)} is ${got[i]}; want ${want[i]}`);
    }
  }
}

// ---------------------------------------------------------------------------
// Shared checks.

/** A tool call as the OpenAI wire has it: an id, type "function". */
export function assertOpenAICall(call, id) {
  assert.ok(typeof call.id === 'string' && call.id.length > 0, `the call has an id: ${JSON.stringify(call)}`);
  assert.equal(call.type, 'function', `the call has type function: ${JSON.stringify(call)}`);
  assert.equal(call.function.name, weather.name);
  assert.deepEqual(JSON.parse(call.function.arguments), weatherArgs(id));
}

/** The answer to the tool's result: the served candidate's lead, then the result quoted. */
export function assertQuotes(text, id, model, result) {
  const lead = toolAnswerLead(id, model);
  assert.ok(text.startsWith(lead), `the answer ${JSON.stringify(text)} starts with ${JSON.stringify(lead)}`);
  assert.ok(text.includes(result), `the answer ${JSON.stringify(text)} quotes the tool's result ${JSON.stringify(result)}`);
}

/**
 * The history of a request the client aborted mid-stream: status
 * client_abort, one attempt on candidate with outcome client_abort and the
 * client's fault, and no failure on the candidate's breaker.
 */
export async function assertClientAbort(server, requestId, candidate) {
  assert.ok(requestId, 'the aborted response carried X-Switchyard-Request-Id');
  const rec = await waitRecord(server, requestId);
  assert.equal(rec.status, 'client_abort', `history record: ${JSON.stringify(rec)}`);
  assert.equal(rec.attempts.length, 1, JSON.stringify(rec.attempts));
  assert.equal(rec.attempts[0].candidate, candidate);
  assert.equal(rec.attempts[0].outcome, 'client_abort');
  assert.equal(rec.attempts[0].fault, 'client', 'the abort is the client\'s doing, not the model\'s');
  const c = await candidateStatus(server, candidate);
  assert.equal(c.breaker.failures, 0, 'a client abort is not a candidate failure');
}

/** promise, failing if it has not settled within ms: a library that does not stop is a failure, not a hang. */
export function bounded(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
