import type { ComponentChildren } from 'preact';

/** Loading is a calm placeholder while data is on its way. */
export function Loading({ what }: { what: string }) {
  return (
    <div class="state state-loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      <span>Loading {what}…</span>
    </div>
  );
}

/** ErrorBox says what failed and offers a retry. */
export function ErrorBox({ title, message, onRetry }: { title: string; message: string; onRetry?: () => void }) {
  return (
    <div class="state state-error" role="alert">
      <strong>{title}</strong>
      <p>{message}</p>
      {onRetry && (
        <button type="button" class="btn" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** Empty explains why there is nothing yet and what would fill it. */
export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="state state-empty">
      <strong>{title}</strong>
      {children && <div class="state-body">{children}</div>}
    </div>
  );
}
