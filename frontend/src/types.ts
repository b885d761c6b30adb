// JSON shapes of Switchyard's own API. They are not written here: they come
// from api.gen.ts, which openapi-typescript generates from docs/openapi.json,
// which the Go types of backend/schema generate (a Go test and a vitest test
// fail when either link is stale). This file only names them for the UI.
// Durations are integer milliseconds (`*_ms`), byte counts integers
// (`*_bytes`), times RFC 3339 strings.

import type { components } from './api.gen';

type S = components['schemas'];

export type Status = S['Status'];
export type StatusDelta = S['StatusDelta'];
export type CandidateStatus = S['Candidate'];
export type Breaker = S['Breaker'];
export type BreakerState = Breaker['state'];
export type TTFTStats = S['TTFT'];
export type Pressure = S['Reading'];
export type GPUProcess = S['Process'];
export type GPUDevice = S['Device'];
export type GPUStatus = S['GPU'];
export type HostStatus = S['Host'];
export type ConfigState = S['ConfigState'];
export type HistoryHealth = S['History'];
export type ConfigDoc = S['Config'];
export type Attempt = S['Attempt'];
export type Outcome = Attempt['outcome'];
export type Fault = Attempt['fault'];
export type RequestRecord = S['Request'];
export type RequestStatus = RequestRecord['status'];
export type Failure = RequestRecord['failure'];
export type TTFTPoint = S['TTFTPoint'];
export type FailoverPoint = S['RatePoint'];
export type Stats = S['Stats'];
export type DemoServer = S['DemoServer'];
export type DemoFault = S['DemoFault'];
export type DemoState = S['Demo'];
export type BreakerChange = S['BreakerChange'];
export type EventType = S['EventType'];
export type AttemptStarted = S['AttemptStarted'];
export type GPUEvent = S['GPUEvent'];
export type ConfigEvent = S['ConfigEvent'];
export type TeamLink = S['TeamLink'];
export type TeamDoc = S['Team'];
export type TeamNode = S['TeamNode'];
export type TeamServer = S['TeamServer'];
export type TeamReport = S['TeamReport'];
export type TeamRequest = S['TeamRequest'];
export type TeamRequests = S['TeamRequests'];

/** One event of GET /switchyard/v1/events, decoded. */
export type LiveEvent =
  | { type: 'status'; data: Status }
  | { type: 'status_delta'; data: S['StatusDelta'] }
  | { type: 'request_started'; data: S['RequestStarted'] }
  | { type: 'attempt_started'; data: AttemptStarted }
  | { type: 'attempt'; data: S['AttemptEvent'] }
  | { type: 'commit'; data: S['AttemptEvent'] }
  | { type: 'request_done'; data: S['RequestDone'] }
  | { type: 'breaker'; data: S['BreakerEvent'] }
  | { type: 'gpu'; data: GPUEvent }
  | { type: 'config'; data: ConfigEvent };

// Every event type the server sends has its case above: a new one fails
// the build until it does.
type Missing = Exclude<EventType, LiveEvent['type']>;
export const everyEventHandled: [Missing] extends [never] ? true : Missing = true;

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ModelList {
  object: 'list';
  data: { id: string; object: string; created: number; owned_by: string }[];
}
