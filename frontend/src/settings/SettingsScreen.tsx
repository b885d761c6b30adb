import { Fragment } from 'preact';
import type { Client } from '../api';
import { isDesktop, openDataFolder } from '../desktop';
import { formatDateTime } from '../format';
import { useAsync, useObservable } from '../hooks';
import { listenWords } from '../listen';
import type { LiveStore } from '../store';
import { Badge } from '../ui/Badge';
import { CopyButton } from '../ui/CopyButton';
import { ErrorBox, Loading } from '../ui/States';

interface Props {
  client: Client;
  live: LiveStore;
}

const SOURCES: Record<string, string> = {
  file: 'from the config file',
  discovered: 'no config file: built from local servers found at start',
  demo: 'no config file and no local servers: the simulated demo fleet',
};

export function SettingsScreen({ client, live }: Props) {
  useObservable(live);
  // Refetch whenever a `config` event says an edit was applied or rejected.
  const [res, reload] = useAsync((signal) => client.config(signal), [client, live.configVersion]);
  const cfg = res.value;
  // The live status carries the latest rejection too, between refetches.
  const error = cfg?.error || live.status?.config?.error || '';
  const errorAt = cfg?.error_at ?? live.status?.config?.error_at ?? null;
  const openFolder = openDataFolder();
  const listen = live.status ? listenWords(live.status) : null;

  return (
    <section class="screen settings-screen" aria-labelledby="settings-title">
      <header class="screen-head">
        <h1 id="settings-title">Settings</h1>
        <span class="muted small">Edit the file; Switchyard applies valid edits without a restart.</span>
      </header>

      {error && (
        <div class="banner banner-bad config-error" role="alert" data-testid="config-error">
          <div>
            <strong>Your last config edit was rejected{errorAt ? ` at ${formatDateTime(errorAt)}` : ''}.</strong> The
            previous config keeps running.
            <pre class="mono error-text">{error}</pre>
          </div>
        </div>
      )}

      {res.state === 'loading' && !cfg ? (
        <Loading what="config" />
      ) : res.state === 'error' && !cfg ? (
        <ErrorBox title="Could not load the config" message={res.error.message} onRetry={reload} />
      ) : cfg ? (
        <section class="card" aria-labelledby="config-title">
          <div class="card-head">
            <h2 id="config-title">Config in force</h2>
            <span class="head-actions">
              <CopyButton text={cfg.yaml} label="Copy YAML" />
              {openFolder && (
                <button type="button" class="btn btn-ghost btn-small" onClick={() => void openFolder()}>
                  Open data folder
                </button>
              )}
            </span>
          </div>
          <dl class="stats stats-wide">
            <div>
              <dt>File</dt>
              <dd class="mono path" data-testid="config-path" title={cfg.path || undefined}>
                {cfg.path ? <BreakablePath path={cfg.path} /> : '(none)'}
              </dd>
            </div>
            <div>
              <dt>Source</dt>
              <dd>
                <Badge tone={cfg.source === 'file' ? 'ok' : 'info'}>{cfg.source}</Badge>{' '}
                <span class="muted small">{SOURCES[cfg.source] ?? ''}</span>
              </dd>
            </div>
            {listen && (
              <div>
                <dt>API listening on</dt>
                <dd class="mono" data-testid="settings-listen">
                  {listen.address} · v{live.status!.version}
                  {isDesktop() ? ' · desktop' : ''}
                </dd>
                {listen.why && (
                  <dd class="note note-warn small" data-testid="settings-listen-why">
                    {listen.why}
                  </dd>
                )}
              </div>
            )}
          </dl>
          <pre class="yaml" data-testid="config-yaml" tabIndex={0} aria-label="Config YAML, read-only">
            {cfg.yaml}
          </pre>
        </section>
      ) : null}
    </section>
  );
}

/**
 * BreakablePath lets a long path wrap after its slashes rather than run
 * into the next column; the whole path stays one string to copy.
 */
function BreakablePath({ path }: { path: string }) {
  const parts = path.split(/(?<=[/\\])/);
  return (
    <>
      {parts.map((p, i) => (
        <Fragment key={i}>
          {p}
          {i < parts.length - 1 && <wbr />}
        </Fragment>
      ))}
    </>
  );
}
