import { useLayoutEffect, useMemo, useRef } from 'preact/hooks';
import { copyText } from '../desktop';
import { renderMarkdown } from '../markdown';

interface Props {
  text: string;
  class?: string;
  testid?: string;
}

/**
 * Markdown renders untrusted Markdown safely and gives each code block a
 * language label and a copy button (added as DOM nodes, never as HTML).
 */
export function Markdown({ text, class: cls, testid }: Props) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  const ref = useRef<HTMLDivElement>(null);

  useLayoutEffect(() => {
    const root = ref.current;
    if (!root) return;
    for (const pre of Array.from(root.querySelectorAll('pre'))) {
      if (pre.parentElement?.classList.contains('code-block')) continue;
      const wrap = document.createElement('div');
      wrap.className = 'code-block';
      const bar = document.createElement('div');
      bar.className = 'code-bar';
      const lang = document.createElement('span');
      const code = pre.querySelector('code');
      const m = code?.className.match(/language-([\w+#.-]+)/);
      lang.textContent = m?.[1] ?? 'text';
      const btn = document.createElement('button');
      btn.type = 'button';
      btn.className = 'code-copy';
      btn.textContent = 'Copy';
      btn.setAttribute('aria-label', 'Copy code');
      bar.append(lang, btn);
      pre.replaceWith(wrap);
      wrap.append(bar, pre);
    }
  }, [html]);

  const onClick = (e: MouseEvent) => {
    const btn = (e.target as HTMLElement).closest('.code-copy');
    if (!btn) return;
    const code = btn.closest('.code-block')?.querySelector('pre')?.textContent ?? '';
    void copyText(code).then(() => {
      btn.textContent = 'Copied';
      setTimeout(() => (btn.textContent = 'Copy'), 1200);
    });
  };

  return (
    <div
      ref={ref}
      class={`markdown ${cls ?? ''}`}
      data-testid={testid}
      onClick={onClick}
      dangerouslySetInnerHTML={{ __html: html }}
    />
  );
}
