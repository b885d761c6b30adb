// JSON shapes of Switchyard's localhost API, as fixed by docs/API.md.
// Durations are integer milliseconds (`*_ms`), byte counts integers (`*_bytes`),
// times RFC 3339 strings.

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface Breaker {
  state: BreakerState | string;
  failures: number;
  remaining_ms: number;
  probing: boolean;
  since: string;
}

export interface TTFTStats {
  n: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
}

export interface Pressure {
  gpu: number;
  source: string;
  free_bytes: number;
  used_bytes: number;
  total_bytes: number;
  reason: string;
}

export interface CandidateStatus {
  id: string;
  provider: string;
  url: string;
  model: string;
  priority: number;
  enabled: boolean;
  supports_thinking: boolean;
  breaker: Breaker;
  busy_ms: number;
  deadline_ms: number;
  cold: boolean;
  ttft: TTFTStats | null;
  demoted: boolean;
  pressure: Pressure | null;
}

export interface GPUProcess {
  pid: number;
  name: string;
  used_bytes: number;
}

export interface GPUDevice {
  index: number;
  name: string;
  uuid: string;
  memory_total_bytes: number;
  memory_used_bytes: number;
  memory_free_bytes: number;
  utilization_pct: number;
  processes: GPUProcess[] | null;
}

export interface GPUStatus {
  available: boolean;
  message: string;
  devices: GPUDevice[] | null;
  sampled_at: string;
}

export interface HostStatus {
  cpu_pct: number;
  memory_total_bytes: number;
  memory_used_bytes: number;
  memory_used_pct: number;
}

export interface ConfigState {
  path: string;
  source: 'file' | 'discovered' | 'demo' | string;
  error: string;
  error_at: string | null;
}

export interface Status {
  version: string;
  demo: boolean;
  listen: string;
  default_model: string;
  deep_thinking_model: string;
  hedge: boolean;
  candidates: CandidateStatus[] | null;
  gpu: GPUStatus | null;
  host: HostStatus | null;
  config: ConfigState | null;
  history?: HistoryHealth | null;
}

/** Whether the history can be written; records wait in memory while not. */
export interface HistoryHealth {
  ok: boolean;
  error: string;
  since: string | null;
  pending: number;
  lost: number;
  write_errors: number;
}

export interface ConfigDoc extends ConfigState {
  yaml: string;
}

export type Outcome =
  | 'success'
  | 'error'
  | 'timeout'
  | 'no_content'
  | 'busy'
  | 'skipped_open'
  | 'client_abort'
  | 'not_retryable'
  | 'failed_after_commit'
  | 'hedge_lost'
  | 'demoted';

export interface Attempt {
  order: number;
  candidate: string;
  outcome: Outcome | string;
  error: string;
  http_status: number;
  started_at: string;
  deadline_ms: number;
  ttft_ms: number;
  duration_ms: number;
  cold: boolean;
  demoted: boolean;
  reading: Pressure | null;
}

export type RequestStatus = 'ok' | 'error' | 'client_abort' | 'upstream_error_after_commit';

export interface RequestRecord {
  id: string;
  started_at: string;
  protocol: 'openai' | 'ollama' | 'ui' | string;
  stream: boolean;
  thinking: boolean;
  requested_model: string;
  served_candidate: string;
  served_model: string;
  is_fallback: boolean;
  status: RequestStatus | string;
  http_status: number;
  error: string;
  ttft_ms: number;
  latency_ms: number;
  prompt_tokens: number;
  completion_tokens: number;
  attempts: Attempt[] | null;
}

export interface TTFTPoint {
  at: string;
  candidate: string;
  p50_ms: number;
  p95_ms: number;
  n: number;
}

export interface FailoverPoint {
  at: string;
  requests: number;
  fallbacks: number;
  errors: number;
}

export interface Stats {
  ttft: TTFTPoint[] | null;
  failover: FailoverPoint[] | null;
}

export interface DemoServer {
  candidate: string;
  provider: string;
  url: string;
  fault: string;
}

export interface DemoState {
  servers: DemoServer[];
  faults: string[];
}

export interface BreakerChange {
  candidate: string;
  from: string;
  to: string;
  at: string;
  cause: string;
}

/** One event of GET /switchyard/v1/events, decoded. */
export type LiveEvent =
  | { type: 'status'; data: Status }
  | { type: 'request_started'; data: { request_id: string } }
  | { type: 'attempt'; data: { request_id: string; attempt: Attempt } }
  | { type: 'commit'; data: { request_id: string; attempt: Attempt } }
  | { type: 'request_done'; data: { request_id: string; request: RequestRecord } }
  | { type: 'breaker'; data: { breaker: BreakerChange } }
  | { type: 'config'; data: { data: { ok: boolean; error: string } } };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ModelList {
  object: 'list';
  data: { id: string; object: string; created: number; owned_by: string }[];
}
