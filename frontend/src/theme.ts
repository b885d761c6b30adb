// Light, dark or the system's choice; kept in localStorage.

export type ThemeChoice = 'system' | 'light' | 'dark';

const KEY = 'switchyard.theme';

export function loadTheme(): ThemeChoice {
  try {
    const t = localStorage.getItem(KEY);
    if (t === 'light' || t === 'dark') return t;
  } catch {
    // storage disabled
  }
  return 'system';
}

/** applyTheme sets data-theme on <html> (absent = follow prefers-color-scheme) and saves the choice. */
export function applyTheme(t: ThemeChoice): void {
  const root = document.documentElement;
  if (t === 'system') delete root.dataset['theme'];
  else root.dataset['theme'] = t;
  try {
    if (t === 'system') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, t);
  } catch {
    // storage disabled
  }
  window.dispatchEvent(new Event('switchyard-theme'));
}

/** isDark reports the theme in effect. */
export function isDark(): boolean {
  const t = document.documentElement.dataset['theme'];
  if (t === 'dark') return true;
  if (t === 'light') return false;
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;
}

/** onThemeChange calls fn when the effective theme may have changed. */
export function onThemeChange(fn: () => void): () => void {
  const mq = window.matchMedia?.('(prefers-color-scheme: dark)');
  mq?.addEventListener('change', fn);
  window.addEventListener('switchyard-theme', fn);
  return () => {
    mq?.removeEventListener('change', fn);
    window.removeEventListener('switchyard-theme', fn);
  };
}

export function nextTheme(t: ThemeChoice): ThemeChoice {
  return t === 'system' ? 'light' : t === 'light' ? 'dark' : 'system';
}
