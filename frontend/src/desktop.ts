// Feature detection of the Wails desktop shell. The UI never imports Wails'
// generated JS: inside the webview the bound Go methods appear on
// window.go.main.App; in a plain browser they are absent and every caller
// falls back to web APIs (or hides the button).

interface BoundApp {
  APIBase?: () => Promise<{ base: string; token: string }>;
  OpenDataFolder?: () => Promise<void>;
  CopyText?: (text: string) => Promise<void>;
}

declare global {
  interface Window {
    go?: { main?: { App?: BoundApp } };
    runtime?: unknown;
  }
}

function boundApp(): BoundApp | undefined {
  return typeof window === 'undefined' ? undefined : window.go?.main?.App;
}

/** True inside the Wails webview. */
export function isDesktop(): boolean {
  return boundApp() !== undefined;
}

/** The API base and token the desktop shell hands out, or null in a browser. */
export async function desktopAPIBase(): Promise<{ base: string; token: string } | null> {
  const app = boundApp();
  if (!app?.APIBase) return null;
  return app.APIBase();
}

/** OpenDataFolder is the bound method when the shell has it, else undefined (hide the button). */
export function openDataFolder(): (() => Promise<void>) | undefined {
  const app = boundApp();
  return app?.OpenDataFolder ? () => app.OpenDataFolder!() : undefined;
}

/** copyText uses the shell's clipboard when bound, else the browser's. */
export async function copyText(text: string): Promise<void> {
  const app = boundApp();
  if (app?.CopyText) return app.CopyText(text);
  if (navigator.clipboard?.writeText) return navigator.clipboard.writeText(text);
  // Last resort for non-secure contexts: a hidden textarea and execCommand.
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.position = 'fixed';
  ta.style.opacity = '0';
  document.body.appendChild(ta);
  ta.select();
  try {
    document.execCommand('copy');
  } finally {
    ta.remove();
  }
}
