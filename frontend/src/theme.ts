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

const systemDark = () => window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;

/**
 * applyTheme saves the choice and sets data-theme on <html> to the theme in
 * effect ("system" resolved through prefers-color-scheme), so the stylesheet
 * keeps one dark palette, keyed on data-theme alone.
 */
export function applyTheme(t: ThemeChoice): void {
  const root = document.documentElement;
  root.dataset['themeChoice'] = t;
  root.dataset['theme'] = t === 'system' ? (systemDark() ? 'dark' : 'light') : t;
  try {
    if (t === 'system') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, t);
  } catch {
    // storage disabled
  }
  window.dispatchEvent(new Event('switchyard-theme'));
}

/** followSystemTheme re-applies a "system" choice when the system's theme changes. */
export function followSystemTheme(): void {
  window.matchMedia?.('(prefers-color-scheme: dark)').addEventListener('change', () => {
    if (document.documentElement.dataset['themeChoice'] === 'system') applyTheme('system');
  });
}

/** isDark reports the theme in effect. */
export function isDark(): boolean {
  return document.documentElement.dataset['theme'] === 'dark';
}

/** onThemeChange calls fn when the effective theme may have changed. */
export function onThemeChange(fn: () => void): () => void {
  window.addEventListener('switchyard-theme', fn);
  return () => window.removeEventListener('switchyard-theme', fn);
}

export function nextTheme(t: ThemeChoice): ThemeChoice {
  return t === 'system' ? 'light' : t === 'light' ? 'dark' : 'system';
}
