import type { ActivityItem } from '../activity';

export function ActivityFeed({ items }: { items: ActivityItem[] }) {
  return (
    <section class="card activity" aria-labelledby="activity-title" data-testid="activity-feed">
      <div class="card-head">
        <h2 id="activity-title">Activity</h2>
        <span class="muted small">live</span>
      </div>
      {items.length === 0 ? (
        <p class="muted small">Quiet so far. Attempts, commits and breaker changes appear here as requests flow.</p>
      ) : (
        <ol class="feed" aria-live="polite" aria-relevant="additions">
          {items.map((it) => (
            <li key={it.key} class={`feed-item tone-${it.tone}`} title={it.title}>
              <time class="mono muted small">
                {new Date(it.at).toLocaleTimeString([], { hour12: false })}
              </time>
              <span class={`dot dot-${it.tone}`} aria-hidden="true" />
              {it.requestId ? (
                <a class="feed-text" href={`#/history/${encodeURIComponent(it.requestId)}`}>
                  {it.text}
                </a>
              ) : (
                <span class="feed-text">{it.text}</span>
              )}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
