// Server-Sent Events over fetch: a parser that follows the WHATWG rules and
// a reader that feeds it from a response body. Used by api.ts, which
// re-exports both.

// WHATWG "Server-sent events", section "Interpreting an event stream".

export interface SSEEvent {
  /** The `event:` field, or "message" when absent. */
  event: string;
  /** The `data:` lines joined with "\n". */
  data: string;
  /** The `id:` field of this event, if one was sent. */
  id?: string;
}

/**
 * SSEParser turns arbitrary text chunks into events. Lines may end in "\n",
 * "\r\n" or "\r", and a chunk may split anywhere (inside a line, between "\r"
 * and "\n"). Comments (lines starting with ":") go to onComment. An event with
 * no data lines is not dispatched. Not safe for concurrent use; feed it from
 * one reader.
 */
export class SSEParser {
  private line = '';
  private pendingCR = false;
  private started = false;
  private dataLines: string[] = [];
  private eventType = '';
  private eventId: string | undefined;

  constructor(
    private readonly onEvent: (e: SSEEvent) => void,
    private readonly onComment?: (text: string) => void,
  ) {}

  /** push feeds the next chunk of decoded text. */
  push(chunk: string): void {
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (c === 10 /* \n */) {
        if (this.pendingCR) {
          // The "\n" of a "\r\n" split across chunks: the line already ended.
          this.pendingCR = false;
          start = i + 1;
          continue;
        }
        this.line += chunk.slice(start, i);
        this.takeLine();
        start = i + 1;
      } else if (c === 13 /* \r */) {
        this.pendingCR = false;
        this.line += chunk.slice(start, i);
        this.takeLine();
        start = i + 1;
        if (i + 1 < chunk.length) {
          if (chunk.charCodeAt(i + 1) === 10) {
            i++;
            start = i + 1;
          }
        } else {
          this.pendingCR = true;
        }
      } else {
        this.pendingCR = false;
      }
    }
    if (start < chunk.length) {
      this.line += chunk.slice(start);
      this.pendingCR = false;
    }
  }

  /**
   * end is called when the stream is over. Unlike a browser it dispatches a
   * last event that lacks its blank line (some servers end with `data: [DONE]`
   * and no "\n\n"), so a final error event is never lost.
   */
  end(): void {
    if (this.line.length > 0) this.takeLine();
    this.dispatch();
  }

  private takeLine(): void {
    const line = this.line;
    this.line = '';
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) {
      this.onComment?.(line.slice(1).replace(/^ /, ''));
      return;
    }
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    switch (field) {
      case 'data':
        this.dataLines.push(value);
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.eventId = value;
        break;
      default:
      // "retry" and unknown fields are ignored.
    }
  }

  private dispatch(): void {
    if (this.dataLines.length === 0) {
      this.eventType = '';
      return;
    }
    const e: SSEEvent = { event: this.eventType || 'message', data: this.dataLines.join('\n') };
    if (this.eventId !== undefined) e.id = this.eventId;
    this.dataLines = [];
    this.eventType = '';
    this.onEvent(e);
  }
}

/**
 * readSSE reads an event-stream body to its end, calling onEvent per event
 * and onActivity on every chunk received (for idle watchdogs). It resolves
 * when the body ends and rejects with the read error (an AbortError when the
 * request was aborted).
 */
export async function readSSE(
  body: ReadableStream<Uint8Array>,
  onEvent: (e: SSEEvent) => void,
  onActivity?: () => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser(onEvent);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onActivity?.();
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
    parser.end();
  } finally {
    reader.releaseLock();
  }
}
