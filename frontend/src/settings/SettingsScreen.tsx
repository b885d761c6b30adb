import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
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
  file: 'read from the file above, and followed as it changes',
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
        <span class="muted small">
          {cfg && cfg.source !== 'file'
            ? 'No config file yet: below is the config Switchyard made at start.'
            : 'Edit the file; Switchyard applies valid edits without a restart.'}
        </span>
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
          {cfg.source === 'discovered' && <WriteConfig client={client} path={cfg.path} />}
          {cfg.source === 'demo' && (
            <p class="note note-info small" data-testid="demo-values-note">
              The lines marked <span class="yaml-demo-tag">demo only</span> name the simulated servers, on ports chosen when
              this demo started: they exist only while it runs, so copying them into a config of your own will not work.
            </p>
          )}
          <p class="muted small">
            Every key is explained in <span class="mono">docs/CONFIG.md</span>; hover a key for its section there.
          </p>
          <YamlView yaml={cfg.yaml} demo={cfg.source === 'demo'} />
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

/** The section of docs/CONFIG.md that explains a key, by its top-level key. */
function docSection(top: string, nested: boolean): string {
  if (top === 'chat' && nested) return 'docs/CONFIG.md, “chat.candidates items” and “chat”';
  return ['history', 'selection', 'gpu', 'chat', 'team'].includes(top) ? `docs/CONFIG.md, “${top}”` : 'docs/CONFIG.md, “Top level”';
}

/**
 * YamlView shows the config a line at a time, wrapped: each key says on
 * hover where docs/CONFIG.md explains it, and in the demo the lines that
 * name its simulated servers are marked demo only.
 */
function YamlView({ yaml, demo }: { yaml: string; demo: boolean }) {
  let top = '';
  return (
    <pre class="yaml" data-testid="config-yaml" tabIndex={0} aria-label="Config YAML, read-only">
      {yaml.split('\n').map((line, i) => {
        const m = /^(\s*(?:- )?)([a-z_]+)(:.*)$/.exec(line);
        if (!m) return <span key={i}>{line}{'\n'}</span>;
        const [, indent, key, rest] = m as unknown as [string, string, string, string];
        if (indent === '') top = key;
        const demoOnly = demo && key === 'url';
        return (
          <span key={i} class={demoOnly ? 'yaml-demo' : undefined} data-testid={demoOnly ? 'yaml-demo-line' : undefined}>
            {indent}
            <span class="yaml-key" title={`See ${docSection(top || key, indent !== '')}`}>
              {key}
            </span>
            {rest}
            {demoOnly && <span class="yaml-demo-tag">demo only</span>}
            {'\n'}
          </span>
        );
      })}
    </pre>
  );
}

/** WriteConfig offers to keep the discovered config as the config file; it never overwrites one. */
function WriteConfig({ client, path }: { client: Client; path: string }) {
  const [state, setState] = useState<{ kind: 'idle' | 'busy' } | { kind: 'done'; path: string } | { kind: 'error'; message: string }>({ kind: 'idle' });
  const write = () => {
    setState({ kind: 'busy' });
    client.writeConfig().then(
      (r) => setState({ kind: 'done', path: r.path }),
      (e: unknown) => setState({ kind: 'error', message: e instanceof Error ? e.message : String(e) }),
    );
  };
  return (
    <div class="write-config" data-testid="write-config">
      {state.kind === 'done' ? (
        <p class="note note-info small" role="status">
          Written to <span class="mono">{state.path}</span>. Switchyard reads it now; edit it to change the fleet.
        </p>
      ) : (
        <>
          <button type="button" class="btn btn-small" onClick={write} disabled={state.kind === 'busy'} data-testid="write-config-button">
            Write this as my config
          </button>{' '}
          <span class="muted small">
            to <span class="mono">{path}</span> — only if no file is there; an existing one is never overwritten.
          </span>
          {state.kind === 'error' && (
            <p class="note note-bad small" role="alert">
              {state.message}
            </p>
          )}
        </>
      )}
    </div>
  );
}
