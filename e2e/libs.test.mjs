// End-to-end tests of `switchyard serve --demo` with the client libraries
// people build on: openai, ollama, the AI SDK (its OpenAI-compatible
// provider, and its OpenAI provider on the Responses API), LangChain
// (ChatOpenAI, OpenAIEmbeddings, ChatOllama, OllamaEmbeddings) and zod for
// schemas. For each: chat streamed and not, a tool round trip (also through
// the demo's older Ollama that sends tool calls without ids, and through a
// vLLM-style server that streams them in fragments), embeddings, an abort
// mid-stream that the history blames on the client, and structured
// output; and the ollama library's other calls (list, show, ps, generate
// with a suffix). What each answer must be comes from the demo fleet
// (backend/simfleet), mirrored in lib/helpers.mjs and lib/libs.mjs; what
// the API must do is docs/API.md.
//
// Run from e2e/: node --test libs.test.mjs (needs build/bin/switchyard and
// a Node these libraries support; the Makefile's test-node uses e2e's own).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Output, embed, embedMany, generateObject, generateText, stepCountIs, streamText, tool as aiTool } from 'ai';
import { HumanMessage } from '@langchain/core/messages';
import { tool as lcTool } from '@langchain/core/tools';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { PRIMARY, SECONDARY, TEST_TIMEOUT_MS, answerOf, fleetOf, hello, infillOf } from './lib/helpers.mjs';
import {
  EMBEDDERS,
  TOOL_TARGETS,
  aiCompatible,
  aiOpenAI,
  assertClientAbort,
  assertOpenAICall,
  assertQuotes,
  assertVector,
  bounded,
  langchainOllama,
  langchainOllamaEmbeddings,
  langchainOpenAI,
  langchainOpenAIEmbeddings,
  ollamaLib,
  openaiLib,
  person,
  personOf,
  recorder,
  weather,
  weatherArgs,
  weatherJSON,
} from './lib/libs.mjs';
import { startServer } from './lib/server.mjs';

// The AI SDK logs its warnings (generateObject is deprecated in favour of
// generateText with an output) to the console; the tests use both.
globalThis.AI_SDK_LOG_WARNINGS = false;

// The tests talk to 127.0.0.1 only: every library gets a fetch that
// refuses anything else (lib/libs.mjs: recorder), and so does the global
// fetch that some use on their own (LangChain downloads tokenizer tables
// with it; it then counts tokens without them).
const globalFetch = globalThis.fetch;
const refused = [];
globalThis.fetch = (input, init) => {
  const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  if (url.hostname !== '127.0.0.1') {
    refused.push(url.origin);
    return Promise.reject(new Error(`refused to reach ${url.origin}: the end-to-end tests talk to 127.0.0.1 only`));
  }
  return globalFetch(input, init);
};

const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
const texts = ['hello', 'a big world', 'hello'];
const ABORT_AFTER = 3; // text chunks before the client aborts

// One server for every test; they run concurrently and none injects a
// fault (an abort is the client's, and counts against no breaker).

/**
 * The AI SDK's abort: streamText with an abortSignal that fires after a few
 * chunks stops the library mid-answer (full is the whole answer), and the
 * history says client_abort.
 */
async function aiSDKAbort(server, modelOf, full) {
  const rec = recorder();
  const ac = new AbortController();
  // streamText reports errors to onError and ends its textStream.
  const errors = [];
  const s = streamText({
    model: modelOf(rec),
    prompt: 'Say hello.',
    abortSignal: ac.signal,
    maxRetries: 0,
    onError: ({ error }) => errors.push(error),
  });
  let text = '';
  let chunks = 0;
  await bounded(
    (async () => {
      try {
        for await (const t of s.textStream) {
          text += t;
          if (++chunks === ABORT_AFTER) ac.abort();
        }
      } catch (err) {
        assert.equal(err.name, 'AbortError', String(err));
      }
    })(),
    5_000,
    'the aborted stream',
  );
  assert.deepEqual(errors.filter((e) => e.name !== 'AbortError').map(String), [], 'no error but the abort');
  assert.ok(text.length > 0 && full.startsWith(text) && text !== full, JSON.stringify(text));
  await assertClientAbort(server, rec.last().requestId, PRIMARY);
}

describe('client libraries against the demo fleet', { concurrency: true, timeout: 180_000 }, () => {
  let server;
  let fleet;
  before(async () => {
    server = await startServer();
    fleet = await fleetOf(server);
  });
  after(async () => {
    await server?.stop();
    if (refused.length) console.log(`# blocked requests to ${[...new Set(refused)].join(', ')}`);
  });
  const answer = (id = PRIMARY) => answerOf(id, fleet.models[id]);
  const it = (name, fn) => test(name, { timeout: TEST_TIMEOUT_MS }, fn);

  // -------------------------------------------------------------------------
  describe('openai', { concurrency: true }, () => {
    it('chat, not streamed: the demo answer', async () => {
      const rec = recorder();
      const r = await openaiLib(server, rec).chat.completions.create({ model: 'auto', messages: hello });
      assert.equal(r.choices[0].message.content, answer());
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.equal(rec.last().served, PRIMARY);
    });

    it('chat, streamed: the demo answer, finish_reason stop', async () => {
      const rec = recorder();
      const stream = await openaiLib(server, rec).chat.completions.create({ model: 'auto', messages: hello, stream: true });
      let text = '';
      const finish = [];
      for await (const chunk of stream) {
        for (const ch of chunk.choices) {
          text += ch.delta?.content ?? '';
          if (ch.finish_reason) finish.push(ch.finish_reason);
        }
      }
      assert.equal(text, answer());
      assert.deepEqual(finish, ['stop']);
    });

    for (const target of TOOL_TARGETS) {
      it(`tools through ${target.id} (${target.what}): id, type function, finish_reason tool_calls, the result quoted`, async () => {
        const client = openaiLib(server, recorder());
        const req = { model: target.model, messages: ask, tools: [weatherJSON] };
        const whole = await client.chat.completions.create(req);
        const choice = whole.choices[0];
        assert.equal(choice.finish_reason, 'tool_calls');
        assert.equal(choice.message.tool_calls?.length, 1, JSON.stringify(choice.message));
        assertOpenAICall(choice.message.tool_calls[0], target.id);

        // Streamed: the first delta of each call has its id, type and name.
        const stream = await client.chat.completions.create({ ...req, stream: true });
        const calls = [];
        const finish = [];
        for await (const chunk of stream) {
          for (const ch of chunk.choices) {
            if (ch.finish_reason) finish.push(ch.finish_reason);
            for (const d of ch.delta?.tool_calls ?? []) {
              if (!calls[d.index]) {
                calls[d.index] = { id: d.id, type: d.type, function: { name: d.function?.name, arguments: '' } };
              }
              calls[d.index].function.arguments += d.function?.arguments ?? '';
            }
          }
        }
        assert.deepEqual(finish, ['tool_calls']);
        assert.equal(calls.length, 1);
        assertOpenAICall(calls[0], target.id);

        const call = choice.message.tool_calls[0];
        const result = weather.run(JSON.parse(call.function.arguments));
        const done = await client.chat.completions.create({
          ...req,
          messages: [...ask, choice.message, { role: 'tool', tool_call_id: call.id, content: result }],
        });
        assertQuotes(done.choices[0].message.content, target.id, fleet.models[target.id], result);
        assert.equal(done.choices[0].finish_reason, 'stop');
      });
    }

    it('embeddings of both demo embedding models: their dimensions, the same vector for the same text', async () => {
      const client = openaiLib(server, recorder());
      for (const e of EMBEDDERS) {
        const r = await client.embeddings.create({ model: e.model, input: texts });
        assert.equal(r.data.length, texts.length);
        r.data.forEach((d, i) => {
          assert.equal(d.index, i);
          assertVector(d.embedding, e, texts[i]);
        });
        assert.deepEqual(r.data[0].embedding, r.data[2].embedding);
        assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
        assert.ok(r.usage.prompt_tokens > 0, JSON.stringify(r.usage));
      }
    });

    it('abort mid-stream (AbortController): the library stops, history says client_abort', async () => {
      const rec = recorder();
      const ac = new AbortController();
      const stream = await openaiLib(server, rec).chat.completions.create(
        { model: PRIMARY, messages: hello, stream: true },
        { signal: ac.signal },
      );
      let text = '';
      let chunks = 0;
      await bounded(
        (async () => {
          try {
            for await (const chunk of stream) {
              text += chunk.choices[0]?.delta?.content ?? '';
              if (++chunks === ABORT_AFTER) ac.abort();
            }
          } catch (err) {
            assert.equal(err.name, 'APIUserAbortError', String(err));
          }
        })(),
        5_000,
        'the aborted stream',
      );
      assert.ok(text.length > 0 && answer().startsWith(text) && text !== answer(), JSON.stringify(text));
      await assertClientAbort(server, rec.last().requestId, PRIMARY);
    });

    it('structured output: response_format json_schema from zod, parsed', async () => {
      const rec = recorder();
      const r = await openaiLib(server, rec).chat.completions.parse({
        model: 'auto',
        messages: [{ role: 'user', content: 'Describe a person.' }],
        response_format: zodResponseFormat(person, 'person'),
      });
      assert.deepEqual(r.choices[0].message.parsed, personOf(rec.last().served));
    });

    it('responses API: output_text, and the streamed deltas', async () => {
      const client = openaiLib(server, recorder());
      const r = await client.responses.create({ model: 'auto', input: 'Say hello.' });
      assert.equal(r.output_text, answer());
      const stream = await client.responses.create({ model: 'auto', input: 'Say hello.', stream: true });
      let text = '';
      const types = new Set();
      for await (const ev of stream) {
        types.add(ev.type);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
      }
      assert.equal(text, answer());
      assert.ok(types.has('response.completed'), [...types].join(' '));
    });

    it('completions with a suffix: the infill text', async () => {
      const rec = recorder();
      const r = await openaiLib(server, rec).completions.create({ model: 'auto', prompt: 'def add(a, b):\n', suffix: '\nprint(add(1, 2))' });
      const id = rec.last().served;
      assert.equal(r.choices[0].text, infillOf(id, fleet.models[id]));
    });
  });

  // -------------------------------------------------------------------------
  describe('ollama', { concurrency: true }, () => {
    it('chat, not streamed and streamed: the demo answer', async () => {
      const ollama = ollamaLib(server, recorder());
      const r = await ollama.chat({ model: 'auto', messages: hello, stream: false });
      assert.equal(r.message.content, answer());
      let text = '';
      let last;
      for await (const part of await ollama.chat({ model: 'auto', messages: hello, stream: true })) {
        text += part.message.content;
        last = part;
      }
      assert.equal(text, answer());
      assert.equal(last.done, true);
      assert.equal(last.done_reason, 'stop');
    });

    for (const target of TOOL_TARGETS) {
      it(`tools through ${target.id} (${target.what}): every call has an id and type function, the result quoted`, async () => {
        const ollama = ollamaLib(server, recorder());
        for (const stream of [false, true]) {
          let message;
          if (stream) {
            message = { role: 'assistant', content: '', tool_calls: [] };
            for await (const part of await ollama.chat({ model: target.model, messages: ask, tools: [weatherJSON], stream })) {
              message.tool_calls.push(...(part.message.tool_calls ?? []));
            }
          } else {
            ({ message } = await ollama.chat({ model: target.model, messages: ask, tools: [weatherJSON], stream }));
          }
          assert.equal(message.tool_calls?.length, 1, JSON.stringify(message));
          const call = message.tool_calls[0];
          assert.ok(call.id, `stream ${stream}: the call has an id: ${JSON.stringify(call)}`);
          assert.equal(call.type, 'function', `stream ${stream}: the call has type function: ${JSON.stringify(call)}`);
          assert.equal(call.function.name, weather.name);
          assert.deepEqual(call.function.arguments, weatherArgs(target.id));

          const result = weather.run(call.function.arguments);
          const done = await ollama.chat({
            model: target.model,
            messages: [...ask, message, { role: 'tool', tool_name: weather.name, content: result }],
            tools: [weatherJSON],
            stream: false,
          });
          assertQuotes(done.message.content, target.id, fleet.models[target.id], result);
        }
      });
    }

    it('embed and the legacy embeddings: dimensions, the same vector for the same text', async () => {
      const ollama = ollamaLib(server, recorder());
      for (const e of EMBEDDERS) {
        const r = await ollama.embed({ model: e.model, input: texts });
        assert.equal(r.embeddings.length, texts.length);
        r.embeddings.forEach((v, i) => assertVector(v, e, texts[i]));
        const legacy = await ollama.embeddings({ model: e.model, prompt: texts[1] });
        assertVector(legacy.embedding, e, texts[1]);
      }
    });

    it('abort mid-stream: the library stops, history says client_abort', async () => {
      const rec = recorder();
      const stream = await ollamaLib(server, rec).chat({ model: PRIMARY, messages: hello, stream: true });
      let text = '';
      let parts = 0;
      await assert.rejects(
        bounded(
          (async () => {
            for await (const part of stream) {
              text += part.message.content;
              if (++parts === ABORT_AFTER) stream.abort();
            }
          })(),
          5_000,
          'the aborted stream',
        ),
        { name: 'AbortError' },
      );
      assert.ok(text.length > 0 && answer().startsWith(text) && text !== answer(), JSON.stringify(text));
      await assertClientAbort(server, rec.last().requestId, PRIMARY);
    });

    it('structured output: format is a JSON schema from zod', async () => {
      const rec = recorder();
      const r = await ollamaLib(server, rec).chat({
        model: 'auto',
        messages: [{ role: 'user', content: 'Describe a person.' }],
        format: z.toJSONSchema(person),
        stream: false,
      });
      assert.deepEqual(person.parse(JSON.parse(r.message.content)), personOf(rec.last().served));
    });

    it('list, show, ps: what apps read at start-up', async () => {
      const ollama = ollamaLib(server, recorder());
      const { models } = await ollama.list();
      for (const m of models) {
        assert.equal(typeof m.name, 'string');
        assert.equal(typeof m.size, 'number', JSON.stringify(m));
        assert.equal(typeof m.details?.family, 'string', JSON.stringify(m));
      }
      const names = models.map((m) => m.name);
      assert.ok(names.includes('auto:latest') && names.includes(`${PRIMARY}:latest`), JSON.stringify(names));

      const show = await ollama.show({ model: PRIMARY });
      for (const cap of ['completion', 'tools', 'thinking']) assert.ok(show.capabilities?.includes(cap), JSON.stringify(show.capabilities));
      const arch = show.model_info?.['general.architecture'];
      assert.equal(arch, 'qwen3', JSON.stringify(show.model_info));
      assert.equal(show.model_info[`${arch}.context_length`], 40960);
      const embedder = await ollama.show({ model: 'nomic-embed-text' });
      assert.deepEqual(embedder.capabilities, ['embedding']);

      await ollama.chat({ model: PRIMARY, messages: hello, stream: false });
      const ps = await ollama.ps();
      assert.ok(Array.isArray(ps.models) && ps.models.length > 0, JSON.stringify(ps));
      for (const m of ps.models) {
        assert.equal(typeof m.name, 'string');
        assert.equal(typeof m.size_vram, 'number', JSON.stringify(m));
        assert.ok(!Number.isNaN(Date.parse(m.expires_at)), JSON.stringify(m));
      }
    });

    it('generate with a suffix: the infill text, streamed and not', async () => {
      const rec = recorder();
      const ollama = ollamaLib(server, rec);
      const req = { model: 'auto', prompt: 'def add(a, b):\n', suffix: '\nprint(add(1, 2))' };
      const r = await ollama.generate({ ...req, stream: false });
      const id = rec.last().served;
      assert.equal(r.response, infillOf(id, fleet.models[id]));
      assert.equal(r.done_reason, 'stop');
      let text = '';
      for await (const part of await ollama.generate({ ...req, stream: true })) text += part.response;
      assert.equal(text, infillOf(id, fleet.models[id]));
      const plain = await ollama.generate({ model: 'auto', prompt: 'Say hello.', stream: false });
      assert.equal(plain.response, answer(id));
    });
  });

  // -------------------------------------------------------------------------
  describe('AI SDK, OpenAI-compatible provider', { concurrency: true }, () => {
    it('generateText and streamText: the demo answer', async () => {
      const provider = aiCompatible(server, recorder());
      const r = await generateText({ model: provider('auto'), prompt: 'Say hello.', maxRetries: 0 });
      assert.equal(r.text, answer());
      assert.equal(r.finishReason, 'stop');
      const s = streamText({ model: provider('auto'), prompt: 'Say hello.', maxRetries: 0 });
      let text = '';
      for await (const t of s.textStream) text += t;
      assert.equal(text, answer());
    });

    for (const target of TOOL_TARGETS) {
      it(`tools through ${target.id} (${target.what}): the call has an id, the result quoted`, async () => {
        const provider = aiCompatible(server, recorder());
        const tools = {
          [weather.name]: aiTool({ description: weather.description, inputSchema: weather.parameters, execute: async (a) => weather.run(a) }),
        };
        for (const run of [generateText, streamText]) {
          // generateText resolves to its result; streamText's result has promises.
          const r = await run({ model: provider(target.model), messages: ask, tools, stopWhen: stepCountIs(3), maxRetries: 0 });
          const steps = await r.steps;
          const calls = steps.flatMap((s) => s.toolCalls);
          assert.equal(calls.length, 1, JSON.stringify(steps.map((s) => s.content)));
          assert.ok(calls[0].toolCallId, `the call has an id: ${JSON.stringify(calls[0])}`);
          assert.deepEqual(calls[0].input, weatherArgs(target.id));
          assert.equal(steps[0].finishReason, 'tool-calls');
          assertQuotes(await r.text, target.id, fleet.models[target.id], weather.run(weatherArgs(target.id)));
        }
      });
    }

    it('embed and embedMany: dimensions, the same vector for the same text', async () => {
      const provider = aiCompatible(server, recorder());
      for (const e of EMBEDDERS) {
        const one = await embed({ model: provider.embeddingModel(e.model), value: texts[1], maxRetries: 0 });
        assertVector(one.embedding, e, texts[1]);
        const many = await embedMany({ model: provider.embeddingModel(e.model), values: texts, maxRetries: 0 });
        many.embeddings.forEach((v, i) => assertVector(v, e, texts[i]));
      }
    });

    it('abort mid-stream (abortSignal): the library stops, history says client_abort', () =>
      aiSDKAbort(server, (rec) => aiCompatible(server, rec)(PRIMARY), answer()));

    it('generateObject, and generateText with Output.object, with a zod schema (json_schema)', async () => {
      const rec = recorder();
      const model = aiCompatible(server, rec)('auto');
      const r = await generateObject({ model, schema: person, prompt: 'Describe a person.', maxRetries: 0 });
      assert.deepEqual(r.object, personOf(rec.last().served));
      const t = await generateText({ model, output: Output.object({ schema: person }), prompt: 'Describe a person.', maxRetries: 0 });
      assert.deepEqual(t.output, personOf(rec.last().served));
    });
  });

  // -------------------------------------------------------------------------
  describe('AI SDK, OpenAI provider (Responses API)', { concurrency: true }, () => {
    it('generateText and streamText: the demo answer, over /v1/responses', async () => {
      const rec = recorder();
      const provider = aiOpenAI(server, rec);
      const r = await generateText({ model: provider('auto'), prompt: 'Say hello.', maxRetries: 0 });
      assert.equal(r.text, answer());
      const s = streamText({ model: provider('auto'), prompt: 'Say hello.', maxRetries: 0 });
      let text = '';
      for await (const t of s.textStream) text += t;
      assert.equal(text, answer());
      assert.ok(rec.responses.every((x) => x.path === '/v1/responses'), JSON.stringify(rec.responses.map((x) => x.path)));
    });

    for (const target of TOOL_TARGETS) {
      it(`tools through ${target.id} (${target.what}): the call has an id, the result quoted`, async () => {
        const provider = aiOpenAI(server, recorder());
        const tools = {
          [weather.name]: aiTool({ description: weather.description, inputSchema: weather.parameters, execute: async (a) => weather.run(a) }),
        };
        for (const run of [generateText, streamText]) {
          // generateText resolves to its result; streamText's result has promises.
          const r = await run({ model: provider(target.model), messages: ask, tools, stopWhen: stepCountIs(3), maxRetries: 0 });
          const steps = await r.steps;
          const calls = steps.flatMap((s) => s.toolCalls);
          assert.equal(calls.length, 1, JSON.stringify(steps.map((s) => s.content)));
          assert.ok(calls[0].toolCallId, `the call has an id: ${JSON.stringify(calls[0])}`);
          assert.deepEqual(calls[0].input, weatherArgs(target.id));
          assertQuotes(await r.text, target.id, fleet.models[target.id], weather.run(weatherArgs(target.id)));
        }
      });
    }

    it('abort mid-stream (abortSignal): the library stops, history says client_abort', () =>
      aiSDKAbort(server, (rec) => aiOpenAI(server, rec)(PRIMARY), answer()));

    it('generateObject, and generateText with Output.object, with a zod schema (text.format json_schema)', async () => {
      const rec = recorder();
      const model = aiOpenAI(server, rec)('auto');
      const r = await generateObject({ model, schema: person, prompt: 'Describe a person.', maxRetries: 0 });
      assert.deepEqual(r.object, personOf(rec.last().served));
      const t = await generateText({ model, output: Output.object({ schema: person }), prompt: 'Describe a person.', maxRetries: 0 });
      assert.deepEqual(t.output, personOf(rec.last().served));
    });

    it('embeddings: the same vectors as every other client', async () => {
      const provider = aiOpenAI(server, recorder());
      for (const e of EMBEDDERS) {
        const many = await embedMany({ model: provider.embedding(e.model), values: texts, maxRetries: 0 });
        many.embeddings.forEach((v, i) => assertVector(v, e, texts[i]));
      }
    });
  });

  // -------------------------------------------------------------------------
  for (const lc of [
    { name: 'LangChain ChatOpenAI and OpenAIEmbeddings', chat: langchainOpenAI, embeddings: langchainOpenAIEmbeddings, openai: true },
    { name: 'LangChain ChatOllama and OllamaEmbeddings', chat: langchainOllama, embeddings: langchainOllamaEmbeddings, openai: false },
  ]) {
    describe(lc.name, { concurrency: true }, () => {
      it('invoke and stream: the demo answer', async () => {
        const chat = lc.chat(server, recorder());
        const r = await chat.invoke([new HumanMessage('Say hello.')]);
        assert.equal(r.content, answer());
        let text = '';
        for await (const chunk of await chat.stream([new HumanMessage('Say hello.')])) text += chunk.content;
        assert.equal(text, answer());
      });

      for (const target of TOOL_TARGETS) {
        it(`bindTools through ${target.id} (${target.what}): the call has an id, the result quoted`, async () => {
          const weatherTool = lcTool(async (a) => weather.run(a), {
            name: weather.name,
            description: weather.description,
            schema: weather.parameters,
          });
          const chat = lc.chat(server, recorder(), target.model).bindTools([weatherTool]);
          const question = new HumanMessage(ask[0].content);
          const ai = await chat.invoke([question]);
          assert.equal(ai.tool_calls?.length, 1, JSON.stringify(ai));
          const call = ai.tool_calls[0];
          assert.ok(call.id, `the call has an id: ${JSON.stringify(call)}`);
          assert.equal(call.name, weather.name);
          assert.deepEqual(call.args, weatherArgs(target.id));
          if (lc.openai) {
            // The OpenAI wire under it: each call with its id and type, finish_reason tool_calls.
            assert.equal(ai.response_metadata?.finish_reason, 'tool_calls', JSON.stringify(ai.response_metadata));
            for (const raw of ai.additional_kwargs?.tool_calls ?? []) {
              assert.ok(raw.id, JSON.stringify(raw));
              assert.equal(raw.type, 'function', JSON.stringify(raw));
            }
          }
          const toolMessage = await weatherTool.invoke(call);
          const done = await chat.invoke([question, ai, toolMessage]);
          assertQuotes(done.content, target.id, fleet.models[target.id], weather.run(weatherArgs(target.id)));
        });
      }

      it('embedQuery and embedDocuments: dimensions, the same vector for the same text', async () => {
        for (const e of EMBEDDERS) {
          const embeddings = lc.embeddings(server, recorder(), e.model);
          assertVector(await embeddings.embedQuery(texts[1]), e, texts[1]);
          const docs = await embeddings.embedDocuments(texts);
          docs.forEach((v, i) => assertVector(v, e, texts[i]));
        }
      });

      it('abort mid-stream (signal): the library stops, history says client_abort', async () => {
        const rec = recorder();
        const ac = new AbortController();
        const stream = await lc.chat(server, rec, PRIMARY).stream([new HumanMessage('Say hello.')], { signal: ac.signal });
        let text = '';
        let chunks = 0;
        await bounded(
          (async () => {
            try {
              for await (const chunk of stream) {
                text += chunk.content;
                if (++chunks === ABORT_AFTER) ac.abort();
              }
            } catch (err) {
              assert.match(String(err), /abort/i);
            }
          })(),
          5_000,
          'the aborted stream',
        );
        assert.ok(text.length > 0 && answer().startsWith(text) && text !== answer(), JSON.stringify(text));
        await assertClientAbort(server, rec.last().requestId, PRIMARY);
      });

      for (const method of ['jsonSchema', 'functionCalling']) {
        it(`withStructuredOutput (${method}) with a zod schema`, async () => {
          const rec = recorder();
          const r = await lc.chat(server, rec).withStructuredOutput(person, { name: 'person', method }).invoke([new HumanMessage('Describe a person.')]);
          assert.deepEqual(r, personOf(rec.last().served));
        });
      }
    });
  }
});

// Unloading a model makes its server cold for a moment: a server of its own,
// so that no test above meets it cold.
describe('ollama: preload and unload', { timeout: 60_000 }, () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
  });

  test('chat and generate without a prompt: unload with keep_alive 0, then load', { timeout: TEST_TIMEOUT_MS }, async () => {
    const ollama = ollamaLib(server, recorder());
    const unload = await ollama.chat({ model: SECONDARY, messages: [], keep_alive: 0, stream: false });
    assert.equal(unload.done, true);
    assert.equal(unload.done_reason, 'unload');
    const load = await ollama.generate({ model: SECONDARY, prompt: '', stream: false });
    assert.equal(load.done, true);
    assert.equal(load.done_reason, 'load');
  });
});
