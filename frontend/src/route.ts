// Hash routes (#/chat, #/fleet, #/history/<id>, #/settings, #/team): they work from
// wails://wails/ and from any path the server mounts the UI at.

export type Screen = 'chat' | 'fleet' | 'history' | 'settings' | 'team';

export const SCREENS: { id: Screen; label: string; key: string }[] = [
  { id: 'chat', label: 'Chat', key: '1' },
  { id: 'fleet', label: 'Fleet', key: '2' },
  { id: 'history', label: 'History', key: '3' },
  { id: 'settings', label: 'Settings', key: '4' },
  // Listed only when this Switchyard is a node of a team (status.team).
  { id: 'team', label: 'Team', key: '5' },
];

export interface Route {
  screen: Screen;
  arg: string | null;
}

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/');
  const screen = SCREENS.find((s) => s.id === parts[0])?.id ?? 'chat';
  const arg = parts[1] ? decodeURIComponent(parts.slice(1).join('/')) : null;
  return { screen, arg };
}

export function routeHash(r: Route): string {
  return `#/${r.screen}${r.arg ? `/${encodeURIComponent(r.arg)}` : ''}`;
}
