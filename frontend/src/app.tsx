import { useEffect, useMemo, useState } from 'preact/hooks';
import { Client } from './api';
import { ChatScreen } from './chat/ChatScreen';
import { ChatSession } from './chat/session';
import { FleetScreen } from './fleet/FleetScreen';
import { HistoryScreen } from './history/HistoryScreen';
import { useObservable } from './hooks';
import { listenWords } from './listen';
import { SCREENS, parseRoute, routeHash, type Route } from './route';
import { SettingsScreen } from './settings/SettingsScreen';
import { TeamScreen } from './team/TeamScreen';
import { LiveStore } from './store';
import { applyTheme, loadTheme, nextTheme, type ThemeChoice } from './theme';
import { ConnectionBanner } from './ui/ConnectionBanner';
import { TokenForm } from './ui/TokenForm';

/** go opens a route; the hashchange it causes updates useRoute's state. */
function go(r: Route): void {
  window.location.hash = routeHash(r);
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

const THEME_LABEL: Record<ThemeChoice, string> = { system: 'Theme: system', light: 'Theme: light', dark: 'Theme: dark' };

export function App() {
  const client = useMemo(() => new Client(), []);
  const live = useMemo(() => new LiveStore(client), [client]);
  const session = useMemo(() => new ChatSession(client, live), [client, live]);
  const route = useRoute();
  const [theme, setTheme] = useState<ThemeChoice>(loadTheme);
  const [needToken, setNeedToken] = useState(false);
  const [everConnected, setEverConnected] = useState(false);
  useObservable(live);

  useEffect(() => {
    live.start();
    const off = client.onUnauthorized(() => setNeedToken(true));
    return () => {
      off();
      live.stop();
    };
  }, [client, live]);

  useEffect(() => {
    if (live.conn.kind === 'open') {
      setEverConnected(true);
      setNeedToken(false);
    }
    if (live.conn.kind === 'unauthorized') setNeedToken(true);
  }, [live.conn]);

  // Alt+1…4 (Alt+5 in a team) switch screens from anywhere.
  const inTeam = Boolean(live.status?.team);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!e.altKey || e.ctrlKey || e.metaKey) return;
      const s = SCREENS.find((x) => x.key === e.key && (x.id !== 'team' || inTeam));
      if (s) {
        e.preventDefault();
        go({ screen: s.id, arg: null });
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [inTeam]);

  useEffect(() => {
    const s = SCREENS.find((x) => x.id === route.screen);
    document.title = s ? `${s.label} · Switchyard` : 'Switchyard';
  }, [route.screen]);

  const status = live.status;
  const configError = status?.config?.error;
  const listen = status ? listenWords(status) : null;
  const [hideListen, setHideListen] = useState('');

  return (
    <div class="app">
      <a href="#main" class="skip-link">
        Skip to content
      </a>
      <nav class="sidebar" aria-label="Screens">
        <div class="brand">
          <svg viewBox="0 0 16 16" width="22" height="22" aria-hidden="true">
            <path d="M2 4h6l6 8M2 12h6l2-3" stroke="currentColor" stroke-width="2" fill="none" stroke-linecap="round" />
          </svg>
          <span>Switchyard</span>
        </div>
        <ul class="nav-list">
          {SCREENS.filter((s) => s.id !== 'team' || status?.team).map((s) => (
            <li key={s.id}>
              <a
                href={routeHash({ screen: s.id, arg: null })}
                class={`nav-link ${route.screen === s.id ? 'active' : ''}`}
                aria-current={route.screen === s.id ? 'page' : undefined}
                data-testid={`nav-${s.id}`}
                title={`${s.label} (Alt+${s.key})`}
              >
                <span>{s.label}</span>
                {s.id === 'settings' && configError && <span class="dot dot-bad" aria-label="config error" />}
                {s.id === 'team' && status?.team?.link === 'offline' && <span class="dot dot-bad" aria-label="team link offline" />}
              </a>
            </li>
          ))}
        </ul>
        <div class="sidebar-foot">
          <div class="conn small" aria-live="polite">
            <span class={`dot ${live.conn.kind === 'open' ? 'dot-ok' : live.conn.kind === 'connecting' ? 'dot-info' : 'dot-bad'}`} aria-hidden="true" />
            {live.conn.kind === 'open' ? 'live' : live.conn.kind === 'connecting' ? 'connecting' : live.conn.kind === 'unauthorized' ? 'needs key' : 'offline'}
            {status?.version && <span class="muted"> · v{status.version}</span>}
          </div>
          {listen?.address && (
            <div
              class={`api-addr small ${listen.taken ? 'api-addr-moved' : ''}`}
              data-testid="api-address"
              title={
                listen.taken
                  ? `${listen.why} Apps set up for ${listen.taken} must use ${listen.address} instead.`
                  : `Switchyard's API listens on ${listen.address}: point OpenAI- and Ollama-speaking apps here.`
              }
            >
              <span class="muted">API</span> <span class="mono">{listen.address}</span>
              {listen.taken && (
                <span class="api-addr-why" data-testid="api-address-why">
                  {listen.taken} was in use
                </span>
              )}
            </div>
          )}
          <button
            type="button"
            class="btn btn-ghost btn-small theme-toggle"
            onClick={() => {
              const t = nextTheme(theme);
              setTheme(t);
              applyTheme(t);
            }}
            data-testid="theme-toggle"
            aria-label={`${THEME_LABEL[theme]}. Switch theme`}
          >
            {THEME_LABEL[theme]}
          </button>
        </div>
      </nav>

      <main id="main" class={`main ${route.screen === 'chat' ? 'main-fill' : ''}`} tabIndex={-1}>
        <ConnectionBanner conn={live.conn} everConnected={everConnected} base={client.baseURL()} onRetry={() => live.retryNow()} />
        {listen?.taken && hideListen !== listen.taken && (
          <div class="banner banner-warn" role="status" data-testid="listen-banner">
            <span class="banner-text">
              <strong>{listen.why}</strong> Apps set up for {listen.taken} must use{' '}
              <span class="mono">{listen.address}</span> while this Switchyard runs.
            </span>
            <button type="button" class="btn btn-ghost btn-small banner-close" onClick={() => setHideListen(listen.taken)}>
              Hide
            </button>
          </div>
        )}
        {status?.demo && (
          <div class="banner banner-demo" data-testid="demo-banner" role="note">
            <p>
              <strong>Demo fleet — simulated servers.</strong> No real model runs here. Break a server from{' '}
              <a href="#/fleet" class="link">
                Fleet
              </a>{' '}
              or the Demo faults menu on Chat, and watch Switchyard fail over.
            </p>
          </div>
        )}
        {status?.history && !status.history.ok && (
          <div class="banner banner-bad" role="alert" data-testid="history-banner">
            <strong>History can't be written</strong>
            <span>
              {status.history.error}. {status.history.pending} request records wait in memory and will be written once it can
              {status.history.lost > 0 ? `; ${status.history.lost} were lost` : ''}. Free disk space, or move the history file aside.
            </span>
          </div>
        )}
        {status?.team?.link === 'offline' && (
          <div class="banner banner-warn" role="status" data-testid="team-banner">
            <strong>Team link offline.</strong> This node routes on its own state and keeps its records; they are shipped
            once the team database answers again{status.team.link_error ? ` (${status.team.link_error})` : ''}.
          </div>
        )}
        {configError && route.screen !== 'settings' && (
          <div class="banner banner-warn" role="status">
            A config edit was rejected; the previous config keeps running.{' '}
            <a href="#/settings" class="link">
              See why
            </a>
          </div>
        )}
        {route.screen === 'chat' && <ChatScreen client={client} live={live} session={session} />}
        {route.screen === 'fleet' && <FleetScreen client={client} live={live} />}
        {route.screen === 'history' && (
          <HistoryScreen
            client={client}
            live={live}
            selected={route.arg}
            onSelect={(id) => go({ screen: 'history', arg: id })}
          />
        )}
        {route.screen === 'settings' && <SettingsScreen client={client} live={live} />}
        {route.screen === 'team' && <TeamScreen client={client} live={live} />}
      </main>

      {needToken && (
        <TokenForm
          hadToken={client.hasToken()}
          onSubmit={(t) => {
            client.setToken(t);
            setNeedToken(false);
          }}
        />
      )}
    </div>
  );
}
