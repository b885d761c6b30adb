import { describe, expect, it } from 'vitest';
import { SSEParser, applyChunk, backoffDelay, errorMessage, readSSE, requestsQuery, type ChatHandlers, type ChatResult, type SSEEvent } from './api';

function parseAll(chunks: string[]): { events: SSEEvent[]; comments: string[] } {
  const events: SSEEvent[] = [];
  const comments: string[] = [];
  const p = new SSEParser((e) => events.push(e), (c) => comments.push(c));
  for (const c of chunks) p.push(c);
  p.end();
  return { events, comments };
}

/** Every way of cutting s into two or three pieces. */
function splits(s: string): string[][] {
  const out: string[][] = [[s]];
  for (let i = 1; i < s.length; i++) {
    out.push([s.slice(0, i), s.slice(i)]);
    for (let j = i + 1; j < s.length; j++) out.push([s.slice(0, i), s.slice(i, j), s.slice(j)]);
  }
  return out;
}

describe('SSEParser', () => {
  it('parses one event with a type', () => {
    const { events } = parseAll(['event: status\ndata: {"a":1}\n\n']);
    expect(events).toEqual([{ event: 'status', data: '{"a":1}' }]);
  });

  it('defaults the type to message and keeps the id', () => {
    const { events } = parseAll(['id: 7\ndata: x\n\n']);
    expect(events).toEqual([{ event: 'message', data: 'x', id: '7' }]);
  });

  it('joins multi-line data with newlines', () => {
    const { events } = parseAll(['data: first\ndata: second\ndata:\ndata:  indented\n\n']);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toBe('first\nsecond\n\n indented');
  });

  it('strips exactly one space after the colon, and none when absent', () => {
    const { events } = parseAll(['data:no-space\n\n', 'data:  two\n\n']);
    expect(events.map((e) => e.data)).toEqual(['no-space', ' two']);
  });

  it('treats a field with no colon as an empty value', () => {
    const { events } = parseAll(['data\n\n']);
    expect(events).toEqual([{ event: 'message', data: '' }]);
  });

  it('reports comments and never dispatches them', () => {
    const { events, comments } = parseAll([': ping\n\n:\n\ndata: y\n\n']);
    expect(comments).toEqual(['ping', '']);
    expect(events.map((e) => e.data)).toEqual(['y']);
  });

  it('does not dispatch an event without data, and resets its type', () => {
    const { events } = parseAll(['event: status\n\ndata: z\n\n']);
    expect(events).toEqual([{ event: 'message', data: 'z' }]);
  });

  it('accepts CRLF, CR and LF line endings, mixed', () => {
    const { events } = parseAll(['event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n']);
    expect(events).toEqual([
      { event: 'a', data: '1' },
      { event: 'b', data: '2' },
      { event: 'message', data: '3' },
    ]);
  });

  it('ignores retry and unknown fields', () => {
    const { events } = parseAll(['retry: 3000\nfoo: bar\ndata: ok\n\n']);
    expect(events).toEqual([{ event: 'message', data: 'ok' }]);
  });

  it('strips a leading byte-order mark', () => {
    const { events } = parseAll(['\uFEFFdata: bom\n\n']);
    expect(events.map((e) => e.data)).toEqual(['bom']);
  });

  it('dispatches a last event that lacks its blank line at end of stream', () => {
    const { events } = parseAll(['data: a\n\ndata: [DONE]']);
    expect(events.map((e) => e.data)).toEqual(['a', '[DONE]']);
  });

  it('gives the same events however the stream is split', () => {
    const stream =
      ': ping\r\nevent: status\r\ndata: {"x":1}\r\n\r\ndata: l1\ndata: l2\n\nevent: breaker\rdata: {"y":"é"}\r\r';
    const want = parseAll([stream]).events;
    expect(want).toEqual([
      { event: 'status', data: '{"x":1}' },
      { event: 'message', data: 'l1\nl2' },
      { event: 'breaker', data: '{"y":"é"}' },
    ]);
    for (const parts of splits(stream)) {
      expect(parseAll(parts).events, JSON.stringify(parts)).toEqual(want);
    }
  });

  it('splits a CRLF between chunks without inventing an empty line', () => {
    const { events } = parseAll(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
    expect(events).toEqual([{ event: 'message', data: 'a\nb' }]);
  });

  it('feeds one character at a time', () => {
    const stream = 'event: commit\r\ndata: {"request_id":"r1"}\r\n\r\n';
    const { events } = parseAll(stream.split(''));
    expect(events).toEqual([{ event: 'commit', data: '{"request_id":"r1"}' }]);
  });
});

describe('readSSE', () => {
  it('decodes UTF-8 split across byte chunks', async () => {
    const bytes = new TextEncoder().encode('data: héllo → wörld\n\n');
    const chunks = Array.from(bytes, (b) => new Uint8Array([b]));
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const ch of chunks) c.enqueue(ch);
        c.close();
      },
    });
    const got: string[] = [];
    let activity = 0;
    await readSSE(body, (e) => got.push(e.data), () => activity++);
    expect(got).toEqual(['héllo → wörld']);
    expect(activity).toBe(chunks.length);
  });
});

function collector() {
  const out = { content: '', reasoning: '', errors: [] as string[], opened: 0 };
  const h: ChatHandlers = {
    onOpen: () => out.opened++,
    onContent: (t) => (out.content += t),
    onReasoning: (t) => (out.reasoning += t),
    onStreamError: (m) => out.errors.push(m),
  };
  return { out, h };
}

describe('applyChunk', () => {
  it('routes content and reasoning, preferring `reasoning` over `reasoning_content`', () => {
    const { out, h } = collector();
    const r: ChatResult = { finished: false, usage: null };
    expect(applyChunk('{"choices":[{"delta":{"role":"assistant"}}]}', h, r)).toBe('more');
    applyChunk('{"choices":[{"delta":{"reasoning":"think ","reasoning_content":"think "}}]}', h, r);
    applyChunk('{"choices":[{"delta":{"reasoning_content":"more"}}]}', h, r);
    applyChunk('{"choices":[{"delta":{"content":"Hi"}}]}', h, r);
    applyChunk('{"choices":[{"delta":{"content":"!"},"finish_reason":"stop"}]}', h, r);
    applyChunk('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}', h, r);
    expect(applyChunk('[DONE]', h, r)).toBe('done');
    expect(out.reasoning).toBe('think more');
    expect(out.content).toBe('Hi!');
    expect(r).toEqual({ finished: true, usage: { prompt_tokens: 3, completion_tokens: 2 } });
  });

  it('turns an in-stream error event into onStreamError', () => {
    const { out, h } = collector();
    const r: ChatResult = { finished: false, usage: null };
    applyChunk('{"choices":[{"delta":{"content":"partial"}}]}', h, r);
    expect(applyChunk('{"error":{"message":"upstream died","type":"upstream_error"}}', h, r)).toBe('error');
    expect(out.errors).toEqual(['upstream died']);
    expect(out.content).toBe('partial');
    expect(r.finished).toBe(false);
  });

  it('tolerates null choices and junk', () => {
    const { out, h } = collector();
    const r: ChatResult = { finished: false, usage: null };
    expect(applyChunk('{"choices":null}', h, r)).toBe('more');
    expect(applyChunk('not json', h, r)).toBe('more');
    expect(out.content).toBe('');
  });
});

describe('errorMessage', () => {
  it('reads both error dialects and plain text', () => {
    expect(errorMessage('{"error":{"message":"all candidates failed","type":"server_error"}}', 502)).toBe('all candidates failed');
    expect(errorMessage('{"error":"not found"}', 404)).toBe('not found');
    expect(errorMessage('bad gateway', 502)).toBe('bad gateway');
    expect(errorMessage('<html>oops</html>', 500)).toBe('HTTP 500');
    expect(errorMessage('', 503)).toBe('HTTP 503');
  });
});

describe('requestsQuery', () => {
  it('encodes only the filters that are set', () => {
    expect(requestsQuery({})).toBe('limit=50');
    expect(requestsQuery({ limit: 20, served: 'qwen3-8b', fallback: false, status: 'ok', before: 'r1' })).toBe(
      'limit=20&served=qwen3-8b&fallback=false&status=ok&before=r1',
    );
  });
});

describe('backoffDelay', () => {
  it('grows then holds at 15 s', () => {
    expect([0, 1, 2, 3, 4, 5, 50].map(backoffDelay)).toEqual([1000, 2000, 4000, 8000, 15000, 15000, 15000]);
  });
});
