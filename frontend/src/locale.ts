// The browser's language, made safe before anything formats with it.
//
// A desktop session started with LANG=C (or POSIX) makes WebKitGTK report
// navigator.language as "C", which is not a BCP 47 tag: Intl constructors
// then throw RangeError, and uPlot builds an Intl.NumberFormat from
// navigator.language when its module loads, which left the Wails window
// blank. This module is imported first by main.tsx, so it runs before any
// other module's top-level code.

export function validLanguage(tag: string | undefined): boolean {
  if (!tag) return false;
  try {
    new Intl.NumberFormat(tag); // what uPlot does at load
    return true;
  } catch {
    return false;
  }
}

if (typeof navigator !== 'undefined' && !validLanguage(navigator.language)) {
  Object.defineProperty(navigator, 'language', { configurable: true, get: () => 'en-US' });
  Object.defineProperty(navigator, 'languages', { configurable: true, get: () => ['en-US'] });
}
